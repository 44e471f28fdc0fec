package main

// The loopback measurement of docs/benchmarks.md, "Admission passes:
// signing and verification": the local server (cmd/local, as a process, on
// its embedded store) signing passes with a keyring whose keys KMS makes
// and opens (PASS_WRAP_KMS_KEY_ID on moto, behind kmstest's proxy, which
// counts the KMS calls) or with a fixed key (-pass-key), driven by bench
// run -poll admission, every pass verified with jwx. By default one small
// keyring run (make test); the measurement:
//
//	go test ./cmd/bench -run TestPassesLoopback -v -timeout 60m -args \
//	  -passes.modes keyring,fixed,keyring,fixed,keyring,fixed \
//	  -passes.users 60000 -passes.rate 10000 -passes.out /tmp/passes

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/testing/dynamotest"
	"github.com/example/waitingroom/internal/testing/kmstest"
	"github.com/example/waitingroom/internal/tools/bench"
	"github.com/example/waitingroom/internal/tools/localkeys"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

var (
	passModes = flag.String("passes.modes", "keyring", "TestPassesLoopback: the runs, in order, each MODE, MODE:USERS or MODE:USERS:TIMEOUT (bench run's -timeout, default -passes.timeout): keyring (PASS_WRAP_KMS_KEY_ID on moto) or fixed (-pass-key)")
	passUsers = flag.Int("passes.users", 2000, "TestPassesLoopback: people a run enters before admission starts, each admitted once (a pass each)")
	passRate  = flag.Float64("passes.rate", 1000, "TestPassesLoopback: the program's admission rate, people a second")
	passLimit = flag.Duration("passes.timeout", 5*time.Minute, "TestPassesLoopback: bench run's -timeout, the bound of each run")
	passOut   = flag.String("passes.out", "", "TestPassesLoopback: write each run's bench results and the summary (summary.json, summary.md) into this directory")
)

// passRun is one run of TestPassesLoopback, as the summary reports it.
type passRun struct {
	Mode  string `json:"mode"`
	Users int    `json:"users"`
	// Passes counts the users whose first ADMITTED answer carried a pass;
	// Verified, those jwx verified against the server's JWKS.
	Passes, Verified int64
	// Kids counts the verified passes by their kid; Keys is the number of
	// keys in the JWKS after the run.
	Kids map[string]int64 `json:"kids"`
	Keys int              `json:"jwksKeys"`
	// WindowSeconds runs from the first second in which anyone saw
	// ADMITTED to the last, both counted whole; Rate is the mean of the
	// seconds in between (the first and last are partial), or Passes over
	// the window when it has none in between.
	WindowSeconds int     `json:"windowSeconds"`
	Rate          float64 `json:"admissionsPerSecond"`
	// PassUnavailable counts the 503 PASS_UNAVAILABLE answers; Errors
	// every failed request (bench's count) and ErrorCodes them by code.
	PassUnavailable int64            `json:"passUnavailable"`
	Errors          int64            `json:"errors"`
	ErrorCodes      map[string]int64 `json:"errorCodes,omitempty"`
	// ServerErrorCodes counts the error answers the server logged, by
	// code: those a client gave up on before the answer included.
	ServerErrorCodes map[string]int64 `json:"serverErrorCodes,omitempty"`
	// KMS counts the calls the proxy received, by operation, from the
	// server's start to its stop.
	KMS map[string]int64 `json:"kms"`
	// ServerCPUSeconds is the server process's CPU time (user + system)
	// over the bench run, and CPUPerAdmissionUs that over Passes: each
	// person's enter, polls and pass.
	ServerCPUSeconds  float64 `json:"serverCpuSeconds"`
	CPUPerAdmissionUs float64 `json:"serverCpuPerAdmissionUs"`
	NotifyP50Ms       float64 `json:"notifyP50Ms"`
	LatencyP50Ms      float64 `json:"latencyP50Ms"`
	Polls             int64   `json:"polls"`
	Load1             string  `json:"load1"`
}

// TestPassesLoopback measures issue 22 on the local server (see the file's
// comment); each run starts a fresh server.
func TestPassesLoopback(t *testing.T) {
	type plan struct {
		mode    string
		users   int
		timeout time.Duration
	}
	var plans []plan
	for m := range strings.SplitSeq(*passModes, ",") {
		f := strings.Split(strings.TrimSpace(m), ":")
		p := plan{mode: f[0], users: *passUsers, timeout: *passLimit}
		var err error
		if len(f) > 1 {
			if p.users, err = strconv.Atoi(f[1]); err != nil || p.users < 1 {
				t.Fatalf("-passes.modes: %q: want MODE, MODE:USERS or MODE:USERS:TIMEOUT", m)
			}
		}
		if len(f) > 2 {
			if p.timeout, err = time.ParseDuration(f[2]); err != nil || p.timeout <= 0 || len(f) > 3 {
				t.Fatalf("-passes.modes: %q: want MODE, MODE:USERS or MODE:USERS:TIMEOUT", m)
			}
		}
		name := p.mode
		switch name {
		case "keyring", "fixed":
		default:
			t.Fatalf("-passes.modes: unknown mode %q (keyring or fixed)", name)
		}
		plans = append(plans, p)
	}
	// kmstest's proxy logs each request its client gave up on to the
	// standard logger, until it is closed: not the measurement's output.
	prev := log.Writer()
	log.SetOutput(io.Discard)
	t.Cleanup(func() { log.SetOutput(prev) })
	dir := t.TempDir()
	bin := filepath.Join(dir, "local")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/example/waitingroom/cmd/local").CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/local: %v\n%s", err, out)
	}
	proxy := kmstest.NewProxy(t)
	client := kmstest.ClientFor(t, proxy.URL())
	wrapKey := kmstest.NewWrapKey(t, client)
	fixedKey := filepath.Join(dir, "pass.pem")
	k, err := localkeys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	pemKey, err := localkeys.PEM(k)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fixedKey, pemKey, 0o600); err != nil {
		t.Fatal(err)
	}

	var runs []passRun
	for i, p := range plans {
		env := map[string]string{}
		var args []string
		switch p.mode {
		case "keyring":
			env = map[string]string{"PASS_WRAP_KMS_KEY_ID": wrapKey, "KMS_ENDPOINT": proxy.URL()}
		case "fixed":
			args = []string{"-pass-key", fixedKey}
		}
		r := passRun{Mode: p.mode, Users: p.users}
		out := ""
		if *passOut != "" {
			out = filepath.Join(*passOut, fmt.Sprintf("%02d-%s", i+1, p.mode))
		}
		kmsBefore := proxyCalls(proxy)
		measurePasses(t, bin, env, args, p.users, p.timeout, filepath.Join(dir, fmt.Sprintf("passes-%d.txt", i)), out, &r)
		r.KMS = map[string]int64{}
		for op, n := range proxyCalls(proxy) {
			if d := n - kmsBefore[op]; d > 0 {
				r.KMS[op] = d
			}
		}
		t.Logf("run %d/%d %s: %d passes, %d verified, %.0f admissions/s over %d s, %d PASS_UNAVAILABLE, %d errors (the server logged %v), KMS %v, server CPU %.0f µs an admission, load %s",
			i+1, len(plans), r.Mode, r.Passes, r.Verified, r.Rate, r.WindowSeconds, r.PassUnavailable, r.Errors, r.ServerErrorCodes, r.KMS, r.CPUPerAdmissionUs, r.Load1)
		runs = append(runs, r)
		switch {
		case r.Verified != r.Passes:
			t.Errorf("%s: %d passes, %d verified: want every pass verified", r.Mode, r.Passes, r.Verified)
		case r.Passes != int64(r.Users):
			t.Errorf("%s: %d people, %d passes: want a pass each", r.Mode, r.Users, r.Passes)
		case r.PassUnavailable != 0 || r.ServerErrorCodes[api.CodePassUnavailable] != 0:
			t.Errorf("%s: %d PASS_UNAVAILABLE answers (the server logged %d), want 0", r.Mode, r.PassUnavailable, r.ServerErrorCodes[api.CodePassUnavailable])
		case r.Mode == "keyring" && (r.KMS["GenerateDataKeyPair"] < 1 || r.KMS["GenerateDataKeyPair"] > 2 || len(r.KMS) != 1):
			// One instance: it makes the key (a second near a slot's end,
			// the next slot's), and opens none.
			t.Errorf("keyring: KMS calls %v, want one GenerateDataKeyPair (two near the end of a rotation) and nothing else", r.KMS)
		case r.Mode == "fixed" && len(r.KMS) != 0:
			t.Errorf("fixed: KMS calls %v, want none", r.KMS)
		}
	}
	summary := passSummary(runs)
	t.Log("\n" + summary)
	if *passOut != "" {
		writeJSONFile(t, filepath.Join(*passOut, "summary.json"), runs)
		if err := os.WriteFile(filepath.Join(*passOut, "summary.md"), []byte(summary), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// measurePasses starts the local server bin with env and args, runs bench
// run -poll admission against it with users people, verifies every pass
// with jwx, stops the server and fills r.
func measurePasses(t *testing.T, bin string, env map[string]string, args []string, users int, timeout time.Duration, passFile, outDir string, r *passRun) {
	t.Helper()
	const token = "passes-secret"
	srv := startLocal(t, bin, env, args, token)
	defer func() { r.ServerErrorCodes = srv.stop(t) }()
	cpu0 := srv.cpu(t)
	r.Load1 = load1()
	benchArgs := []string{"run", "-url", srv.base, "-admin-token", token,
		"-users", strconv.Itoa(users), "-admit-rate", strconv.FormatFloat(*passRate, 'f', -1, 64),
		"-poll", "admission", "-cache-ttl", "2s", "-timeout", timeout.String(), "-program", "passes",
		"-passes", passFile, "-json"}
	if outDir != "" {
		benchArgs = append(benchArgs, "-out", outDir)
	}
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), benchArgs, env2(&stdout, &stderr)); err != nil {
		t.Fatalf("bench %s: %v\n%s", strings.Join(benchArgs, " "), err, stderr.String())
	}
	cpu := srv.cpu(t) - cpu0
	var results []bench.Result
	if err := json.Unmarshal(stdout.Bytes(), &results); err != nil || len(results) != 1 {
		t.Fatalf("bench output: %v\n%s", err, stdout.String())
	}
	res := results[0]
	r.Passes, r.Errors, r.ErrorCodes = res.Passes, res.Errors, res.ErrorCodes
	r.PassUnavailable = res.ErrorCodes[api.CodePassUnavailable]
	r.Polls = res.Polls
	r.NotifyP50Ms = res.NotifyDelayMs.P50
	if res.LatencyMs != nil {
		r.LatencyP50Ms = res.LatencyMs.P50
	}
	seen := func(n int64) bool { return n > 0 }
	if first := slices.IndexFunc(res.SeenSeries, seen); first >= 0 {
		last := len(res.SeenSeries) - 1
		for !seen(res.SeenSeries[last]) {
			last--
		}
		r.WindowSeconds = last - first + 1
		r.Rate = float64(res.Passes) / float64(r.WindowSeconds)
		if inner := res.SeenSeries[first+1 : max(first+1, last)]; len(inner) > 0 {
			var n int64
			for _, c := range inner {
				n += c
			}
			r.Rate = float64(n) / float64(len(inner))
		}
	}
	r.ServerCPUSeconds = cpu.Seconds()
	if r.Passes > 0 {
		r.CPUPerAdmissionUs = float64(cpu.Microseconds()) / float64(r.Passes)
	}
	doc := httpGet(t, srv.base+"/.well-known/jwks.json")
	r.Verified, r.Kids = verifyPasses(t, doc, passFile, srv.base, res.ProgramID)
	var set struct{ Keys []json.RawMessage }
	if err := json.Unmarshal(doc, &set); err != nil {
		t.Fatalf("JWKS: %v", err)
	}
	r.Keys = len(set.Keys)
}

// localServer is a cmd/local process.
type localServer struct {
	cmd    *exec.Cmd
	base   string
	stderr *bytes.Buffer
	done   chan error
	once   sync.Once
	codes  map[string]int64 // the error answers it logged, by code
}

var listeningRE = regexp.MustCompile(`listening on (http://\S+)`)

// startLocal starts bin on 127.0.0.1 with env (and the admin token) and
// args, with no demo program, and waits for its address.
func startLocal(t *testing.T, bin string, env map[string]string, args []string, token string) *localServer {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-addr", "127.0.0.1:0", "-demo-program", "", "-max-conns", "4096"}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "ADMIN_TOKEN=" + token, "LOG_LEVEL=warn"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &localServer{cmd: cmd, stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	cmd.Stderr = &lockedWriter{w: s.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		s.done <- cmd.Wait()
	}()
	select {
	case s.base = <-addr:
		return s
	case err := <-s.done:
		t.Fatalf("the local server stopped: %v\n%s", err, s.stderr.String())
	case <-time.After(time.Minute): // a hang guard
		_ = cmd.Process.Kill()
		t.Fatalf("the local server did not start\n%s", s.stderr.String())
	}
	return nil
}

// cpu is the process's CPU time so far, user and system.
func (s *localServer) cpu(t *testing.T) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("server CPU time: %v", err)
	}
	// Fields after the command name in parentheses: utime and stime are
	// the 14th and 15th of the line, in clock ticks (100 a second).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// stop ends the server with SIGTERM, then SIGKILL after 10 s, once, and
// returns the error answers it logged, by code.
func (s *localServer) stop(t *testing.T) map[string]int64 {
	t.Helper()
	s.once.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
		logged := s.stderr.String()
		if n := strings.Count(logged, "\n"); n > 0 {
			t.Logf("the server logged %d lines at warn or above; the first: %.500s", n, logged)
		}
		for line := range strings.Lines(logged) {
			var rec struct{ Code string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Code != "" {
				if s.codes == nil {
					s.codes = map[string]int64{}
				}
				s.codes[rec.Code]++
			}
		}
	})
	return s.codes
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// verifyPasses verifies every pass of file, one a line, with jwx against
// the JWKS document doc, issuer iss and audience aud, across all cores,
// and returns how many verified, by kid; it reports each failure (the
// first few) and each jti seen twice.
func verifyPasses(t *testing.T, doc []byte, file, iss, aud string) (int64, map[string]int64) {
	t.Helper()
	set, err := jwk.Parse(doc)
	if err != nil {
		t.Fatalf("jwx cannot parse the JWKS: %v\n%s", err, doc)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	passes := strings.Fields(string(data))
	workers := runtime.GOMAXPROCS(0)
	type tally struct {
		ok   int64
		kids map[string]int64
		jtis []string
		errs []error
	}
	tallies := make([]tally, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			tl := &tallies[w]
			tl.kids = map[string]int64{}
			for i := w; i < len(passes); i += workers {
				tok, err := jwt.ParseString(passes[i], jwt.WithKeySet(set), jwt.WithValidate(true), jwt.WithIssuer(iss), jwt.WithAudience(aud))
				var kid, jti string
				if err == nil {
					var msg *jws.Message
					if msg, err = jws.Parse([]byte(passes[i])); err == nil {
						kid, _ = msg.Signatures()[0].ProtectedHeaders().KeyID()
						jti, _ = tok.JwtID()
					}
				}
				if err != nil {
					if len(tl.errs) < 3 {
						tl.errs = append(tl.errs, err)
					}
					continue
				}
				tl.ok++
				tl.kids[kid]++
				tl.jtis = append(tl.jtis, jti)
			}
		})
	}
	wg.Wait()
	var ok int64
	kids := map[string]int64{}
	seen := make(map[string]bool, len(passes))
	for _, tl := range tallies {
		ok += tl.ok
		for k, n := range tl.kids {
			kids[k] += n
		}
		for _, err := range tl.errs {
			t.Errorf("jwx refuses a pass: %v", err)
		}
		for _, j := range tl.jtis {
			if seen[j] {
				t.Errorf("jti %s on two passes", j)
			}
			seen[j] = true
		}
	}
	return ok, kids
}

// proxyCalls is the proxy's count of each KMS operation.
func proxyCalls(p *kmstest.Proxy) map[string]int64 {
	out := map[string]int64{}
	for _, op := range []string{"GenerateDataKeyPair", "Decrypt", "Encrypt", "Sign", "GetPublicKey", "DescribeKey", "CreateKey", "ListKeys", "ScheduleKeyDeletion"} {
		if n := p.Calls(op); n > 0 {
			out[op] = n
		}
	}
	var known int64
	for _, n := range out {
		known += n
	}
	if other := p.Total() - known; other > 0 {
		out["other"] = other
	}
	return out
}

func httpGet(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return b
}

func env2(stdout, stderr io.Writer) env {
	return env{stdout: stdout, stderr: stderr, getenv: func(string) string { return "" }}
}

// load1 is the machine's load average over the last minute.
func load1() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

func writeJSONFile(t *testing.T, name string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// passSummary is the runs as a Markdown table, then each mode's medians
// and the ratio of each mode's median rate to fixed's.
func passSummary(runs []passRun) string {
	var b strings.Builder
	b.WriteString("| run | mode | people | passes | verified (jwx) | admissions/s | window | PASS_UNAVAILABLE | errors | KMS calls | JWKS keys | server CPU per admission | load |\n")
	b.WriteString("|--:|---|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|\n")
	for i, r := range runs {
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %d s | %s | %s | %s | %d | %.0f µs | %s |\n", i+1, r.Mode,
			bench.Thousands(int64(r.Users)), bench.Thousands(r.Passes), bench.Thousands(r.Verified), bench.Thousands(int64(r.Rate)),
			r.WindowSeconds, bench.Thousands(r.PassUnavailable), bench.Thousands(r.Errors), kmsCalls(r.KMS), r.Keys, r.CPUPerAdmissionUs, r.Load1)
	}
	byMode := map[string][]passRun{}
	var modes []string
	for _, r := range runs {
		if byMode[r.Mode] == nil {
			modes = append(modes, r.Mode)
		}
		byMode[r.Mode] = append(byMode[r.Mode], r)
	}
	median := func(rs []passRun, f func(passRun) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	rate := func(r passRun) float64 { return r.Rate }
	cpu := func(r passRun) float64 { return r.CPUPerAdmissionUs }
	span := func(rs []passRun, f func(passRun) float64) string {
		lo, hi := f(rs[0]), f(rs[0])
		for _, r := range rs {
			lo, hi = min(lo, f(r)), max(hi, f(r))
		}
		return bench.Thousands(int64(lo)) + "–" + bench.Thousands(int64(hi))
	}
	b.WriteString("\n| mode | runs | median admissions/s | range | vs fixed | median server CPU per admission | range | vs fixed |\n|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, m := range modes {
		rs := byMode[m]
		vsRate, vsCPU := "", ""
		if f := byMode["fixed"]; f != nil && m != "fixed" {
			vsRate = fmt.Sprintf("%.2f ×", median(rs, rate)/median(f, rate))
			vsCPU = fmt.Sprintf("%.2f ×", median(rs, cpu)/median(f, cpu))
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %.0f µs | %s µs | %s |\n", m, len(rs), bench.Thousands(int64(median(rs, rate))), span(rs, rate), vsRate,
			median(rs, cpu), span(rs, cpu), vsCPU)
	}
	return b.String()
}

// kmsCalls formats calls by operation, sorted: "GenerateDataKeyPair 1".
func kmsCalls(calls map[string]int64) string {
	if len(calls) == 0 {
		return "none"
	}
	var parts []string
	for _, op := range slices.SortedFunc(maps.Keys(calls), func(a, b string) int { return cmp.Compare(a, b) }) {
		parts = append(parts, fmt.Sprintf("%s %s", op, bench.Thousands(calls[op])))
	}
	return strings.Join(parts, ", ")
}
