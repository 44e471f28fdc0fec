package localdynamo

import (
	"os/exec"
	"runtime"
)

// Process is a child process in its own process group, so that Kill
// reaches whatever it forked too (a shim's child, rie's bootstrap). On
// Linux it also gets SIGKILL if the process that started it dies first.
type Process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been waited for
	err    error         // cmd.Wait's, set before exited is closed
}

// StartProcess starts cmd, after setting its SysProcAttr, and waits for it
// in the background. Stop it with Kill.
func StartProcess(cmd *exec.Cmd) (*Process, error) {
	cmd.SysProcAttr = sysProcAttr()
	p := &Process{cmd: cmd, exited: make(chan struct{})}
	// On Linux the child gets SIGKILL when the thread that started it
	// ends (Pdeathsig), not the process: start and wait for it from a
	// goroutine locked to its thread, which the runtime then keeps until
	// the child exits.
	started := make(chan error)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// Exited is closed once the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Kill kills the process's group with SIGKILL, waits for the process to
// exit and returns its exit error, as from exec.Cmd.Wait.
func (p *Process) Kill() error {
	kill(p.cmd)
	<-p.exited
	return p.err
}
