//go:build emulator

package lambdaemu_test

// The real function binaries, built as for Lambda (for this machine's
// architecture), under the Runtime Interface Emulator, against moto's
// DynamoDB API: every sample event in events/ goes to the function that
// template.yaml routes it to, and must get the status and the body shape
// (for the waiting-room page's HTML, the same text but for numbers and a
// random form key) that the same handler, wired the same way over the in-memory store and
// behind the same Lambda adapter, gives; an error exactly. So this checks what the handler tests cannot: the mains' wiring,
// the template's routing and environment, the DynamoDB store under the
// real client, and the Lambda runtime's encoding.
//
// Run it with `make emulator` (build tag emulator; aws-lambda-rie from
// `make tools`, moto_server from pip).

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/dynamotest"
	"github.com/example/waitingroom/internal/testing/emfspec"
	"github.com/example/waitingroom/internal/testing/kmstest"
	"github.com/example/waitingroom/internal/testing/metricstest"
	"github.com/example/waitingroom/internal/tools/lambdaemu"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/sampleevents"
	"github.com/example/waitingroom/internal/tools/samtemplate"
	"github.com/example/waitingroom/passverify"
)

// root is the repository, from this package's directory.
const root = "../../.."

func TestMain(m *testing.M) { dynamotest.Main(m) }

// function is one function of the template, running twice: its bootstrap
// under the emulator, and the reference handler in this process.
type function struct {
	emu *lambdaemu.Emulator
	ref httpapi.LambdaHandler
	// log is the emulator's and the function's output, complete once emu
	// has stopped; namespace is the function's METRICS_NAMESPACE.
	log       *bytes.Buffer
	namespace string
	// answered is the status of each invocation, in order.
	answered []int
}

// resources are the template's and what stands in for its resources.
type resources struct {
	client   *dynamodb.Client
	table    string
	tpl      *samtemplate.Template
	res      lambdaemu.Resources
	kmsProxy *kmstest.Proxy
}

// provide loads the template and stands in for its resources: a table on
// the test's DynamoDB API; its KMS keys, each of its own kind, on the same
// moto_server (its KMS warmed by kmstest.Client), which the functions
// reach through the proxy that adds GenerateDataKeyPair (the keyrings');
// and its challenges' secret (Secrets Manager).
func provide(t *testing.T) resources {
	t.Helper()
	ctx := t.Context()
	endpoint := dynamotest.Endpoint(t)
	client, err := dynamostore.NewClient(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	r := resources{client: client, table: dynamotest.NewTable(t, client)}
	if r.tpl, err = samtemplate.Load(filepath.Join(root, "template.yaml")); err != nil {
		t.Fatal(err)
	}
	kmstest.Client(t)
	if r.res, r.kmsProxy, err = lambdaemu.Provide(ctx, r.tpl, endpoint, r.table); err != nil {
		t.Fatal(err)
	}
	if r.kmsProxy == nil {
		t.Fatal("lambdaemu.Provide started no KMS proxy: the template has no KMS key")
	}
	t.Cleanup(func() { _ = r.kmsProxy.Close() })
	return r
}

func TestFunctions(t *testing.T) {
	rie := findRIE(t)
	ctx := t.Context()
	r := provide(t)
	client, table, tpl, res, kmsProxy := r.client, r.table, r.tpl, r.res, r.kmsProxy

	mem := memstore.New() // the reference handlers' store
	// The reference handlers' passes: signed with the bootstraps' keyring
	// (its keys in the table, opened through a proxy of their own, so that
	// kmsProxy counts the bootstraps' KMS calls alone): the JWKS are the
	// same, and the admin and queue references share one key set.
	refProxy := kmstest.NewProxy(t)
	refKeys := refKeyring{store: dynamostore.New(client, table), kms: kmstest.ClientFor(t, refProxy.URL())}
	fns := map[string]*function{}
	for _, id := range tpl.FunctionIDs() {
		if id != pushSender && id != reporterFn { // not behind the API: TestPushSenderFunction, TestReporterFunction
			fns[id] = startFunction(t, tpl, id, rie, res, mem, refKeys)
		}
	}

	// Seed both stores at one instant, after the builds: the fixtures'
	// queue advances in real time from here.
	now := time.Now()
	if err := sampleevents.Seed(ctx, dynamostore.New(client, table), now); err != nil {
		t.Fatal(err)
	}
	if err := sampleevents.Seed(ctx, mem, now); err != nil {
		t.Fatal(err)
	}

	files, err := filepath.Glob(filepath.Join(root, "events", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no events in %s/events (%v)", root, err)
	}
	slices.Sort(files)
	// One at a time, in name order, over the same state: the emulator
	// serves one invocation at a time.
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var req events.APIGatewayV2HTTPRequest
			if err := json.Unmarshal(raw, &req); err != nil {
				t.Fatalf("not an HTTP API (payload 2.0) event: %v", err)
			}
			// As API Gateway routes it: by method and path. The routeKey
			// it would write must be the event's.
			route, id, err := tpl.RouteFor(req.RequestContext.HTTP.Method, req.RawPath)
			if err != nil {
				t.Fatal(err)
			}
			if route != req.RouteKey || route != req.RequestContext.RouteKey {
				t.Errorf("routeKey %q (requestContext %q), want %q: the route API Gateway chooses", req.RouteKey, req.RequestContext.RouteKey, route)
			}
			fn := fns[id]
			// An admission answered 503 may have been made: as a client does
			// (design.md), read the program before repeating it.
			notMade := func() bool { return false }
			madeOnce := func() bool { return false }
			if strings.HasSuffix(req.RawPath, "/admissions") {
				store := dynamostore.New(client, table)
				before, err := store.GetProgram(ctx, "demo")
				if err != nil {
					t.Fatal(err)
				}
				version := func() int64 {
					after, err := store.GetProgram(ctx, "demo")
					if err != nil {
						return -1
					}
					return after.Version
				}
				notMade = func() bool { return version() == before.Version }
				madeOnce = func() bool { return version() == before.Version+1 }
			}
			got := fn.invokeRetrying(t, id, req.RequestContext.HTTP.Method, raw, notMade)
			want, err := fn.ref(ctx, req) // the reference's state keeps in step either way
			if err != nil {
				t.Fatal(err)
			}
			if got.StatusCode == http.StatusServiceUnavailable && madeOnce() {
				// Made, its answer past the store's budget (moto under load): as a
				// client reads it, made once; the answer itself is not the reference's.
				t.Logf("%s: answered 503 %s, and the admission was made once", id, got.Body)
				return
			}
			checkResponse(t, id, got, want)
			if name == "poll-first-admission" {
				checkPass(t, fn, got)
			}
		})
	}

	checkKMSCalls(t, kmsProxy, refProxy.Calls("GenerateDataKeyPair"))

	// The metrics of every invocation, as CloudWatch would read them from
	// the function's log.
	for _, id := range slices.Sorted(maps.Keys(fns)) {
		fn := fns[id]
		fn.emu.Stop() // the log is complete
		t.Run("EMF/"+id, func(t *testing.T) { checkEMF(t, fn) })
	}
}

// invokeRetrying invokes fn with the event raw, of method, as a client
// does: a 503 with Retry-After (the store slower than the function's
// budget) to a GET or PUT, or to a write notMade says was not made, is sent
// again, at most 3 times in all. It is sent at once: the wait is the
// client's, and the store is no slower for it.
func (fn *function) invokeRetrying(t *testing.T, id, method string, raw []byte, notMade func() bool) events.APIGatewayV2HTTPResponse {
	t.Helper()
	for attempt := 1; ; attempt++ {
		payload, err := fn.emu.Invoke(t.Context(), raw)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		var got events.APIGatewayV2HTTPResponse
		if err := json.Unmarshal(payload, &got); err != nil {
			t.Fatalf("%s: response is not an HTTP API response: %v: %s", id, err, payload)
		}
		fn.answered = append(fn.answered, got.StatusCode)
		wait, err := strconv.Atoi(got.Headers["Retry-After"])
		idempotent := method == http.MethodGet || method == http.MethodPut
		if got.StatusCode != http.StatusServiceUnavailable || err != nil || !idempotent && !notMade() || attempt == 3 {
			return got
		}
		t.Logf("%s: attempt %d answered 503 %s (Retry-After %d s); retrying", id, attempt, got.Body, wait)
	}
}

// checkKMSCalls: the bootstraps signed every pass (bypass passes from the
// admin function first, in name order, then an admission's) with one
// signing key of the keyring, which the first of them to sign made
// (kms:GenerateDataKeyPair) and the other opened from the table
// (kms:Decrypt): a handful of KMS calls for the run, none per pass, and
// none that the template does not grant.
func checkKMSCalls(t *testing.T, proxy *kmstest.Proxy, refMade int64) {
	t.Helper()
	made, opened := proxy.Calls("GenerateDataKeyPair"), proxy.Calls("Decrypt")
	t.Logf("KMS calls: %d GenerateDataKeyPair, %d Decrypt, %d in all (the references made %d keys in the same table)", made, opened, proxy.Total(), refMade)
	// The slot's key and the admin-keys-rotate event's; a run that starts
	// less than the keyring's lead before a slot also makes the next
	// slot's. Each key is opened once by each function that did not make
	// it, and only if it signs or the function serves the JWKS: the
	// bootstraps' keys by the other function, the references' by both.
	if made < 2 || made > 3 || opened > made+2*refMade {
		t.Errorf("%d GenerateDataKeyPair and %d Decrypt calls: want the slot's and the rotation's keys made (and the next slot's across its lead), each opened at most once by each function that did not make it", made, opened)
	}
	for _, op := range []string{"Sign", "GetPublicKey", "Encrypt"} {
		if n := proxy.Calls(op); n != 0 {
			t.Errorf("%d %s calls: the pass keyring signs without them (and no sample event shuffles, which signs with the shuffle key)", n, op)
		}
	}
}

// checkEMF holds fn's log to the EMF specification (emfspec) and to
// metrics.Defs: the function ran with METRICS_INTERVAL=0, so each
// invocation wrote its metrics when it answered, in fn's namespace, every
// metric with its unit and its dimensions: a Latency each, in order, and
// as many Rejected as 4xx answers; and, over the run, every metric the
// sample events give cause for.
func checkEMF(t *testing.T, fn *function) {
	var latencies []string
	seen, rejected := map[string]bool{}, 0.0
	docs := 0
	for line := range strings.Lines(fn.log.String()) {
		line = strings.TrimSpace(line)
		if !emfspec.IsEMF([]byte(line)) {
			continue
		}
		docs++
		doc, err := emfspec.Parse([]byte(line))
		if err != nil {
			t.Errorf("invalid EMF line: %v\n%s", err, line)
			continue
		}
		for _, m := range doc.Metrics {
			seen[m.Name] = true
			def, ok := metricstest.ByName(m.Name)
			switch {
			case !ok:
				t.Errorf("metric %q is not in metrics.Defs", m.Name)
				continue
			case m.Namespace != fn.namespace:
				t.Errorf("%s in namespace %q, want %q", m.Name, m.Namespace, fn.namespace)
			case m.Unit != string(def.Unit):
				t.Errorf("%s in %s, want %s", m.Name, m.Unit, def.Unit)
			case len(m.Values) != 1:
				t.Errorf("%s has %d values, want one invocation's", m.Name, len(m.Values))
			}
			if got := slices.Sorted(maps.Keys(m.Dimensions)); !slices.Equal(got, slices.Sorted(slices.Values(def.Dimensions))) {
				t.Errorf("%s by %v, want %v", m.Name, got, def.Dimensions)
			}
			switch m.Name {
			case "Latency":
				latencies = append(latencies, m.Dimensions[metrics.DimOperation])
			case "Rejected":
				rejected += m.Values[0]
			}
		}
	}
	if len(latencies) != len(fn.answered) {
		t.Fatalf("%d Latency values for %d invocations; log:\n%s", len(latencies), len(fn.answered), fn.log)
	}
	want4xx := 0
	for i, status := range fn.answered {
		if status >= 400 && status < 500 {
			want4xx++
		}
		if latencies[i] == "" {
			t.Errorf("invocation %d: Latency without an operation", i)
		}
	}
	if int(rejected) != want4xx {
		t.Errorf("%v Rejected for %d 4xx answers", rejected, want4xx)
	}
	// What the sample events give cause for: no 503 among them, and one
	// first sighting of an admission (poll-first-admission).
	want := []string{"Latency", "Waiting", "Rejected"}
	if slices.Contains(latencies, "poll") {
		want = append(want, "Enters", "Polls", "Leaves", "RetryAfterMs", "EstimatedWaitMs", "Admissions")
	}
	t.Logf("%d EMF lines in %s, metrics %v", docs, fn.namespace, slices.Sorted(maps.Keys(seen)))
	for _, name := range want {
		if !seen[name] {
			t.Errorf("no %s metric in any line", name)
		}
	}
}

// checkPass verifies the admission pass of resp, the bootstrap's answer
// to poll-first-admission, with package passverify against the JWKS that
// the same bootstrap serves (events/jwks.json, invoked for each fetch),
// as a protected site would; its claims are the token's. Those JWKS
// invocations are fn's too.
func checkPass(t *testing.T, fn *function, resp events.APIGatewayV2HTTPResponse) {
	t.Helper()
	var body struct {
		AdmissionPass string
		AdmittedAt    time.Time
		ExpiresAt     time.Time
	}
	if err := json.Unmarshal([]byte(resp.Body), &body); err != nil || body.AdmissionPass == "" {
		t.Fatalf("ADMITTED answer without an admissionPass (%v): %s", err, resp.Body)
	}
	jwksEvent, err := os.ReadFile(filepath.Join(root, "events", "jwks.json"))
	if err != nil {
		t.Fatal(err)
	}
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		payload, err := fn.emu.Invoke(r.Context(), jwksEvent)
		var ans events.APIGatewayV2HTTPResponse
		if err == nil {
			err = json.Unmarshal(payload, &ans)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		fn.answered = append(fn.answered, ans.StatusCode)
		for k, v := range ans.Headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(ans.StatusCode)
		_, _ = io.WriteString(w, ans.Body)
	}))
	defer jwks.Close()
	v, err := passverify.New(passverify.Config{
		JWKSURL:   jwks.URL + api.JWKSPath,
		Issuer:    "https://abc123.execute-api.us-east-1.amazonaws.com", // the event's domainName
		ProgramID: sampleevents.ProgramID,
	})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := v.Verify(t.Context(), body.AdmissionPass)
	if err != nil {
		t.Fatalf("the bootstrap's pass does not verify against its JWKS: %v", err)
	}
	want := passverify.Claims{
		Issuer: "https://abc123.execute-api.us-east-1.amazonaws.com", ProgramID: sampleevents.ProgramID,
		TokenID: sampleevents.AdmitNowToken, Ticket: 450, JTI: claims.JTI,
		AdmittedAt: body.AdmittedAt.Truncate(time.Second), ExpiresAt: body.ExpiresAt.Truncate(time.Second),
	}
	if diff := cmp.Diff(want, claims); diff != "" {
		t.Errorf("pass claims (-want +got):\n%s", diff)
	}
}

// checkResponse holds the emulator's answer to the reference's: the same
// status, the same headers, and a body of the same documented shape.
func checkResponse(t *testing.T, id string, got, want events.APIGatewayV2HTTPResponse) {
	t.Helper()
	if got.StatusCode != want.StatusCode {
		t.Errorf("%s: status %d, want %d\n  body %s\n  want %s", id, got.StatusCode, want.StatusCode, got.Body, want.Body)
		return
	}
	if g, w := slices.Sorted(maps.Keys(got.Headers)), slices.Sorted(maps.Keys(want.Headers)); !slices.Equal(g, w) {
		t.Errorf("%s: headers %v, want %v", id, g, w)
	}
	if g, w := got.Headers["Allow"], want.Headers["Allow"]; g != w {
		t.Errorf("%s: Allow %q, want %q", id, g, w)
	}
	if !slices.Equal(got.Cookies, want.Cookies) {
		t.Errorf("%s: cookies %q, want %q", id, got.Cookies, want.Cookies)
	}
	if ct := want.Headers["Content-Type"]; want.Body != "" && !strings.HasPrefix(ct, "application/json") {
		// The waiting-room page: the same text but for what moves with
		// time (numbers) and the random key of its no-JavaScript form.
		if g, w := pageText(got.Body), pageText(want.Body); g != w || got.IsBase64Encoded != want.IsBase64Encoded {
			t.Errorf("%s: %s page\n%s\nwant\n%s", id, ct, got.Body, want.Body)
		}
		return
	}
	if want.Body == "" {
		if got.Body != "" {
			t.Errorf("%s: body %s, want none", id, got.Body)
		}
		return
	}
	var g, w map[string]any
	if err := json.Unmarshal([]byte(got.Body), &g); err != nil {
		t.Fatalf("%s: body is not a JSON object: %v: %s", id, err, got.Body)
	}
	if err := json.Unmarshal([]byte(want.Body), &w); err != nil {
		t.Fatalf("reference body: %v", err)
	}
	var required []string
	switch {
	case got.StatusCode >= 400:
		required = []string{"code", "message"}
		if got.Body != want.Body {
			t.Errorf("%s: error %s, want %s", id, got.Body, want.Body)
		}
	case w["tokenId"] != nil:
		required = []string{"tokenId", "status", "issuedAt"}
	case w["programId"] != nil:
		required = []string{"programId", "issued", "admitted", "waiting"}
	}
	for _, k := range required {
		if s, ok := g[k].(string); ok && s == "" || g[k] == nil {
			t.Errorf("%s: body lacks %q: %s", id, k, got.Body)
		}
	}
	if gk, wk := slices.Sorted(maps.Keys(g)), slices.Sorted(maps.Keys(w)); !slices.Equal(gk, wk) {
		t.Errorf("%s: body keys %v, want %v\n  body %s\n  want %s", id, gk, wk, got.Body, want.Body)
	}
}

var (
	formKey = regexp.MustCompile(`name="key" value="[^"]*"`)
	digits  = regexp.MustCompile(`[0-9]+`)
)

// pageText is an HTML page without its form key and with every number
// as "#".
func pageText(body string) string {
	return digits.ReplaceAllString(formKey.ReplaceAllString(body, `name="key" value=""`), "#")
}

// startFunction builds function id's bootstrap and starts it under the
// emulator with the template's environment, and builds the reference
// handler over mem, wired as the function's main wires it: the function
// behind the AWS_IAM routes is the admin one.
func startFunction(t *testing.T, tpl *samtemplate.Template, id, rie string, res lambdaemu.Resources, mem queue.Store, keys refKeyring) *function {
	t.Helper()
	bootstrap := filepath.Join(t.TempDir(), "bootstrap")
	// As make bootstrap builds it: for this machine, with the build
	// settings of go test so that the packages come from its cache.
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bootstrap, "./"+samtemplate.MainPackage(id))
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", id, err, out)
	}
	env, err := lambdaemu.FunctionEnv(tpl, id, res)
	if err != nil {
		t.Fatal(err)
	}
	// Not the template's default namespace, to see the function read it.
	env = append(env, config.EnvMetricsNamespace+"=WaitingRoom/emulator")
	// Each invocation's metrics as it answers, for checkEMF to count; the
	// aggregation over an interval is internal/metrics' to test.
	env = append(env, config.EnvMetricsInterval+"=0")
	var log bytes.Buffer // written by the emulator's process until Stop
	emu, err := lambdaemu.Start(rie, bootstrap, env, &log)
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s: emulator and function output:\n%s", id, log.String())
		}
	})
	t.Cleanup(emu.Stop) // runs first: the log is complete after it

	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	cfg, err := config.FromEnv(func(k string) string { return vars[k] }, true)
	if err != nil {
		t.Fatal(err)
	}
	var opts []app.Option
	if cfg.Pass.WrapKMSKeyID != "" { // as app.QueueFromEnv: a keyring wrapped by the same KMS key
		opts = append(opts, keys.option(cfg.Pass))
	}
	a := app.New(cfg, mem, slog.New(slog.NewTextHandler(io.Discard, nil)), opts...)
	h := a.QueueHandler()
	if isAdmin(t, tpl, id) {
		h = a.AdminHandler()
	}
	return &function{emu: emu, ref: httpapi.Lambda(h), log: &log, namespace: cfg.MetricsNamespace}
}

// refKeyring is where the reference handlers' keyring keeps its keys and
// the KMS client that makes and opens them.
type refKeyring struct {
	store admissionpass.KeyStore
	kms   *kms.Client
}

// option is the App option of a keyring as app.PassOption makes it for p,
// over k's store and client rather than the App's store and a client of
// its own.
func (k refKeyring) option(p config.Pass) app.Option {
	var opts []admissionpass.KeyringOption
	if p.KeyRotation > 0 {
		opts = append(opts, admissionpass.WithRotation(p.KeyRotation))
	}
	return app.WithKeyring(p.Issuer, k.store, admissionpass.NewKMSWrapper(k.kms, p.WrapKMSKeyID), opts...)
}

func isAdmin(t *testing.T, tpl *samtemplate.Template, id string) bool {
	t.Helper()
	f, err := tpl.Function(id)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range f.Events {
		if e.Properties.Auth.Authorizer == "AWS_IAM" {
			return true
		}
	}
	return false
}

// findRIE returns the emulator's path. Without it the test fails on CI
// (CI=true), where `make tools` must have installed it, and skips
// elsewhere.
func findRIE(t *testing.T) string {
	t.Helper()
	rie, err := lambdaemu.Find(root)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (CI=true: .ci/run must install it)", err)
		}
		t.Skip(err)
	}
	return rie
}
