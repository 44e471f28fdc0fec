package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/testing/dynamotest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// syncBuffer is an io.Writer safe to read while run writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

var listening = regexp.MustCompile(`listening on (http://[0-9.:]+)`)

// start runs the local server with env and returns its base URL.
func start(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errs syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), func(k string) string { return env[k] }, &out, &errs)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m := listening.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		select {
		case err := <-done:
			t.Fatalf("server stopped: %v\n%s", err, errs.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("server did not start: %s %s", out.String(), errs.String())
	return ""
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

// walk takes a token from WAITING to ADMITTED through the admin API, as the
// README's curl session does.
func walk(t *testing.T, base, secret string) {
	prog := base + "/api/v1/queues/programs/walk"
	admin := base + "/api/v1/admin/programs/walk"
	if code, body := call(t, "PUT", admin, "", secret, `{"admissionRatePerSecond": 5, "paused": true}`); code != 201 {
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
	if code, body := call(t, "POST", admin+"/admissions", "", secret, `{"count": 3}`); code != 200 {
		t.Fatalf("admit: %d %v", code, body)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, body := call(t, "GET", prog, token, "", "")
		if code == 200 && body["status"] == "ADMITTED" {
			if _, ok := body["position"]; ok {
				t.Errorf("admitted answer has a position: %v", body)
			}
			break
		}
		if code != 200 || body["status"] != "WAITING" || time.Now().After(deadline) {
			t.Fatalf("waiting for admission: %d %v", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, body := call(t, "GET", admin, "", secret, ""); code != 200 || body["admitted"] != float64(3) || body["issued"] != float64(3) {
		t.Errorf("counters: %d %v", code, body)
	}
	if code, _ := call(t, "GET", admin, "", "wrong", ""); code != 403 {
		t.Errorf("wrong admin secret: %d, want 403", code)
	}
}

func TestLocalMemory(t *testing.T) {
	base := start(t, map[string]string{"ADMIN_TOKEN": "s3cret"})
	walk(t, base, "s3cret")
	// The demo program is open at start.
	if code, body := call(t, "POST", base+"/api/v1/queues/programs/demo", "", "", ""); code != 201 {
		t.Errorf("demo program: %d %v", code, body)
	}
}

func TestLocalDynamoDB(t *testing.T) {
	env := map[string]string{"ADMIN_TOKEN": "s3cret", "DYNAMODB_ENDPOINT": dynamotest.Endpoint(t), "TABLE_NAME": "local-" + strings.ReplaceAll(t.Name(), "/", "-")}
	base := start(t, env, "-create-table")
	walk(t, base, "s3cret")
}

func TestLocalGeneratesAdminToken(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out, errs syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-demo-program", ""}, func(string) string { return "" }, &out, &errs)
	}()
	defer func() { cancel(); <-done }()
	re := regexp.MustCompile(`generated admin token: ([0-9a-f]{32})`)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && !listening.MatchString(out.String()) {
		time.Sleep(20 * time.Millisecond)
	}
	m := re.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no generated token printed: %q", out.String())
	}
	base := listening.FindStringSubmatch(out.String())[1]
	if code, _ := call(t, "GET", base+"/api/v1/admin/programs/demo", "", m[1], ""); code != 404 {
		t.Errorf("generated token not accepted (want 404 for the absent demo program, got %d)", code)
	}
}

func TestLocalBadConfig(t *testing.T) {
	var out, errs syncBuffer
	err := run(context.Background(), []string{"-addr", "127.0.0.1:0"}, func(k string) string {
		return map[string]string{"POLL_TIERS": "100:1s"}[k]
	}, &out, &errs)
	if err == nil || !strings.Contains(err.Error(), "POLL_TIERS") {
		t.Errorf("err = %v, want a POLL_TIERS error", err)
	}
}
