package httpapi_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/metricstest"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/sampleevents"
	"github.com/example/waitingroom/internal/tools/simclock"
	"github.com/example/waitingroom/passverify"
)

// settingsAPI is the API over an empty store with a fake clock and a
// program cache, each answer held to docs/openapi.yaml.
func settingsAPI(t *testing.T) (http.Handler, *simclock.Fake) {
	t.Helper()
	c := simclock.NewFake(t0)
	svc := queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(c), queue.WithProgramCache(time.Second))
	return checked(t, httpapi.New(svc, httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard))), c
}

// call sends one request to h and decodes its JSON answer into out.
func call(t *testing.T, h http.Handler, method, path string, hdr http.Header, body string, out any) int {
	t.Helper()
	w := record(h, method, path, hdr, body)
	if out != nil && w.Body.Len() > 0 {
		decodeInto(t, method, path, w, out)
	}
	return w.Code
}

// record serves one request, with hdr, to h.
func record(h http.Handler, method, path string, hdr http.Header, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	maps.Copy(r.Header, hdr)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// decodeInto decodes w's JSON body into out.
func decodeInto(t *testing.T, method, path string, w *httptest.ResponseRecorder, out any) {
	t.Helper()
	if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
		t.Fatalf("%s %s: %v in %s", method, path, err, w.Body)
	}
}

var bearer = http.Header{"Authorization": {"Bearer s3cret"}}

// TestClosesAtOnTheWire: closesAt is set by a PUT and shown in the admin
// answer and in a WAITING token's; from that instant an enter answers 409
// PROGRAM_CLOSED saying when, while a poll goes on.
func TestClosesAtOnTheWire(t *testing.T) {
	h, c := settingsAPI(t)
	closes := t0.Add(time.Hour).Truncate(time.Second)
	var p api.Program
	if status := call(t, h, "PUT", "/api/v1/admin/programs/sale", bearer, `{"paused":true,"closesAt":"`+closes.In(time.FixedZone("KST", 9*3600)).Format(time.RFC3339)+`"}`, &p); status != 201 || !p.ClosesAt.Equal(closes) {
		t.Fatalf("PUT closesAt: %d %+v, want 201 closing at %v", status, p, closes)
	}
	var tok api.Token
	if status := call(t, h, "POST", "/api/v1/queues/programs/sale", nil, "", &tok); status != 201 || !tok.ClosesAt.Equal(closes) {
		t.Fatalf("enter: %d %+v, want closesAt %v", status, tok, closes)
	}
	c.Advance(time.Hour)
	var e api.Error
	if status := call(t, h, "POST", "/api/v1/queues/programs/sale", nil, "", &e); status != 409 || e.Code != api.CodeProgramClosed || !strings.Contains(e.Message, closes.Format(time.RFC3339)) {
		t.Errorf("enter at the close: %d %+v, want 409 PROGRAM_CLOSED at %s", status, e, closes.Format(time.RFC3339))
	}
	var polled api.Token
	if status := call(t, h, "GET", "/api/v1/queues/programs/sale", http.Header{api.HeaderToken: {tok.TokenID}}, "", &polled); status != 200 || polled.Status != api.StatusWaiting || polled.Position != 1 || !polled.ClosesAt.Equal(closes) {
		t.Errorf("poll after the close: %d %+v, want WAITING at 1 with closesAt", status, polled)
	}
	if status := call(t, h, "PUT", "/api/v1/admin/programs/sale", bearer, `{"closesAt":""}`, &e); status != 409 || e.Code != api.CodeInvalidSettings {
		t.Errorf("clear a close that has passed: %d %+v, want 409 INVALID_SETTINGS", status, e)
	}
}

// TestTranslationsOnTheWire: translations set by a PUT come back in the
// admin answer under canonical keys, and a WAITING answer's notice
// follows ?lang=, or else Accept-Language, falling back to the
// untranslated notice.
func TestTranslationsOnTheWire(t *testing.T) {
	h, _ := settingsAPI(t)
	var p api.Program
	body := `{"paused":true,"notice":"Saturday is sold out","translations":{"KO-kr":{"displayName":"갈라","notice":"토요일 매진"},"ja":{"message":"二夜"}}}`
	if status := call(t, h, "PUT", "/api/v1/admin/programs/sale", bearer, body, &p); status != 201 {
		t.Fatalf("PUT: %d", status)
	}
	want := map[string]api.Texts{"ko-KR": {DisplayName: "갈라", Notice: "토요일 매진"}, "ja": {Message: "二夜"}}
	if d := cmp.Diff(want, p.Translations); d != "" {
		t.Errorf("admin answer's translations (-want +got):\n%s", d)
	}
	var tok api.Token
	if status := call(t, h, "POST", "/api/v1/queues/programs/sale?lang=ko", nil, "", &tok); status != 201 || tok.Notice != "토요일 매진" {
		t.Fatalf("enter with ?lang=ko: %d notice %q, want the Korean one", status, tok.Notice)
	}
	for _, tc := range []struct {
		query, acceptLanguage, notice string
	}{
		{"", "", "Saturday is sold out"},
		{"?lang=ko", "en", "토요일 매진"},
		{"?lang=KO", "en", "토요일 매진"}, // BCP 47 tags are case-insensitive
		{"", "KO-kr, en;q=0.5", "토요일 매진"},
		{"?lang=en", "ko", "Saturday is sold out"}, // the page's choice stands alone: en has none, so the untranslated one
		{"", "fr;q=0.9, ko-KR;q=0.8", "토요일 매진"},
		{"?lang=not_a*tag", "ko", "토요일 매진"},
		{"?lang=ja", "ko", "Saturday is sold out"}, // ja has no notice: it falls back
	} {
		hdr := http.Header{api.HeaderToken: {tok.TokenID}}
		if tc.acceptLanguage != "" {
			hdr.Set("Accept-Language", tc.acceptLanguage)
		}
		var got api.Token
		if status := call(t, h, "GET", "/api/v1/queues/programs/sale"+tc.query, hdr, "", &got); status != 200 || got.Notice != tc.notice {
			t.Errorf("poll%s Accept-Language %q: %d notice %q, want %q", tc.query, tc.acceptLanguage, status, got.Notice, tc.notice)
		}
	}
	var e api.Error
	if status := call(t, h, "PUT", "/api/v1/admin/programs/sale", bearer, `{"translations":{"ko":{"notice":"`+strings.Repeat("가", 281)+`"}}}`, &e); status != 400 || e.Code != api.CodeInvalidSettings {
		t.Errorf("a translated notice too long: %d %+v, want 400 INVALID_SETTINGS", status, e)
	}
}

// adminCall sends one admin request with the bearer secret and decodes its
// JSON answer into out (if any); it returns the status and error code.
func adminCall(t *testing.T, h http.Handler, method, path, body string, out any) (int, string) {
	t.Helper()
	w := record(h, method, path, bearer, body)
	if out != nil && w.Code < 300 {
		decodeInto(t, method, path, w, out)
	}
	return w.Code, decodeCode(w.Body.String())
}

// TestHandlerCatalog walks list, history and delete through the HTTP API
// on the local server's bearer secret, with their refusals.
func TestHandlerCatalog(t *testing.T) {
	h := checked(t, httpapi.New(queue.NewService(memstore.New(), polling.DefaultTiers()), httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard)))
	for _, id := range []string{"gala-c", "gala-a", "gala-b"} {
		if code, _ := adminCall(t, h, "PUT", "/api/v1/admin/programs/"+id, `{"message":"hello"}`, nil); code != 201 {
			t.Fatalf("create %s: %d", id, code)
		}
	}
	var ids []string
	cursor := ""
	for range 3 {
		var page api.ProgramList
		if code, _ := adminCall(t, h, "GET", "/api/v1/admin/programs?limit=2&cursor="+cursor, "", &page); code != 200 {
			t.Fatalf("list: %d", code)
		}
		for _, p := range page.Programs {
			ids = append(ids, p.ProgramID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if diff := cmp.Diff([]string{"gala-a", "gala-b", "gala-c"}, ids); diff != "" {
		t.Errorf("programs listed by 2 (-want +got):\n%s", diff)
	}

	if code, _ := adminCall(t, h, "POST", "/api/v1/admin/programs/gala-a/admissions", `{"count":3}`, nil); code != 200 {
		t.Fatalf("admit: %d", code)
	}
	var hist api.ChangeList
	if code, _ := adminCall(t, h, "GET", "/api/v1/admin/programs/gala-a/changes", "", &hist); code != 200 {
		t.Fatalf("history: %d", code)
	}
	var got []string
	for _, c := range hist.Changes {
		got = append(got, fmt.Sprintf("%s %s %v", c.Actor, c.Action, c.Fields))
		if c.At.IsZero() || c.EffectiveAt.Before(c.At.Time) || len(c.ChangeID) != 22 {
			t.Errorf("change %+v: want an id, at, and effectiveAt not before at", c)
		}
	}
	want := []string{"local-admin admit map[count:3]", "local-admin create map[message:hello]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("history, newest first (-want +got):\n%s", diff)
	}

	refusals := []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/api/v1/admin/programs?cursor=%21%21", 400, api.CodeInvalidCursor},
		{"GET", "/api/v1/admin/programs?cursor=Li4", 400, api.CodeInvalidCursor}, // "..", not an id
		{"GET", "/api/v1/admin/programs?limit=0", 400, api.CodeInvalidLimit},
		{"GET", "/api/v1/admin/programs?limit=201", 400, api.CodeInvalidLimit},
		{"GET", "/api/v1/admin/programs?limit=ten", 400, api.CodeInvalidLimit},
		{"GET", "/api/v1/admin/programs/gala-a/changes?limit=1001", 400, api.CodeInvalidLimit},
		{"GET", "/api/v1/admin/programs/gala-a/changes?cursor=Z2FsYQ", 400, api.CodeInvalidCursor},
		{"GET", "/api/v1/admin/programs/nope/changes", 404, api.CodeProgramNotFound},
		{"GET", "/api/v1/admin/programs/n%20o/changes", 400, api.CodeInvalidProgramID},
		{"DELETE", "/api/v1/admin/programs/nope", 404, api.CodeProgramNotFound},
		{"DELETE", "/api/v1/admin/programs/gala-a", 409, api.CodeProgramNotClosed},
	}
	for _, r := range refusals {
		if code, ecode := adminCall(t, h, r.method, r.path, "", nil); code != r.status || ecode != r.code {
			t.Errorf("%s %s = %d %s, want %d %s", r.method, r.path, code, ecode, r.status, r.code)
		}
	}

	// Closed, deleted: gone everywhere, and its id taken.
	var enter api.Token
	r := httptest.NewRequest("POST", "/api/v1/queues/programs/gala-b", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if err := json.Unmarshal(w.Body.Bytes(), &enter); err != nil || w.Code != 201 {
		t.Fatalf("enter: %d %s", w.Code, w.Body)
	}
	adminCall(t, h, "PUT", "/api/v1/admin/programs/gala-b", `{"closed":true}`, nil)
	if code, _ := adminCall(t, h, "DELETE", "/api/v1/admin/programs/gala-b", "", nil); code != 204 {
		t.Fatalf("delete a closed program: %d, want 204", code)
	}
	gone := []struct{ method, path string }{
		{"GET", "/api/v1/admin/programs/gala-b"},
		{"GET", "/api/v1/admin/programs/gala-b/changes"},
		{"DELETE", "/api/v1/admin/programs/gala-b"},
		{"POST", "/api/v1/admin/programs/gala-b/admissions"},
	}
	for _, g := range gone {
		body := ""
		if g.method == "POST" {
			body = `{"count":1}`
		}
		if code, ecode := adminCall(t, h, g.method, g.path, body, nil); code != 404 || ecode != api.CodeProgramNotFound {
			t.Errorf("%s %s after the delete = %d %s, want 404 PROGRAM_NOT_FOUND", g.method, g.path, code, ecode)
		}
	}
	r = httptest.NewRequest("GET", "/api/v1/queues/programs/gala-b", nil)
	r.Header.Set(api.HeaderToken, enter.TokenID)
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 404 {
		t.Errorf("a poll of the deleted program's token = %d %s, want 404", w.Code, w.Body)
	}
	if code, ecode := adminCall(t, h, "PUT", "/api/v1/admin/programs/gala-b", `{}`, nil); code != 409 || ecode != api.CodeProgramDeleted {
		t.Errorf("re-create the deleted id = %d %s, want 409 PROGRAM_DELETED", code, ecode)
	}
	var page api.ProgramList
	adminCall(t, h, "GET", "/api/v1/admin/programs", "", &page)
	if len(page.Programs) != 2 || page.NextCursor != "" {
		t.Errorf("list after the delete = %+v, want gala-a and gala-c", page)
	}
}

// TestHandlerBypass: the passes route answers passes that passverify
// accepts, against the JWKS route, as bypass passes of the program; the
// metrics count them; an unknown program is 404, and a cap without room
// 409 NO_ROOM with Retry-After.
func TestHandlerBypass(t *testing.T) {
	const iss = "https://queue.example.com"
	c := simclock.NewFake(t0)
	keys := passIssuer(t, iss)
	svc := queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(c), queue.WithPassSigner(app.Signer(keys)))
	rec := &metricstest.Recorder{}
	h := checked(t, httpapi.New(svc, httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard), httpapi.WithPasses(keys), httpapi.WithObserver(rec)))
	srv := httptest.NewServer(h)
	defer srv.Close()
	do := func(method, path, body string) *httptest.ResponseRecorder {
		t.Helper()
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer s3cret")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	do("PUT", "/api/v1/admin/programs/gala", `{"closed":true}`)
	do("PUT", "/api/v1/admin/programs/capped", `{"maxActiveUsers":3,"paused":true}`)

	w := do("POST", "/api/v1/admin/programs/gala/passes", `{"count":3,"validSeconds":7200}`)
	var got api.BypassPasses
	if err := json.Unmarshal(w.Body.Bytes(), &got); w.Code != http.StatusOK || err != nil || len(got.Passes) != 3 {
		t.Fatalf("issue: %d %s", w.Code, w.Body)
	}
	v, err := passverify.New(passverify.Config{JWKSURL: srv.URL + api.JWKSPath, Issuer: iss, ProgramID: "gala", Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	for i, pass := range got.Passes {
		claims, err := v.Verify(t.Context(), pass)
		if err != nil {
			t.Fatalf("pass %d: %v", i, err)
		}
		want := passverify.Claims{Issuer: iss, ProgramID: "gala", AdmittedAt: t0.Truncate(time.Second), ExpiresAt: t0.Add(2 * time.Hour).Truncate(time.Second), Bypass: true}
		if diff := cmp.Diff(want, claims, cmpopts.IgnoreFields(passverify.Claims{}, "TokenID", "JTI")); diff != "" {
			t.Errorf("pass %d (-want +got):\n%s", i, diff)
		}
	}

	if w := do("POST", "/api/v1/admin/programs/nobody/passes", `{"count":1,"validSeconds":60}`); w.Code != 404 || decodeCode(w.Body.String()) != api.CodeProgramNotFound {
		t.Errorf("unknown program: %d %s", w.Code, w.Body)
	}
	if w := do("POST", "/api/v1/admin/programs/capped/passes", `{"count":2,"validSeconds":60}`); w.Code != 200 {
		t.Errorf("2 passes under a cap of 3: %d %s", w.Code, w.Body)
	}
	if w := do("GET", "/api/v1/admin/programs/capped", ""); decode(t, w.Body.String())["bypassHeld"] != 2.0 {
		t.Errorf("the program after 2 passes: %s, want bypassHeld 2", w.Body)
	}
	if w := do("POST", "/api/v1/admin/programs/capped/passes", `{"count":2,"validSeconds":60}`); w.Code != 409 || decodeCode(w.Body.String()) != api.CodeNoRoom || w.Header().Get(api.HeaderRetryAfter) == "" {
		t.Errorf("2 more under a cap of 3: %d %s, Retry-After %q", w.Code, w.Body, w.Header().Get(api.HeaderRetryAfter))
	}
	for _, body := range []string{`{"validSeconds":60}`, `{"count":1}`, `{"count":1,"validSeconds":9223372036854775807}`, `{"count":1,"validSeconds":-9223372036854775808}`} {
		if w := do("POST", "/api/v1/admin/programs/gala/passes", body); w.Code != 400 {
			t.Errorf("%s: %d %s, want 400", body, w.Code, w.Body)
		}
	}

	var counted []metrics.Request
	for _, r := range rec.Requests() {
		if r.BypassPasses > 0 {
			counted = append(counted, r)
		}
	}
	want := []metrics.Request{{Op: metrics.OpAdmin, Method: "POST", Status: 200, ProgramID: "gala", BypassPasses: 3}, {Op: metrics.OpAdmin, Method: "POST", Status: 200, ProgramID: "capped", BypassPasses: 2}}
	if diff := cmp.Diff(want, counted, cmpopts.IgnoreFields(metrics.Request{}, "Duration")); diff != "" {
		t.Errorf("the metrics' bypass passes (-want +got):\n%s", diff)
	}
}

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

// TestHandlerReport: the report route answers the program's people as its
// tokens tell them (3 arrivals: 1 admitted, 1 left, 1 waiting), 400 to an
// invalid id, 404 to an unknown program, and 503 with Retry-After to a
// store fault.
func TestHandlerReport(t *testing.T) {
	h, c := settingsAPI(t)
	admin := http.Header{"Authorization": {"Bearer s3cret"}}
	if code := call(t, h, "PUT", "/api/v1/admin/programs/gala", admin, `{"paused":true}`, nil); code != 201 {
		t.Fatalf("create: %d", code)
	}
	var tokens []string
	for range 3 {
		var w api.Token
		if code := call(t, h, "POST", "/api/v1/queues/programs/gala", nil, "", &w); code != 201 {
			t.Fatalf("enter: %d", code)
		}
		tokens = append(tokens, w.TokenID)
	}
	if code := call(t, h, "POST", "/api/v1/admin/programs/gala/admissions", admin, `{"count":1}`, nil); code != 200 {
		t.Fatalf("admit: %d", code)
	}
	c.Advance(2 * time.Second)                         // past the program cache
	for i, method := range []string{"GET", "DELETE"} { // the first sees its turn, the second leaves
		if code := call(t, h, method, "/api/v1/queues/programs/gala", http.Header{api.HeaderToken: {tokens[i]}}, "", nil); code >= 300 {
			t.Fatalf("%s: %d", method, code)
		}
	}
	var rep api.Report
	if code := call(t, h, "GET", "/api/v1/admin/programs/gala/report", admin, "", &rep); code != 200 {
		t.Fatalf("report: %d", code)
	}
	want := api.ReportPeople{Arrivals: 3, Admitted: 1, Left: 1, Waiting: 1}
	if diff := cmp.Diff(want, rep.People); diff != "" || rep.ProgramID != "gala" || rep.Final || rep.Waits.MaxMs != 2000 {
		t.Errorf("report of %s (final %v, waits %+v), people (-want +got):\n%s", rep.ProgramID, rep.Final, rep.Waits, diff)
	}

	for _, tt := range []struct {
		name, path string
		h          http.Handler
		status     int
		code       string
	}{
		{"invalid id", "/api/v1/admin/programs/-x/report", h, 400, api.CodeInvalidProgramID},
		{"unknown program", "/api/v1/admin/programs/nobody/report", h, 404, api.CodeProgramNotFound},
		{"store fault", "/api/v1/admin/programs/gala/report", checked(t, httpapi.New(queue.NewService(brokenStore{memstore.New()}, polling.DefaultTiers()), httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard))), 503, api.CodeUnavailable},
	} {
		w := record(tt.h, "GET", tt.path, admin, "")
		if w.Code != tt.status || decodeCode(w.Body.String()) != tt.code || (tt.status == 503) != (w.Header().Get("Retry-After") != "") {
			t.Errorf("%s: %d %s (Retry-After %q), want %d %s", tt.name, w.Code, w.Body, w.Header().Get("Retry-After"), tt.status, tt.code)
		}
	}
}
