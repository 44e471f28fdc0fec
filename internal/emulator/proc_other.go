//go:build !linux

// The emulator runs only on Linux; this keeps the package building
// elsewhere.

package emulator

import (
	"os/exec"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

func kill(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
