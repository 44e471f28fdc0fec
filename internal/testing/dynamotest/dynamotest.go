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
	"cmp"
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

	"github.com/example/waitingroom/internal/tools/localdynamo"
)

// Server is the server of a test binary that DYNAMODB_TEST_SERVER does not
// choose: "moto" (also when empty) or "dynalite". Set it in TestMain, before
// Main.
var Server = "moto"

// server and moto start, on first use, the binary's shared server
// (Endpoint) and the shared moto (Moto) when the binary's server is
// another one.
var (
	server = sync.OnceValues(func() (*localdynamo.Server, error) { return start(options()) })
	moto   = sync.OnceValues(func() (*localdynamo.Server, error) {
		return start(localdynamo.Options{Server: "moto", Serialize: true, Output: options().Output})
	})
)

// Endpoint returns the URL of the test binary's DynamoDB API server,
// starting it on first use. It fails t if the server cannot start, or skips
// it under -short when the server is not installed.
func Endpoint(t testing.TB) string {
	t.Helper()
	return endpointOf(t, server)
}

// Moto returns the URL of a moto server that tests share, for what the
// binary's server may lack (the TTL API): the binary's own when it is moto.
func Moto(t testing.TB) string {
	t.Helper()
	if options().Server == "moto" {
		return Endpoint(t)
	}
	return endpointOf(t, moto)
}

// endpointOf returns the URL of the shared server that shared starts, as
// Endpoint says.
func endpointOf(t testing.TB, shared func() (*localdynamo.Server, error)) string {
	t.Helper()
	srv, err := shared()
	if err != nil {
		if errors.Is(err, localdynamo.ErrNotInstalled) && testing.Short() {
			t.Skipf("dynamotest: %v (skipped under -short)", err)
		}
		t.Fatalf("dynamotest: %v", err)
	}
	return srv.Endpoint()
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
		if srv, err = start(options()); err != nil {
			t.Fatalf("dynamotest: %v", err)
		}
	}
	t.Cleanup(func() {
		pool.mu.Lock()
		defer pool.mu.Unlock()
		pool.idle = append(pool.idle, srv)
	})
	return srv.Endpoint()
}

// pool holds the servers started: all of them, and those of Lease that
// no test holds.
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
	pool.mu.Lock()
	defer pool.mu.Unlock()
	for _, srv := range pool.all {
		srv.Stop()
	}
	pool.all, pool.idle = nil, nil
}

// options are the binary's server options: Server, or the environment's.
func options() localdynamo.Options {
	kind := cmp.Or(os.Getenv("DYNAMODB_TEST_SERVER"), Server, "moto")
	opts := localdynamo.Options{Server: kind, Serialize: kind == "moto"}
	if os.Getenv("DYNAMOTEST_VERBOSE") != "" {
		opts.Output = os.Stderr
	}
	return opts
}

// start starts a server with opts, for Stop to kill.
func start(opts localdynamo.Options) (*localdynamo.Server, error) {
	srv, err := localdynamo.Start(context.Background(), opts)
	if errors.Is(err, localdynamo.ErrUnknownServer) {
		err = fmt.Errorf("DYNAMODB_TEST_SERVER=%q: %w", os.Getenv("DYNAMODB_TEST_SERVER"), localdynamo.ErrUnknownServer)
	}
	if err != nil {
		return nil, err
	}
	pool.mu.Lock()
	defer pool.mu.Unlock()
	pool.all = append(pool.all, srv)
	return srv, nil
}

// noTTL reports whether the binary's server lacks the TTL API (dynalite):
// there NewTable creates tables without TTL; tests of TTL use Moto.
func noTTL() bool { return options().Server == "dynalite" }

// NewTable creates a fresh, uniquely named table with
// localdynamo.CreateTable and deletes it when t ends.
func NewTable(t testing.TB, client *dynamodb.Client) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	table := "test-" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := localdynamo.CreateTable(ctx, client, table); err != nil {
		if !errors.Is(err, localdynamo.ErrNoTTL) || !noTTL() {
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
