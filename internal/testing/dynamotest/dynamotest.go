// Package dynamotest runs local DynamoDB API servers for tests: one shared
// per test binary (Endpoint), and more that a test can have to itself
// (Lease), each started on first use and stopped when the binary exits.
// Import it from _test.go files only.
//
// The server is the binary's Server (moto_server, pip install
// 'moto[server]', unless TestMain chose dynalite, npm install -g dynalite),
// or DYNAMODB_TEST_SERVER when set. A missing server fails the test rather
// than skipping it, so that CI cannot pass without running the DynamoDB
// tests; under go test -short it is skipped instead. Moto gives a moto
// server whatever the binary's, for the tests of what dynalite lacks.
//
// DYNAMOTEST_VERBOSE=1 passes the server's output through to stderr.
//
// internal/tools/localdynamo starts the server. moto is reached through a proxy
// that passes one request at a time, because moto is not atomic per item
// (see localdynamo.Options.Serialize). dynalite locks per item and is used
// directly, but has no TTL API: NewTable then makes tables without TTL.
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
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/tools/localdynamo"
)

// Server is the server of a test binary that DYNAMODB_TEST_SERVER does not
// choose: "moto" (also when empty) or "dynalite". Set it in TestMain, before
// Main.
var Server = "moto"

// shared is a server that tests share, started on first use.
type shared struct {
	once     sync.Once
	mu       sync.Mutex
	srv      *localdynamo.Server // nil once stopped
	endpoint string
	err      error
	missing  bool // the server's executable is not installed
}

// server is the binary's shared server (Endpoint), moto the shared moto
// (Moto) when the binary's server is another one.
var server, moto shared

// Endpoint returns the URL of the test binary's DynamoDB API server,
// starting it on first use. It fails t if the server cannot start, or skips
// it under -short when the server is not installed.
func Endpoint(t testing.TB) string {
	t.Helper()
	return server.endpointFor(t, options())
}

// Moto returns the URL of a moto server that tests share, for what the
// binary's server may lack (the TTL API): the binary's own when it is moto.
func Moto(t testing.TB) string {
	t.Helper()
	if options().Server == "moto" {
		return Endpoint(t)
	}
	return moto.endpointFor(t, localdynamo.Options{Server: "moto", Serialize: true, Output: options().Output})
}

func (s *shared) endpointFor(t testing.TB, opts localdynamo.Options) string {
	t.Helper()
	s.once.Do(func() { s.start(opts) })
	if s.err != nil {
		if s.missing && testing.Short() {
			t.Skipf("dynamotest: %v (skipped under -short)", s.err)
		}
		t.Fatalf("dynamotest: %v", s.err)
	}
	return s.endpoint
}

// Lease returns the URL of a DynamoDB API server that no other test uses
// until t ends: an idle one, or a new one. Parallel tests that each lease
// one use a core each rather than queueing at the shared server.
func Lease(t testing.TB) string {
	t.Helper()
	Endpoint(t) // the first server tells whether one can start
	pool.mu.Lock()
	var srv *localdynamo.Server
	if n := len(pool.idle); n > 0 {
		srv, pool.idle = pool.idle[n-1], pool.idle[:n-1]
	}
	pool.mu.Unlock()
	if srv == nil {
		var err error
		if srv, err = localdynamo.Start(context.Background(), options()); err != nil {
			t.Fatalf("dynamotest: %v", err)
		}
		pool.mu.Lock()
		pool.all = append(pool.all, srv)
		pool.mu.Unlock()
	}
	t.Cleanup(func() {
		pool.mu.Lock()
		defer pool.mu.Unlock()
		pool.idle = append(pool.idle, srv)
	})
	return srv.Endpoint()
}

// pool holds the servers Lease started: all of them, and those no test
// holds.
var pool struct {
	mu        sync.Mutex
	all, idle []*localdynamo.Server
}

// Main runs the tests and stops the servers that were started before the
// binary exits. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop kills the servers that are running. Main calls it; a later Endpoint
// does not restart the shared one.
func Stop() {
	server.stop()
	moto.stop()
	pool.mu.Lock()
	defer pool.mu.Unlock()
	for _, srv := range pool.all {
		srv.Stop()
	}
	pool.all, pool.idle = nil, nil
}

func (s *shared) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		s.srv.Stop()
		s.srv = nil
	}
}

// options are the binary's server options: Server, or the environment's.
func options() localdynamo.Options {
	kind := os.Getenv("DYNAMODB_TEST_SERVER")
	if kind == "" {
		kind = Server
	}
	if kind == "" {
		kind = "moto"
	}
	opts := localdynamo.Options{Server: kind, Serialize: kind == "moto"}
	if os.Getenv("DYNAMOTEST_VERBOSE") != "" {
		opts.Output = os.Stderr
	}
	return opts
}

func (s *shared) start(opts localdynamo.Options) {
	srv, err := localdynamo.Start(context.Background(), opts)
	if err != nil {
		if errors.Is(err, localdynamo.ErrUnknownServer) {
			err = fmt.Errorf("DYNAMODB_TEST_SERVER=%q: %w", os.Getenv("DYNAMODB_TEST_SERVER"), localdynamo.ErrUnknownServer)
		}
		s.err = err
		s.missing = errors.Is(err, localdynamo.ErrNotInstalled)
		return
	}
	s.mu.Lock()
	s.srv, s.endpoint = srv, srv.Endpoint()
	s.mu.Unlock()
}

// noTTL reports whether the binary's server lacks the TTL API (dynalite):
// there NewTable creates tables without TTL; tests of TTL use Moto.
func noTTL() bool { return options().Server == "dynalite" }

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
		if !errors.Is(err, dynamostore.ErrNoTTL) || !noTTL() {
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
