package localdynamo

import (
	"os/exec"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		// Its own process group, so that kill reaches whatever it
		// forked.
		Setpgid: true,
		// If this process dies without killing it, it dies with it.
		Pdeathsig: syscall.SIGKILL,
	}
}

func kill(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
