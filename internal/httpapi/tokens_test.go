package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/tools/sampleevents"
)

// TestTokenAdmin walks an admin's lookup and revoke of tokens: a lookup
// records nothing and never shows a pass; once revoked, a token reads
// REVOKED to its holder, its pass ends no session (TOKEN_REVOKED), and
// its lookup shows every time it stores.
func TestTokenAdmin(t *testing.T) {
	iss := passIssuer(t, "https://queue.example.com")
	h := checked(t, httpapi.New(newServiceIssuing(t, iss), httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard), httpapi.WithPasses(iss)))
	admin := http.Header{"Authorization": {"Bearer s3cret"}}
	const tokens = "/api/v1/admin/programs/demo/tokens/"
	steps := []struct {
		name, method, path string
		hdr                http.Header
		status             int
		body               string // exact JSON, or the error's code alone
	}{
		{"look up an admission nobody has seen", "GET", tokens + sampleevents.AdmitNowToken, admin, 200,
			`{"tokenId":"admitNowTokenFixture01","status":"ADMITTED","ticket":450,"issuedAt":"2026-05-19T09:25:00.123Z","retainedUntil":"2026-05-21T10:00:00.123Z"}`},
		{"the holder's poll still signs the pass", "GET", "/api/v1/queues/programs/demo", http.Header{api.HeaderToken: {sampleevents.AdmitNowToken}}, 200, ""},
		{"look up an admitted token with a pass", "GET", tokens + sampleevents.SessionToken, admin, 200,
			`{"tokenId":"sessionTokenFixture001","status":"ADMITTED","ticket":420,"issuedAt":"2026-05-19T09:20:00.123Z","admittedAt":"2026-05-19T09:59:00.123Z","expiresAt":"2026-05-19T10:09:00.123Z","retainedUntil":"2026-05-21T10:00:00.123Z"}`},
		{"revoke it", "DELETE", tokens + sampleevents.SessionToken, admin, 204, ""},
		{"revoke it again", "DELETE", tokens + sampleevents.SessionToken, admin, 204, ""},
		{"its holder's poll", "GET", "/api/v1/queues/programs/demo", http.Header{api.HeaderToken: {sampleevents.SessionToken}}, 200,
			`{"tokenId":"sessionTokenFixture001","status":"REVOKED","ticket":420,"issuedAt":"2026-05-19T09:20:00.123Z","revokedAt":"2026-05-19T10:00:00.123Z"}`},
		{"its holder's leave", "DELETE", "/api/v1/queues/programs/demo", http.Header{api.HeaderToken: {sampleevents.SessionToken}}, 204, ""},
		{"the site ends its session", "DELETE", "/api/v1/queues/programs/demo/session", http.Header{api.HeaderAdmissionPass: {sampleevents.SessionPass}}, 403, api.CodeTokenRevoked},
		{"the site releases its session", "DELETE", "/api/v1/admin/programs/demo/session", http.Header{"Authorization": {"Bearer s3cret"}, api.HeaderAdmissionPass: {sampleevents.SessionPass}}, 403, api.CodeTokenRevoked},
		{"look the revoked token up", "GET", tokens + sampleevents.SessionToken, admin, 200,
			`{"tokenId":"sessionTokenFixture001","status":"REVOKED","ticket":420,"issuedAt":"2026-05-19T09:20:00.123Z","admittedAt":"2026-05-19T09:59:00.123Z","expiresAt":"2026-05-19T10:09:00.123Z","leftAt":"2026-05-19T10:00:00.123Z","revokedAt":"2026-05-19T10:00:00.123Z","retainedUntil":"2026-05-21T10:00:00.123Z"}`},
		{"look up a malformed token", "GET", tokens + "not-a-token", admin, 400, api.CodeInvalidToken},
		{"revoke in a malformed program", "DELETE", "/api/v1/admin/programs/-demo/tokens/" + sampleevents.WaitingToken, admin, 400, api.CodeInvalidProgramID},
		{"revoke an unknown token", "DELETE", tokens + sampleevents.UnknownToken, admin, 404, api.CodeTokenNotFound},
		{"revoke another program's token", "DELETE", "/api/v1/admin/programs/sold-out/tokens/" + sampleevents.WaitingToken, admin, 404, api.CodeTokenNotFound},
	}
	for _, s := range steps {
		r := httptest.NewRequest(s.method, s.path, nil)
		for k, vs := range s.hdr {
			r.Header[k] = vs
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		switch {
		case w.Code != s.status:
			t.Errorf("%s: %d %s, want %d", s.name, w.Code, w.Body, s.status)
		case s.status >= 400:
			if code := decodeCode(w.Body.String()); code != s.body {
				t.Errorf("%s: code %s, want %s", s.name, code, s.body)
			}
		case s.body != "":
			assertJSONEqual(t, w.Body.String(), s.body)
		}
	}
}

// TestEndSessionOfADeletedProgram: once its program is deleted, a pass's
// session end answers what a poll of its token does, 404
// PROGRAM_NOT_FOUND, not 204.
func TestEndSessionOfADeletedProgram(t *testing.T) {
	iss := passIssuer(t, "https://queue.example.com")
	h := checked(t, httpapi.New(newServiceIssuing(t, iss), httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard), httpapi.WithPasses(iss)))
	admin := http.Header{"Authorization": {"Bearer s3cret"}}
	do := func(method, path string, hdr http.Header, body string) *httptest.ResponseRecorder {
		t.Helper()
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		for k, vs := range hdr {
			r.Header[k] = vs
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := do("PUT", "/api/v1/admin/programs/demo", admin, `{"closed":true}`); w.Code != 200 {
		t.Fatalf("close: %d %s", w.Code, w.Body)
	}
	if w := do("DELETE", "/api/v1/admin/programs/demo", admin, ""); w.Code != 204 {
		t.Fatalf("delete: %d %s", w.Code, w.Body)
	}
	const gone = `{"code":"PROGRAM_NOT_FOUND","message":"No such program."}`
	poll := do("GET", "/api/v1/queues/programs/demo", http.Header{api.HeaderToken: {sampleevents.SessionToken}}, "")
	if poll.Code != 404 {
		t.Fatalf("poll of the deleted program's token: %d %s, want 404", poll.Code, poll.Body)
	}
	assertJSONEqual(t, poll.Body.String(), gone)
	end := do("DELETE", "/api/v1/queues/programs/demo/session", http.Header{api.HeaderAdmissionPass: {sampleevents.SessionPass}}, "")
	if end.Code != 404 {
		t.Fatalf("session end in the deleted program: %d %s, want 404", end.Code, end.Body)
	}
	assertJSONEqual(t, end.Body.String(), gone)
}
