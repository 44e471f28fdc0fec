package main

import (
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// recorder is a transport that sends nothing anywhere: it records each
// request and answers it with a program.
type recorder struct {
	mu   sync.Mutex
	urls []string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.urls = append(r.urls, req.URL.String())
	r.mu.Unlock()
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"programId":"gala"}`)), Request: req}, nil
}

// wrctlThrough runs wrctl with its requests carried by transport.
func wrctlThrough(t *testing.T, transport http.RoundTripper, env map[string]string, args ...string) result {
	t.Helper()
	return runApp(t, env, func(a *app) { a.transport = transport }, args...)
}

// TestBearerOnlyOverTLSOrLoopback is the regression test of ADMIN_TOKEN
// sent in clear text: with it set, wrctl sends requests only over https or
// to a loopback host, and refuses any other URL before sending anything.
// The requests go to a recorder, never to the network.
func TestBearerOnlyOverTLSOrLoopback(t *testing.T) {
	t.Parallel()
	env := map[string]string{"ADMIN_TOKEN": testSecret}
	for _, tc := range []struct {
		url  string
		sent bool
	}{
		{"http://example.invalid", false},
		{"http://example.invalid:3000/stage", false},
		{"http://192.0.2.10:3000", false},
		{"http://[2001:db8::1]:3000", false},
		{"http://localhost.example.invalid:3000", false},
		{"http://127.0.0.1.example.invalid", false},
		{"http://127.0.0.1:3000", true},
		{"http://127.9.8.7:3000", true},
		{"http://localhost:3000", true},
		{"http://LOCALHOST", true},
		{"http://[::1]:3000", true},
		{"https://example.invalid", true},
	} {
		t.Run(tc.url, func(t *testing.T) {
			rec := &recorder{}
			r := wrctlThrough(t, rec, env, "get", "gala", "-url", tc.url)
			switch {
			case tc.sent && (r.status != 0 || len(rec.urls) != 1):
				t.Errorf("exit %d, %d requests, stderr %q; want it sent once", r.status, len(rec.urls), r.stderr)
			case !tc.sent && len(rec.urls) != 0:
				t.Errorf("sent %v with the bearer token in clear text", rec.urls)
			case !tc.sent && (r.status != 1 || !regexp.MustCompile(`^wrctl: .*only over https or to a loopback host`).MatchString(r.stderr)):
				t.Errorf("exit %d, stderr %q; want a refusal", r.status, r.stderr)
			}
		})
	}
}

// TestGlobalFlagsBeforeCommand is the regression test of "unknown command
// -url": the flags every command takes go before the command as well as
// after it, or between its arguments.
func TestGlobalFlagsBeforeCommand(t *testing.T) {
	t.Parallel()
	url := serve(t, newAPI(t))
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	// WR_URL names no server: a -url that is not taken fails.
	env := adminEnv(down.URL)
	if r := wrctl(t, env, "put", "gala", "-paused", "-url", url); r.status != 0 {
		t.Fatal(r.stderr)
	}
	for _, args := range [][]string{
		{"get", "gala", "-url", url, "-json"},
		{"-url", url, "get", "gala", "-json"},
		{"-url=" + url, "-json", "get", "gala"},
		{"--url", url, "--json", "get", "gala"},
		{"-json", "get", "-url", url, "gala"},
		{"-timeout", "10s", "-url", url, "get", "gala", "-json"},
		{"-url", url, "-json", "put", "gala", "-rate", "5"},
		{"-url", url, "-json", "admit", "gala", "1"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			m := decode(t, wrctl(t, env, args...))
			if m["programId"] != "gala" {
				t.Errorf("answer %v, want program gala", m)
			}
		})
	}
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"-url"}, `flag needs an argument: -url`},
		{[]string{"-bogus", "get", "gala"}, `^wrctl: flag provided but not defined: -bogus\nRun "wrctl -h" for usage\.\n$`},
		{[]string{"-rate", "5", "put", "gala"}, `flag provided but not defined: -rate`},
		{[]string{"-url", url}, `^Usage: wrctl COMMAND`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := wrctl(t, env, tc.args...)
			if r.status != 2 || !regexp.MustCompile(tc.stderr).MatchString(r.stderr) {
				t.Errorf("exit %d, stderr %q; want 2 and %s", r.status, r.stderr, tc.stderr)
			}
		})
	}
}

// flaky answers each request with the next of its answers (status, error
// code, Retry-After), then with a program; it counts the requests.
type flaky struct {
	mu      sync.Mutex
	answers [][3]string
	n       int
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	i := f.n
	f.n++
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if i >= len(f.answers) {
		w.Write([]byte(`{"programId":"gala","issued":3}`))
		return
	}
	a := f.answers[i]
	if a[2] != "" {
		w.Header().Set("Retry-After", a[2])
	}
	status := map[string]int{"503": 503, "429": 429, "500": 500}[a[0]]
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"code": a[1], "message": "not now"})
}

func (f *flaky) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// TestRetries is the regression test of an admin change given up at the
// first BUSY: wrctl repeats a request the server could not serve now (503,
// 429) after its Retry-After, saying so on stderr, a bounded number of
// times; an admission, which is not safe to repeat, only when the server
// says it was not made (BUSY, 429).
func TestRetries(t *testing.T) {
	t.Parallel()
	busy := [3]string{"503", "BUSY", "1"}
	unavailable := [3]string{"503", "STORE_UNAVAILABLE", "1"}
	now := [3]string{"503", "STORE_UNAVAILABLE", ""} // 1 s
	for _, tc := range []struct {
		name     string
		args     []string
		answers  [][3]string
		status   int
		requests int
		retries  int // lines on stderr that say so
	}{
		{"get after two 503s", []string{"get", "gala"}, [][3]string{unavailable, unavailable}, 0, 3, 2},
		{"pause after BUSY", []string{"pause", "gala"}, [][3]string{busy}, 0, 2, 1},
		{"put after 429", []string{"put", "gala", "-rate", "5"}, [][3]string{{"429", "", "1"}}, 0, 2, 1},
		{"admit after BUSY", []string{"admit", "gala", "5"}, [][3]string{busy}, 0, 2, 1},
		{"admit not after STORE_UNAVAILABLE", []string{"admit", "gala", "5"}, [][3]string{unavailable}, 1, 1, 0},
		{"not after 500", []string{"get", "gala"}, [][3]string{{"500", "INTERNAL", ""}}, 1, 1, 0},
		{"bounded", []string{"get", "gala"}, [][3]string{now, now, now, now, now, now, now, now}, 1, 4, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &flaky{answers: tc.answers}
			url := serve(t, f)
			r := wrctl(t, adminEnv(url), tc.args...)
			retries := len(regexp.MustCompile(`(?m)^wrctl: .*; retrying in `).FindAllString(r.stderr, -1))
			if r.status != tc.status || f.requests() != tc.requests || retries != tc.retries {
				t.Errorf("exit %d after %d requests, %d retries said, stderr:\n%s\nwant exit %d, %d requests, %d retries", r.status, f.requests(), retries, r.stderr, tc.status, tc.requests, tc.retries)
			}
			// Each retry waits the answer's Retry-After (1 s), or 1 s
			// without one.
			if want := slices.Repeat([]time.Duration{time.Second}, tc.retries); !slices.Equal(r.waits, want) {
				t.Errorf("waits before the retries %v, want %v", r.waits, want)
			}
		})
	}
}

// TestParseInterspersed: flags go anywhere among the positional
// arguments, and a token id or kid that starts with '-' is positional,
// not an unknown flag; a mistyped flag is still refused.
func TestParseInterspersed(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    []string
		json    bool
		wantErr bool
	}{
		{"flags after", []string{"gala", "tok", "-json"}, []string{"gala", "tok"}, true, false},
		{"flags between", []string{"gala", "-json", "tok"}, []string{"gala", "tok"}, true, false},
		{"a token id with a dash", []string{"gala", "-d363Zw48WaJts4opduvcw", "-json"}, []string{"gala", "-d363Zw48WaJts4opduvcw"}, true, false},
		{"a kid with a dash", []string{"revoke", "-Mmfp_Pgh7fn-kLmVDcUVfNmqJ6Lvr7kZ1Ebdr6zwzw"}, []string{"revoke", "-Mmfp_Pgh7fn-kLmVDcUVfNmqJ6Lvr7kZ1Ebdr6zwzw"}, false, false},
		{"after --", []string{"gala", "--", "-json"}, []string{"gala", "-json"}, false, false},
		{"a mistyped flag", []string{"gala", "-jsn"}, nil, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("token", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			json := fs.Bool("json", false, "")
			got, err := parseInterspersed(fs, tt.args)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want an error: %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" || *json != tt.json {
				t.Errorf("positional (-want +got):\n%s; -json %v, want %v", diff, *json, tt.json)
			}
		})
	}
}
