package app_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/fixtures"
	"github.com/example/waitingroom/internal/testing/metricstest"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/sampleevents"
	"github.com/example/waitingroom/internal/tools/simclock"
)

// fixtureApp is the App over the fixtures of events/, seeded now, its
// service on a clock that stays there: the fixtures' queue does not move.
// (The page without JavaScript reads the real clock for its estimate.)
func fixtureApp(t *testing.T) *app.App {
	t.Helper()
	cfg, err := config.FromEnv(func(string) string { return "" }, false)
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New()
	now := time.Now()
	if err := sampleevents.Seed(t.Context(), store, now); err != nil {
		t.Fatal(err)
	}
	return app.New(cfg, store, slog.New(slog.NewTextHandler(io.Discard, nil)), app.WithServiceOptions(queue.WithClock(simclock.NewFake(now))))
}

const (
	html    = "text/html; charset=utf-8"
	noCache = "no-cache"
	noStore = "private, no-store" // a page with a person's own key, place or pass
)

// TestPageEvents replays the waiting-room page's sample events
// (events/page*.json) through the queue function's handler behind the
// Lambda adapter: status, headers, cookies and what the body must say.
func TestPageEvents(t *testing.T) {
	tests := []struct {
		event      string
		wantStatus int
		wantHeader map[string]string
		wantBody   []string // substrings, in order
		wantCookie string   // the Set-Cookie of the answer, "" for none
	}{
		{"page", 200, map[string]string{"Content-Type": html, "Cache-Control": noStore, "X-Frame-Options": "DENY"},
			[]string{`<html lang="en">`, `<title>demo</title>`, `<script src="/waiting-room/assets/app.`, `data-program="demo" data-api="/api/v1/queues/programs/"`, `<h1>demo</h1>`, "You&#39;re in line", `<form method="post" action="/waiting-room/demo/enter">`}, ""},
		{"page-ko", 200, map[string]string{"Content-Type": html, "Cache-Control": noStore},
			[]string{`<html lang="ko">`, "대기 중입니다", "대기열 들어가기"}, ""},
		{"page-noscript-waiting", 200, map[string]string{"Content-Type": html, "Cache-Control": "private, no-store"},
			[]string{`<noscript><meta http-equiv="refresh" content="`, `<p class="position">`, "This page refreshes itself in"}, ""},
		{"page-error-unknown-program", 404, map[string]string{"Content-Type": html},
			[]string{"Waiting room not found"}, ""},
		{"page-error-invalid-program", 400, map[string]string{"Content-Type": html},
			[]string{"This link is not valid"}, ""},
		{"page-error-stale-asset", 404, nil, nil, ""},
		{"page-enter", 303, map[string]string{"Location": "/waiting-room/demo?lang=en", "X-Frame-Options": "DENY"}, nil,
			"wr_token=" + enteredToken + "; Path=/waiting-room/demo; Max-Age=86400; HttpOnly; Secure; SameSite=Lax"},
	}
	files, _ := filepath.Glob(filepath.Join("..", "..", "events", "page*.json"))
	if len(files) != len(tests) {
		t.Errorf("%d page events in events/, %d here: each needs its expected answer", len(files), len(tests))
	}
	fn := httpapi.Lambda(fixtureApp(t).QueueHandler())
	for _, tt := range tests {
		t.Run(tt.event, func(t *testing.T) {
			resp, err := fn(t.Context(), fixtures.Event(t, tt.event))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d, want %d\n%s", resp.StatusCode, tt.wantStatus, resp.Body)
			}
			for k, want := range tt.wantHeader {
				if got := resp.Headers[k]; got != want {
					t.Errorf("header %s = %q, want %q", k, got, want)
				}
			}
			rest := resp.Body
			for _, want := range tt.wantBody {
				i := strings.Index(rest, want)
				if i < 0 {
					t.Errorf("body lacks %q (after the earlier ones):\n%s", want, resp.Body)
					break
				}
				rest = rest[i+len(want):]
			}
			if tt.wantCookie != "" && !slices.Equal(resp.Cookies, []string{tt.wantCookie}) {
				t.Errorf("cookies = %q, want [%q]", resp.Cookies, tt.wantCookie)
			} else if tt.wantCookie == "" && len(resp.Cookies) > 0 {
				t.Errorf("cookies = %q, want none", resp.Cookies)
			}
		})
	}
}

// enteredToken is the token events/page-enter.json's key names in "demo".
const enteredToken = "sb58SU1QxUgALGGM9NDZjQ"

// TestPageEnterIsTheAPIsEnter: the form's key names the same place as the
// JSON API's Idempotency-Key, and the cookie polls it.
func TestPageEnterIsTheAPIsEnter(t *testing.T) {
	h := fixtureApp(t).QueueHandler()
	r, _ := http.NewRequest("POST", "http://127.0.0.1/api/v1/queues/programs/demo", nil)
	r.Header.Set("Idempotency-Key", "pageEnterEventKey00001")
	w := record(h, r)
	var body struct{ TokenID, Status string }
	if err := json.Unmarshal(w.body, &body); err != nil || body.TokenID != enteredToken || body.Status != "WAITING" {
		t.Fatalf("API enter with the event's key = %s (%v), want WAITING as %s", w.body, err, enteredToken)
	}
	r, _ = http.NewRequest("GET", "http://127.0.0.1/waiting-room/demo", nil)
	r.AddCookie(&http.Cookie{Name: "wr_token", Value: enteredToken})
	w = record(h, r)
	if !regexp.MustCompile(`<p class="position">501</p>`).Match(w.body) {
		t.Errorf("the cookie's page does not show position 501 (ticket 1,001 of a queue serving 500 at 10/s):\n%s", w.body)
	}
}

// TestPageAssetsThroughLambda: the hashed assets leave the function
// gzipped, base64-encoded for API Gateway, and cached for a year.
func TestPageAssetsThroughLambda(t *testing.T) {
	fn := httpapi.Lambda(fixtureApp(t).QueueHandler())
	page, err := fn(t.Context(), fixtures.Event(t, "page"))
	if err != nil {
		t.Fatal(err)
	}
	assets := regexp.MustCompile(`/waiting-room/assets/app\.[0-9a-f]{8}\.(js|css)`).FindAllString(page.Body, -1)
	if len(assets) != 2 {
		t.Fatalf("page links assets %q, want app.js and app.css", assets)
	}
	for _, path := range assets {
		ev := fixtures.Event(t, "page-error-stale-asset")
		ev.RawPath, ev.RequestContext.HTTP.Path = path, path
		resp, err := fn(t.Context(), ev)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || !resp.IsBase64Encoded || resp.Headers["Content-Encoding"] != "gzip" || resp.Headers["Cache-Control"] != "public, max-age=31536000, immutable" {
			t.Errorf("%s: status %d, base64 %v, headers %v", path, resp.StatusCode, resp.IsBase64Encoded, resp.Headers)
			continue
		}
		raw, _ := base64.StdEncoding.DecodeString(resp.Body)
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("%s: not gzip: %v", path, err)
		}
		body, err := io.ReadAll(zr)
		if err != nil || len(body) < 1000 {
			t.Errorf("%s: %d bytes (%v)", path, len(body), err)
		}
	}
}

// TestPageRouting: the page's paths reach the page in the queue and local
// handlers, never in the admin one; any other path, or one not in
// canonical form, is the API's JSON.
func TestPageRouting(t *testing.T) {
	a := fixtureApp(t)
	tests := []struct {
		name       string
		handler    http.Handler
		path       string
		wantStatus int
		wantType   string
	}{
		{"Queue", a.QueueHandler(), "/waiting-room/demo", 200, html},
		{"Local", a.LocalHandler("s3cret"), "/waiting-room/demo", 200, html},
		{"AdminHasNone", a.AdminHandler(), "/waiting-room/demo", 404, "application/json; charset=utf-8"},
		{"NoProgram", a.QueueHandler(), "/waiting-room/", 404, html},
		{"DoubleSlash", a.QueueHandler(), "/waiting-room//demo", 404, "application/json; charset=utf-8"},
		{"DotSegment", a.QueueHandler(), "/waiting-room/../api/v1/queues/programs/demo", 404, "application/json; charset=utf-8"},
		{"NoTrailingSlash", a.QueueHandler(), "/waiting-room", 404, "application/json; charset=utf-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := http.NewRequest("GET", "http://127.0.0.1"+tt.path, nil)
			r.URL.Path = tt.path // as sent, not cleaned
			w := record(tt.handler, r)
			if w.status != tt.wantStatus || w.header.Get("Content-Type") != tt.wantType {
				t.Errorf("%s: %d %q, want %d %q\n%s", tt.path, w.status, w.header.Get("Content-Type"), tt.wantStatus, tt.wantType, w.body)
			}
		})
	}
}

// TestPageShowsTheProgram: the page shows the admin's profile, and the
// paused and closed state, as soon as they take effect.
func TestPageShowsTheProgram(t *testing.T) {
	a := fixtureApp(t)
	h := a.LocalHandler("s3cret")
	req, _ := http.NewRequest("PUT", "http://127.0.0.1/api/v1/admin/programs/gala", strings.NewReader(
		`{"paused":true,"closed":true,"displayName":"Gala <night>","message":"Both nights.","targetUrl":"https://tickets.example.com/buy"}`))
	req.Header.Set("Authorization", "Bearer s3cret")
	if w := record(h, req); w.status != 201 {
		t.Fatalf("create: %d %s", w.status, w.body)
	}
	r, _ := http.NewRequest("GET", "http://127.0.0.1/waiting-room/gala", nil)
	w := record(h, r)
	for _, want := range []string{`<title>Gala &lt;night&gt;</title>`, `data-target="https://tickets.example.com/buy"`, `data-paused="true" data-closed="true"`, `<p class="message">Both nights.</p>`, "This queue is closed to new entries."} {
		if !strings.Contains(string(w.body), want) {
			t.Errorf("page lacks %q:\n%s", want, w.body)
		}
	}
}

type recorded struct {
	status int
	header http.Header
	body   []byte
}

func record(h http.Handler, r *http.Request) recorded {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return recorded{w.Code, w.Header(), w.Body.Bytes()}
}

// TestPageMetered: each page request is recorded once, as OpPage, with
// the queue's code when it fails.
func TestPageMetered(t *testing.T) {
	a := fixtureApp(t)
	obs := &metricstest.Recorder{}
	a.Metrics = obs
	h := a.QueueHandler()
	for _, path := range []string{"/waiting-room/demo", "/waiting-room/nobody", "/waiting-room/-x"} {
		r, _ := http.NewRequest("GET", "http://127.0.0.1"+path, nil)
		record(h, r)
	}
	type seen struct {
		Op              metrics.Op
		Status          int
		Code, ProgramID string
	}
	var got []seen
	for _, r := range obs.Requests() {
		got = append(got, seen{r.Op, r.Status, r.Code, r.ProgramID})
	}
	want := []seen{
		{metrics.OpPage, 200, "", "demo"},
		{metrics.OpPage, 404, "PROGRAM_NOT_FOUND", "nobody"},
		{metrics.OpPage, 400, "INVALID_PROGRAM_ID", "-x"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("observed (-want +got):\n%s", diff)
	}
}

// TestNoScriptPageShowsTheOpening: the page without JavaScript tells a
// person waiting for a scheduled opening when it opens, as the API does.
func TestNoScriptPageShowsTheOpening(t *testing.T) {
	h := fixtureApp(t).LocalHandler("s3cret")
	opens := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	req, _ := http.NewRequest("PUT", "http://127.0.0.1/api/v1/admin/programs/gala", strings.NewReader(
		`{"admissionRatePerSecond":5,"opensAt":"`+opens.Format(time.RFC3339)+`"}`))
	req.Header.Set("Authorization", "Bearer s3cret")
	if w := record(h, req); w.status != 201 {
		t.Fatalf("create: %d %s", w.status, w.body)
	}
	page, _ := http.NewRequest("GET", "http://127.0.0.1/waiting-room/gala?lang=en", nil)
	key := regexp.MustCompile(`name="key" value="([A-Za-z0-9]+)"`).FindSubmatch(record(h, page).body)
	if key == nil {
		t.Fatal("no join form with a key")
	}
	enter, _ := http.NewRequest("POST", "http://127.0.0.1/waiting-room/gala/enter", strings.NewReader("lang=en&key="+string(key[1])))
	enter.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, enter)
	if w.Code != http.StatusSeeOther || len(w.Result().Cookies()) != 1 {
		t.Fatalf("enter: %d, cookies %v", w.Code, w.Result().Cookies())
	}
	page, _ = http.NewRequest("GET", "http://127.0.0.1/waiting-room/gala?lang=en", nil)
	page.AddCookie(w.Result().Cookies()[0])
	body := string(record(h, page).body)
	if want := "Admission opens at " + opens.Format("2006-01-02 15:04 UTC"); !strings.Contains(body, want) {
		t.Errorf("page lacks %q:\n%s", want, body)
	}
}

// TestPageSpeaksItsLanguage: the page shows the program's texts in its
// own language where translated, each falling back to the untranslated
// one; without JavaScript, the notice too.
func TestPageSpeaksItsLanguage(t *testing.T) {
	h := fixtureApp(t).LocalHandler("s3cret")
	req, _ := http.NewRequest("PUT", "http://127.0.0.1/api/v1/admin/programs/gala", strings.NewReader(
		`{"paused":true,"displayName":"Gala","message":"Both nights.","notice":"Saturday is sold out","translations":{"ko-KR":{"displayName":"갈라","notice":"토요일 매진"}}}`))
	req.Header.Set("Authorization", "Bearer s3cret")
	if w := record(h, req); w.status != 201 {
		t.Fatalf("create: %d %s", w.status, w.body)
	}
	for lang, want := range map[string][]string{
		"ko": {`<title>갈라</title>`, `<p class="message">Both nights.</p>`},
		"en": {`<title>Gala</title>`, `<p class="message">Both nights.</p>`},
	} {
		page, _ := http.NewRequest("GET", "http://127.0.0.1/waiting-room/gala?lang="+lang, nil)
		body := record(h, page).body
		for _, w := range want {
			if !bytes.Contains(body, []byte(w)) {
				t.Errorf("page in %s lacks %q:\n%s", lang, w, body)
			}
		}
	}
	enter, _ := http.NewRequest("POST", "http://127.0.0.1/waiting-room/gala/enter", strings.NewReader("lang=ko&key=0123456789abcdefKEY"))
	enter.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, enter)
	if w.Code != http.StatusSeeOther || len(w.Result().Cookies()) != 1 {
		t.Fatalf("enter: %d, cookies %v", w.Code, w.Result().Cookies())
	}
	for lang, notice := range map[string]string{"ko": "토요일 매진", "en": "Saturday is sold out"} {
		page, _ := http.NewRequest("GET", "http://127.0.0.1/waiting-room/gala?lang="+lang, nil)
		page.AddCookie(w.Result().Cookies()[0])
		if body := string(record(h, page).body); !strings.Contains(body, "</strong> "+notice+"</p>") {
			t.Errorf("the page without JavaScript in %s lacks the notice %q:\n%s", lang, notice, body)
		}
	}
}
