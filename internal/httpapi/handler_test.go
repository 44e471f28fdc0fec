package httpapi_test

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/ecdsa"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/challenge"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/edge"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/fixtures"
	"github.com/example/waitingroom/internal/testing/metricstest"
	"github.com/example/waitingroom/internal/tools/localkeys"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/sampleevents"
	"github.com/example/waitingroom/internal/tools/simclock"
	"github.com/example/waitingroom/internal/webpush"
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
	key, err := localkeys.ReadFile(filepath.Join("testdata", "pass-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	i, err := localkeys.FixedIssuer(iss, key)
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
		queue.WithClock(simclock.NewFake(t0)),
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
			`{"programId":"capped-gala","issued":0,"admitted":0,"waiting":0,"admissionRatePerSecond":20,"paused":false,"closed":false,"admissionWindowSeconds":600,"createdAt":"2026-05-19T10:00:00.123Z","maxActiveUsers":50,"noShowSeconds":60,"active":0,"ended":0,"noShows":0,"turnoverPerSecond":0,"turnoverSpreadPerSecond":0,"turnoverBoundPerSecond":0,"heldBack":0}`, nil},
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
			`{"programs":[{"programId":"capped","issued":100,"admitted":50,"waiting":50,"admissionRatePerSecond":20,"paused":false,"closed":false,"admissionWindowSeconds":600,"createdAt":"2026-05-19T09:00:00.123Z","maxActiveUsers":50,"noShowSeconds":60,"active":50,"ended":0,"noShows":0,"turnoverPerSecond":0,"turnoverSpreadPerSecond":0,"turnoverBoundPerSecond":0,"heldBack":0},` +
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
	h := checked(t, httpapi.New(queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(simclock.NewFake(t0))), httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard)))
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
	svc := queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(simclock.NewFake(t0)))
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
	h := checked(t, httpapi.New(queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(simclock.NewFake(t0))), httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard)))
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

// heldFillStore is a memstore whose token fills wait until release is
// closed, and signal held when the first one starts waiting.
type heldFillStore struct {
	*memstore.Store
	once    sync.Once
	held    chan struct{}
	release chan struct{}
}

func (s *heldFillStore) FillToken(ctx context.Context, t queue.Token, claim string) (queue.Token, error) {
	s.once.Do(func() { close(s.held) })
	<-s.release
	return s.Store.FillToken(ctx, t, claim)
}

// TestHandlerEnterInProgress: while an enter with a key is taking its
// ticket, another enter with the key answers 503 ENTER_IN_PROGRESS with
// Retry-After and takes no ticket; once the first has answered 201, a retry
// answers its token with 200.
func TestHandlerEnterInProgress(t *testing.T) {
	store := &heldFillStore{Store: memstore.New(), held: make(chan struct{}), release: make(chan struct{})}
	// The second enter waits for the first's token on this clock, whose
	// Sleep moves it at once: its wait runs out without real time passing.
	svc := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(simclock.NewFake(t0)))
	if _, _, err := svc.PutProgram(context.Background(), "gala", api.ProgramSettings{Paused: new(true)}); err != nil {
		t.Fatal(err)
	}
	h := checked(t, httpapi.NewQueue(svc, httpapi.WithLogger(discard)))
	const key = "in-progress-key-3b1d-4c2e"
	enter := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/api/v1/queues/programs/gala", nil)
		r.Header.Set(api.HeaderIdempotencyKey, key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	body := func(w *httptest.ResponseRecorder) map[string]any {
		var m map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &m)
		return m
	}
	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- enter() }()
	<-store.held

	w := enter()
	if b := body(w); w.Code != 503 || b["code"] != api.CodeEnterInProgress {
		t.Errorf("enter while another with the key takes its ticket = %d %v; want 503 %s", w.Code, b, api.CodeEnterInProgress)
	}
	if s, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q, want whole seconds ≥ 1", w.Header().Get("Retry-After"))
	}
	close(store.release)
	a := <-first
	again := enter()
	if a.Code != 201 || again.Code != 200 || body(a)["tokenId"] != body(again)["tokenId"] || body(again)["ticket"] != 1.0 {
		t.Errorf("first %d %s, retry %d %s; want 201 then 200 with the same token, ticket 1", a.Code, a.Body, again.Code, again.Body)
	}
}

// TestHandlerChallenge walks a program with a proof of work through the
// API: its challenge (never cached), an enter with the solution (201),
// the same proof again (403 CHALLENGE_FAILED), and an unknown program.
func TestHandlerChallenge(t *testing.T) {
	svc := queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(simclock.NewFake(t0)))
	if _, _, err := svc.PutProgram(t.Context(), "gala", api.ProgramSettings{Paused: new(true), ChallengeBits: new(int64(10))}); err != nil {
		t.Fatal(err)
	}
	h := checked(t, httpapi.NewQueue(svc, httpapi.WithLogger(discard)))
	do := func(method, path string, header map[string]string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		for k, v := range header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	w := do("GET", "/api/v1/queues/programs/gala/challenge", nil)
	got := decode(t, w.Body.String())
	c, _ := got["challenge"].(string)
	if w.Code != http.StatusOK || w.Header().Get("Cache-Control") != "no-store" || got["bits"] != 10.0 || len(c) != challenge.EncodedLen || got["expiresAt"] == nil {
		t.Fatalf("challenge: %d %v %s", w.Code, w.Header(), w.Body)
	}
	sol, _, err := challenge.Solve(t.Context(), c, 10)
	if err != nil {
		t.Fatal(err)
	}
	proof := map[string]string{api.HeaderChallenge: c, api.HeaderSolution: sol}
	if w := do("POST", "/api/v1/queues/programs/gala", proof); w.Code != http.StatusCreated {
		t.Errorf("enter with the proof: %d %s, want 201", w.Code, w.Body)
	}
	w = do("POST", "/api/v1/queues/programs/gala", proof)
	if got := decode(t, w.Body.String()); w.Code != http.StatusForbidden || got["code"] != api.CodeChallengeFailed {
		t.Errorf("the proof again: %d %s, want 403 %s", w.Code, w.Body, api.CodeChallengeFailed)
	}
	w = do("GET", "/api/v1/queues/programs/nope/challenge", nil)
	if got := decode(t, w.Body.String()); w.Code != http.StatusNotFound || got["code"] != api.CodeProgramNotFound {
		t.Errorf("challenge of an unknown program: %d %s, want 404", w.Code, w.Body)
	}
}

// TestHandlerFirstAdmission: the poll that first sees an admission answers
// a pass that an independent JOSE implementation (jwx) verifies against
// the JWKS route's document, with the token's claims and, with no
// configured issuer, the URL of the domain API Gateway reports; later
// polls answer the same pass.
func TestHandlerFirstAdmission(t *testing.T) {
	h := newLambda(t, nil)
	resp := invoke(t, h, fixtures.Event(t, "poll-first-admission"))
	pass, _ := decode(t, resp.Body)["admissionPass"].(string)
	if resp.StatusCode != http.StatusOK || pass == "" {
		t.Fatalf("status %d body %s, want 200 with an admissionPass", resp.StatusCode, resp.Body)
	}
	jwks := invoke(t, h, fixtures.Event(t, "jwks"))
	set, err := jwk.Parse([]byte(jwks.Body))
	if err != nil {
		t.Fatalf("JWKS: %v: %s", err, jwks.Body)
	}
	const iss = "https://abc123.execute-api.us-east-1.amazonaws.com"
	tok, err := jwt.ParseString(pass, jwt.WithKeySet(set), jwt.WithValidate(true), jwt.WithIssuer(iss),
		jwt.WithAudience(sampleevents.ProgramID), jwt.WithClock(jwt.ClockFunc(func() time.Time { return t0 })))
	if err != nil {
		t.Fatalf("jwx refuses the pass: %v", err)
	}
	type claims struct {
		Sub           string
		IAT, NBF, EXP time.Time
		Ticket        float64
	}
	var got claims
	got.Sub, _ = tok.Subject()
	got.IAT, _ = tok.IssuedAt()
	got.NBF, _ = tok.NotBefore()
	got.EXP, _ = tok.Expiration()
	if err := tok.Get("ticket", &got.Ticket); err != nil {
		t.Error(err)
	}
	admitted := t0.Truncate(time.Second)
	want := claims{Sub: sampleevents.AdmitNowToken, IAT: admitted, NBF: admitted, EXP: admitted.Add(10 * time.Minute), Ticket: 450}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}

	again := invoke(t, h, fixtures.Event(t, "poll-first-admission"))
	if p, _ := decode(t, again.Body)["admissionPass"].(string); p != pass {
		t.Errorf("second poll's pass differs from the first: the pass is signed once and kept")
	}
}

// TestHandlerIssuerNotFromHost: off API Gateway, a pass's issuer is never
// taken from the Host header, which the client writes; with none
// configured, nothing is signed and nothing recorded (503).
func TestHandlerIssuerNotFromHost(t *testing.T) {
	h := checked(t, httpapi.New(newService(t), httpapi.BearerAuth("s"), httpapi.WithLogger(discard), httpapi.WithPasses(passIssuer(t, ""))))
	r := httptest.NewRequest(http.MethodGet, "http://evil.example/api/v1/queues/programs/demo", nil)
	r.Header.Set(api.HeaderToken, sampleevents.AdmitNowToken)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusServiceUnavailable || decodeCode(w.Body.String()) != "PASS_UNAVAILABLE" || w.Header().Get("Retry-After") == "" {
		t.Errorf("%d %s, want 503 PASS_UNAVAILABLE with Retry-After", w.Code, w.Body)
	}
}

// brokenKey is a signing key whose public half cannot be read.
type brokenKey struct{}

func (brokenKey) PublicKey(context.Context) (*ecdsa.PublicKey, error) {
	return nil, errors.New("kms:GetPublicKey: AccessDeniedException")
}
func (brokenKey) PrivateKey(context.Context) (*ecdsa.PrivateKey, error) {
	return nil, errors.New("kms:Decrypt: AccessDeniedException")
}

// TestHandlerJWKSErrors: the JWKS route answers the API's JSON errors: 503
// KEYS_UNAVAILABLE with Retry-After when the key cannot be read, 404 on a
// handler that signs no passes.
func TestHandlerJWKSErrors(t *testing.T) {
	broken, err := localkeys.FixedIssuer("https://queue.example.com", brokenKey{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		opts       []httpapi.Option
		wantStatus int
		wantCode   string
	}{
		{"KeyUnreadable", []httpapi.Option{httpapi.WithPasses(broken)}, 503, "KEYS_UNAVAILABLE"},
		{"NoPasses", nil, 404, "NOT_FOUND"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := checked(t, httpapi.NewQueue(newService(t), append(tt.opts, httpapi.WithLogger(discard))...))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, api.JWKSPath, nil))
			if w.Code != tt.wantStatus || decodeCode(w.Body.String()) != tt.wantCode || w.Header().Get("Cache-Control") != "no-store" {
				t.Errorf("%d %s (Cache-Control %q), want %d %s, no-store", w.Code, w.Body, w.Header().Get("Cache-Control"), tt.wantStatus, tt.wantCode)
			}
			if (w.Header().Get("Retry-After") != "") != (tt.wantStatus == 503) {
				t.Errorf("Retry-After %q on a %d", w.Header().Get("Retry-After"), w.Code)
			}
		})
	}
}

// answer is what a client of the local server sees.
type answer struct {
	status int
	header http.Header
	body   string
}

// serve starts the API behind net/http, as the local server runs it, and
// returns a function that sends one request to it.
func serve(t *testing.T) func(method, path string, hdr http.Header, body string) answer {
	t.Helper()
	srv := httptest.NewServer(newHandler(t, httpapi.BearerAuth("s3cret")))
	t.Cleanup(srv.Close)
	return func(method, path string, hdr http.Header, body string) answer {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = hdr.Clone()
		if req.Header == nil {
			req.Header = http.Header{}
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Header, string(b)}
	}
}

// headersTooLarge is the answer to a request line and headers over
// MaxHeaderBytes.
const headersTooLarge = `{"code":"HEADERS_TOO_LARGE","message":"The request line and headers must be at most 16384 bytes."}`

// withHeader is hdr with name set to value.
func withHeader(hdr http.Header, name, value string) http.Header {
	out := hdr.Clone()
	out.Set(name, value)
	return out
}

var (
	admin   = http.Header{"Authorization": {"Bearer s3cret"}}
	waiting = http.Header{"X-Queue-Token": {"waitingTokenFixture001"}}
)

func TestServeHTTP(t *testing.T) {
	do := serve(t)
	tests := []struct {
		name, method, path string
		hdr                http.Header
		body               string
		wantStatus         int
		wantBody           string // exact JSON; "" for none
		wantHeader         map[string]string
	}{
		{"Poll", "GET", "/api/v1/queues/programs/demo", waiting, "", 200,
			`{"tokenId":"waitingTokenFixture001","status":"WAITING","ticket":734,"issuedAt":"2026-05-19T09:30:00.123Z","position":234,"retryAfterMs":` + firstRetryMs(234) + `,"estimatedWaitMs":23400}`,
			map[string]string{"Retry-After": "6", "Cache-Control": "no-store"}},
		// A request line and headers up to MaxHeaderBytes pass; past it,
		// 431 (17 KiB is within net/http's own slack: the handler answers).
		{"HeadersUnderTheLimit", "DELETE", "/api/v1/queues/programs/demo/session", http.Header{"X-Admission-Pass": {strings.Repeat("a", 15<<10)}}, "", 403,
			`{"code":"INVALID_PASS","message":"The admission pass is not one this waiting room handed out for this program."}`, nil},
		{"HeadersTooLarge", "GET", "/api/v1/queues/programs/demo", withHeader(waiting, "X-Big", strings.Repeat("a", 17<<10)), "", 431, headersTooLarge, nil},
		{"AuthorizationTooLarge", "PUT", "/api/v1/admin/programs/demo", http.Header{"Authorization": {"Bearer " + strings.Repeat("a", 17<<10)}}, `{"paused":true}`, 431, headersTooLarge, nil},
		{"PassTooLarge", "DELETE", "/api/v1/queues/programs/demo/session", http.Header{"X-Admission-Pass": {strings.Repeat("a", 17<<10)}}, "", 431, headersTooLarge, nil},
		{"TooLarge", "PUT", "/api/v1/admin/programs/demo", admin, `{"admissionRatePerSecond": 1` + strings.Repeat(" ", httpapi.MaxBodyBytes) + `}`, 413,
			`{"code":"PAYLOAD_TOO_LARGE","message":"The body must be at most 16384 bytes."}`, nil},
		{"TooLargeOnAnyRoute", "POST", "/api/v1/queues/programs/demo", nil, strings.Repeat(" ", httpapi.MaxBodyBytes+1), 413,
			`{"code":"PAYLOAD_TOO_LARGE","message":"The body must be at most 16384 bytes."}`, nil},
		{"EscapedProgramID", "GET", "/api/v1/queues/programs/de%2Fmo", waiting, "", 400,
			`{"code":"INVALID_PROGRAM_ID","message":"The program id must be 1 to 64 letters, digits, '-' or '_', starting with a letter or digit."}`, nil},
		{"AdminSecret", "POST", "/api/v1/admin/programs/demo/admissions", admin, `{"count":2}`, 200,
			`{"programId":"demo","issued":1000,"admitted":502,"waiting":498,"admissionRatePerSecond":10,"paused":false,"closed":false,"admissionWindowSeconds":600,"createdAt":"2026-05-19T09:00:00.123Z"}`, nil},
		// Two values must not pass for one.
		{"TwoTokens", "GET", "/api/v1/queues/programs/demo", http.Header{"X-Queue-Token": {"waitingTokenFixture001", "admittedTokenFixture01"}}, "", 400,
			`{"code":"INVALID_TOKEN","message":"The queue token is malformed."}`, nil},
		// ServeMux would answer these itself, in text: a redirect to the
		// clean path, its own 404 and 405.
		{"DoubleSlash", "GET", "//api/v1/queues/programs/demo", nil, "", 404, `{"code":"NOT_FOUND","message":"No such route."}`, nil},
		{"DotSegment", "GET", "/api/v1/admin/programs/../../queues/programs/demo", nil, "", 404, `{"code":"NOT_FOUND","message":"No such route."}`, nil},
		{"TrailingSlash", "GET", "/api/v1/queues/programs/demo/", nil, "", 404, `{"code":"NOT_FOUND","message":"No such route."}`, nil},
		{"UnknownRoute", "GET", "/favicon.ico", nil, "", 404, `{"code":"NOT_FOUND","message":"No such route."}`, nil},
		{"MethodNotAllowed", "PATCH", "/api/v1/admin/programs/demo/admissions", nil, "", 405,
			`{"code":"METHOD_NOT_ALLOWED","message":"Allowed methods: POST."}`, map[string]string{"Allow": "POST"}},
		{"Head", "HEAD", "/api/v1/queues/programs/demo", nil, "", 405, "", map[string]string{"Allow": "DELETE, GET, POST"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := do(tt.method, tt.path, tt.hdr, tt.body)
			if got.status != tt.wantStatus {
				t.Errorf("status = %d, want %d (body %s)", got.status, tt.wantStatus, got.body)
			}
			assertJSONEqual(t, got.body, tt.wantBody)
			for k, want := range tt.wantHeader {
				if g := got.header.Get(k); g != want {
					t.Errorf("header %s = %q, want %q", k, g, want)
				}
			}
			if got.header.Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control = %q, want no-store on every answer", got.header.Get("Cache-Control"))
			}
		})
	}
}

// TestDecodeBody holds the admin bodies to the documented JSON rules: one
// object, keys spelt exactly and at most once, no null, no unknown key
// (named in at most 64 characters, a nested one by its path), a wrong
// type named as the JSON type wanted, -0 read as 0.
func TestDecodeBody(t *testing.T) {
	long := strings.Repeat("x", 15000)
	tests := []struct {
		name, path, body string
		wantStatus       int
		wantBody         string // exact JSON
	}{
		{"NullBody", "/api/v1/admin/programs/demo", `null`, 400, `{"code":"INVALID_JSON","message":"The body must be a JSON object."}`},
		{"Array", "/api/v1/admin/programs/demo", `[{"paused":true}]`, 400, `{"code":"INVALID_JSON","message":"The body must be a JSON object."}`},
		{"Empty", "/api/v1/admin/programs/demo", ` `, 400, `{"code":"INVALID_JSON","message":"A JSON object body is required."}`},
		{"TwoObjects", "/api/v1/admin/programs/demo", `{} {}`, 400, `{"code":"INVALID_JSON","message":"The body must hold a single JSON object."}`},
		{"Syntax", "/api/v1/admin/programs/demo", `{"paused" true}`, 400, `{"code":"INVALID_JSON","message":"The body is not valid JSON (at byte 11)."}`},
		{"KeyCase", "/api/v1/admin/programs/demo", `{"ADMISSIONRATEPERSECOND": 5}`, 400, `{"code":"INVALID_JSON","message":"Unknown field \"ADMISSIONRATEPERSECOND\"."}`},
		{"DuplicateKey", "/api/v1/admin/programs/demo", `{"paused": true, "paused": false}`, 400, `{"code":"INVALID_JSON","message":"Field \"paused\" is repeated."}`},
		{"NullField", "/api/v1/admin/programs/demo", `{"paused": null}`, 400, `{"code":"INVALID_JSON","message":"Field \"paused\" must be a boolean."}`},
		{"NullTranslation", "/api/v1/admin/programs/demo", `{"translations": {"ja": null}}`, 400, `{"code":"INVALID_JSON","message":"Field \"translations.ja\" must be an object of texts (displayName, message, notice); to remove a language, set each of its texts to \"\"."}`},
		{"TranslationNotAnObject", "/api/v1/admin/programs/demo", `{"translations": {"ja": "x"}}`, 400, `{"code":"INVALID_JSON","message":"Field \"translations.ja\" must be an object of texts (displayName, message, notice); to remove a language, set each of its texts to \"\"."}`},
		{"NullTranslations", "/api/v1/admin/programs/demo", `{"translations": null}`, 400, `{"code":"INVALID_JSON","message":"Field \"translations\" must be an object."}`},
		{"NestedWrongType", "/api/v1/admin/programs/demo", `{"translations": {"ja": {"notice": 5}}}`, 400, `{"code":"INVALID_JSON","message":"Field \"translations.ja.notice\" must be a string."}`},
		{"NestedUnknownField", "/api/v1/admin/programs/demo", `{"translations": {"ja": {"title": "x"}}}`, 400, `{"code":"INVALID_JSON","message":"Unknown field \"translations.ja.title\"."}`},
		{"LongUnknownField", "/api/v1/admin/programs/demo", `{"` + long + `": 1}`, 400, `{"code":"INVALID_JSON","message":"Unknown field \"` + strings.Repeat("x", 64) + `…\"."}`},
		{"MinusZero", "/api/v1/admin/programs/demo", `{"admissionRatePerSecond": -0}`, 200,
			`{"programId":"demo","issued":1000,"admitted":500,"waiting":500,"admissionRatePerSecond":0,"paused":false,"closed":false,"admissionWindowSeconds":600,"createdAt":"2026-05-19T09:00:00.123Z"}`},
		{"FractionalCount", "/api/v1/admin/programs/demo/admissions", `{"count": 1.5}`, 400, `{"code":"INVALID_JSON","message":"Field \"count\" must be a number."}`},
		{"MissingCount", "/api/v1/admin/programs/demo/admissions", `{}`, 400, `{"code":"INVALID_COUNT","message":"count is required."}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := "PUT"
			if strings.HasSuffix(tt.path, "/admissions") {
				method = "POST"
			}
			got := serve(t)(method, tt.path, admin, tt.body)
			if got.status != tt.wantStatus {
				t.Errorf("status = %d, want %d (body %s)", got.status, tt.wantStatus, got.body)
			}
			assertJSONEqual(t, got.body, tt.wantBody)
			if strings.Contains(got.body, ":-0") {
				t.Errorf("body %s echoes -0", got.body)
			}
		})
	}
}

// TestUnreadableBody: a body that fails while read (the client's stream
// broke, or stopped and the server's read deadline passed) gets
// INVALID_BODY.
func TestUnreadableBody(t *testing.T) {
	h := newHandler(t, httpapi.BearerAuth("s3cret"))
	r := httptest.NewRequest("PUT", "/api/v1/admin/programs/demo", io.MultiReader(strings.NewReader(`{"paused":`), errReader{}))
	r.Header = admin.Clone()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusBadRequest {
		t.Errorf("status = %d, want 400", w.Code)
	}
	assertJSONEqual(t, w.Body.String(), `{"code":"INVALID_BODY","message":"The request body could not be read."}`)
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// decodeCode returns the code of an error body, "" for anything else.
func decodeCode(body string) string {
	var e struct{ Code string }
	_ = json.Unmarshal([]byte(body), &e)
	return e.Code
}

// TestRoutes checks httpapi.Routes against what the handler does: each
// listed route is served, and any other method on a listed path (HEAD
// included, which a GET pattern would match) gets 405 with exactly the
// listed methods in Allow.
func TestRoutes(t *testing.T) {
	h := newLambda(t, nil)
	methods := map[string][]string{} // path -> methods listed for it
	for _, r := range httpapi.Routes {
		methods[r.Path] = append(methods[r.Path], r.Method)
	}
	call := func(method, path string) events.APIGatewayV2HTTPResponse {
		t.Helper()
		req := events.APIGatewayV2HTTPRequest{
			RawPath: strings.NewReplacer("{programId}", "demo", "{keyId}", kid1).Replace(path),
			Headers: map[string]string{},
		}
		req.RequestContext.HTTP.Method = method
		req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::123456789012:user/ops"},
		}
		return invoke(t, h, req)
	}

	for _, r := range httpapi.Routes {
		t.Run(r.Method+" "+r.Path, func(t *testing.T) {
			resp := call(r.Method, r.Path)
			if code := decodeCode(resp.Body); resp.StatusCode == http.StatusMethodNotAllowed || code == "NOT_FOUND" {
				t.Errorf("status %d body %s: the handler does not serve this listed route", resp.StatusCode, resp.Body)
			}
		})
	}
	for path, listed := range methods {
		for _, method := range []string{http.MethodPatch, http.MethodHead, http.MethodOptions} {
			if slices.Contains(listed, method) {
				continue
			}
			t.Run(method+" "+path, func(t *testing.T) {
				resp := call(method, path)
				slices.Sort(listed)
				if got, want := resp.StatusCode, http.StatusMethodNotAllowed; got != want {
					t.Errorf("status = %d, want %d (body %s)", got, want, resp.Body)
				}
				if got, want := resp.Headers["Allow"], strings.Join(listed, ", "); got != want {
					t.Errorf("Allow = %q, want %q (the methods Routes lists)", got, want)
				}
				if code := decodeCode(resp.Body); code != "METHOD_NOT_ALLOWED" {
					t.Errorf("body %s, want code METHOD_NOT_ALLOWED", resp.Body)
				}
			})
		}
	}
}

// TestObserver walks a program through the handler and checks what each
// answer told the metrics: its route's op, status and code, the token's
// status and delays, the first sighting of an admission, the queue length
// where the answer knows it.
func TestObserver(t *testing.T) {
	c := simclock.NewFake(t0)
	svc := queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(c), queue.WithRand(rand.New(rand.NewPCG(seed, seed))))
	rec := &metricstest.Recorder{}
	h := checked(t, httpapi.New(svc, httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard), httpapi.WithObserver(rec)))
	do := func(method, path, token, auth, body string) map[string]any {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		if token != "" {
			req.Header.Set(api.HeaderToken, token)
		}
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		var m map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &m)
		return m
	}
	const queuePath, adminPath = "/api/v1/queues/programs/gala", "/api/v1/admin/programs/gala"
	ms := func(m map[string]any, key string) time.Duration {
		f, _ := m[key].(float64)
		return time.Duration(f) * time.Millisecond
	}

	do("PUT", adminPath, "", "s3cret", `{"admissionRatePerSecond": 1, "paused": true}`)
	do("PUT", adminPath, "", "", `{"paused": false}`)
	first := do("POST", queuePath, "", "", "")
	second := do("POST", queuePath, "", "", "")
	poll := do("GET", queuePath, first["tokenId"].(string), "", "")
	do("GET", "/nowhere", "", "", "")
	do("PATCH", queuePath, "", "", "")
	do("POST", adminPath+"/admissions", "", "s3cret", `{"count": 1}`)
	c.Advance(time.Second)
	do("GET", queuePath, first["tokenId"].(string), "", "")
	do("GET", queuePath, first["tokenId"].(string), "", "")
	do("DELETE", queuePath, first["tokenId"].(string), "", "")
	do("POST", "/api/v1/queues/programs/nope", "", "", "")

	if poll["status"] != "WAITING" || ms(poll, "retryAfterMs") <= 0 {
		t.Fatalf("poll answered %v", poll)
	}
	want := []metrics.Request{
		{Op: metrics.OpAdmin, Method: "PUT", Status: 201, ProgramID: "gala", WaitingKnown: true},
		{Op: metrics.OpAdmin, Method: "PUT", Status: 401, Code: "UNAUTHORIZED", ProgramID: "gala"},
		{Op: metrics.OpEnter, Method: "POST", Status: 201, ProgramID: "gala", TokenStatus: "WAITING", RetryAfter: ms(first, "retryAfterMs"), Waiting: 1, WaitingKnown: true, Ticket: 1, Position: 1},
		{Op: metrics.OpEnter, Method: "POST", Status: 201, ProgramID: "gala", TokenStatus: "WAITING", RetryAfter: ms(second, "retryAfterMs"), Waiting: 2, WaitingKnown: true, Ticket: 2, Position: 2},
		{Op: metrics.OpPoll, Method: "GET", Status: 200, ProgramID: "gala", TokenStatus: "WAITING", RetryAfter: ms(poll, "retryAfterMs"), Ticket: 1, Position: 1},
		{Op: metrics.OpOther, Method: "GET", Status: 404, Code: "NOT_FOUND"},
		{Op: metrics.OpOther, Method: "PATCH", Status: 405, Code: "METHOD_NOT_ALLOWED", ProgramID: "gala"},
		{Op: metrics.OpAdmin, Method: "POST", Status: 200, ProgramID: "gala", Waiting: 1, WaitingKnown: true},
		{Op: metrics.OpPoll, Method: "GET", Status: 200, ProgramID: "gala", TokenStatus: "ADMITTED", Admitted: true},
		{Op: metrics.OpPoll, Method: "GET", Status: 200, ProgramID: "gala", TokenStatus: "ADMITTED"},
		{Op: metrics.OpLeave, Method: "DELETE", Status: 204, ProgramID: "gala"},
		{Op: metrics.OpEnter, Method: "POST", Status: 404, Code: "PROGRAM_NOT_FOUND", ProgramID: "nope"},
	}
	if diff := cmp.Diff(want, rec.Requests(), cmpopts.IgnoreFields(metrics.Request{}, "Duration")); diff != "" {
		t.Errorf("observed (-want +got):\n%s", diff)
	}
}

// TestObserverEstimatedWait: a WAITING answer on a program that admits
// tells the metrics the estimated wait it told the person.
func TestObserverEstimatedWait(t *testing.T) {
	rec := &metricstest.Recorder{}
	h := checked(t, httpapi.NewQueue(newService(t), httpapi.WithLogger(discard), httpapi.WithObserver(rec)))
	req := httptest.NewRequest("GET", "/api/v1/queues/programs/demo", nil)
	req.Header.Set(api.HeaderToken, "waitingTokenFixture001")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	var body struct{ EstimatedWaitMs, RetryAfterMs int64 }
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != http.StatusOK || body.EstimatedWaitMs <= 0 {
		t.Fatalf("%d %s: want a WAITING answer with an estimated wait", w.Code, w.Body)
	}
	if len(rec.Requests()) != 1 {
		t.Fatalf("observed %d requests, want 1", len(rec.Requests()))
	}
	got := rec.Requests()[0]
	if got.EstimatedWait != time.Duration(body.EstimatedWaitMs)*time.Millisecond || got.RetryAfter != time.Duration(body.RetryAfterMs)*time.Millisecond {
		t.Errorf("observed wait %s, retry %s; answered %d ms, %d ms", got.EstimatedWait, got.RetryAfter, body.EstimatedWaitMs, body.RetryAfterMs)
	}
}

// brokenStore fails every call with an error whose text must never reach a
// client.
type brokenStore struct{ queue.Store }

var errSecret = errors.New("dial tcp 10.0.0.12:443: arn:aws:dynamodb:eu-west-1:123456789012:table/secret")

func (brokenStore) GetToken(context.Context, string) (queue.Token, error) {
	return queue.Token{}, errSecret
}
func (brokenStore) IssueTicket(context.Context, string, time.Time) (admission.Program, error) {
	return admission.Program{}, errSecret
}
func (brokenStore) GetProgram(context.Context, string) (admission.Program, error) {
	return admission.Program{}, errSecret
}
func (brokenStore) ListPrograms(context.Context, string, int) ([]string, bool, error) {
	return nil, false, errSecret
}

func TestHandlerStoreFault(t *testing.T) {
	var logs bytes.Buffer
	h := checkedLambda(t, httpapi.Lambda(httpapi.New(queue.NewService(brokenStore{memstore.New()}, polling.DefaultTiers()),
		httpapi.IAMAuth(), httpapi.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))))
	for _, event := range []string{"enter", "challenge", "poll-waiting", "leave", "session-end", "admin-session-release", "admin-get-program", "admin-put-program", "admin-admit",
		"admin-list-programs", "admin-delete-program", "admin-history", "admin-token-get", "admin-token-revoke", "admin-passes"} {
		t.Run(event, func(t *testing.T) {
			resp := invoke(t, h, fixtures.Event(t, event))
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("status = %d, want 503", resp.StatusCode)
			}
			if resp.Headers["Retry-After"] == "" {
				t.Error("no Retry-After on a 503")
			}
			if strings.Contains(resp.Body, "10.0.0.12") || strings.Contains(resp.Body, "arn:") {
				t.Errorf("body leaks internals: %s", resp.Body)
			}
			assertJSONEqual(t, resp.Body, `{"code":"STORE_UNAVAILABLE","message":"The queue is briefly unavailable; retry shortly."}`)
		})
	}
	if !strings.Contains(logs.String(), "10.0.0.12") || !strings.Contains(logs.String(), `"requestId":"JKJaXmPLvHcESHA="`) {
		t.Errorf("store faults must be logged with their cause and request id; logs: %s", logs.String())
	}
}

// panickyStore panics, as a bug would.
type panickyStore struct{ queue.Store }

func (panickyStore) GetToken(context.Context, string) (queue.Token, error) { panic("boom") }

func TestHandlerRecoversPanic(t *testing.T) {
	var logs bytes.Buffer
	h := checkedLambda(t, httpapi.Lambda(httpapi.NewQueue(queue.NewService(panickyStore{memstore.New()}, polling.DefaultTiers()),
		httpapi.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))))
	resp := invoke(t, h, fixtures.Event(t, "poll-waiting"))
	if resp.StatusCode != 500 {
		t.Fatalf("status %d, want 500", resp.StatusCode)
	}
	assertJSONEqual(t, resp.Body, `{"code":"INTERNAL","message":"Internal error."}`)
	if !strings.Contains(logs.String(), "boom") || !strings.Contains(logs.String(), `"requestId":"JKJaXmPLvHcESHA="`) {
		t.Errorf("a panic must be logged with the request id; logs: %s", logs.String())
	}
}

// routePath is r's path for program demo (and token
// waitingTokenFixture001, key kid1).
func routePath(r httpapi.Route) string {
	return strings.NewReplacer("{programId}", "demo", "{tokenId}", "waitingTokenFixture001", "{keyId}", kid1).Replace(r.Path)
}

// sendTo sends one request to h and returns its status and error code.
func sendTo(h http.Handler, method, path string, hdr http.Header, body string) (int, string) {
	w := record(h, method, path, hdr, body)
	return w.Code, decodeCode(w.Body.String())
}

// panicPushStore panics on every call, push ones too, as a bug would.
type panicPushStore struct {
	queue.Store
	queue.PushStore
	queue.HandoffStore
}

// pushBody is a valid push subscription on push.example, as a page sends it.
func pushBody(t *testing.T) string {
	t.Helper()
	k, err := ecdh.P256().GenerateKey(crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return fmt.Sprintf(`{"endpoint":"https://push.example/s/1","expirationTime":null,"keys":{"p256dh":%q,"auth":%q}}`, enc(k.PublicKey().Bytes()), enc(make([]byte, 16)))
}

// panicKV is an edge store that panics on every call.
type panicKV struct{}

func (panicKV) Get(context.Context, string) (string, error) { panic("boom") }
func (panicKV) Put(context.Context, string, string) error   { panic("boom") }

// panicKey panics when asked for its public half.
type panicKey struct{ brokenKey }

func (panicKey) PublicKey(context.Context) (*ecdsa.PublicKey, error) { panic("boom") }

// TestEveryRouteAnswers drives each route through the answers every route
// can give: 413 to a body announced too large, 431 to headers over
// MaxHeaderBytes, 500 to a bug, 400
// INVALID_BODY to a Lambda event whose body is not base64, and on admin
// routes 401 and 403 without valid credentials.
func TestEveryRouteAnswers(t *testing.T) {
	keys, err := localkeys.FixedIssuer("https://queue.example.com", panicKey{})
	if err != nil {
		t.Fatal(err)
	}
	fine := checked(t, httpapi.New(newService(t), httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard), httpapi.WithPasses(passIssuer(t, ""))))
	// A keyring whose store panicked stays stuck on its read: one a route.
	buggyFor := func() http.Handler {
		return checked(t, httpapi.New(queue.NewService(panicPushStore{}, polling.DefaultTiers(), queue.WithPush(webpush.Hosts{"push.example"})), httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard), httpapi.WithPasses(keys),
			httpapi.WithKeyring(admissionpass.NewKeyring(panicKeyStore{}, &seqWrapper{})),
			httpapi.WithEdge(edge.NewPublisher(panicKV{}, edge.DefaultSite(), nil, clock.Real{}))))
	}
	lambda := checkedLambda(t, httpapi.Lambda(httpapi.New(newService(t), httpapi.IAMAuth(), httpapi.WithLogger(discard), httpapi.WithPasses(passIssuer(t, "")))))
	admin := http.Header{"Authorization": {"Bearer s3cret"}, api.HeaderToken: {"waitingTokenFixture001"}, api.HeaderAdmissionPass: {sampleevents.SessionPass},
		api.HeaderIdempotencyKey: {"every-route-answers-key"}}
	bodyOf := map[string]string{http.MethodPut: `{"paused":true}`, http.MethodPost: `{"count":1}`}
	for _, r := range httpapi.Routes {
		t.Run(r.Method+" "+r.Path, func(t *testing.T) {
			path := routePath(r)
			if status, code := sendTo(fine, r.Method, path, admin, strings.Repeat(" ", httpapi.MaxBodyBytes+1)); status != 413 || code != api.CodePayloadTooLarge {
				t.Errorf("too large: %d %s", status, code)
			}
			big := admin.Clone()
			big.Set("X-Big", strings.Repeat("a", httpapi.MaxHeaderBytes))
			if status, code := sendTo(fine, r.Method, path, big, ""); status != 431 || code != api.CodeHeadersTooLarge {
				t.Errorf("headers too large: %d %s", status, code)
			}
			body := ""
			if r.Admin {
				body = bodyOf[r.Method]
			}
			switch r.Path {
			case api.PassesPath:
				body = `{"count":1,"validSeconds":60}`
			case api.EdgeKeysPath:
				body = `{}`
			case api.PushPath:
				body = pushBody(t)
			case api.HandoffPath:
				body = `{"page":"https://queue.example.com/waiting-room/demo"}`
			case api.RedeemPath:
				body = `{"code":"K7QM-3XWD-9P2H-RT5A"}`
			}
			if status, code := sendTo(buggyFor(), r.Method, path, admin, body); status != 500 || code != api.CodeInternal {
				t.Errorf("a bug: %d %s", status, code)
			}
			ev := events.APIGatewayV2HTTPRequest{RawPath: path, IsBase64Encoded: true, Body: "{not base64"}
			ev.RequestContext.HTTP.Method = r.Method
			if resp := invoke(t, lambda, ev); resp.StatusCode != 400 || decodeCode(resp.Body) != api.CodeInvalidBody {
				t.Errorf("body not base64: %d %s", resp.StatusCode, resp.Body)
			}
			if !r.Admin {
				return
			}
			if status, code := sendTo(fine, r.Method, path, nil, body); status != 401 || code != api.CodeUnauthorized {
				t.Errorf("no credentials: %d %s", status, code)
			}
			if status, code := sendTo(fine, r.Method, path, http.Header{"Authorization": {"Bearer nope"}}, body); status != 403 || code != api.CodeForbidden {
				t.Errorf("wrong credentials: %d %s", status, code)
			}
		})
	}
}

// TestConflictAnswers drives the answers of programs in a state that
// refuses the request: unknown tokens and programs, an opening not yet
// reached or too near to move, a shuffle asked too late, a change while
// another is pending.
func TestConflictAnswers(t *testing.T) {
	c := simclock.NewFake(t0)
	h := checked(t, httpapi.New(queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(c), queue.WithProgramCache(5*time.Second)), httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard)))
	admin := http.Header{"Authorization": {"Bearer s3cret"}}
	opens := t0.Add(48 * time.Hour).Format(time.RFC3339)
	steps := []struct {
		name, method, path string
		hdr                http.Header
		body               string
		advance            time.Duration
		status             int
		code               string
	}{
		{"create with an opening", "PUT", "/api/v1/admin/programs/sale", admin, `{"opensAt":"` + opens + `"}`, 0, 201, ""},
		{"admit before the opening", "POST", "/api/v1/admin/programs/sale/admissions", admin, `{"count":1}`, 0, 409, api.CodeNotOpen},
		{"admit in an unknown program", "POST", "/api/v1/admin/programs/nobody/admissions", admin, `{"count":1}`, 0, 404, api.CodeProgramNotFound},
		{"leave with an unknown token", "DELETE", "/api/v1/queues/programs/sale", http.Header{api.HeaderToken: {"AAAAAAAAAAAAAAAAAAAAAA"}}, "", 0, 404, api.CodeTokenNotFound},
		{"enter", "POST", "/api/v1/queues/programs/sale", nil, "", 0, 201, ""},
		{"shuffle once people entered", "PUT", "/api/v1/admin/programs/sale", admin, `{"shuffleAtOpen":true}`, 0, 409, api.CodeInvalidSettings},
		{"move the opening too late", "PUT", "/api/v1/admin/programs/sale", admin, `{"opensAt":"` + t0.Add(72*time.Hour).Format(time.RFC3339) + `"}`, 48*time.Hour - time.Second, 409, api.CodeNotOpen},
		{"change", "PUT", "/api/v1/admin/programs/sale", admin, `{"paused":true}`, 0, 200, ""},
		{"change while one is pending", "PUT", "/api/v1/admin/programs/sale", admin, `{"paused":false}`, 0, 503, api.CodeBusy},
	}
	for _, s := range steps {
		c.Advance(s.advance)
		if status, code := sendTo(h, s.method, s.path, s.hdr, s.body); status != s.status || code != s.code {
			t.Errorf("%s: %d %s, want %d %s", s.name, status, code, s.status, s.code)
		}
	}
}

// FuzzHandler throws arbitrary methods, paths, tokens, authorization
// headers and bodies at the handler, both through the Lambda adapter and
// directly (ServeHTTP, as the local server calls it): it must never panic,
// never return an error, always answer JSON (or nothing on 204), and never
// blame itself (5xx) for what a client sent. Seeds come from events/.
func FuzzHandler(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "events", "*.json"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		var req events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(b, &req); err != nil {
			f.Fatal(err)
		}
		f.Add(req.RequestContext.HTTP.Method, req.RawPath, req.Headers["x-queue-token"], req.Headers["authorization"], req.Body, req.RequestContext.Authorizer != nil)
	}
	f.Add("GET", "/api/v1/queues/programs/%zz", "", "", "", false)
	f.Add("PUT", "/api/v1/admin/programs/demo", "", "Bearer s3cret", `{"admissionRatePerSecond":1e309}`, false)
	f.Add("POST", "/api/v1/admin/programs/demo/admissions", "", "Bearer s3cret", `{"count":1.5}`, false)
	f.Add("POST", "//api/v1//queues/programs/demo/", "waitingTokenFixture001", "", "", false)
	f.Add("PUT", "/api/v1/admin/programs/demo", "", "Bearer s3cret", `{"paused":true,"paused":false}`, true)
	f.Add("PUT", "/api/v1/admin/programs/demo", "", "Bearer s3cret", `null`, true)
	f.Add("GET", "/api/v1/admin/programs/../queues/programs/demo", "", "", "", false)
	f.Add("GE T", "/", "", "", "", false)
	f.Add("DELETE", "/api/v1/admin/keys/"+kid1, "", "Bearer s3cret", "", false)
	f.Add("DELETE", "/api/v1/admin/keys/%2e%2e", "", "Bearer s3cret", "", true)

	// As deployed: the local server names its issuer; on Lambda, API
	// Gateway always gives the domain, whose URL the passes then name.
	svc := newServiceIssuing(f, passIssuer(f, "http://127.0.0.1:3000"))
	ring := admissionpass.NewKeyring(memstore.New(), &seqWrapper{})
	lambda := httpapi.Lambda(httpapi.New(svc, httpapi.IAMAuth(), httpapi.WithLogger(discard), httpapi.WithPasses(passIssuer(f, "")), httpapi.WithKeyring(ring)))
	direct := httpapi.New(svc, httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard), httpapi.WithPasses(passIssuer(f, "")), httpapi.WithKeyring(ring))
	f.Fuzz(func(t *testing.T, method, path, token, auth, body string, iam bool) {
		req := events.APIGatewayV2HTTPRequest{
			Version: "2.0", RouteKey: "$default", RawPath: path,
			Headers: map[string]string{"x-queue-token": token, "authorization": auth},
			Body:    body,
		}
		req.RequestContext.HTTP.Method = method
		req.RequestContext.RequestID = "fuzz"
		if iam {
			req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::1:user/x"}}
		}
		resp := invoke(t, lambda, req)
		checkAnswer(t, "lambda", method, path, body, resp.StatusCode, resp.Body)

		// The same request as net/http would hand it to the local server,
		// when it is one net/http would accept.
		r, err := http.NewRequest(method, "http://localhost"+path, strings.NewReader(body))
		if err != nil || !strings.HasPrefix(path, "/") {
			return
		}
		r.Header.Set(api.HeaderToken, token)
		r.Header.Set("Authorization", auth)
		w := httptest.NewRecorder()
		direct.ServeHTTP(w, r)
		b, _ := io.ReadAll(w.Result().Body)
		checkAnswer(t, "ServeHTTP", method, path, body, w.Code, string(b))
	})
}

func checkAnswer(t *testing.T, via, method, path, reqBody string, status int, body string) {
	t.Helper()
	if status >= 500 {
		t.Fatalf("%s: %s %q: status %d for client input: %s", via, method, path, status, body)
	}
	if status == 204 {
		if body != "" {
			t.Fatalf("%s: 204 with a body: %q", via, body)
		}
		return
	}
	if !json.Valid([]byte(body)) || !utf8.ValidString(body) {
		t.Fatalf("%s: %s %q: body is not valid JSON: %q", via, method, path, body)
	}
	if status >= 400 {
		var e map[string]any
		_ = json.Unmarshal([]byte(body), &e)
		code, _ := e["code"].(string)
		msg, _ := e["message"].(string)
		if code == "" || msg == "" || len(e) != 2 {
			t.Fatalf("%s: error body is not {code,message}: %s", via, body)
		}
		if len(reqBody) > 8 && strings.Contains(msg, reqBody) {
			t.Fatalf("%s: error message echoes the request body: %s", via, msg)
		}
	}
}
