package localdynamo

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// sysProcAttr puts the child in its own process group, so that kill reaches whatever it forked,
// and has it die with this process.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// kill kills the process's group and the groups its children moved to (as aws-lambda-rie's bootstrap
// does), stopping all before killing any, so that none sees another go and complains of it.
func kill(cmd *exec.Cmd) {
	pid := cmd.Process.Pid
	groups := []int{pid}
	for _, child := range children(pid) {
		if pgid, err := syscall.Getpgid(child); err == nil && pgid != pid {
			groups = append(groups, pgid)
		}
	}
	for _, sig := range []syscall.Signal{syscall.SIGSTOP, syscall.SIGKILL} {
		for _, g := range groups {
			_ = syscall.Kill(-g, sig)
		}
	}
}

// children returns the pids whose parent is pid, from /proc.
func children(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var kids []int
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(pid) {
			continue
		}
		if kid, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil {
			kids = append(kids, kid)
		}
	}
	return kids
}
