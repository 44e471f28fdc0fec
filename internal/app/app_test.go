package app_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/tools/localkeys"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/simclock"
)

func newApp(t *testing.T, env map[string]string) *app.App {
	t.Helper()
	cfg, err := config.FromEnv(func(k string) string { return env[k] }, false)
	if err != nil {
		t.Fatal(err)
	}
	return app.New(cfg, memstore.New(), slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func do(h http.Handler, method, path, auth, body string) (int, string) {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// TestHandlers: each function's handler serves its own routes only, the
// admin one behind IAM, the local one behind the bearer secret.
func TestHandlers(t *testing.T) {
	a := newApp(t, nil)
	tests := []struct {
		name               string
		handler            http.Handler
		method, path, auth string
		wantStatus         int
	}{
		{"LocalCreates", a.LocalHandler("s3cret"), "PUT", "/api/v1/admin/programs/p", "Bearer s3cret", 201},
		{"LocalNeedsSecret", a.LocalHandler("s3cret"), "GET", "/api/v1/admin/programs/p", "", 401},
		{"LocalServesQueue", a.LocalHandler("s3cret"), "POST", "/api/v1/queues/programs/p", "", 201},
		{"QueueServesQueue", a.QueueHandler(), "POST", "/api/v1/queues/programs/p", "", 201},
		{"QueueServesNoAdmin", a.QueueHandler(), "GET", "/api/v1/admin/programs/p", "Bearer s3cret", 404},
		{"AdminNeedsIAM", a.AdminHandler(), "GET", "/api/v1/admin/programs/p", "Bearer s3cret", 403},
		{"AdminServesNoQueue", a.AdminHandler(), "POST", "/api/v1/queues/programs/p", "", 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if code, body := do(tt.handler, tt.method, tt.path, tt.auth, `{}`); code != tt.wantStatus {
				t.Errorf("status %d, want %d (%s)", code, tt.wantStatus, body)
			}
		})
	}
}

// TestKeyringRoutes: the admin and the local handlers serve the controls
// of the App's keyring (PassOption without keys: a keyring over a local
// wrapper), the queue handler does not; with fixed keys they answer 409
// NO_KEYRING.
func TestKeyringRoutes(t *testing.T) {
	cfg, err := config.FromEnv(func(string) string { return "" }, false)
	if err != nil {
		t.Fatal(err)
	}
	// The keyring's clock moves a minute before each request: the second
	// rotation is one of its own, not the first's key again.
	clk := simclock.NewFake(time.Date(2026, 5, 19, 12, 0, 0, 0, time.UTC))
	passes, err := localkeys.PassOption(t.Context(), cfg.Pass, "https://queue.example.com", admissionpass.WithKeyringClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	ring := app.New(cfg, memstore.New(), slog.New(slog.DiscardHandler), passes)
	if ring.Keys == nil {
		t.Fatal("PassOption without keys made no keyring")
	}
	fixed, err := localkeys.NewIssuer(cfg.Pass, "https://queue.example.com")
	if err != nil {
		t.Fatal(err)
	}
	noRing := app.New(cfg, memstore.New(), slog.New(slog.DiscardHandler), app.WithPasses(fixed))
	const iam = "arn:aws:iam::123456789012:user/ops"
	tests := []struct {
		name       string
		a          *app.App
		admin      bool // through AdminHandler, IAM-signed; else LocalHandler
		method     string
		wantStatus int
		wantCode   string
	}{
		{"LocalLists", ring, false, "GET", 200, ""},
		{"LocalRotates", ring, false, "POST", 201, ""},
		{"AdminLists", ring, true, "GET", 200, ""},
		{"AdminRotates", ring, true, "POST", 201, ""},
		{"LocalFixedKeys", noRing, false, "GET", 409, "NO_KEYRING"},
		{"AdminFixedKeys", noRing, true, "POST", 409, "NO_KEYRING"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk.Advance(time.Minute)
			var code int
			var body string
			if tt.admin {
				ev := events.APIGatewayV2HTTPRequest{RawPath: "/api/v1/admin/keys"}
				ev.RequestContext.HTTP.Method = tt.method
				ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
					IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: iam}}
				resp, err := httpapi.Lambda(tt.a.AdminHandler())(t.Context(), ev)
				if err != nil {
					t.Fatal(err)
				}
				code, body = resp.StatusCode, resp.Body
			} else {
				code, body = do(tt.a.LocalHandler("s3cret"), tt.method, "/api/v1/admin/keys", "Bearer s3cret", "")
			}
			var e struct{ Code string }
			_ = json.Unmarshal([]byte(body), &e)
			if code != tt.wantStatus || e.Code != tt.wantCode {
				t.Errorf("%d %s, want %d %q", code, body, tt.wantStatus, tt.wantCode)
			}
		})
	}
	if code, body := do(ring.QueueHandler(), "GET", "/api/v1/admin/keys", "Bearer s3cret", ""); code != 404 {
		t.Errorf("the queue handler answers %d %s to the key list, want 404", code, body)
	}
}

// TestPolicies: a program may choose any policy of the registry, and no
// other.
func TestPolicies(t *testing.T) {
	h := newApp(t, map[string]string{"POLL_POLICY": "eta"}).LocalHandler("s")
	tests := []struct {
		policy     string
		wantStatus int
	}{{"tiers", 201}, {"eta", 201}, {"", 201}, {"fastest", 400}}
	for _, tt := range tests {
		t.Run(tt.policy, func(t *testing.T) {
			code, body := do(h, "PUT", "/api/v1/admin/programs/p-"+tt.policy, "Bearer s", `{"pollingPolicy":"`+tt.policy+`"}`)
			if code != tt.wantStatus {
				t.Errorf("status %d, want %d (%s)", code, tt.wantStatus, body)
			}
		})
	}
}

func TestFromEnv(t *testing.T) {
	var logs bytes.Buffer
	if _, err := app.FromEnv(t.Context(), func(string) string { return "" }, &logs); err == nil || !strings.Contains(err.Error(), "TABLE_NAME") {
		t.Errorf("err = %v, want TABLE_NAME required", err)
	}
	a, err := app.FromEnv(t.Context(), func(k string) string {
		return map[string]string{"TABLE_NAME": "t", "DYNAMODB_ENDPOINT": "http://127.0.0.1:9", "LOG_LEVEL": "debug"}[k]
	}, &logs)
	if err != nil {
		t.Fatal(err)
	}
	if a.Config.TableName != "t" || !a.Log.Enabled(t.Context(), slog.LevelDebug) {
		t.Errorf("config %+v, debug logging %v", a.Config, a.Log.Enabled(t.Context(), slog.LevelDebug))
	}
	if _, ok := a.Metrics.(*metrics.EMF); !ok {
		t.Errorf("metrics %T, want EMF lines", a.Metrics)
	}
}

// opsSeen is a metrics.Observer that keeps the op of each request.
type opsSeen []metrics.Op

func (o *opsSeen) Observe(r metrics.Request) { *o = append(*o, r.Op) }

// TestMetrics: every handler reports its requests to the App's observer.
func TestMetrics(t *testing.T) {
	a := newApp(t, nil)
	seen := &opsSeen{}
	a.Metrics = seen
	do(a.LocalHandler("s"), "PUT", "/api/v1/admin/programs/p", "Bearer s", `{}`)
	do(a.QueueHandler(), "POST", "/api/v1/queues/programs/p", "", "")
	do(a.AdminHandler(), "GET", "/api/v1/admin/programs/p", "", "")
	if want := (opsSeen{metrics.OpAdmin, metrics.OpEnter, metrics.OpAdmin}); !slices.Equal(*seen, want) {
		t.Errorf("observed %v, want %v", *seen, want)
	}
}

// TestQueueFromEnv: the queue function will not start without its KMS
// keys (no admission without a pass, no shuffled opening without its
// seed); with them it signs passes and serves their JWKS. The admin
// function needs neither, and signs bypass passes with the pass key when
// it has one.
func TestQueueFromEnv(t *testing.T) {
	base := map[string]string{"TABLE_NAME": "t", "DYNAMODB_ENDPOINT": "http://127.0.0.1:9"}
	getenv := func(extra map[string]string) func(string) string {
		return func(k string) string {
			if v, ok := extra[k]; ok {
				return v
			}
			return base[k]
		}
	}
	if _, err := app.QueueFromEnv(t.Context(), getenv(nil), io.Discard); !errors.Is(err, app.ErrNoPassKey) {
		t.Errorf("QueueFromEnv without PASS_WRAP_KMS_KEY_ID: err %v, want ErrNoPassKey", err)
	}
	keys := map[string]string{"PASS_WRAP_KMS_KEY_ID": "alias/pass", "KMS_ENDPOINT": "http://127.0.0.1:9"}
	if _, err := app.QueueFromEnv(t.Context(), getenv(keys), io.Discard); !errors.Is(err, app.ErrNoShuffleKey) {
		t.Errorf("QueueFromEnv without SHUFFLE_KMS_KEY_ID: err %v, want ErrNoShuffleKey", err)
	}
	keys["SHUFFLE_KMS_KEY_ID"] = "alias/shuffle"
	if _, err := app.QueueFromEnv(t.Context(), getenv(keys), io.Discard); !errors.Is(err, app.ErrNoChallengeSecret) {
		t.Errorf("QueueFromEnv without CHALLENGE_SECRET_ARN: err %v, want ErrNoChallengeSecret", err)
	}
	keys["CHALLENGE_SECRET_ARN"], keys["SECRETS_ENDPOINT"] = secretsServer(t, strings.Repeat("s", 64))
	a, err := app.QueueFromEnv(t.Context(), getenv(keys), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if a.Passes == nil || a.Passes.Issuer() != "" || a.Keys == nil {
		t.Errorf("Passes %v, keyring %v, want a keyring's issuer naming the API's base URL per request", a.Passes, a.Keys)
	}
	admin, err := app.FromEnv(t.Context(), getenv(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if admin.Passes != nil {
		t.Error("the admin function's App signs passes without a key")
	}
	if _, err := app.FromEnv(t.Context(), getenv(map[string]string{"PASS_KMS_KEY_ID": "alias/pass"}), io.Discard); err == nil || !strings.Contains(err.Error(), "no longer read") {
		t.Errorf("the admin function with the retired PASS_KMS_KEY_ID: err %v, want it refused", err)
	}
	admin, err = app.FromEnv(t.Context(), getenv(map[string]string{"PASS_WRAP_KMS_KEY_ID": "alias/pass", "KMS_ENDPOINT": "http://127.0.0.1:9"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if admin.Passes == nil || admin.Passes.Issuer() != "" {
		t.Errorf("the admin function's App with the pass key: Passes %v, want an issuer naming the API's base URL per request", admin.Passes)
	}
	// With the challenge secret, the admin function finds an account's place where the queue function put it.
	withSecret := map[string]string{"CHALLENGE_SECRET_ARN": keys["CHALLENGE_SECRET_ARN"], "SECRETS_ENDPOINT": keys["SECRETS_ENDPOINT"]}
	if admin, err = app.FromEnv(t.Context(), getenv(withSecret), io.Discard); err != nil {
		t.Fatal(err)
	}
	if got, want := admin.Service.AccountTokenID("gala", "alice"), a.Service.AccountTokenID("gala", "alice"); got != want {
		t.Errorf("the admin function keys alice's place %s, the queue function %s", got, want)
	}
}

// TestNewIssuer: the key files sign and publish, the issuer defaults as
// documented, and a missing file fails clearly.
func TestNewIssuer(t *testing.T) {
	dir := t.TempDir()
	write := func(name string) string {
		k, err := localkeys.Generate()
		if err != nil {
			t.Fatal(err)
		}
		b, err := localkeys.PEM(k)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	signing, published := write("next.pem"), write("previous.pem")
	jwksKeys := func(iss *admissionpass.Issuer) int {
		doc, err := iss.JWKS(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var set struct{ Keys []any }
		if err := json.Unmarshal(doc, &set); err != nil {
			t.Fatal(err)
		}
		return len(set.Keys)
	}
	tests := []struct {
		name       string
		pass       config.Pass
		def        string
		wantIss    string
		wantKeys   int
		wantErrHas string
	}{
		{"Generated", config.Pass{}, "http://127.0.0.1:3000", "http://127.0.0.1:3000", 1, ""},
		{"ConfiguredIssuerWins", config.Pass{Issuer: "https://queue.example.com"}, "http://127.0.0.1:3000", "https://queue.example.com", 1, ""},
		{"Files", config.Pass{KeyFile: signing, PublishedKeyFile: published}, "", "", 2, ""},
		{"MissingFile", config.Pass{KeyFile: filepath.Join(dir, "none.pem")}, "", "", 0, "PASS_KEY_FILE"},
		{"MissingPublishedFile", config.Pass{KeyFile: signing, PublishedKeyFile: filepath.Join(dir, "none.pem")}, "", "", 0, "PASS_PUBLISHED_KEY_FILE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			iss, err := localkeys.NewIssuer(tt.pass, tt.def)
			if tt.wantErrHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErrHas) {
					t.Fatalf("err %v, want it to name %s", err, tt.wantErrHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if iss.Issuer() != tt.wantIss || jwksKeys(iss) != tt.wantKeys {
				t.Errorf("iss %q with %d keys, want %q with %d", iss.Issuer(), jwksKeys(iss), tt.wantIss, tt.wantKeys)
			}
		})
	}
}

// TestLocalKeyringAcrossRestart: the local server's keyring (no KMS) keeps
// its keys in its own memory, so a second process on the same store (a
// DynamoDB table outlives the process) makes keys it can open and signs.
func TestLocalKeyringAcrossRestart(t *testing.T) {
	store := memstore.New()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var kids []string
	for range 2 { // the server, then the server restarted
		opt, err := localkeys.PassOption(t.Context(), config.Pass{}, "http://127.0.0.1:3000")
		if err != nil {
			t.Fatal(err)
		}
		a := app.New(config.Config{}, store, log, opt)
		pass, err := a.Passes.Issue(t.Context(), admissionpass.Admission{ProgramID: "gala", TokenID: "t", Ticket: 1, AdmittedAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)})
		if err != nil {
			t.Fatalf("Issue: %v", err)
		}
		kid, err := a.Passes.KeyID(t.Context())
		if err != nil || pass == "" {
			t.Fatalf("KeyID: %v", err)
		}
		kids = append(kids, kid)
	}
	if kids[0] == kids[1] {
		t.Errorf("the restarted server signs with its predecessor's key %s, which it cannot have opened", kids[0])
	}
}

const secretARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:challenge-AbCdEf"

// secretsServer serves Secrets Manager's GetSecretValue of secretARN as
// value, and returns that ARN and the server's URL.
func secretsServer(t *testing.T, value string) (arn, endpoint string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ SecretId string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		if r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" || in.SecretId != secretARN {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"ResourceNotFoundException","message":"no such secret"}`))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"ARN": secretARN, "Name": "challenge", "SecretString": value})
	}))
	t.Cleanup(srv.Close)
	return secretARN, srv.URL
}

func TestChallengeSecret(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	long := strings.Repeat("k", 40)
	arn, endpoint := secretsServer(t, long)
	tests := []struct {
		name    string
		cfg     config.Config
		want    string
		wantErr string
	}{
		{"from Secrets Manager", config.Config{ChallengeSecretARN: arn, SecretsEndpoint: endpoint}, long, ""},
		{"unknown secret", config.Config{ChallengeSecretARN: arn + "x", SecretsEndpoint: endpoint}, "", "no such secret"},
		{"given", config.Config{ChallengeSecret: long}, long, ""},
		{"none: random per process", config.Config{}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := app.ChallengeSecret(t.Context(), tt.cfg)
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) || tt.wantErr == "" && err != nil {
				t.Fatalf("err %v, want %q", err, tt.wantErr)
			}
			if string(got) != tt.want {
				t.Errorf("secret %q, want %q", got, tt.want)
			}
		})
	}
	short, endpoint := secretsServer(t, "too short")
	if _, err := app.ChallengeSecret(t.Context(), config.Config{ChallengeSecretARN: short, SecretsEndpoint: endpoint}); err == nil {
		t.Error("a secret of 9 bytes was accepted")
	}
}
