package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/fixtures"
	"github.com/example/waitingroom/internal/tools/sampleevents"
)

// t0 is the seed time of the fixtures and the fixed clock of these tests.
var t0 = time.Date(2026, 5, 19, 10, 0, 0, 123e6, time.UTC)

const seed = 42

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// passIssuer is the issuer of the tests' passes, with the fixed key of
// testdata/pass-key.pem and iss; with "", each pass takes the API's base
// URL from the request, as on AWS without PASS_ISSUER.
func passIssuer(t testing.TB, iss string) *admissionpass.Issuer {
	t.Helper()
	key, err := admissionpass.ReadLocalKeyFile(filepath.Join("testdata", "pass-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	i, err := admissionpass.NewIssuer(iss, key)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// testJWKS is the JWKS of testdata/pass-key.pem.
const testJWKS = `{"keys":[{"use":"sig","kty":"EC","kid":"t_NzVjtgZ0BVU9IjgJ1koAjNRJv15EmuaQxGxKpNS4o","crv":"P-256","alg":"ES256","x":"en8IbEC2WIv-FeBA3rD2gSLx13N9M0TW3Bps-uu1p10","y":"cX90kxZ3x9L05yYQ9JujgMNn1VNVEgUKnzPEVCAsA0M"}]}`

// newService returns a service over the fixtures, with a fixed clock, a
// seeded jitter source, and passes signed by passIssuer(t, "").
func newService(t testing.TB) *queue.Service {
	t.Helper()
	return newServiceIssuing(t, passIssuer(t, ""))
}

// newServiceIssuing is newService with passes signed by iss.
func newServiceIssuing(t testing.TB, iss *admissionpass.Issuer) *queue.Service {
	t.Helper()
	store := memstore.New()
	if err := sampleevents.Seed(context.Background(), store, t0); err != nil {
		t.Fatal(err)
	}
	return queue.NewService(store, polling.DefaultTiers(),
		queue.WithClock(clock.NewFake(t0)),
		queue.WithRand(rand.New(rand.NewPCG(seed, seed))),
		queue.WithPassSigner(app.Signer(iss)))
}

// newHandler returns both APIs over the fixtures, the admin routes behind
// auth (IAM, as on AWS, when nil), with the JWKS of passIssuer and the
// controls of eventKeyring.
func newHandler(t testing.TB, auth httpapi.Middleware) http.Handler {
	t.Helper()
	if auth == nil {
		auth = httpapi.IAMAuth()
	}
	return checked(t, httpapi.New(newService(t), auth, httpapi.WithLogger(discard), httpapi.WithPasses(passIssuer(t, "")), httpapi.WithKeyring(eventKeyring(t))))
}

// newLambda returns newHandler behind the Lambda adapter, as the functions
// serve it.
func newLambda(t testing.TB, auth httpapi.Middleware) httpapi.LambdaHandler {
	t.Helper()
	return checkedLambda(t, httpapi.Lambda(newHandler(t, auth)))
}

// invoke runs req through fn, which must never return an error.
func invoke(t testing.TB, fn httpapi.LambdaHandler, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	t.Helper()
	resp, err := fn(context.Background(), req)
	if err != nil {
		t.Fatalf("the Lambda handler returned error %v; it must answer every failure over HTTP", err)
	}
	return resp
}

// firstRetryMs is what the seeded jitter source gives for the first waiting
// answer of a test at position.
func firstRetryMs(position int64) string {
	d := polling.DefaultTiers().RetryAfter(polling.Situation{Position: position, RatePerSecond: 10}, rand.New(rand.NewPCG(seed, seed)))
	return strconv.FormatInt(d.Milliseconds(), 10)
}

// TestHandlerEvents replays every sample event through the Lambda adapter
// and asserts the exact answer.
func TestHandlerEvents(t *testing.T) {
	waitingMs := firstRetryMs(234)
	tests := []struct {
		event      string
		wantStatus int
		wantBody   string            // exact JSON; "" for none
		wantHeader map[string]string // headers that must be present with these values
	}{
		{"poll-waiting", 200,
			`{"tokenId":"waitingTokenFixture001","status":"WAITING","ticket":734,"issuedAt":"2026-05-19T09:30:00.123Z","position":234,"retryAfterMs":` + waitingMs + `,"estimatedWaitMs":23400}`,
			map[string]string{"Retry-After": "6", "Cache-Control": "no-store", "Content-Type": "application/json; charset=utf-8"}},
		// Admitted before passes were signed (seeded so): no pass.
		{"poll-admitted", 200,
			`{"tokenId":"admittedTokenFixture01","status":"ADMITTED","ticket":400,"issuedAt":"2026-05-19T09:20:00.123Z","admittedAt":"2026-05-19T09:59:00.123Z","expiresAt":"2026-05-19T10:09:00.123Z"}`,
			map[string]string{"Cache-Control": "no-store"}},
		// The first sighting: admitted now, with a pass (checked apart:
		// see TestHandlerFirstAdmission).
		{"poll-first-admission", 200,
			`{"tokenId":"admitNowTokenFixture01","status":"ADMITTED","ticket":450,"issuedAt":"2026-05-19T09:25:00.123Z","admittedAt":"2026-05-19T10:00:00.123Z","expiresAt":"2026-05-19T10:10:00.123Z","admissionPass":"<pass>"}`,
			map[string]string{"Cache-Control": "no-store"}},
		{"jwks", 200, testJWKS, map[string]string{"Cache-Control": "public, max-age=300", "Content-Type": "application/jwk-set+json", "Access-Control-Allow-Origin": "*"}},
		{"enter-existing-token", 200,
			`{"tokenId":"waitingTokenFixture001","status":"WAITING","ticket":734,"issuedAt":"2026-05-19T09:30:00.123Z","position":234,"retryAfterMs":` + waitingMs + `,"estimatedWaitMs":23400}`,
			map[string]string{"Retry-After": "6"}},
		{"leave", 204, "", map[string]string{"Cache-Control": "no-store"}},
		// Its holder ends an admission: the token then reads LEFT.
		{"leave-admitted", 204, "", map[string]string{"Cache-Control": "no-store"}},
		// The site that holds the pass ends the admission.
		{"session-end", 204, "", map[string]string{"Cache-Control": "no-store"}},
		// The site, as an admin, ends it and frees its place at once.
		{"admin-session-release", 204, "", nil},
		// Admitted to a capped program, never came to see: a no-show.
		{"poll-no-show", 200, `{"tokenId":"noShowTokenFixture0001","status":"EXPIRED","ticket":5,"issuedAt":"2026-05-19T09:10:00.123Z"}`, map[string]string{"Cache-Control": "no-store"}},
		{"error-session-missing-pass", 400, `{"code":"MISSING_PASS","message":"An admission pass is required in the X-Admission-Pass header."}`, nil},
		{"error-session-forged", 403, `{"code":"INVALID_PASS","message":"The admission pass is not one this waiting room handed out for this program."}`, nil},
		{"error-session-expired", 403, `{"code":"PASS_EXPIRED","message":"The admission pass has expired: its admission is over."}`, nil},
		{"error-missing-token", 400, `{"code":"MISSING_TOKEN","message":"The X-Queue-Token header is required."}`, nil},
		{"error-malformed-token", 400, `{"code":"INVALID_TOKEN","message":"The queue token is malformed."}`, nil},
		{"error-invalid-idempotency-key", 400, `{"code":"INVALID_IDEMPOTENCY_KEY","message":"The Idempotency-Key must be 16 to 128 letters, digits, '-', '_', '.' or ':' (a random UUID fits)."}`, nil},
		{"error-unknown-token", 404, `{"code":"TOKEN_NOT_FOUND","message":"No such token in this program's queue."}`, nil},
		{"error-foreign-token", 404, `{"code":"TOKEN_NOT_FOUND","message":"No such token in this program's queue."}`, nil},
		{"error-invalid-program-id", 400, `{"code":"INVALID_PROGRAM_ID","message":"The program id must be 1 to 64 letters, digits, '-' or '_', starting with a letter or digit."}`, nil},
		{"error-unknown-program", 404, `{"code":"PROGRAM_NOT_FOUND","message":"No such program."}`, nil},
		{"error-program-closed", 409, `{"code":"PROGRAM_CLOSED","message":"The program's queue is closed to new entries."}`, nil},
		{"error-program-closed-at", 409, `{"code":"PROGRAM_CLOSED","message":"The program's queue closed to new entries at 2026-05-19T09:59:00Z."}`, nil},
		{"error-queue-full", 409, `{"code":"QUEUE_FULL","message":"The line is full (100 waiting): try again later."}`, nil},
		// A program that asks for a proof of work: its challenge (random,
		// checked apart: see TestHandlerChallenge), an enter without a
		// proof, and one with a challenge it never issued.
		{"challenge", 200, `{"challenge":"<challenge>","bits":16,"expiresAt":"2026-05-19T10:05:00.123Z"}`, map[string]string{"Cache-Control": "no-store"}},
		{"error-challenge-required", 403, `{"code":"CHALLENGE_REQUIRED","message":"This program asks for a proof of work: GET /api/v1/queues/programs/guarded/challenge, solve the challenge, and send it in X-Queue-Challenge with the solution in X-Queue-Solution."}`, nil},
		{"error-challenge-failed", 403, `{"code":"CHALLENGE_FAILED","message":"The proof of work is not valid for this program, or its solution is wrong."}`, nil},
		{"error-method-not-allowed", 405, `{"code":"METHOD_NOT_ALLOWED","message":"Allowed methods: DELETE, GET, POST."}`, map[string]string{"Allow": "DELETE, GET, POST"}},
		{"error-unknown-route", 404, `{"code":"NOT_FOUND","message":"No such route."}`, nil},
		{"admin-get-program", 200,
			`{"programId":"demo","issued":1000,"admitted":500,"waiting":500,"admissionRatePerSecond":10,"paused":false,"closed":false,"admissionWindowSeconds":600,"createdAt":"2026-05-19T09:00:00.123Z"}`, nil},
		{"admin-put-program", 200,
			`{"programId":"demo","issued":1000,"admitted":500,"waiting":500,"admissionRatePerSecond":10,"paused":false,"closed":false,"admissionWindowSeconds":600,"createdAt":"2026-05-19T09:00:00.123Z"}`, nil},
		{"admin-create-program", 201,
			`{"programId":"spring-gala","issued":0,"admitted":0,"waiting":0,"admissionRatePerSecond":2.5,"paused":true,"closed":false,"admissionWindowSeconds":900,"createdAt":"2026-05-19T10:00:00.123Z"}`, nil},
		{"admin-create-capped-program", 201,
			`{"programId":"capped-gala","issued":0,"admitted":0,"waiting":0,"admissionRatePerSecond":20,"paused":false,"closed":false,"admissionWindowSeconds":600,"createdAt":"2026-05-19T10:00:00.123Z","maxActiveUsers":50,"noShowSeconds":60,"active":0,"ended":0,"noShows":0}`, nil},
		{"admin-error-cap-after-start", 409, `{"code":"INVALID_SETTINGS","message":"maxActiveUsers cannot be set once admission has started: the people admitted before it were not followed."}`, nil},
		{"admin-admit", 200,
			`{"programId":"demo","issued":1000,"admitted":505,"waiting":495,"admissionRatePerSecond":10,"paused":false,"closed":false,"admissionWindowSeconds":600,"createdAt":"2026-05-19T09:00:00.123Z"}`, nil},
		// Two bypass passes, checked apart: see TestHandlerBypass.
		{"admin-passes", 200, `{"passes":["<pass>","<pass>"]}`, map[string]string{"Cache-Control": "no-store"}},
		{"admin-error-passes-validity", 400, `{"code":"INVALID_VALIDITY","message":"validSeconds must be between 60 and 86400."}`, nil},
		{"admin-error-unsigned", 403, `{"code":"FORBIDDEN","message":"Admin routes need an IAM-signed request."}`, nil},
		{"admin-error-bad-json", 400, `{"code":"INVALID_JSON","message":"The body is truncated JSON."}`, nil},
		{"admin-error-wrong-type", 400, `{"code":"INVALID_JSON","message":"Field \"admissionRatePerSecond\" must be a number."}`, nil},
		{"admin-error-unknown-field", 400, `{"code":"INVALID_JSON","message":"Unknown field \"rate\"."}`, nil},
		{"admin-error-negative-rate", 400, `{"code":"INVALID_SETTINGS","message":"admissionRatePerSecond must be 0 (manual admission only) or between 0.001 and 100000."}`, nil},
		{"admin-error-negative-count", 400, `{"code":"INVALID_COUNT","message":"count must be a whole number between 1 and 1000000."}`, nil},
		{"admin-error-absurd-count", 400, `{"code":"INVALID_COUNT","message":"count must be a whole number between 1 and 1000000."}`, nil},
		{"admin-error-unknown-program", 404, `{"code":"PROGRAM_NOT_FOUND","message":"No such program."}`, nil},
		{"admin-error-method-not-allowed", 405, `{"code":"METHOD_NOT_ALLOWED","message":"Allowed methods: DELETE, GET, PUT."}`, map[string]string{"Allow": "DELETE, GET, PUT"}},
		{"admin-list-programs", 200,
			`{"programs":[{"programId":"capped","issued":100,"admitted":50,"waiting":50,"admissionRatePerSecond":20,"paused":false,"closed":false,"admissionWindowSeconds":600,"createdAt":"2026-05-19T09:00:00.123Z","maxActiveUsers":50,"noShowSeconds":60,"active":50,"ended":0,"noShows":0},` +
				`{"programId":"demo","issued":1000,"admitted":500,"waiting":500,"admissionRatePerSecond":10,"paused":false,"closed":false,"admissionWindowSeconds":600,"createdAt":"2026-05-19T09:00:00.123Z"}],"nextCursor":"ZGVtbw"}`, nil},
		{"admin-delete-program", 204, ``, nil},
		{"admin-error-delete-open", 409, `{"code":"PROGRAM_NOT_CLOSED","message":"Close the program (closed: true) before you delete it."}`, nil},
		{"admin-history", 200,
			`{"changes":[{"changeId":"changeFixture000000001","at":"2026-05-19T09:30:00.123Z","effectiveAt":"2026-05-19T09:30:00.123Z","actor":"arn:aws:sts::123456789012:assumed-role/ops/ops","action":"update","fields":{"admissionRatePerSecond":10,"paused":false}}]}`, nil},
		{"admin-token-get", 200,
			`{"tokenId":"admittedTokenFixture01","status":"ADMITTED","ticket":400,"issuedAt":"2026-05-19T09:20:00.123Z","admittedAt":"2026-05-19T09:59:00.123Z","expiresAt":"2026-05-19T10:09:00.123Z","retainedUntil":"2026-05-21T10:00:00.123Z"}`, nil},
		{"admin-token-revoke", 204, "", nil},
		{"admin-error-foreign-token", 404, `{"code":"TOKEN_NOT_FOUND","message":"No such token in this program's queue."}`, nil},
		// The keyring of eventKeyring: kid1 signs since the slot's start
		// (midnight); a rotation makes kid2, which signs 15 minutes
		// later; a revoke of kid1 makes kid2 sign from now in its place.
		{"admin-keys", 200, `{"rotationSeconds":86400,"keys":[{"keyId":"` + kid1 + `","state":"signing","signFrom":"2026-05-19T00:00:00.000Z","createdAt":"2026-05-19T10:00:00.123Z"}]}`,
			map[string]string{"Cache-Control": "no-store"}},
		{"admin-keys-rotate", 201, `{"key":{"keyId":"` + kid2 + `","state":"next","signFrom":"2026-05-19T10:15:00.123Z","createdAt":"2026-05-19T10:00:00.123Z"}}`, nil},
		{"admin-keys-revoke", 200, `{"revoked":"` + kid1 + `","replacement":{"keyId":"` + kid2 + `","state":"signing","signFrom":"2026-05-19T10:00:00.123Z","createdAt":"2026-05-19T10:00:00.123Z"}}`, nil},
		{"admin-error-unknown-key", 404, `{"code":"KEY_NOT_FOUND","message":"No signing key has this id."}`, nil},
		{"admin-error-invalid-key-id", 400, invalidKeyID, nil},
	}
	files, _ := filepath.Glob(filepath.Join("..", "..", "events", "*.json"))
	// page-*.json are the waiting-room page's, asserted in internal/app.
	files = slices.DeleteFunc(files, func(f string) bool { return strings.HasPrefix(filepath.Base(f), "page") })
	if len(files) != len(tests)+1 { // + enter, walked by TestHandlerEnter
		t.Errorf("%d events in events/, %d here and enter: each event needs its expected answer", len(files), len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.event, func(t *testing.T) {
			resp := invoke(t, newLambda(t, nil), fixtures.Event(t, tt.event))
			if got, want := resp.StatusCode, tt.wantStatus; got != want {
				t.Errorf("status = %d, want %d (body %s)", got, want, resp.Body)
			}
			body := resp.Body
			if strings.Contains(tt.wantBody, `"<pass>"`) {
				body = passPlaceholder.ReplaceAllString(body, `"<pass>"`)
			}
			body = challengePlaceholder.ReplaceAllString(body, `"challenge":"<challenge>"`)
			assertJSONEqual(t, body, tt.wantBody)
			for k, want := range tt.wantHeader {
				if got := resp.Headers[k]; got != want {
					t.Errorf("header %s = %q, want %q", k, got, want)
				}
			}
			if resp.Headers["Cache-Control"] != "no-store" && tt.event != "jwks" {
				t.Errorf("Cache-Control = %q, want no-store on every answer but the JWKS", resp.Headers["Cache-Control"])
			}
			if _, ok := resp.Headers["Retry-After"]; ok != strings.Contains(tt.wantBody, `"WAITING"`) {
				t.Errorf("Retry-After present = %v, want it exactly on WAITING answers", ok)
			}
		})
	}
}

// challengePlaceholder finds a challenge of package challenge.
var challengePlaceholder = regexp.MustCompile(`"challenge":"[A-Za-z0-9_-]{56}"`)

// passPlaceholder finds a compact JWS as a JSON string.
var passPlaceholder = regexp.MustCompile(`"eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+"`)

// assertJSONEqual compares two JSON texts as values: key order does not
// matter, key presence does.
func assertJSONEqual(t *testing.T, got, want string) {
	t.Helper()
	if want == "" {
		if got != "" {
			t.Errorf("body = %s, want none", got)
		}
		return
	}
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want: %v", err)
	}
	if diff := cmp.Diff(w, g); diff != "" {
		t.Errorf("body (-want +got):\n%s\n  got %s", diff, got)
	}
}

// decode returns a JSON object body.
func decode(t *testing.T, body string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("body is not a JSON object: %v: %s", err, body)
	}
	return m
}

// TestHandlerEnter walks a token through entering, a refresh, polling and
// leaving, asserting what the client sees at each step.
func TestHandlerEnter(t *testing.T) {
	h := newLambda(t, nil)
	resp := invoke(t, h, fixtures.Event(t, "enter"))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("enter status = %d, body %s", resp.StatusCode, resp.Body)
	}
	got := decode(t, resp.Body)
	id, _ := got["tokenId"].(string)
	if !queue.ValidTokenID(id) {
		t.Fatalf("tokenId %q is not a well-formed token id", id)
	}
	// Ticket 1001 behind a serving counter of 500: position 501.
	if got["status"] != "WAITING" || got["ticket"] != float64(1001) || got["position"] != float64(501) || got["issuedAt"] != "2026-05-19T10:00:00.123Z" {
		t.Errorf("enter body = %s", resp.Body)
	}
	if ms, _ := got["retryAfterMs"].(float64); ms < 4700 || ms > 5300 {
		t.Errorf("retryAfterMs = %v, want 5000±300 at position 501", ms)
	}

	// A refresh with the token keeps the place: 200, same token, same position.
	again := fixtures.Event(t, "enter")
	again.Headers["x-queue-token"] = id
	resp = invoke(t, h, again)
	refreshed := decode(t, resp.Body)
	if resp.StatusCode != http.StatusOK || refreshed["tokenId"] != id || refreshed["ticket"] != float64(1001) || refreshed["position"] != float64(501) {
		t.Errorf("refresh: status %d body %s, want 200 with the same token at 501", resp.StatusCode, resp.Body)
	}

	// Leaving, then polling: LEFT with leftAt, no position and no retry keys.
	leave := fixtures.Event(t, "leave")
	leave.Headers["x-queue-token"] = id
	if resp = invoke(t, h, leave); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("leave status = %d body %s", resp.StatusCode, resp.Body)
	}
	if resp = invoke(t, h, leave); resp.StatusCode != http.StatusNoContent {
		t.Errorf("second leave status = %d, want 204 (idempotent)", resp.StatusCode)
	}
	poll := fixtures.Event(t, "poll-waiting")
	poll.Headers["x-queue-token"] = id
	resp = invoke(t, h, poll)
	assertJSONEqual(t, resp.Body, `{"tokenId":"`+id+`","status":"LEFT","ticket":1001,"issuedAt":"2026-05-19T10:00:00.123Z","leftAt":"2026-05-19T10:00:00.123Z"}`)

	// A left token entering again gets a new place (201), not its old one.
	again.Headers["x-queue-token"] = id
	resp = invoke(t, h, again)
	fresh := decode(t, resp.Body)
	if resp.StatusCode != http.StatusCreated || fresh["tokenId"] == id || fresh["ticket"] != float64(1002) || fresh["position"] != float64(502) {
		t.Errorf("re-enter after leaving: status %d body %s, want 201 with a new token, ticket 1002 at 502", resp.StatusCode, resp.Body)
	}
}

func TestHandlerAdminSecret(t *testing.T) {
	h := newLambda(t, httpapi.BearerAuth("s3cret"))
	tests := []struct {
		name, auth string
		want       int
		wantCode   string
	}{
		{"OK", "Bearer s3cret", 200, ""},
		{"OKSchemeCase", "bearer s3cret", 200, ""},
		{"Missing", "", 401, "UNAUTHORIZED"},
		{"Wrong", "Bearer s3cret2", 403, "FORBIDDEN"},
		{"Prefix", "Bearer s3cre", 403, "FORBIDDEN"},
		{"WrongScheme", "Basic s3cret", 403, "FORBIDDEN"},
		{"NoScheme", "s3cret", 403, "FORBIDDEN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := fixtures.Event(t, "admin-error-unsigned") // no IAM context: the secret decides
			if tt.auth != "" {
				req.Headers["authorization"] = tt.auth
			}
			resp := invoke(t, h, req)
			if resp.StatusCode != tt.want {
				t.Fatalf("status = %d, want %d (%s)", resp.StatusCode, tt.want, resp.Body)
			}
			if tt.wantCode != "" && decode(t, resp.Body)["code"] != tt.wantCode {
				t.Errorf("body = %s, want code %s", resp.Body, tt.wantCode)
			}
		})
	}
}

// TestHandlerIAM: the admin function's check of API Gateway's IAM
// authorizer context, as the adapter passes it on.
func TestHandlerIAM(t *testing.T) {
	h := newLambda(t, nil)
	tests := []struct {
		name string
		iam  *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription
		want int
	}{
		{"UserARN", &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::123456789012:user/ops"}, 200},
		{"CallerID", &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{CallerID: "AIDAEXAMPLE"}, 200},
		{"EmptyIAM", &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{}, 403},
		{"NoAuthorizer", nil, 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := fixtures.Event(t, "admin-get-program")
			req.RequestContext.Authorizer = nil
			if tt.iam != nil {
				req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: tt.iam}
			}
			if resp := invoke(t, h, req); resp.StatusCode != tt.want {
				t.Errorf("status = %d, want %d (%s)", resp.StatusCode, tt.want, resp.Body)
			}
		})
	}
}

// TestHandlersApart: the public function serves no admin route and the
// admin function no public one; each answers the other's paths with the
// API's 404.
func TestHandlersApart(t *testing.T) {
	svc := newService(t)
	tests := []struct {
		name    string
		handler http.Handler
		event   string
	}{
		{"QueueServesNoAdminRoute", checked(t, httpapi.NewQueue(svc, httpapi.WithLogger(discard))), "admin-get-program"},
		{"AdminServesNoQueueRoute", checked(t, httpapi.NewAdmin(svc, httpapi.IAMAuth(), httpapi.WithLogger(discard))), "poll-waiting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := invoke(t, checkedLambda(t, httpapi.Lambda(tt.handler)), fixtures.Event(t, tt.event))
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("status %d, want 404", resp.StatusCode)
			}
			assertJSONEqual(t, resp.Body, `{"code":"NOT_FOUND","message":"No such route."}`)
		})
	}
}

// TestLambdaUnconvertible: events the adapter cannot turn into a request
// still get the API's JSON, never an error (which Lambda would answer 500).
func TestLambdaUnconvertible(t *testing.T) {
	h := newLambda(t, nil)
	tests := []struct {
		name   string
		edit   func(*events.APIGatewayV2HTTPRequest)
		status int
		body   string
	}{
		{"BadEscape", func(e *events.APIGatewayV2HTTPRequest) { e.RawPath = "/api/v1/queues/programs/%zz" }, 404, `{"code":"NOT_FOUND","message":"No such route."}`},
		{"BadQuery", func(e *events.APIGatewayV2HTTPRequest) { e.RawQueryString = "a=\x7f" }, 404, `{"code":"NOT_FOUND","message":"No such route."}`},
		{"BadMethod", func(e *events.APIGatewayV2HTTPRequest) { e.RequestContext.HTTP.Method = "GE T" }, 404, `{"code":"NOT_FOUND","message":"No such route."}`},
		{"BadBase64", func(e *events.APIGatewayV2HTTPRequest) { e.IsBase64Encoded, e.Body = true, "{not base64" }, 400, `{"code":"INVALID_BODY","message":"The request body could not be read."}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := fixtures.Event(t, "poll-waiting")
			tt.edit(&req)
			resp := invoke(t, h, req)
			if resp.StatusCode != tt.status {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.status)
			}
			assertJSONEqual(t, resp.Body, tt.body)
			if resp.Headers["Cache-Control"] != "no-store" || resp.Headers["Content-Type"] != "application/json; charset=utf-8" {
				t.Errorf("headers %v", resp.Headers)
			}
		})
	}
}

// TestHandlerProfile: the profile's fields go through the admin PUT, come
// back in the counters, are cleared with "", and the notice reaches the
// people waiting; a bad value is INVALID_SETTINGS.
func TestHandlerProfile(t *testing.T) {
	h := checked(t, httpapi.New(queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(clock.NewFake(t0))), httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard)))
	do := func(method, path, body string, hdr ...string) (int, map[string]any) {
		t.Helper()
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer s3cret")
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var m map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &m)
		return w.Code, m
	}
	status, c := do("PUT", "/api/v1/admin/programs/gala", `{"paused":true,"displayName":"Gala","message":"Both nights.","notice":"Saturday is sold out","targetUrl":"https://tickets.example.com/buy"}`)
	if status != 201 || c["displayName"] != "Gala" || c["message"] != "Both nights." || c["notice"] != "Saturday is sold out" || c["targetUrl"] != "https://tickets.example.com/buy" {
		t.Fatalf("PUT = %d %v", status, c)
	}
	_, tok := do("POST", "/api/v1/queues/programs/gala", "")
	if tok["notice"] != "Saturday is sold out" {
		t.Errorf("enter answer %v lacks the notice", tok)
	}
	status, c = do("PUT", "/api/v1/admin/programs/gala", `{"notice":""}`)
	if _, ok := c["notice"]; status != 200 || ok || c["displayName"] != "Gala" {
		t.Errorf("clearing the notice = %d %v; want it absent and the rest kept", status, c)
	}
	_, poll := do("GET", "/api/v1/queues/programs/gala", "", api.HeaderToken, tok["tokenId"].(string))
	if _, ok := poll["notice"]; ok || poll["status"] != "WAITING" {
		t.Errorf("poll after clearing = %v; want WAITING without a notice", poll)
	}
	for _, body := range []string{`{"targetUrl":"http://tickets.example.com/"}`, `{"notice":"` + strings.Repeat("n", 281) + `"}`, `{"displayName":7}`} {
		if status, e := do("PUT", "/api/v1/admin/programs/gala", body); status != 400 || (e["code"] != "INVALID_SETTINGS" && e["code"] != "INVALID_JSON") {
			t.Errorf("PUT %.50s = %d %v, want 400", body, status, e)
		}
	}
}

// TestHandlerIdempotencyKey: a retried enter with the same Idempotency-Key
// answers the same token and ticket, and takes no ticket of its own.
func TestHandlerIdempotencyKey(t *testing.T) {
	svc := queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(clock.NewFake(t0)))
	if _, _, err := svc.PutProgram(context.Background(), "gala", api.ProgramSettings{Paused: new(true)}); err != nil {
		t.Fatal(err)
	}
	h := checked(t, httpapi.NewQueue(svc, httpapi.WithLogger(discard)))
	enter := func(key string) (int, map[string]any) {
		r := httptest.NewRequest("POST", "/api/v1/queues/programs/gala", nil)
		r.Header.Set(api.HeaderIdempotencyKey, key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var m map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &m)
		return w.Code, m
	}
	const key = "5f0c7a9e-3b1d-4c2e-8f6a-9d0b1c2e3f4a"
	s1, a := enter(key)
	s2, b := enter(key)
	s3, c := enter(key + "-other")
	if s1 != 201 || s2 != 200 || a["tokenId"] != b["tokenId"] || a["ticket"] != b["ticket"] {
		t.Errorf("same key: %d %v then %d %v; want 201 then 200 with the same token and ticket", s1, a, s2, b)
	}
	if s3 != 201 || c["ticket"] != 2.0 {
		t.Errorf("another key = %d %v; want ticket 2 (the retry took none)", s3, c)
	}
}

// TestHandlerSettingsQuirks is the regression test of admin input that was
// taken for something else: the zero time cleared the opening, a rate that
// underflows became 0 (manual admission), and bidirectional and other
// invisible controls went into the text people see. Each is 400
// INVALID_SETTINGS and changes nothing; the values beside them still go
// through.
func TestHandlerSettingsQuirks(t *testing.T) {
	h := checked(t, httpapi.New(queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(clock.NewFake(t0))), httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard)))
	do := func(body string) (int, map[string]any) {
		t.Helper()
		r := httptest.NewRequest("PUT", "/api/v1/admin/programs/gala", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer s3cret")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var m map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &m)
		return w.Code, m
	}
	opens := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	if status, c := do(`{"admissionRatePerSecond":2,"displayName":"Gala","opensAt":"` + opens + `"}`); status != 201 || c["opensAt"] == nil {
		t.Fatalf("create = %d %v", status, c)
	}
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"zero time", `{"opensAt":"0001-01-01T00:00:00Z"}`, 400},
		{"before 2000", `{"opensAt":"1999-12-31T23:59:59Z"}`, 400},
		{"Unix epoch", `{"opensAt":"1970-01-01T00:00:00Z"}`, 400},
		{"past 9999 in UTC", `{"opensAt":"9999-12-31T23:00:00-02:00"}`, 400},
		{"rate underflows", `{"admissionRatePerSecond":1e-400}`, 400},
		{"negative rate underflows", `{"admissionRatePerSecond":-1e-400}`, 400},
		{"rate 0.0e-5 is 0", `{"admissionRatePerSecond":0.0e-5}`, 200},
		{"right-to-left override", `{"displayName":"Gala \u202Etxt.exe"}`, 400},
		{"left-to-right mark", `{"displayName":"Gala\u200E"}`, 400},
		{"right-to-left mark", `{"message":"Both\u200F nights"}`, 400},
		{"left-to-right embedding", `{"notice":"\u202Asold out"}`, 400},
		{"pop directional formatting", `{"notice":"sold out\u202C"}`, 400},
		{"first strong isolate", `{"displayName":"\u2068Gala\u2069"}`, 400},
		{"Arabic letter mark", `{"displayName":"\u061CGala"}`, 400},
		{"zero width space", `{"displayName":"Ga\u200Bla"}`, 400},
		{"byte order mark", `{"displayName":"\uFEFFGala"}`, 400},
		{"line separator", `{"message":"Both\u2028nights"}`, 400},
		{"C1 control", `{"displayName":"Gala\u0085"}`, 400},
		{"zero width joiner in an emoji", `{"displayName":"Gala \uD83D\uDC68\u200D\uD83D\uDC69\u200D\uD83D\uDC67"}`, 200},
		{"Arabic text", `{"displayName":"حفل"}`, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, c := do(tc.body)
			if status != tc.status || tc.status == 400 && c["code"] != "INVALID_SETTINGS" {
				t.Fatalf("PUT %s = %d %v, want %d (INVALID_SETTINGS if 400)", tc.body, status, c, tc.status)
			}
			if status == 400 {
				return
			}
			if c["opensAt"] == nil || c["admissionRatePerSecond"] == nil {
				t.Errorf("PUT %s = %v: the opening or the rate went", tc.body, c)
			}
		})
	}
	_, c := do(`{}`)
	if c["opensAt"] == nil || c["displayName"] == nil || strings.ContainsAny(c["displayName"].(string), "\u202E\u200E") {
		t.Errorf("after the refusals: %v; want the opening and the display name kept", c)
	}
}
