package dynamotest

import (
	"os/exec"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		// Its own process group, so that kill reaches whatever a shim
		// (pyenv, npx) forked.
		Setpgid: true,
		// If the test binary dies without reaching Main's cleanup (a
		// panic, a -timeout), the server dies with it.
		Pdeathsig: syscall.SIGKILL,
	}
}

func kill(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
