package emulator

import (
	"os/exec"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		// Its own process group, so that kill reaches the bootstrap too.
		Setpgid: true,
		// If this process dies without stopping it, the emulator dies
		// with it.
		Pdeathsig: syscall.SIGKILL,
	}
}

func kill(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
