package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
)

// settingsAPI is the API over an empty store with a fake clock and a
// program cache, each answer held to docs/openapi.yaml.
func settingsAPI(t *testing.T) (http.Handler, *clock.Fake) {
	t.Helper()
	c := clock.NewFake(t0)
	svc := queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(c), queue.WithProgramCache(time.Second))
	return checked(t, httpapi.New(svc, httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard))), c
}

// call sends one request to h and decodes its JSON answer into out.
func call(t *testing.T, h http.Handler, method, path string, hdr http.Header, body string, out any) int {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	for k, vs := range hdr {
		r.Header[k] = vs
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if out != nil && w.Body.Len() > 0 {
		if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, w.Body)
		}
	}
	return w.Code
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
