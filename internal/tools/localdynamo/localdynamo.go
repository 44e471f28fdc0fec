// Package localdynamo starts a local DynamoDB API server, moto_server (pip
// install 'moto[server]') or dynalite (npm), as a child Process:
// in its own process group, which Stop kills whole, and on Linux dying
// with the process that started it.
package localdynamo

import (
	"bytes"
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
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrNotInstalled is wrapped by Start's error when the server's executable
// is not on PATH.
var ErrNotInstalled = errors.New("server not installed")

// ErrUnknownServer is wrapped by Start's error when Options.Server names
// no server it knows.
var ErrUnknownServer = errors.New("want moto or dynalite")

var installHint = map[string]string{
	"moto":     "install moto: pip install 'moto[server]'",
	"dynalite": "install Node.js and dynalite: make setup installs it into .tools/ and make puts it on PATH",
}

// startTimeout bounds how long the server may take to answer after it is
// started: a hang guard (moto took over 30 s on a busy 2-core machine).
const startTimeout = 2 * time.Minute

// Options choose the server and how it is reached.
type Options struct {
	// Server is "moto" (moto_server; also when empty) or "dynalite".
	Server string

	// Serialize puts a proxy that passes one request at a time in front
	// of the server, and Endpoint is then the proxy's. moto needs it:
	// its conditional writes are not atomic (docs/operations.md).
	Serialize bool

	// Output receives the server's standard output and error; nil
	// discards them.
	Output io.Writer
}

// Server is a running server. Stop it with Stop.
type Server struct {
	proc     *Process
	proxy    *http.Server // nil unless Options.Serialize
	endpoint string
	stop     sync.Once
}

// Start starts the server on a loopback port the kernel chooses (the
// server binds port 0 and prints the port it got, so no other process can
// take it first) and waits until it answers HTTP, ctx is done or
// startTimeout passes. ctx bounds only the start: the server runs until
// Stop.
func Start(ctx context.Context, opts Options) (*Server, error) {
	kind := opts.Server
	if kind == "" {
		kind = "moto"
	}
	var name string
	var args []string
	switch kind {
	case "moto":
		name, args = "moto_server", []string{"-H", "127.0.0.1", "-p", "0"}
	case "dynalite":
		name = "dynalite"
	default:
		return nil, fmt.Errorf("server %q: %w", opts.Server, ErrUnknownServer)
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("%s not found on PATH (%s): %w", name, installHint[kind], notInstalled{err})
	}
	if kind == "dynalite" {
		// dynalite's command line cannot listen on port 0: its module
		// can, run by node from the installed command's package. New
		// tables are ACTIVE at once, as with moto (dynalite's default is
		// half a second).
		if path, args, err = dynaliteCommand(path); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(path, args...)
	out := newPortWatch(opts.Output)
	cmd.Stdout, cmd.Stderr = out, out
	proc, err := StartProcess(cmd)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	fail := func(err error) (*Server, error) {
		proc.Kill()
		if waitErr := proc.Err(); waitErr != nil {
			err = fmt.Errorf("%w (%v)", err, waitErr)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	port, err := out.wait(ctx, proc.Exited())
	if err != nil {
		return fail(err)
	}
	s := &Server{proc: proc, endpoint: "http://127.0.0.1:" + strconv.Itoa(port)}
	if err := waitReady(ctx, s.endpoint, proc.Exited()); err != nil {
		return fail(fmt.Errorf("on port %d: %w", port, err))
	}
	if kind == "moto" {
		if err := dynamoReady(ctx, s.endpoint); err != nil {
			return fail(fmt.Errorf("on port %d: %w", port, err))
		}
	}
	if !opts.Serialize {
		return s, nil
	}
	if err := s.serialize(); err != nil {
		proc.Kill()
		return nil, err
	}
	return s, nil
}

// dynaliteScript starts dynalite's server on port 0 of 127.0.0.1 and
// prints the line its command prints, with the port it got.
const dynaliteScript = `const s = require(process.argv[1])({createTableMs: 0, deleteTableMs: 0, updateTableMs: 0});
s.listen(0, '127.0.0.1', () => console.log('Dynalite listening at: http://127.0.0.1:' + s.address().port));`

// dynaliteCommand is node running dynaliteScript on the package of the
// dynalite command at path (node_modules/.bin/dynalite, a link to the
// package's cli.js).
func dynaliteCommand(path string) (string, []string, error) {
	cli, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", nil, fmt.Errorf("dynalite: %w", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return "", nil, fmt.Errorf("node not found on PATH (%s): %w", installHint["dynalite"], notInstalled{err})
	}
	return node, []string{"-e", dynaliteScript, filepath.Dir(cli)}, nil
}

// portWatch passes a server's output on to w and finds the port in the
// first line that names an http://127.0.0.1:PORT URL.
type portWatch struct {
	w     io.Writer
	mu    sync.Mutex
	line  []byte
	found chan int // receives the port once
	done  bool
}

func newPortWatch(w io.Writer) *portWatch {
	if w == nil {
		w = io.Discard
	}
	return &portWatch{w: w, found: make(chan int, 1)}
}

var listening = regexp.MustCompile(`http://(?:127\.0\.0\.1|localhost):(\d+)`)

func (p *portWatch) Write(b []byte) (int, error) {
	p.mu.Lock()
	if !p.done {
		p.line = append(p.line, b...)
		for {
			i := bytes.IndexByte(p.line, '\n')
			if i < 0 {
				break
			}
			if m := listening.FindSubmatch(p.line[:i]); m != nil {
				port, _ := strconv.Atoi(string(m[1]))
				p.found <- port
				p.done, p.line = true, nil
				break
			}
			p.line = p.line[i+1:]
		}
		if len(p.line) > 64<<10 { // a hang guard against a server that prints no newline
			p.line = nil
		}
	}
	p.mu.Unlock()
	return p.w.Write(b)
}

// wait returns the port once the server has printed it, or an error if it
// exits first, ctx is done or startTimeout passes.
func (p *portWatch) wait(ctx context.Context, exited <-chan struct{}) (int, error) {
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case port := <-p.found:
		return port, nil
	case <-exited:
		return 0, errors.New("exited before listening")
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-timer.C:
		return 0, errors.New("not listening after " + startTimeout.String())
	}
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

// IsMoto reports whether the server at endpoint is moto_server, which
// answers its own /moto-api/data.json with a JSON object (dynalite answers
// every GET with a plain-text health line; DynamoDB and DynamoDB Local
// refuse it).
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

// waitReady polls endpoint until it answers HTTP, the process exits, ctx
// is done or startTimeout passes.
func waitReady(ctx context.Context, endpoint string, exited <-chan struct{}) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("exited before answering")
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("not answering after " + startTimeout.String())
}

// dynamoReady makes moto's first DynamoDB call, ListTables, and waits up
// to startTimeout for it: moto loads its DynamoDB backend then, which can
// take longer than a client's attempt timeout.
func dynamoReady(ctx context.Context, endpoint string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader("{}"))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("first DynamoDB call: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("first DynamoDB call: %s", resp.Status)
	}
	return nil
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

// notInstalled is LookPath's error, which also is ErrNotInstalled.
type notInstalled struct{ err error }

func (e notInstalled) Error() string        { return e.err.Error() }
func (e notInstalled) Unwrap() error        { return e.err }
func (e notInstalled) Is(target error) bool { return target == ErrNotInstalled }
