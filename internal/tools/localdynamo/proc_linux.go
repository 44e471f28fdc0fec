package localdynamo

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// kill kills the process's group and the groups of its children that moved
// to groups of their own (as aws-lambda-rie's bootstrap does), so that
// none outlives it. All are stopped before any is killed, so that none
// sees another go and complains of it (rie logs its bootstrap's death).
func kill(cmd *exec.Cmd) {
	pid := cmd.Process.Pid
	groups := []int{pid}
	for _, child := range children(pid) {
		if pgid, err := syscall.Getpgid(child); err == nil && pgid != pid {
			groups = append(groups, pgid)
		}
	}
	for _, g := range groups {
		_ = syscall.Kill(-g, syscall.SIGSTOP)
	}
	for _, g := range groups {
		_ = syscall.Kill(-g, syscall.SIGKILL)
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
		s := string(b)
		rest := s[strings.LastIndexByte(s, ')')+1:]
		fields := strings.Fields(rest)
		if len(fields) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == pid {
			if kid, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil {
				kids = append(kids, kid)
			}
		}
	}
	return kids
}
