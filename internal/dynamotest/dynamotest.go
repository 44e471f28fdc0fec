// Package dynamotest runs a local DynamoDB API server for tests: one per
// test binary, started on first use and stopped when the binary exits.
// Import it from _test.go files only.
//
// The server is moto_server (pip install 'moto[server]'), or dynalite
// (npx dynalite) when DYNAMODB_TEST_SERVER=dynalite. A missing server fails
// the test rather than skipping it, so that CI cannot pass without running
// the DynamoDB tests; under go test -short it is skipped instead.
//
// DYNAMOTEST_VERBOSE=1 passes the server's output through to stderr.
//
// moto is reached through a proxy that passes one request at a time. moto
// checks a ConditionExpression and applies the update in two steps without
// a lock, so two concurrent conditional writes to one item can both
// succeed (two callers get the same ticket, a token is both admitted and
// left), which DynamoDB never allows. Serialising the requests restores
// DynamoDB's per-item atomicity, and moto, which runs Python under one lock
// anyway, is faster for it. dynalite locks per item and is used directly,
// but has no TTL API: NewTable then makes tables without TTL (see NoTTL).
//
// Use it as:
//
//	func TestMain(m *testing.M) { dynamotest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		client, err := dynamostore.NewClient(t.Context(), dynamotest.Endpoint(t))
//		...
//		table := dynamotest.NewTable(t, client)
//	}
package dynamotest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"

	"github.com/example/waitingroom/internal/dynamostore"
)

var installHint = map[string]string{
	"":         "install moto: pip install 'moto[server]'",
	"moto":     "install moto: pip install 'moto[server]'",
	"dynalite": "install Node.js and dynalite: npm install -g dynalite",
}

// startTimeout bounds how long the server may take to answer after it is
// started (moto imports a lot of Python on start).
const startTimeout = 30 * time.Second

var server struct {
	once     sync.Once
	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{} // closed once cmd has been waited for
	proxy    *httptest.Server
	endpoint string
	err      error
	missing  bool // the server's executable is not installed
}

// Endpoint returns the URL of the test binary's DynamoDB API server,
// starting it on first use. It fails t if the server cannot start, or skips
// it under -short when the server is not installed.
func Endpoint(t testing.TB) string {
	t.Helper()
	server.once.Do(start)
	if server.err != nil {
		if server.missing && testing.Short() {
			t.Skipf("dynamotest: %v (skipped under -short)", server.err)
		}
		t.Fatalf("dynamotest: %v", server.err)
	}
	return server.endpoint
}

// Main runs the tests and stops the server, if one was started, before the
// binary exits. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop kills the server if it is running. Main calls it; a later Endpoint
// does not restart it.
func Stop() {
	server.mu.Lock()
	defer server.mu.Unlock()
	if server.proxy != nil {
		server.proxy.Close()
		server.proxy = nil
	}
	if server.cmd == nil {
		return
	}
	kill(server.cmd)
	<-server.exited
	server.cmd = nil
}

func start() {
	port, err := freePort()
	if err != nil {
		server.err = fmt.Errorf("find a free port: %w", err)
		return
	}
	var name string
	var args []string
	kind := os.Getenv("DYNAMODB_TEST_SERVER")
	switch kind {
	case "", "moto":
		name, args = "moto_server", []string{"-H", "127.0.0.1", "-p", strconv.Itoa(port)}
	case "dynalite":
		// New tables ACTIVE at once, as with moto (dynalite's default
		// is half a second).
		name, args = "npx", []string{"--no-install", "dynalite", "--port", strconv.Itoa(port), "--createTableMs", "0", "--deleteTableMs", "0"}
	default:
		server.err = fmt.Errorf("DYNAMODB_TEST_SERVER=%q: want moto or dynalite", kind)
		return
	}
	path, err := exec.LookPath(name)
	if err != nil {
		server.err = fmt.Errorf("%s not found on PATH (%s): %w", name, installHint[kind], err)
		server.missing = true
		return
	}
	cmd := exec.Command(path, args...)
	cmd.SysProcAttr = sysProcAttr()
	if os.Getenv("DYNAMOTEST_VERBOSE") != "" {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	// On Linux the server gets SIGKILL when the thread that started it
	// ends (Pdeathsig), not the process: start and wait for it from a
	// goroutine locked to its thread, which the runtime then keeps until
	// the server exits.
	started := make(chan error)
	exited := make(chan struct{})
	var waitErr error
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waitErr = cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		server.err = fmt.Errorf("start %s: %w", name, err)
		return
	}
	server.mu.Lock()
	server.cmd, server.exited = cmd, exited
	server.mu.Unlock()

	endpoint := "http://127.0.0.1:" + strconv.Itoa(port)
	if err := waitReady(endpoint, exited); err != nil {
		Stop()
		if waitErr != nil {
			err = fmt.Errorf("%w (%v)", err, waitErr)
		}
		server.err = fmt.Errorf("%s on port %d: %w", name, port, err)
		return
	}
	if kind == "dynalite" {
		server.endpoint = endpoint
		return
	}
	backend, _ := url.Parse(endpoint)
	proxy := serialized(httputil.NewSingleHostReverseProxy(backend))
	server.mu.Lock()
	server.proxy = httptest.NewServer(proxy)
	server.endpoint = server.proxy.URL
	server.mu.Unlock()
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

// waitReady polls endpoint until it answers HTTP, the process exits or
// startTimeout passes.
func waitReady(endpoint string, exited <-chan struct{}) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("exited before answering")
		default:
		}
		resp, err := client.Get(endpoint)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("not answering after " + startTimeout.String())
}

// freePort asks the kernel for a free port on 127.0.0.1. Another process
// could take it before the server binds it; on a test machine that is rare
// enough, and the start then fails loudly.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// NoTTL reports whether the server lacks the TTL API (dynalite): there
// NewTable creates tables without TTL, and tests of TTL should skip.
func NoTTL() bool { return os.Getenv("DYNAMODB_TEST_SERVER") == "dynalite" }

// NewTable creates a fresh, uniquely named table with
// dynamostore.CreateTable and deletes it when t ends.
func NewTable(t testing.TB, client *dynamodb.Client) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	table := "test-" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := dynamostore.CreateTable(ctx, client, table); err != nil {
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "UnknownOperationException" || !NoTTL() {
			t.Fatalf("dynamotest: %v", err)
		}
		// dynalite has no TTL API; the table is there, without TTL.
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: &table}); err != nil {
			t.Logf("dynamotest: delete table %s: %v", table, err)
		}
	})
	return table
}
