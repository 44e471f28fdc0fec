// Package localdynamo starts a local DynamoDB API server, moto_server (pip
// install 'moto[server]') or dynalite (npm), as a child Process:
// in its own process group, which Stop kills whole, and on Linux dying
// with the process that started it.
package localdynamo

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Errors wrapped by Start's: the server's executable is not on PATH, or
// Options.Server names no server it knows.
var (
	ErrNotInstalled  = errors.New("not installed")
	ErrUnknownServer = errors.New("want moto or dynalite")
)

var installHint = map[string]string{
	"moto":     "install moto: pip install 'moto[server]'",
	"dynalite": "install Node.js and dynalite: make setup installs it into .tools/ and make puts it on PATH",
}

// startTimeout bounds how long the server may take to answer after it is
// started (moto took over 30 s on a busy 2-core machine).
const startTimeout = 2 * time.Minute

// Options choose the server and how it is reached.
type Options struct {
	// Server is "moto" (moto_server; also when empty) or "dynalite".
	Server string

	// Serialize puts a proxy that passes one request at a time in front
	// of the server (Endpoint is the proxy's): moto's conditional writes
	// are not atomic (docs/operations.md).
	Serialize bool
	// Output receives the server's output; nil discards it.
	Output io.Writer
}

// Server is a running server. Stop it with Stop.
type Server struct {
	proc     *Process
	proxy    *http.Server // nil unless Options.Serialize
	endpoint string
	stop     sync.Once
}

// Start starts the server on a loopback port it binds itself (port 0) and
// waits until it answers DynamoDB calls, ctx is done or startTimeout
// passes. ctx bounds only the start: the server runs until Stop.
func Start(ctx context.Context, opts Options) (*Server, error) {
	name, path, args, err := command(cmp.Or(opts.Server, "moto"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	out, found := watchPort(opts.Output)
	cmd.Stdout, cmd.Stderr = out, out
	proc, err := StartProcess(cmd)
	if err != nil {
		out.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		<-proc.Exited()
		out.Close()
	}()
	s := &Server{proc: proc}
	err = s.ready(ctx, found)
	if err == nil && opts.Serialize {
		err = s.serialize()
	}
	if err != nil {
		if waitErr := proc.Kill(); waitErr != nil {
			err = fmt.Errorf("%w (%v)", err, waitErr)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return s, nil
}

// dynaliteScript starts dynalite's server on port 0 of 127.0.0.1 and
// prints the line its command prints, with the port it got.
const dynaliteScript = `const s = require(process.argv[1])({createTableMs: 0, deleteTableMs: 0, updateTableMs: 0});
s.listen(0, '127.0.0.1', () => console.log('Dynalite listening at: http://127.0.0.1:' + s.address().port));`

// command is the command line that starts the server kind on port 0 of
// 127.0.0.1, and the name of its executable.
func command(kind string) (name, path string, args []string, err error) {
	switch kind {
	case "moto":
		name, args = "moto_server", []string{"-H", "127.0.0.1", "-p", "0"}
	case "dynalite":
		name = "dynalite"
	default:
		return "", "", nil, fmt.Errorf("server %q: %w", kind, ErrUnknownServer)
	}
	if path, err = exec.LookPath(name); err != nil {
		return "", "", nil, fmt.Errorf("%s: %w (%s): %w", name, ErrNotInstalled, installHint[kind], err)
	}
	if kind == "moto" {
		return name, path, args, nil
	}
	// dynalite's command line cannot listen on port 0: its module can, run
	// by node from the package the installed command links to.
	cli, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", "", nil, fmt.Errorf("dynalite: %w", err)
	}
	if path, err = exec.LookPath("node"); err != nil {
		return "", "", nil, fmt.Errorf("node: %w (%s): %w", ErrNotInstalled, installHint[kind], err)
	}
	return name, path, []string{"-e", dynaliteScript, filepath.Dir(cli)}, nil
}

var listening = regexp.MustCompile(`http://(?:127\.0\.0\.1|localhost):(\d+)`)

// watchPort returns a writer that passes a server's output on to w (nil
// discards it) and a channel that receives the port of the first
// http://127.0.0.1:PORT URL in it. Close the writer once the server exits.
func watchPort(w io.Writer) (io.WriteCloser, <-chan int) {
	if w == nil {
		w = io.Discard
	}
	r, pw := io.Pipe()
	found := make(chan int, 1)
	go func() {
		lines := bufio.NewScanner(io.TeeReader(r, w)) // a line over 64 KiB ends the scan
		for lines.Scan() {
			if m := listening.FindSubmatch(lines.Bytes()); m != nil {
				port, _ := strconv.Atoi(string(m[1]))
				found <- port
				break
			}
		}
		_, _ = io.Copy(w, r)
		r.Close()
	}()
	return pw, found
}

// Proxy starts the proxy of Options.Serialize in front of the DynamoDB API
// at endpoint, a server this process did not start; Endpoint is the
// proxy's. Stop closes the proxy only.
func Proxy(endpoint string) (*Server, error) {
	s := &Server{endpoint: endpoint}
	if err := s.serialize(); err != nil {
		return nil, err
	}
	return s, nil
}

// serialize puts the serializing proxy in front of s.endpoint.
func (s *Server) serialize() error {
	backend, err := url.Parse(s.endpoint)
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	s.proxy = &http.Server{Handler: serialized(httputil.NewSingleHostReverseProxy(backend))}
	go func() { _ = s.proxy.Serve(l) }()
	s.endpoint = "http://" + l.Addr().String()
	return nil
}

// IsMoto reports whether the server at endpoint is moto_server: it
// answers its own /moto-api/data.json with a JSON object.
func IsMoto(ctx context.Context, endpoint string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(endpoint, "/")+"/moto-api/data.json", nil)
	if err != nil {
		return false
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var data map[string]json.RawMessage
	return resp.StatusCode == http.StatusOK && json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&data) == nil
}

// Endpoint returns the server's URL (the proxy's, with Options.Serialize).
func (s *Server) Endpoint() string { return s.endpoint }

// Stop closes the proxy, if any, and kills the server if Start started it.
// Later calls do nothing.
func (s *Server) Stop() {
	s.stop.Do(func() {
		if s.proxy != nil {
			_ = s.proxy.Close()
		}
		if s.proc != nil {
			s.proc.Kill()
		}
	})
}

// serialized passes requests to h one at a time.
func serialized(h http.Handler) http.Handler {
	turn := make(chan struct{}, 1)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case turn <- struct{}{}:
		case <-r.Context().Done():
			http.Error(w, "client gone", http.StatusServiceUnavailable)
			return
		}
		defer func() { <-turn }()
		h.ServeHTTP(w, r)
	})
}

// ready waits until the server has printed its port, which s.endpoint
// then names, and answered its first DynamoDB call (moto loads its backend
// then, slower than a client's attempt timeout). It gives up when the
// server exits, ctx is done or startTimeout passes.
func (s *Server) ready(ctx context.Context, found <-chan int) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	select {
	case port := <-found:
		s.endpoint = "http://127.0.0.1:" + strconv.Itoa(port)
	case <-s.proc.Exited():
		return errors.New("exited before listening")
	case <-ctx.Done():
		return fmt.Errorf("not listening: %w", ctx.Err())
	}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, strings.NewReader("{}"))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
		req.Header.Set("X-Amz-Date", "20260101T000000Z")
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: first DynamoDB call: %s", s.endpoint, resp.Status)
			}
			return nil
		}
		select {
		case <-s.proc.Exited():
			return fmt.Errorf("%s: exited before answering", s.endpoint)
		case <-ctx.Done():
			return fmt.Errorf("%s: first DynamoDB call: %w", s.endpoint, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// FreePort asks the kernel for a free port on 127.0.0.1. Another process
// may take it before the caller binds it; the start then fails.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Process is a child process in its own process group, so that Kill
// reaches whatever it forked too. On Linux it also gets SIGKILL if the
// process that started it dies first.
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
	// Pdeathsig fires when the thread that started the child ends: start
	// and wait for it from a goroutine locked to its thread.
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
