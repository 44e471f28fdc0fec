// Package dynamotest runs local DynamoDB API servers for tests: one shared
// per test binary (Endpoint), more leased to one test (Lease), all stopped by
// Main. A missing server fails the test except under -short;
// DYNAMOTEST_VERBOSE=1 passes its output to stderr. Import it from tests only.
package dynamotest

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/tools/localdynamo"
)

// Server is the server ("moto", the default, or "dynalite") when
// DYNAMODB_TEST_SERVER is unset; set it in TestMain, before Main.
var Server = "moto"

// server and moto start the shared servers of Endpoint and Moto on first use.
var (
	server = sync.OnceValues(func() (*localdynamo.Server, error) { return start(options()) })
	moto   = sync.OnceValues(func() (*localdynamo.Server, error) {
		return start(localdynamo.Options{Server: "moto", Serialize: true, Output: options().Output})
	})
)

// Endpoint returns the URL of the test binary's DynamoDB API server.
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

// endpointOf returns the URL of the shared server, failing t (or skipping
// it under -short) without one.
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

// pool holds the servers started, and those of Lease that no test holds.
var pool struct {
	mu        sync.Mutex
	all, idle []*localdynamo.Server
}

// Main runs the tests and stops the servers; call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop kills the servers; a later Endpoint does not restart the shared one.
func Stop() {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	for _, srv := range pool.all {
		srv.Stop()
	}
	pool.all, pool.idle = nil, nil
}

// options are the binary's server options; moto is serialized, not atomic per item.
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

// NewTable creates a uniquely named table (without TTL on dynalite) and
// deletes it when t ends.
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

// NewClient returns a client of the server at endpoint through rt (nil:
// the SDK's transport), patient enough for a busy machine.
func NewClient(t testing.TB, endpoint string, rt http.RoundTripper) *dynamodb.Client {
	t.Helper()
	client, err := dynamostore.NewClientWithOptions(t.Context(), dynamostore.ClientOptions{Endpoint: endpoint, Transport: rt, AttemptTimeout: time.Minute, Backoff: dynamostore.NoBackoff})
	if err != nil {
		t.Fatalf("dynamotest: client: %v", err)
	}
	return client
}
