package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/go-cmp/cmp"

	waitingroom "github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/testing/clocktest"
	"github.com/example/waitingroom/internal/testing/sigv4test"
	"github.com/example/waitingroom/internal/tools/localkeys"
	"github.com/example/waitingroom/internal/tools/memstore"
)

// testSecret is the test server's admin bearer secret, testIssuer the iss
// of its passes.
const (
	testSecret = "s3cret"
	testIssuer = "https://queue.example.com"
)

// newAPI is the waiting room's HTTP API in process, on an in-memory store,
// admin changes taking effect at once (no program cache), the admin
// routes behind testSecret, passes signed for testIssuer by a fixed key.
func newAPI(t *testing.T) http.Handler {
	t.Helper()
	iss, err := localkeys.NewIssuer(config.Pass{}, testIssuer)
	if err != nil {
		t.Fatal(err)
	}
	return newServer(t, waitingroom.WithPasses(iss)).LocalHandler(testSecret)
}

// newServer is the App the tests serve, signing passes as passes says: the one
// place the tests build the server.
func newServer(t *testing.T, opts ...waitingroom.Option) *waitingroom.App {
	t.Helper()
	cfg, err := config.FromEnv(func(k string) string {
		if k == config.EnvProgramCacheTTL {
			return "0s"
		}
		return ""
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	return waitingroom.New(cfg, memstore.New(), slog.New(slog.DiscardHandler), opts...)
}

// mustRun runs wrctl with env and args, failing t unless it exits 0.
func mustRun(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	r := wrctl(t, env, args...)
	if r.status != 0 {
		t.Fatalf("wrctl %v: exit %d, stderr %s", args, r.status, r.stderr)
	}
	return r
}

// musts is mustRun with t and env.
func musts(t *testing.T, env map[string]string) func(args ...string) result {
	return func(args ...string) result {
		t.Helper()
		return mustRun(t, env, args...)
	}
}

// adminEnv is the environment of a wrctl run against url with the test
// server's admin token.
func adminEnv(url string) map[string]string {
	return map[string]string{"WR_URL": url, "ADMIN_TOKEN": testSecret}
}

// serve serves h on loopback for the test's duration and returns its URL.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// result is what one wrctl run printed and its exit status.
type result struct {
	stdout, stderr string
	status         int
	waits          []time.Duration // asked before retries
}

// wrctl runs the command line args with env as its environment (and
// nothing of the process's, except the AWS SDK's own variables).
func wrctl(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	return runApp(t, env, nil, args...)
}

// runApp is wrctl with the app changed by setup first (nil: none). Waits
// before a retry are recorded in the result, not slept.
func runApp(t *testing.T, env map[string]string, setup func(*app), args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := newApp(func(k string) string { return env[k] }, &stdout, &stderr)
	var waits []time.Duration
	a.sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return ctx.Err()
	}
	if setup != nil {
		setup(a)
	}
	status := exitStatus(a.run(ctx, args), &stderr)
	return result{stdout.String(), stderr.String(), status, waits}
}

// roundTrip is an http.RoundTripper of a function.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// watchOnClock runs wrctl watch args (which must say -every every) on a
// manual clock started at t0 that moves by every once each sample's
// answer is in, after between(i) for the i-th answer (nil: nothing): the
// i-th sample is taken at t0 + (i+1)·every, however fast the machine.
func watchOnClock(t *testing.T, env map[string]string, every time.Duration, between func(i int), args ...string) result {
	t.Helper()
	c := clocktest.NewManual(t0)
	answers := 0
	return runApp(t, env, func(a *app) {
		a.clock = c.FakeClock
		a.transport = roundTrip(func(r *http.Request) (*http.Response, error) {
			resp, err := http.DefaultTransport.RoundTrip(r)
			if err == nil {
				// Read now: the clock's move may end a -for, which must not
				// cut short an answer already in.
				body, rerr := io.ReadAll(resp.Body)
				resp.Body.Close()
				if rerr != nil {
					return nil, rerr
				}
				resp.Body = io.NopCloser(bytes.NewReader(body))
			}
			if between != nil {
				between(answers)
			}
			answers++
			c.Advance(every)
			return resp, err
		})
	}, append([]string{"watch"}, args...)...)
}

// t0 is when the watches on a manual clock start.
var t0 = time.Date(2026, 5, 19, 10, 0, 0, 0, time.UTC)

// decode parses a -json answer.
func decode(t *testing.T, r result) map[string]any {
	t.Helper()
	if r.status != 0 {
		t.Fatalf("exit %d, stderr: %s", r.status, r.stderr)
	}
	if strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("-json output is not one line: %q", r.stdout)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("-json output does not parse: %v\n%s", err, r.stdout)
	}
	return m
}

// pick returns the keys of m named, absent ones as nil.
func pick(m map[string]any, keys ...string) map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		out[k] = m[k]
	}
	return out
}

// enter makes n people enter program id.
func enter(t *testing.T, url, id string, n int) {
	t.Helper()
	for range n {
		resp, err := http.Post(url+"/api/v1/queues/programs/"+id, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("enter: status %d", resp.StatusCode)
		}
	}
}

func TestCommands(t *testing.T) {
	t.Parallel()
	url := serve(t, newAPI(t))
	env := adminEnv(url)
	run := func(t *testing.T, args ...string) map[string]any {
		t.Helper()
		return decode(t, wrctl(t, env, args...))
	}
	counters := []string{"programId", "issued", "admitted", "waiting", "admissionRatePerSecond", "paused", "closed", "admissionWindowSeconds", "pollingPolicy"}

	t.Run("PutCreates", func(t *testing.T) {
		got := run(t, "put", "gala", "-rate", "2", "-paused", "-window", "15m", "-json")
		want := map[string]any{"programId": "gala", "issued": 0.0, "admitted": 0.0, "waiting": 0.0, "admissionRatePerSecond": 2.0,
			"paused": true, "closed": false, "admissionWindowSeconds": 900.0, "pollingPolicy": nil}
		if diff := cmp.Diff(want, pick(got, counters...)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("PutSendsOnlyTheFlagsGiven", func(t *testing.T) {
		// Flags after the id, a policy: paused and the window stay.
		got := run(t, "put", "-json", "gala", "-rate", "3.5", "-policy", "eta", "-max-waiting", "5000")
		want := map[string]any{"admissionRatePerSecond": 3.5, "paused": true, "admissionWindowSeconds": 900.0, "pollingPolicy": "eta", "maxWaiting": 5000.0}
		if diff := cmp.Diff(want, pick(got, "admissionRatePerSecond", "paused", "admissionWindowSeconds", "pollingPolicy", "maxWaiting")); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		got = run(t, "put", "gala", "-challenge-bits", "12", "-json")
		if got["challengeBits"] != 12.0 {
			t.Errorf("-challenge-bits 12: challengeBits %v", got["challengeBits"])
		}
		got = run(t, "put", "gala", "-challenge-bits", "0", "-json")
		if _, ok := got["challengeBits"]; ok {
			t.Errorf("-challenge-bits 0 should remove the proof of work: %v", got)
		}
		got = run(t, "put", "gala", "-policy", "", "-json")
		if _, ok := got["pollingPolicy"]; ok || got["admissionRatePerSecond"] != 3.5 {
			t.Errorf(`-policy "" should return the program to the default policy and keep the rate: %v`, got)
		}
	})
	enter(t, url, "gala", 5)
	t.Run("Get", func(t *testing.T) {
		got := run(t, "get", "gala", "-json")
		if diff := cmp.Diff(map[string]any{"issued": 5.0, "admitted": 0.0, "waiting": 5.0}, pick(got, "issued", "admitted", "waiting")); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("GetHuman", func(t *testing.T) {
		r := wrctl(t, env, "get", "gala")
		if r.status != 0 || r.stderr != "" {
			t.Fatalf("exit %d: %s", r.status, r.stderr)
		}
		for _, want := range []string{`(?m)^  programId +gala$`, `(?m)^  issued +5$`, `(?m)^  waiting +5$`, `(?m)^  paused +true$`, `(?m)^  admissionRatePerSecond +3.5$`} {
			if !regexp.MustCompile(want).MatchString(r.stdout) {
				t.Errorf("output lacks %s:\n%s", want, r.stdout)
			}
		}
	})
	t.Run("Admit", func(t *testing.T) {
		got := run(t, "admit", "gala", "2", "-json")
		if diff := cmp.Diff(map[string]any{"issued": 5.0, "admitted": 2.0, "waiting": 3.0}, pick(got, "issued", "admitted", "waiting")); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		r := wrctl(t, env, "admit", "gala", "1")
		if r.status != 0 || !strings.HasPrefix(r.stdout, "admitted 1 more of program gala\n") || !regexp.MustCompile(`(?m)^  admitted +3$`).MatchString(r.stdout) {
			t.Errorf("exit %d, output:\n%s%s", r.status, r.stdout, r.stderr)
		}
	})
	t.Run("Toggles", func(t *testing.T) {
		for _, tc := range []struct {
			cmd            string
			paused, closed bool
		}{
			{"resume", false, false},
			{"pause", true, false},
			{"close", true, true},
			{"resume", false, true},
			{"reopen", false, false},
		} {
			got := run(t, tc.cmd, "gala", "-json")
			if got["paused"] != tc.paused || got["closed"] != tc.closed {
				t.Errorf("after %s: paused %v closed %v, want %v %v", tc.cmd, got["paused"], got["closed"], tc.paused, tc.closed)
			}
		}
		run(t, "close", "gala", "-json")
		resp, err := http.Post(url+"/api/v1/queues/programs/gala", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusConflict {
			t.Errorf("enter after close: %d, want 409", resp.StatusCode)
		}
	})
	t.Run("PutHuman", func(t *testing.T) {
		r := wrctl(t, env, "put", "fair")
		if r.status != 0 || !strings.HasPrefix(r.stdout, "created program fair\n") {
			t.Errorf("exit %d, output:\n%s%s", r.status, r.stdout, r.stderr)
		}
		r = wrctl(t, env, "put", "fair", "-rate", "1")
		if r.status != 0 || !strings.HasPrefix(r.stdout, "updated program fair\n") {
			t.Errorf("exit %d, output:\n%s%s", r.status, r.stdout, r.stderr)
		}
	})
	t.Run("Profile", func(t *testing.T) {
		profile := []string{"displayName", "message", "notice", "targetUrl"}
		got := run(t, "put", "fair", "-display-name", "Autumn fair", "-message", "Doors at 10.", "-target-url", "https://tickets.example.com/fair", "-json")
		want := map[string]any{"displayName": "Autumn fair", "message": "Doors at 10.", "notice": nil, "targetUrl": "https://tickets.example.com/fair"}
		if diff := cmp.Diff(want, pick(got, profile...)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, pick(run(t, "get", "fair", "-json"), profile...)); diff != "" {
			t.Errorf("get after put (-want +got):\n%s", diff)
		}
	})
	t.Run("Notice", func(t *testing.T) {
		// The notice reaches the people waiting, and clearing it removes it.
		waiting := func() map[string]any {
			t.Helper()
			resp, err := http.Post(url+"/api/v1/queues/programs/fair", "", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var m map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || m["status"] != "WAITING" {
				t.Fatalf("enter: %d %v %v", resp.StatusCode, m, err)
			}
			return m
		}
		run(t, "pause", "fair", "-json")
		const notice = "Saturday is sold out; Sunday still has seats"
		if got := run(t, "put", "fair", "-notice", notice, "-json"); got["notice"] != notice || got["displayName"] != "Autumn fair" {
			t.Errorf("put -notice: %v", got)
		}
		if got := waiting(); got["notice"] != notice {
			t.Errorf("WAITING answer %v, want the notice", got)
		}
		got := run(t, "put", "fair", "-notice", "", "-json")
		if _, ok := got["notice"]; ok || got["displayName"] != "Autumn fair" {
			t.Errorf(`put -notice "": %v, want no notice key and the rest kept`, got)
		}
		if got := waiting(); got["notice"] != nil {
			t.Errorf("WAITING answer after clearing %v, want no notice key", got)
		}
		r := wrctl(t, env, "put", "fair", "-notice", strings.Repeat("x", 281))
		if r.status != 1 || !strings.HasPrefix(r.stderr, "wrctl: INVALID_SETTINGS: ") || !strings.Contains(r.stderr, "280") {
			t.Errorf("a notice of 281 characters: exit %d, stderr %q; want the API's INVALID_SETTINGS naming the limit", r.status, r.stderr)
		}
	})
	t.Run("Translations", func(t *testing.T) {
		// -text merges per language and per text, as the API does; a
		// language left without texts goes away.
		got := run(t, "put", "fair", "-text", "ko.displayName=가을 축제", "-text", "ko.notice=토요일 매진", "-text", "pt-br.message=Portas às 10.", "-json")
		want := map[string]any{"ko": map[string]any{"displayName": "가을 축제", "notice": "토요일 매진"}, "pt-BR": map[string]any{"message": "Portas às 10."}}
		if diff := cmp.Diff(want, got["translations"]); diff != "" {
			t.Errorf("put -text (-want +got):\n%s", diff)
		}
		got = run(t, "put", "fair", "-text", "ko.notice=", "-text", "pt-BR.message=", "-json")
		want = map[string]any{"ko": map[string]any{"displayName": "가을 축제"}}
		if diff := cmp.Diff(want, got["translations"]); diff != "" {
			t.Errorf("put -text clearing (-want +got):\n%s", diff)
		}
		if r := wrctl(t, env, "put", "fair", "-text", "ko.title=x"); r.status != 2 || !strings.Contains(r.stderr, "want LANG.TEXT=VALUE") {
			t.Errorf("-text with an unknown text: exit %d, stderr %q", r.status, r.stderr)
		}
	})
}

func TestErrors(t *testing.T) {
	t.Parallel()
	url := serve(t, newAPI(t))
	env := adminEnv(url)
	if r := wrctl(t, env, "put", "gala", "-paused"); r.status != 0 {
		t.Fatal(r.stderr)
	}
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	// An older server, which does not know shuffleAtOpen yet: it answers
	// a PUT with it as the API answers a field it does not know.
	api := newAPI(t)
	older := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPut && bytes.Contains(b, []byte(`"shuffleAtOpen"`)) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"code":"INVALID_JSON","message":"Unknown field \"shuffleAtOpen\"."}`))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		api.ServeHTTP(w, r)
	}))
	t.Run("UnknownFieldAnswer", func(t *testing.T) {
		// The API's answer to a field it does not know names it as
		// explain reads it.
		req, _ := http.NewRequest(http.MethodPut, url+"/api/v1/admin/programs/gala", strings.NewReader(`{"testOnlyField":"x"}`))
		req.Header.Set("Authorization", "Bearer "+testSecret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e struct{ Code, Message string }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		if m := unknownField.FindStringSubmatch(e.Message); resp.StatusCode != 400 || e.Code != "INVALID_JSON" || m == nil || m[1] != "testOnlyField" {
			t.Errorf("answer %d %+v, want 400 INVALID_JSON naming testOnlyField as %s reads it", resp.StatusCode, e, unknownField)
		}
	})

	for _, tc := range []struct {
		name   string
		env    map[string]string
		args   []string
		status int
		stderr string // a regular expression
	}{
		{"UnknownProgram", env, []string{"get", "nope"}, 1, `^wrctl: PROGRAM_NOT_FOUND: \S.*\n$`},
		{"WrongToken", map[string]string{"WR_URL": url, "ADMIN_TOKEN": "wrong"}, []string{"get", "gala"}, 1, `^wrctl: FORBIDDEN: The admin credentials are not valid\.\n$`},
		{"InvalidSetting", env, []string{"put", "gala", "-rate", "1e9"}, 1, `^wrctl: INVALID_SETTINGS: admissionRatePerSecond must be`},
		{"InvalidProgramID", env, []string{"get", "_x"}, 1, `^wrctl: INVALID_PROGRAM_ID: `},
		// N is read before anything is sent: a usage error, in two lines.
		{"AdmitZero", env, []string{"admit", "gala", "0"}, 2, `^wrctl admit: want N a whole number of at least 1, not "0"\nRun "wrctl admit -h" for usage\.\n$`},
		{"AdmitNotANumber", adminEnv(down.URL), []string{"admit", "demo", "ten"}, 2, `^wrctl admit: want N a whole number of at least 1, not "ten"\nRun "wrctl admit -h" for usage\.\n$`},
		{"AdmitTooMany", env, []string{"admit", "gala", "2000000"}, 1, `^wrctl: INVALID_COUNT: `},
		// Nothing listens on a loopback URL: how to start the local
		// server on its address.
		{"ServerDown", adminEnv(down.URL), []string{"get", "gala"}, 1,
			`^wrctl: GET http://127\.0\.0\.1:\d+/api/v1/admin/programs/gala: .*connection refused\n\(no server at http://127\.0\.0\.1:\d+: start the local one with make run ADDR=127\.0\.0\.1:\d+ at the repository's root, or give -url or WR_URL\)\n$`},
		// A URL without its scheme: the scheme to add, http:// for a
		// loopback host, https:// otherwise; no word of ADMIN_TOKEN.
		{"BadURL", map[string]string{"ADMIN_TOKEN": testSecret}, []string{"get", "gala", "-url", "127.0.0.1:3000"}, 1,
			`^wrctl: API URL "127.0.0.1:3000": want http\S+\n\(a URL starts with its scheme: -url http://127\.0\.0\.1:3000\)\n$`},
		{"BadURLLocalhost", map[string]string{"ADMIN_TOKEN": testSecret}, []string{"get", "gala", "-url", "localhost:3000"}, 1,
			`^wrctl: API URL "localhost:3000": want http\S+\n\(a URL starts with its scheme: -url http://localhost:3000\)\n$`},
		{"BadURLRemote", map[string]string{"ADMIN_TOKEN": testSecret}, []string{"get", "gala", "-url", "queue.example.com/prod"}, 1,
			`^wrctl: API URL "queue.example.com/prod": want http\S+\n\(a URL starts with its scheme: -url https://queue\.example\.com/prod\)\n$`},
		// A flag of a setting the server does not know yet: the server's
		// own error, and what it means.
		{"SettingUnknownToServer", adminEnv(older), []string{"put", "gala", "-shuffle-at-open"}, 1,
			`^wrctl: INVALID_JSON: Unknown field "shuffleAtOpen"\.\n\(this server does not know -shuffle-at-open yet: it runs an older version than wrctl\)\n$`},
		{"NotANumber", env, []string{"put", "gala", "-rate", "fast"}, 2, `invalid value "fast" for flag -rate: not a number`},
		{"FractionalWindow", env, []string{"put", "gala", "-window", "1.5s"}, 2, `invalid value "1.5s" for flag -window: want whole seconds`},
		{"BadOpensAt", env, []string{"put", "gala", "-opens-at", "tomorrow"}, 2, `invalid value "tomorrow" for flag -opens-at: want an RFC 3339 time`},
		{"MissingID", env, []string{"get"}, 2, `wrctl get: want ID, got 0 argument\(s\)`},
		{"ExtraArgument", env, []string{"pause", "gala", "now"}, 2, `wrctl pause: want ID, got 2 argument\(s\)`},
		// A mistyped flag or command: the error and where the help is, in
		// two lines, not under the whole usage.
		{"UnknownFlag", env, []string{"get", "gala", "-bogus"}, 2, `^wrctl get: flag provided but not defined: -bogus\nRun "wrctl get -h" for usage\.\n$`},
		{"MistypedPutFlag", env, []string{"put", "gala", "-rat", "5"}, 2, `^wrctl put: flag provided but not defined: -rat\nRun "wrctl put -h" for usage\.\n$`},
		{"BadFlagValue", env, []string{"watch", "gala", "-every", "often"}, 2, `^wrctl watch: invalid value "often" for flag -every: parse error\nRun "wrctl watch -h" for usage\.\n$`},
		{"UnknownCommand", env, []string{"open", "gala"}, 2,
			`^wrctl: unknown command "open" \(commands: admit, check, close, delete, edge, edge-keys, get, history, keys, list, passes, pause, put, reopen, report, resume, revoke, token, watch\)\nRun "wrctl -h" for usage\.\n$`},
		{"NoCommand", env, nil, 2, `^Usage: wrctl COMMAND`},
		{"CommandHelp", env, []string{"watch", "-h"}, 0, `(?s)^Usage: wrctl watch \[flags\] ID\n.*-every duration`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := wrctl(t, tc.env, tc.args...)
			if r.status != tc.status || !regexp.MustCompile(tc.stderr).MatchString(r.stderr) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and stderr matching %s", r.status, r.stderr, tc.status, tc.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout should be empty on failure: %q", r.stdout)
			}
		})
	}
	t.Run("DefaultURLRefused", func(t *testing.T) {
		// Nothing at the default URL, where make run serves: the hint is
		// make run itself. The refusal is forced by the transport.
		var sent []string
		r := runApp(t, map[string]string{"ADMIN_TOKEN": testSecret}, func(a *app) {
			a.transport = roundTrip(func(r *http.Request) (*http.Response, error) {
				sent = append(sent, r.URL.String())
				return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
			})
		}, "get", "gala")
		want := `^wrctl: GET http://127\.0\.0\.1:3000/api/v1/admin/programs/gala: .*connection refused\n` +
			`\(no server at http://127\.0\.0\.1:3000: start the local one with make run at the repository's root, or give -url or WR_URL\)\n$`
		if r.status != 1 || !regexp.MustCompile(want).MatchString(r.stderr) || len(sent) != 1 || sent[0] != defaultURL+"/api/v1/admin/programs/gala" {
			t.Errorf("exit %d, stderr:\n%s\nsent %v; want exit 1, stderr matching %s, one request to %s", r.status, r.stderr, sent, want, defaultURL)
		}
	})
	t.Run("Help", func(t *testing.T) {
		r := wrctl(t, env, "-h")
		if r.status != 0 || !strings.Contains(r.stdout, "Commands:") {
			t.Errorf("exit %d, stdout %q", r.status, r.stdout)
		}
	})
}

// watchLines runs watch and returns its output lines.
func watchLines(t *testing.T, env map[string]string, every time.Duration, between func(int), args ...string) []string {
	t.Helper()
	r := watchOnClock(t, env, every, between, append(args, "-every", every.String())...)
	if r.status != 0 {
		t.Fatalf("exit %d: %s", r.status, r.stderr)
	}
	return strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
}

func TestWatch(t *testing.T) {
	t.Parallel()
	url := serve(t, newAPI(t))
	env := adminEnv(url)
	if r := wrctl(t, env, "put", "gala", "-paused", "-rate", "2"); r.status != 0 {
		t.Fatal(r.stderr)
	}
	enter(t, url, "gala", 4)

	t.Run("PlainLines", func(t *testing.T) {
		lines := watchLines(t, env, 10*time.Millisecond, nil, "gala", "-n", "3")
		if len(lines) != 3 {
			t.Fatalf("%d lines, want 3:\n%s", len(lines), strings.Join(lines, "\n"))
		}
		line := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ gala issued=4 admitted=0 waiting=4 rate=2/s last="paused" enters/s=(-|0\.0) admissions/s=(-|0\.0) paused=true closed=false queue=█+$`)
		for i, l := range lines {
			if !line.MatchString(l) {
				t.Errorf("line %d: %q", i, l)
			}
		}
		if !strings.Contains(lines[0], "enters/s=- ") || !strings.HasSuffix(lines[2], "queue=███") {
			t.Errorf("the first line has no rate yet, the third a sparkline of three: %q, %q", lines[0], lines[2])
		}
	})

	t.Run("JSONWhileArriving", func(t *testing.T) {
		if r := wrctl(t, env, "resume", "gala"); r.status != 0 {
			t.Fatal(r.stderr)
		}
		// One person enters after each sample: every sample sees more.
		lines := watchLines(t, env, 40*time.Millisecond, func(int) { enter(t, url, "gala", 1) }, "gala", "-n", "6", "-json")
		if len(lines) != 6 {
			t.Fatalf("%d lines, want 6", len(lines))
		}
		var prev *frame
		for i, l := range lines {
			var f frame
			if err := json.Unmarshal([]byte(l), &f); err != nil {
				t.Fatalf("line %d does not parse: %v\n%s", i, err, l)
			}
			if f.ProgramID != "gala" || f.Waiting != f.Issued-f.Admitted || f.LastInLine != "advancing" || f.LastInLineMs == nil || *f.LastInLineMs != f.Waiting*500 {
				t.Errorf("line %d: %s (want the last in line at waiting/rate = waiting × 500 ms)", i, l)
			}
			if prev == nil {
				if f.EntersPerSecond != nil || f.AdmissionsPerSecond != nil {
					t.Errorf("first line has rates: %s", l)
				}
			} else {
				dt := f.At.Sub(prev.At).Seconds()
				if dt != 0.04 || f.Issued != prev.Issued+1 {
					t.Errorf("line %d: %g s and %d enters after the last, want 0.04 s and 1", i, dt, f.Issued-prev.Issued)
				}
				wantEnters := float64(f.Issued-prev.Issued) / dt
				wantAdmissions := float64(f.Admitted-prev.Admitted) / dt
				near := func(got *float64, want float64) bool {
					return got != nil && math.Abs(*got-want) <= 1e-3*math.Max(1, want)
				}
				if !near(f.EntersPerSecond, wantEnters) || !near(f.AdmissionsPerSecond, wantAdmissions) {
					t.Errorf("line %d: rates %v %v, want %g %g", i, deref(f.EntersPerSecond), deref(f.AdmissionsPerSecond), wantEnters, wantAdmissions)
				}
			}
			prev = &f
		}
		var first, last frame
		_ = json.Unmarshal([]byte(lines[0]), &first)
		_ = json.Unmarshal([]byte(lines[len(lines)-1]), &last)
		if last.Issued <= first.Issued {
			t.Errorf("issued went from %d to %d while people entered", first.Issued, last.Issued)
		}
	})

	t.Run("For", func(t *testing.T) {
		// Samples at 0, 50, 100 and 150 ms of the clock; at 200 ms the
		// watch ends, the sample due then not taken.
		lines := watchLines(t, env, 50*time.Millisecond, nil, "gala", "-for", "200ms")
		if len(lines) != 4 {
			t.Errorf("%d lines in 200 ms at one per 50 ms, want 4:\n%s", len(lines), strings.Join(lines, "\n"))
		}
	})

	t.Run("UnknownProgram", func(t *testing.T) {
		r := wrctl(t, env, "watch", "nope", "-every", "10ms")
		if r.status != 1 || !strings.HasPrefix(r.stderr, "wrctl: PROGRAM_NOT_FOUND: ") {
			t.Errorf("exit %d, stderr %q", r.status, r.stderr)
		}
	})

	t.Run("RidesOutServerFaults", func(t *testing.T) {
		// The second sample gets a 503: shown, and the watch goes on.
		var n atomic.Int32
		api := newAPI(t)
		flaky := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && n.Add(1) == 2 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"code":"STORE_UNAVAILABLE","message":"The queue is briefly unavailable; retry shortly."}`))
				return
			}
			api.ServeHTTP(w, r)
		}))
		flakyEnv := adminEnv(flaky)
		if r := wrctl(t, flakyEnv, "put", "gala", "-paused"); r.status != 0 {
			t.Fatal(r.stderr)
		}
		lines := watchLines(t, flakyEnv, 10*time.Millisecond, nil, "gala", "-n", "3")
		if len(lines) != 3 || !strings.HasSuffix(lines[1], `error="STORE_UNAVAILABLE: The queue is briefly unavailable; retry shortly."`) || strings.Contains(lines[2], "error=") {
			t.Errorf("want the fault on the second line only:\n%s", strings.Join(lines, "\n"))
		}
	})
}

// awsEnv gives the test an AWS environment of its own: the example
// credentials, which it returns, region (AWS_REGION; "" for none), and no
// shared configuration or instance metadata.
func awsEnv(t *testing.T, region string) aws.Credentials {
	t.Helper()
	creds := aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": creds.AccessKeyID, "AWS_SECRET_ACCESS_KEY": creds.SecretAccessKey, "AWS_SESSION_TOKEN": "",
		"AWS_REGION": region, "AWS_DEFAULT_REGION": "", "AWS_PROFILE": "", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
	} {
		t.Setenv(k, v)
	}
	return creds
}

// TestSigV4 runs wrctl as on AWS: no ADMIN_TOKEN, so it signs with the
// AWS credentials of its environment, and a gateway that verifies the
// signature as API Gateway's IAM authorizer does stands before the API.
func TestSigV4(t *testing.T) {
	creds := awsEnv(t, "")
	h := newAPI(t)
	url := serve(t, sigv4test.Gateway(creds, "eu-west-1", "Bearer "+testSecret, h))
	env := map[string]string{"WR_URL": url}

	got := decode(t, wrctl(t, env, "put", "gala", "-rate", "5", "-region", "eu-west-1", "-json"))
	if got["programId"] != "gala" || got["admissionRatePerSecond"] != 5.0 {
		t.Errorf("put through the signed gateway: %v", got)
	}
	t.Setenv("AWS_REGION", "eu-west-1") // the region from the AWS configuration
	got = decode(t, wrctl(t, env, "admit", "gala", "1", "-json"))
	if got["programId"] != "gala" {
		t.Errorf("admit through the signed gateway: %v", got)
	}
	if r := wrctl(t, env, "passes", "gala", "-n", "2"); r.status != 0 || strings.Count(r.stdout, "\n") != 2 {
		t.Errorf("passes through the signed gateway: exit %d, stdout %q, stderr %s", r.status, r.stdout, r.stderr)
	}
	id := enterToken(t, serve(t, h), "gala")
	if got = decode(t, wrctl(t, env, "token", "gala", id, "-json")); got["tokenId"] != id {
		t.Errorf("token through the signed gateway: %v", got)
	}
	if r := wrctl(t, env, "revoke", "gala", id); r.status != 0 {
		t.Errorf("revoke through the signed gateway: exit %d, %s", r.status, r.stderr)
	}
	// The routes with a query string and a DELETE, signed as well.
	if got := decode(t, wrctl(t, env, "list", "-json", "-n", "5")); len(got["programs"].([]any)) != 1 {
		t.Errorf("list through the signed gateway: %v", got)
	}
	if got := decode(t, wrctl(t, env, "history", "gala", "-json", "-n", "1")); len(got["changes"].([]any)) != 1 {
		t.Errorf("history -n 1 through the signed gateway: %v", got)
	}
	wrctl(t, env, "close", "gala")
	if got := decode(t, wrctl(t, env, "delete", "gala", "-yes", "-json")); got["deleted"] != true {
		t.Errorf("delete through the signed gateway: %v", got)
	}

	for _, tc := range []struct {
		name   string
		env    map[string]string
		args   []string
		stderr string
	}{
		{"WrongRegion", env, []string{"get", "gala", "-region", "us-east-1"}, `(?s)^wrctl: Forbidden: signed for execute-api in us-east-1, want execute-api in eu-west-1 \(HTTP 403\)\n\(check that your AWS identity may execute-api:Invoke`},
		{"BearerOnAWS", map[string]string{"WR_URL": url, "ADMIN_TOKEN": "x"}, []string{"get", "gala"}, `(?s)^wrctl: Forbidden: .*\(HTTP 403\)\n\(an API on AWS takes requests signed with AWS credentials: unset ADMIN_TOKEN\)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := wrctl(t, tc.env, tc.args...)
			if r.status != 1 || !regexp.MustCompile(tc.stderr).MatchString(r.stderr) {
				t.Errorf("exit %d, stderr:\n%s\nwant 1 and %s", r.status, r.stderr, tc.stderr)
			}
		})
	}
	t.Run("NoRegion", func(t *testing.T) {
		t.Setenv("AWS_REGION", "")
		r := wrctl(t, env, "get", "gala")
		if r.status != 1 || !strings.Contains(r.stderr, "no AWS region to sign for") {
			t.Errorf("exit %d, stderr %s", r.status, r.stderr)
		}
	})
	t.Run("LocalServerWithoutToken", func(t *testing.T) {
		local := serve(t, newAPI(t))
		r := wrctl(t, map[string]string{"WR_URL": local}, "get", "gala", "-region", "eu-west-1")
		if r.status != 1 || !strings.HasPrefix(r.stderr, "wrctl: FORBIDDEN: ") || !strings.Contains(r.stderr, "set ADMIN_TOKEN") {
			t.Errorf("exit %d, stderr %s", r.status, r.stderr)
		}
	})
}

// TestIsTerminal: a pipe or a buffer is not a terminal, so tests and
// scripts get plain lines.
func TestIsTerminal(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if isTerminal(w) || isTerminal(&bytes.Buffer{}) {
		t.Error("a pipe or a buffer taken for a terminal")
	}
}
