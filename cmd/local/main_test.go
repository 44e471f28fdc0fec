package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/testing/browser"
	"github.com/example/waitingroom/internal/testing/clocktest"
	"github.com/example/waitingroom/internal/testing/dynamotest"
	"github.com/example/waitingroom/internal/tools/localdynamo"
	"github.com/example/waitingroom/internal/tools/partitionmodel"
)

func TestMain(m *testing.M) {
	code := m.Run()
	dynamotest.Stop()
	browser.Stop()
	os.Exit(code)
}

// syncBuffer is an io.Writer safe to read while run writes to it.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	written chan struct{} // closed and replaced at each write
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written != nil {
		close(s.written)
		s.written = nil
	}
	return s.b.Write(p)
}

// next returns what was written so far and a channel closed at the next
// write.
func (s *syncBuffer) next() (string, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written == nil {
		s.written = make(chan struct{})
	}
	return s.b.String(), s.written
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

var listening = regexp.MustCompile(`listening on (http://[0-9.:]+)`)

// start runs the local server with env and returns its base URL.
func start(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	base, _ := startOut(t, env, args...)
	return base
}

// startOut is start, also returning what the server printed.
func startOut(t *testing.T, env map[string]string, args ...string) (string, *syncBuffer) {
	t.Helper()
	return startWith(t, seams{}, env, args...)
}

// startWith is startOut with the seams s; the keyring's clock, unless s
// sets one, reads mid-slot: no next key is due, whatever the hour.
func startWith(t *testing.T, s seams, env map[string]string, args ...string) (string, *syncBuffer) {
	t.Helper()
	if s.keyring == nil {
		s.keyring = []admissionpass.KeyringOption{admissionpass.WithKeyringClock(clocktest.MidSlot(24 * time.Hour))}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out, errs syncBuffer
	done := make(chan error, 1)
	go func() {
		// No crowd in the demo program unless a test asks for one.
		// No program cache unless a test sets one: an admission shows at
		// the next poll.
		getenv := func(k string) string {
			if v, ok := env[k]; ok || k != config.EnvProgramCacheTTL {
				return v
			}
			return "0s"
		}
		done <- run(ctx, s, append([]string{"-addr", "127.0.0.1:0", "-demo-crowd", "0"}, args...), getenv, &out, &errs)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	// A hang guard: with -dynamo moto the start includes moto's, which
	// takes over 30 s on a busy machine (localdynamo allows it 2 min).
	guard := time.After(4 * time.Minute)
	for {
		printed, written := out.next()
		if m := listening.FindStringSubmatch(printed); m != nil {
			return m[1], &out
		}
		select {
		case err := <-done:
			done <- err // for the cleanup, which would wait for it for ever
			t.Fatalf("server stopped: %v\n%s", err, errs.String())
		case <-written:
			continue
		case <-guard:
		}
		break
	}
	t.Fatalf("server did not start: %s %s", out.String(), errs.String())
	return "", nil
}

func call(t *testing.T, method, url, token, auth, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("X-Queue-Token", token)
	}
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s %s: not JSON: %s", method, url, b)
		}
	}
	return resp.StatusCode, m
}

// callRetry is call, repeated while the answer is 503: on a busy machine,
// moto may take longer than an admin write's budget (1 s), which the
// attempt itself then spends. Two minutes bound a server that never
// recovers.
func callRetry(t *testing.T, method, url, token, auth, body string) (int, map[string]any) {
	t.Helper()
	give := time.Now().Add(2 * time.Minute)
	for {
		code, m := call(t, method, url, token, auth, body)
		if code != http.StatusServiceUnavailable || time.Now().After(give) {
			return code, m
		}
	}
}

// walk takes a token from WAITING to ADMITTED through the admin API, as the
// README's curl session does.
func walk(t *testing.T, base, secret string) {
	prog := base + "/api/v1/queues/programs/walk"
	admin := base + "/api/v1/admin/programs/walk"
	if code, body := callRetry(t, "PUT", admin, "", secret, `{"admissionRatePerSecond": 5, "paused": true}`); code != 201 {
		t.Fatalf("create program: %d %v", code, body)
	}
	var last map[string]any
	for i := range 3 {
		code, body := call(t, "POST", prog, "", "", "")
		if code != 201 || body["position"] != float64(i+1) || body["status"] != "WAITING" {
			t.Fatalf("enter %d: %d %v", i, code, body)
		}
		last = body
	}
	token := last["tokenId"].(string)
	if code, body := call(t, "GET", prog, token, "", ""); code != 200 || body["position"] != float64(3) || body["retryAfterMs"] != float64(1000) {
		t.Fatalf("poll: %d %v", code, body)
	}
	if code, body := callRetry(t, "POST", admin+"/admissions", "", secret, `{"count": 3}`); code != 200 {
		t.Fatalf("admit: %d %v", code, body)
	}
	// No program cache: the next poll sees the admission.
	if code, body := call(t, "GET", prog, token, "", ""); code != 200 || body["status"] != "ADMITTED" {
		t.Fatalf("poll after the admission: %d %v, want ADMITTED", code, body)
	} else if _, ok := body["position"]; ok {
		t.Errorf("admitted answer has a position: %v", body)
	}
	if code, body := call(t, "GET", admin, "", secret, ""); code != 200 || body["admitted"] != float64(3) || body["issued"] != float64(3) {
		t.Errorf("counters: %d %v", code, body)
	}
	if code, _ := call(t, "GET", admin, "", "wrong", ""); code != 403 {
		t.Errorf("wrong admin secret: %d, want 403", code)
	}
}

func TestLocalMemory(t *testing.T) {
	t.Parallel()
	base, out := startOut(t, map[string]string{"ADMIN_TOKEN": "s3cret"}, "-demo-rate", "0.01", "-demo-crowd", "25")
	if !strings.Contains(out.String(), "(store: memory;") {
		t.Errorf("start-up line does not name the store: %s", out)
	}
	walk(t, base, "s3cret")
	// The demo program is open at start, with its crowd, and its page
	// printed.
	if code, body := call(t, "POST", base+"/api/v1/queues/programs/demo", "", "", ""); code != 201 || body["ticket"] != float64(26) {
		t.Errorf("demo program: %d %v, want ticket 26 behind a crowd of 25", code, body)
	}
	if want := "waiting-room page of the demo program: " + base + "/waiting-room/demo\n"; !strings.Contains(out.String(), want) {
		t.Errorf("start-up output %q, want %q", out, want)
	}
	resp, page := get(t, http.DefaultClient, base+"/waiting-room/demo", nil)
	if resp.StatusCode != 200 || !strings.Contains(page, "<h1>Demo concert · 데모 콘서트</h1>") {
		t.Errorf("demo page: %d\n%s", resp.StatusCode, page)
	}
}

func TestLocalDynamoDB(t *testing.T) {
	t.Parallel()
	endpoint := dynamotest.Endpoint(t)
	table := "local-" + rand.Text()[:12] // -create-table makes it; fresh in every run (-count=2)
	env := map[string]string{"ADMIN_TOKEN": "s3cret", "DYNAMODB_ENDPOINT": endpoint, "TABLE_NAME": table}
	base, out := startOut(t, env, "-create-table")
	if want := "(store: DynamoDB table " + table + " at " + endpoint; !strings.Contains(out.String(), want) {
		t.Errorf("start-up line %q, want it to say %q", out, want)
	}
	walk(t, base, "s3cret")
}

func TestLocalGeneratesAdminToken(t *testing.T) {
	t.Parallel()
	base, out := startOut(t, map[string]string{}, "-demo-program", "")
	m := regexp.MustCompile(`generated admin token: ([0-9a-f]{32})`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no generated token printed: %q", out.String())
	}
	if code, _ := call(t, "GET", base+"/api/v1/admin/programs/demo", "", m[1], ""); code != 404 {
		t.Errorf("generated token not accepted (want 404 for the absent demo program, got %d)", code)
	}
}

func TestLocalBadConfig(t *testing.T) {
	t.Parallel()
	var out, errs syncBuffer
	err := run(context.Background(), seams{}, []string{"-addr", "127.0.0.1:0"}, func(k string) string {
		return map[string]string{"POLL_TIERS": "100:1s"}[k]
	}, &out, &errs)
	if err == nil || !strings.Contains(err.Error(), "POLL_TIERS") {
		t.Errorf("err = %v, want a POLL_TIERS error", err)
	}
}

// TestLocalAddressInUse: a port another server holds is named, with how
// to serve on another address (the Makefile's ADDR=, or -addr).
func TestLocalAddressInUse(t *testing.T) {
	t.Parallel()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	var out, errs syncBuffer
	err = run(context.Background(), seams{}, []string{"-addr", held.Addr().String(), "-demo-crowd", "0"}, func(string) string { return "" }, &out, &errs)
	want := "\n(another server holds " + held.Addr().String() + ": stop it, or serve on another address: make run ADDR=127.0.0.1:3001, or -addr)"
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("err = %v, want EADDRINUSE ending %q", err, want)
	}
}

// TestLocalHelp: -h names every variable the server reads.
func TestLocalHelp(t *testing.T) {
	t.Parallel()
	var out, errs syncBuffer
	err := run(context.Background(), seams{}, []string{"-h"}, func(string) string { return "" }, &out, &errs)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	for _, v := range append([]string{EnvAdminToken}, config.Variables...) {
		if !strings.Contains(errs.String(), v) {
			t.Errorf("-h does not name %s:\n%s", v, errs.String())
		}
	}
	for _, flag := range []string{"-create-table", "-dynamo", "-max-conns", "-read-timeout", "-pass-key", "/demo-site/", defaultLocalTable} {
		if !strings.Contains(errs.String(), flag) {
			t.Errorf("-h does not mention %s", flag)
		}
	}
}

// TestLocalMissingTable: a DynamoDB API without the table is reported at
// start, naming the table and -create-table.
func TestLocalMissingTable(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DYNAMODB_ENDPOINT": dynamotest.Endpoint(t), "TABLE_NAME": "no-such-table"}
	var out, errs syncBuffer
	err := run(context.Background(), seams{}, []string{"-addr", "127.0.0.1:0"}, func(k string) string { return env[k] }, &out, &errs)
	if err == nil || !strings.Contains(err.Error(), "no table no-such-table") || !strings.Contains(err.Error(), "-create-table") {
		t.Errorf("err = %v, want the missing table named and -create-table suggested", err)
	}
}

// TestLocalBareMoto is bug 4: the local server over a bare moto_server
// (DYNAMODB_ENDPOINT, as docs/operations.md, "The local server", has it) must hand out
// every ticket once under concurrent enters. It finds moto and puts the
// serialising proxy in front of it.
func TestLocalBareMoto(t *testing.T) {
	t.Parallel()
	moto, err := localdynamo.Start(t.Context(), localdynamo.Options{Server: "moto"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(moto.Stop)
	base, out := startWith(t, patientMoto, map[string]string{"ADMIN_TOKEN": "s3cret", "DYNAMODB_ENDPOINT": moto.Endpoint()}, "-create-table")
	if !strings.Contains(out.String(), "moto, through a proxy") {
		t.Errorf("start-up line does not say moto is serialised: %s", out)
	}
	enterConcurrently(t, base, 40)
}

// TestLocalDynamoFlag: -dynamo moto starts moto behind the proxy, makes the
// table and serves from it.
func TestLocalDynamoFlag(t *testing.T) {
	t.Parallel()
	base, out := startWith(t, patientMoto, map[string]string{"ADMIN_TOKEN": "s3cret"}, "-dynamo", "moto")
	if want := "(store: DynamoDB table " + defaultLocalTable + " on a moto it started at http://"; !strings.Contains(out.String(), want) {
		t.Errorf("start-up line %q, want %q", out, want)
	}
	walk(t, base, "s3cret")
	enterConcurrently(t, base, 40)
}

// patientMoto lets the server's DynamoDB client wait for moto's one-at-a-time
// proxy as long as a crowd of enters needs on a loaded machine, rather
// than time attempts out and answer 503.
var patientMoto = seams{dynamo: dynamostore.ClientOptions{Backoff: dynamostore.NoBackoff, AttemptTimeout: time.Minute}}

// enterConcurrently makes n people enter program "crowd", eight at a time
// (more only queue at moto's one-at-a-time proxy), and checks that their
// tickets are n distinct numbers.
func enterConcurrently(t *testing.T, base string, n int) {
	t.Helper()
	if code, body := callRetry(t, "PUT", base+"/api/v1/admin/programs/crowd", "", "s3cret", `{"paused": true}`); code != 201 {
		t.Fatalf("create program: %d %v", code, body)
	}
	tickets := make(chan float64, n)
	eightAtATime(n, func() bool {
		// A 503 (moto slower than the request's budget on a busy machine)
		// is tried again, as a client would.
		code, body := callRetry(t, "POST", base+"/api/v1/queues/programs/crowd", "", "", "")
		ticket, ok := body["ticket"].(float64)
		if code != 201 || !ok {
			t.Errorf("enter: %d %v", code, body)
			return false
		}
		tickets <- ticket
		return true
	})
	close(tickets)
	// A crowd this fast may get its tickets from ticket shards, whose
	// blocks leave gaps: every ticket is unique and at most what was issued.
	code, prog := call(t, "GET", base+"/api/v1/admin/programs/crowd", "", "s3cret", "")
	issued, _ := prog["issued"].(float64)
	if code != 200 || issued < float64(n) {
		t.Fatalf("program after %d enters: %d %v", n, code, prog)
	}
	seen := map[float64]bool{}
	for tk := range tickets {
		if seen[tk] || tk < 1 || tk > issued {
			t.Errorf("ticket %v handed out twice or out of 1..%v", tk, issued)
		}
		seen[tk] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct tickets for %d enters", len(seen), n)
	}
}

// TestLocalPartitionLimits: -partition-limits throttles the program item
// like DynamoDB, and the server publishes the model's counts.
func TestLocalPartitionLimits(t *testing.T) {
	t.Parallel()
	frozen := time.Now()
	base, out := startWith(t, seams{partitionNow: func() time.Time { return frozen }}, map[string]string{"ADMIN_TOKEN": "s3cret"}, "-dynamo", "moto", "-partition-limits", "write=1,read=100", "-demo-program", "")
	if !strings.Contains(out.String(), "per-partition limits write=1,read=100 a second") {
		t.Errorf("start-up line does not name the limits: %s", out)
	}
	if code, body := call(t, "PUT", base+"/api/v1/admin/programs/hot", "", "s3cret", `{"paused": true}`); code != 201 {
		t.Fatalf("create program: %d %v", code, body)
	}
	type stats struct {
		ThrottledWrites int64
		Hottest         []struct {
			Key             string
			Writes          int64
			WriteUnits      float64
			ThrottledWrites int64
		}
	}
	// Enters in one second of the model's clock, which does not move:
	// the program item's 1 unit a second is spent, the rest throttled.
	for range 3 {
		if code, body := call(t, "POST", base+"/api/v1/queues/programs/hot", "", "", ""); code != 201 && code != 503 {
			t.Errorf("enter: %d %v, want 201 or 503", code, body)
		}
	}
	resp, err := http.Get(base + partitionmodel.StatsPath)
	if err != nil {
		t.Fatal(err)
	}
	var sum stats
	err = json.NewDecoder(resp.Body).Decode(&sum)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The program item is among the hottest and throttled (with ticket
	// shards beside it, a shard may be hotter still).
	programThrottled := false
	for _, h := range sum.Hottest {
		programThrottled = programThrottled || strings.Contains(h.Key, "PROGRAM#hot") && h.ThrottledWrites > 0
	}
	if sum.ThrottledWrites == 0 || !programThrottled {
		b, _ := json.Marshal(sum)
		t.Errorf("3 enters in one second on a 1-unit partition: %s, want throttled writes on PROGRAM#hot", b)
	}
}

func TestLocalPartitionLimitsNeedDynamo(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-partition-limits", "scale=0.1"},
		{"-dynamo", "moto", "-partition-limits", "scale=fast"},
	} {
		var out, errs syncBuffer
		err := run(context.Background(), seams{}, append([]string{"-addr", "127.0.0.1:0"}, args...), func(string) string { return "" }, &out, &errs)
		if err == nil || !strings.Contains(err.Error(), "-partition-limits") {
			t.Errorf("%v: err = %v, want a -partition-limits error", args, err)
		}
	}
}
