//go:build unix && !linux

package localdynamo

import (
	"os/exec"
	"syscall"
)

// sysProcAttr puts the child in its own process group, so that kill reaches whatever it forked.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func kill(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
