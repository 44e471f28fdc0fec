// Package dynamotest runs local DynamoDB API servers (internal/tools/localdynamo)
// for tests: one shared per test binary (Endpoint) and more that a test can
// have to itself (Lease), started on first use and stopped by Main (call it
// from TestMain). The server is DYNAMODB_TEST_SERVER, else Server; moto is
// serialized, as it is not atomic per item. A missing server fails the test,
// so that CI cannot pass without the DynamoDB tests, except under -short,
// which skips it. DYNAMOTEST_VERBOSE=1 passes the server's output to stderr.
// Import it from _test.go files only.
package dynamotest

import (
	"cmp"
	"context"
	"crypto/rand"
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

// server and moto start, on first use, the shared servers of Endpoint and
// Moto.
var (
	server = sync.OnceValues(func() (*localdynamo.Server, error) { return start(options()) })
	moto   = sync.OnceValues(func() (*localdynamo.Server, error) {
		return start(localdynamo.Options{Server: "moto", Serialize: true, Output: options().Output})
	})
)

// Endpoint returns the URL of the test binary's DynamoDB API server,
// starting it on first use.
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

// endpointOf returns the URL of the shared server that shared starts,
// failing t if it cannot start (skipping it under -short if not installed).
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
// until t ends: an idle one, or a new one.
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

// NewTable creates a fresh, uniquely named table with
// localdynamo.CreateTable (without TTL on dynalite, which lacks the TTL
// API) and deletes it when t ends.
func NewTable(t testing.TB, client *dynamodb.Client) string {
	t.Helper()
	table := "test-" + rand.Text()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := localdynamo.CreateTable(ctx, client, table); err != nil {
		if !errors.Is(err, localdynamo.ErrNoTTL) || options().Server != "dynalite" {
			t.Fatalf("dynamotest: %v", err)
		}
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
