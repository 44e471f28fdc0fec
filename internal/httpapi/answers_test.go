package httpapi_test

import (
	"context"
	"crypto/ecdsa"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tools/sampleevents"
)

// routePath is r's path for program demo (and token
// waitingTokenFixture001, key kid1).
func routePath(r httpapi.Route) string {
	return strings.NewReplacer("{programId}", "demo", "{tokenId}", "waitingTokenFixture001", "{keyId}", kid1).Replace(r.Path)
}

// sendTo sends one request to h and returns its status and error code.
func sendTo(h http.Handler, method, path string, hdr http.Header, body string) (int, string) {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	for k, vs := range hdr {
		r.Header[k] = vs
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, decodeCode(w.Body.String())
}

// panicStore panics on every call, as a bug would.
type panicStore struct{ queue.Store }

// panicKey panics when asked for its public half.
type panicKey struct{ brokenKey }

func (panicKey) PublicKey(context.Context) (*ecdsa.PublicKey, error) { panic("boom") }

// TestEveryRouteAnswers drives each route through the answers every route
// can give: 413 to a body announced too large, 431 to headers over
// MaxHeaderBytes, 500 to a bug, 400
// INVALID_BODY to a Lambda event whose body is not base64, and on admin
// routes 401 and 403 without valid credentials.
func TestEveryRouteAnswers(t *testing.T) {
	keys, err := admissionpass.NewIssuer("https://queue.example.com", panicKey{})
	if err != nil {
		t.Fatal(err)
	}
	fine := checked(t, httpapi.New(newService(t), httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard), httpapi.WithPasses(passIssuer(t, ""))))
	// A keyring whose store panicked stays stuck on its read: one a route.
	buggyFor := func() http.Handler {
		return checked(t, httpapi.New(queue.NewService(panicStore{}, polling.DefaultTiers()), httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard), httpapi.WithPasses(keys),
			httpapi.WithKeyring(admissionpass.NewKeyring(panicKeyStore{}, &seqWrapper{}))))
	}
	lambda := checkedLambda(t, httpapi.Lambda(httpapi.New(newService(t), httpapi.IAMAuth(), httpapi.WithLogger(discard), httpapi.WithPasses(passIssuer(t, "")))))
	admin := http.Header{"Authorization": {"Bearer s3cret"}, api.HeaderToken: {"waitingTokenFixture001"}, api.HeaderAdmissionPass: {sampleevents.SessionPass}}
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
			if r.Path == api.PassesPath {
				body = `{"count":1,"validSeconds":60}`
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
	c := clock.NewFake(t0)
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
