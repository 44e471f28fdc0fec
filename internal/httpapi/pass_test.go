package httpapi_test

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/testing/fixtures"
	"github.com/example/waitingroom/internal/tools/sampleevents"
)

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
func (brokenKey) SignASN1(context.Context, []byte) ([]byte, error) {
	return nil, errors.New("kms:Sign: AccessDeniedException")
}

// TestHandlerJWKSErrors: the JWKS route answers the API's JSON errors: 503
// KEYS_UNAVAILABLE with Retry-After when the key cannot be read, 404 on a
// handler that signs no passes.
func TestHandlerJWKSErrors(t *testing.T) {
	broken, err := admissionpass.NewIssuer("https://queue.example.com", brokenKey{})
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
