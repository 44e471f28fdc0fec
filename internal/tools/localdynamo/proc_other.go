//go:build !unix

package localdynamo

import (
	"os/exec"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

func kill(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
