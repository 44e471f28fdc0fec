//go:build unix && !linux

package dynamotest

import (
	"os/exec"
	"syscall"
)

// sysProcAttr puts the server in its own process group, so that kill
// reaches whatever a shim (pyenv, npx) forked.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func kill(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
