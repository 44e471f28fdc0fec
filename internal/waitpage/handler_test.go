package waitpage_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/testing/browser"
	"github.com/example/waitingroom/internal/waitpage"
)

// send sends a request to h and returns the recorded answer.
func send(h http.Handler, method, target string, body io.Reader, header http.Header) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, body)
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func newHandler(t *testing.T, q *fakeQueue, opts waitpage.Options) *waitpage.Handler {
	t.Helper()
	h, err := waitpage.New(q, opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestPageStatuses(t *testing.T) {
	q := newFakeQueue()
	q.add("gala", gala())
	h := newHandler(t, q, waitpage.Options{})
	tests := []struct {
		name, path string
		pageErr    error
		status     int
		contains   string
	}{
		// The page carries a join form with the visitor's own
		// Idempotency-Key: no cache may keep it for another visitor.
		{"OK", "/waiting-room/gala", nil, 200, "Gala concert — general sale"},
		{"unknown program", "/waiting-room/nope", nil, 404, "Waiting room not found"},
		{"malformed program", "/waiting-room/-bad!", nil, 400, "This link is not valid"},
		{"malformed program in Korean", "/waiting-room/-bad!?lang=ko", nil, 400, "올바르지 않은 링크입니다"},
		{"too deep", "/waiting-room/gala/more", nil, 404, "Waiting room not found"},
		{"bare prefix", "/waiting-room/", nil, 404, "Waiting room not found"},
		{"store fault", "/waiting-room/gala", errors.New("dynamodb: throttled (internal detail)"), 503, "Please wait a moment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q.mu.Lock()
			q.pageErr = tt.pageErr
			q.mu.Unlock()
			w := send(h, "GET", tt.path, nil, nil)
			if w.Code != tt.status {
				t.Errorf("status = %d, want %d", w.Code, tt.status)
			}
			body := w.Body.String()
			if !strings.Contains(body, tt.contains) {
				t.Errorf("body lacks %q:\n%s", tt.contains, body)
			}
			if strings.Contains(body, "internal detail") {
				t.Error("the page shows the error's internals")
			}
			want := http.Header{
				"Content-Type":           {"text/html; charset=utf-8"},
				"Cache-Control":          {"no-cache"},
				"X-Content-Type-Options": {"nosniff"},
			}
			if tt.status == 200 {
				want["Cache-Control"] = []string{"private, no-store"}
			}
			if tt.status == 503 {
				want["Retry-After"] = []string{"5"}
				if !strings.Contains(body, `<meta http-equiv="refresh" content="5">`) {
					t.Error("the 503 page does not refresh itself")
				}
			}
			got := http.Header{}
			for k := range want {
				got[k] = w.Header().Values(k)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
			if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
				t.Errorf("Content-Security-Policy = %q", csp)
			}
		})
	}
}

var assetRef = regexp.MustCompile(`/waiting-room/assets/(app|push)\.([0-9a-f]{8})\.(js|css)`)

// TestAssetsAreHashedAndCachedForAYear holds the first visit to its
// budget: 25 KiB (9.5 KiB gzipped), and 30 KiB (11.5 KiB) with push.js,
// which only a deployment with push serves.
func TestAssetsAreHashedAndCachedForAYear(t *testing.T) {
	for _, tc := range []struct {
		name          string
		pushKey       string
		assets        int
		budget, gzBud int
	}{
		{"without push", "", 2, 25 << 10, 9<<10 + 512},
		{"with push", "BPushKeyForTheBudget", 3, 30 << 10, 11<<10 + 512},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkAssets(t, tc.pushKey, tc.assets, tc.budget, tc.gzBud)
		})
	}
}

func checkAssets(t *testing.T, pushKey string, assets, budget, gzBudget int) {
	q := newFakeQueue()
	q.add("gala", gala())
	h := newHandler(t, q, waitpage.Options{PushKey: func(context.Context) string { return pushKey }})
	page := send(h, "GET", "/waiting-room/gala", nil, nil).Body.String()
	refs := assetRef.FindAllStringSubmatch(page, -1)
	if len(refs) != assets {
		t.Fatalf("page references %d hashed assets, want %d: %q", len(refs), assets, refs)
	}
	var total, totalGzip int
	for _, ref := range refs {
		plain, gz := checkAsset(t, h, ref[0], ref[2], ref[3])
		total += plain
		totalGzip += gz
	}
	if w := send(h, "GET", "/waiting-room/assets/app.00000000.js", nil, nil); w.Code != 404 {
		t.Errorf("unknown asset: status %d, want 404", w.Code)
	}
	// A budget, so that the page stays small: docs/waiting-room.md states
	// the sizes.
	var zpage bytes.Buffer
	zw := gzip.NewWriter(&zpage)
	_, _ = zw.Write([]byte(page))
	_ = zw.Close()
	t.Logf("the HTML: %d B, gzip %d B", len(page), zpage.Len())
	total += len(page)
	totalGzip += zpage.Len()
	t.Logf("total: %d B, gzip %d B", total, totalGzip)
	if total > budget || totalGzip > gzBudget {
		t.Errorf("page and assets weigh %d B (gzip %d B), over the %d B (%d B) budget", total, totalGzip, budget, gzBudget)
	}
}

// checkAsset checks the asset at ref (its name hashed to hash, its type
// ext): its hash, a year's caching, its type, and its gzip, the same
// bytes; it returns its size plain and gzipped.
func checkAsset(t *testing.T, h http.Handler, ref, hash, ext string) (plain, gzipped int) {
	t.Helper()
	w := send(h, "GET", ref, nil, nil)
	if w.Code != 200 {
		t.Fatalf("%s: status %d", ref, w.Code)
	}
	sum := sha256.Sum256(w.Body.Bytes())
	if got := hex.EncodeToString(sum[:4]); got != hash {
		t.Errorf("%s: the content hashes to %s", ref, got)
	}
	if got := w.Header().Get("Cache-Control"); got != "public, max-age=31536000, immutable" {
		t.Errorf("%s: Cache-Control = %q", ref, got)
	}
	wantType := map[string]string{"js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8"}[ext]
	if got := w.Header().Get("Content-Type"); got != wantType {
		t.Errorf("%s: Content-Type = %q, want %q", ref, got, wantType)
	}

	gz := send(h, "GET", ref, nil, http.Header{"Accept-Encoding": {"br, gzip"}})
	if gz.Header().Get("Content-Encoding") != "gzip" {
		t.Fatalf("%s: not gzipped for a client that accepts it", ref)
	}
	t.Logf("%s: %d B, gzip %d B", ref, w.Body.Len(), gz.Body.Len())
	gzipped = gz.Body.Len()
	zr, err := gzip.NewReader(gz.Body)
	if err != nil {
		t.Fatal(err)
	}
	unzipped, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(unzipped, w.Body.Bytes()) {
		t.Errorf("%s: gzip body differs from the plain one (%v)", ref, err)
	}
	return w.Body.Len(), gzipped
}

var handoffRef = regexp.MustCompile(` data-handoff="(/waiting-room/assets/handoff\.([0-9a-f]{8})\.js)"`)

// TestHandoffScriptOnDemand: the page names handoff.js for app.js to
// fetch when needed, and loads no script of it: a hashed asset like the
// others, with the handoff's texts in every language (app.js has none of
// them), within its budget of 10 KiB (4 KiB gzipped).
func TestHandoffScriptOnDemand(t *testing.T) {
	q := newFakeQueue()
	q.add("gala", gala())
	h := newHandler(t, q, waitpage.Options{})
	page := send(h, "GET", "/waiting-room/gala", nil, nil).Body.String()
	ref := handoffRef.FindStringSubmatch(page)
	if ref == nil {
		t.Fatalf("the page names no handoff script:\n%s", page)
	}
	if strings.Contains(page, `<script src="`+ref[1]) || strings.Count(page, "<script") != 1 {
		t.Errorf("the page loads handoff.js, or a script other than app.js:\n%s", page)
	}
	plain, gz := checkAsset(t, h, ref[1], ref[2], "js")
	if plain > 10<<10 || gz > 4<<10 {
		t.Errorf("handoff.js weighs %d B (gzip %d B), over its 10 KiB (4 KiB) budget", plain, gz)
	}
	js := send(h, "GET", ref[1], nil, nil).Body.String()
	app := send(h, "GET", assetRef.FindString(page[strings.Index(page, "<script"):]), nil, nil).Body.String()
	for _, want := range []string{`"handoffNotFound":"This code is not valid`, `"handoffAsk":"Bring your place`, `"handoffQr":"다른 기기에서 계속하기`} {
		if !strings.Contains(js, want) {
			t.Errorf("handoff.js lacks %s", want)
		}
	}
	for _, unwanted := range []string{"/*TEXT*/", `"position"`} {
		if strings.Contains(js, unwanted) {
			t.Errorf("handoff.js holds %s", unwanted)
		}
	}
	for _, unwanted := range []string{"handoffNotFound", "handoffAsk", "handoffValid"} {
		if strings.Contains(app, unwanted) {
			t.Errorf("app.js holds %s", unwanted)
		}
	}
}

func TestScriptCarriesEveryLanguage(t *testing.T) {
	q := newFakeQueue()
	q.add("gala", gala())
	h := newHandler(t, q, waitpage.Options{})
	page := send(h, "GET", "/waiting-room/gala", nil, nil).Body.String()
	js := send(h, "GET", assetRef.FindString(page[strings.Index(page, "<script"):]), nil, nil).Body.String()
	// Each script carries the texts it names, in every language; the
	// server renders the page's own (youAreInLine) and push.js its own.
	for _, want := range []string{`"position":"Your place in line"`, `"position":"내 대기 순서"`} {
		if !strings.Contains(js, want) {
			t.Errorf("app.js lacks %s", want)
		}
	}
	for _, unwanted := range []string{"/*TEXT*/", `"youAreInLine"`, `"notifyOn"`} {
		if strings.Contains(js, unwanted) {
			t.Errorf("app.js holds %s", unwanted)
		}
	}
}

func TestServerLanguage(t *testing.T) {
	q := newFakeQueue()
	q.add("gala", gala())
	h := newHandler(t, q, waitpage.Options{})
	tests := []struct {
		query, acceptLanguage, wantLang, wantText string
	}{
		{"", "", "en", "You&#39;re in line"},
		{"", "ko-KR,ko;q=0.9,en;q=0.8", "ko", "대기 중입니다"},
		{"", "fr-FR, ko;q=0.5", "ko", "대기 중입니다"},
		{"?lang=en", "ko-KR", "en", "You&#39;re in line"},
		{"?lang=ko", "", "ko", "대기 중입니다"},
		{"?lang=KO", "en", "ko", "대기 중입니다"},
		{"?lang=Ko-kr", "en", "ko", "대기 중입니다"},
		{"?lang=EN", "ko", "en", "You&#39;re in line"},
		{"", "KO-KR, en;q=0.5", "ko", "대기 중입니다"},
		{"?lang=xx", "", "en", "You&#39;re in line"},
		{"?lang=constructor", "", "en", "You&#39;re in line"},
		{"?lang=__proto__", "ko", "ko", "대기 중입니다"},
		{"", "__proto__, constructor", "en", "You&#39;re in line"},
	}
	for _, tt := range tests {
		w := send(h, "GET", "/waiting-room/gala"+tt.query, nil, http.Header{"Accept-Language": {tt.acceptLanguage}})
		body := w.Body.String()
		if !strings.Contains(body, `<html lang="`+tt.wantLang+`">`) || !strings.Contains(body, tt.wantText) {
			t.Errorf("%q, Accept-Language %q: want lang %s with %q", tt.query, tt.acceptLanguage, tt.wantLang, tt.wantText)
		}
	}
}

func TestOptions(t *testing.T) {
	q := newFakeQueue()
	q.add("gala", gala())
	t.Run("logo and override", func(t *testing.T) {
		h := newHandler(t, q, waitpage.Options{
			LogoURL:  "https://cdn.example.com/logo.png",
			Override: `{{define "footer"}}<footer class="muted">Help: 1588-0000</footer>{{end}}`,
		})
		body := send(h, "GET", "/waiting-room/gala", nil, nil).Body.String()
		for _, want := range []string{`<img class="logo" src="https://cdn.example.com/logo.png" alt="">`, `<footer class="muted">Help: 1588-0000</footer>`} {
			if !strings.Contains(body, want) {
				t.Errorf("page lacks %s", want)
			}
		}
	})
	t.Run("brand override replaces the title block", func(t *testing.T) {
		h := newHandler(t, q, waitpage.Options{Override: `{{define "brand"}}<header class="brand"><h1>Our own {{.Title}}</h1></header>{{end}}`})
		body := send(h, "GET", "/waiting-room/gala", nil, nil).Body.String()
		if !strings.Contains(body, "<h1>Our own Gala concert — general sale</h1>") || strings.Count(body, "<h1>") != 1 {
			t.Errorf("brand block not replaced:\n%s", body)
		}
	})
	t.Run("absolute API base adds its origin to connect-src", func(t *testing.T) {
		h := newHandler(t, q, waitpage.Options{APIBase: "https://api.example.com/api/v1/queues/programs/"})
		w := send(h, "GET", "/waiting-room/gala", nil, nil)
		if !strings.Contains(w.Header().Get("Content-Security-Policy"), "connect-src 'self' https://api.example.com;") {
			t.Errorf("CSP = %q", w.Header().Get("Content-Security-Policy"))
		}
		if !strings.Contains(w.Body.String(), `data-api="https://api.example.com/api/v1/queues/programs/"`) {
			t.Error("the page does not carry the API base")
		}
	})
	for name, opts := range map[string]waitpage.Options{
		"javascript logo":  {LogoURL: "javascript:alert(1)"},
		"http logo":        {LogoURL: "http://cdn.example.com/logo.png"},
		"relative logo":    {LogoURL: "logo.png"},
		"API base no path": {APIBase: "api/v1"},
		"broken override":  {Override: `{{define "footer"}}`},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := waitpage.New(q, opts); err == nil {
				t.Error("New accepted it")
			}
		})
	}
}

// The no-JavaScript path: the form enters and sets the cookie; the page
// then renders the place from the server's poll.
func TestNoScriptFallback(t *testing.T) {
	q := newFakeQueue()
	s := gala()
	s.retry = []time.Duration{2300 * time.Millisecond}
	s.info.TargetURL = "https://tickets.example.com/buy?event=7"
	q.add("gala", s)
	h := newHandler(t, q, waitpage.Options{})
	form := func(v url.Values) io.Reader { return strings.NewReader(v.Encode()) }
	post := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}

	page := send(h, "GET", "http://127.0.0.1:3000/waiting-room/gala", nil, nil).Body.String()
	key := regexp.MustCompile(`name="key" value="([A-Za-z0-9]+)"`).FindStringSubmatch(page)
	if key == nil || !strings.Contains(page, `action="/waiting-room/gala/enter"`) {
		t.Fatalf("no join form with a key:\n%s", page)
	}

	w := send(h, "POST", "http://127.0.0.1:3000/waiting-room/gala/enter", form(url.Values{"key": {key[1]}, "lang": {"en"}}), post)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/waiting-room/gala?lang=en" {
		t.Fatalf("enter: %d to %q, want 303 to the page", w.Code, w.Header().Get("Location"))
	}
	cookie := w.Result().Cookies()
	if len(cookie) != 1 {
		t.Fatalf("cookies = %v", cookie)
	}
	c := cookie[0]
	if !c.HttpOnly || c.Secure || c.SameSite != http.SameSiteLaxMode || c.Path != "/waiting-room/gala" || c.MaxAge <= 0 {
		t.Errorf("cookie = %+v, want HttpOnly, SameSite=Lax, not Secure on plain-HTTP loopback, the program's Path", c)
	}
	// A double submit of the same form keeps the one place.
	again := send(h, "POST", "http://127.0.0.1:3000/waiting-room/gala/enter", form(url.Values{"key": {key[1]}}), post)
	if again.Result().Cookies()[0].Value != c.Value {
		t.Error("a resubmitted form got another token")
	}

	withCookie := http.Header{"Cookie": {c.Name + "=" + c.Value}}
	w = send(h, "GET", "http://127.0.0.1:3000/waiting-room/gala", nil, withCookie)
	body := w.Body.String()
	for _, want := range []string{
		`<noscript><meta http-equiv="refresh" content="3"></noscript>`, // 2.3 s, rounded up
		`<p class="position">1,367</p>`,
		"about 5 min",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s:\n%s", want, body)
		}
	}
	if got := w.Header().Get("Cache-Control"); got != "private, no-store" {
		t.Errorf("a page with a person's place: Cache-Control = %q, want private, no-store", got)
	}
	// Paused, as the answer says.
	q.mu.Lock()
	s.info.Paused = true
	q.mu.Unlock()
	if body := send(h, "GET", "http://127.0.0.1:3000/waiting-room/gala", nil, withCookie).Body.String(); !strings.Contains(body, `<p class="state">Admission is paused for now. Your place is kept.</p>`) {
		t.Errorf("paused page lacks the paused line:\n%s", body)
	}
	q.mu.Lock()
	s.info.Paused = false
	q.mu.Unlock()

	// Admitted: a refresh straight on to the target, query kept, pass added.
	q.mu.Lock()
	tok := q.tokens[c.Value]
	tok.status, tok.pass, tok.expiresAt = api.StatusAdmitted, "h.p.s", time.Now().Add(time.Minute)
	q.mu.Unlock()
	w = send(h, "GET", "http://127.0.0.1:3000/waiting-room/gala", nil, withCookie)
	body = w.Body.String()
	if want := `<noscript><meta http-equiv="refresh" content="0; url=https://tickets.example.com/buy?event=7&amp;admissionPass=h.p.s"></noscript>`; !strings.Contains(body, want) {
		t.Errorf("admitted page lacks %s:\n%s", want, body)
	}
	// It carries the pass: no cache keeps it, as no cache keeps the API's.
	if got := w.Header().Get("Cache-Control"); got != "private, no-store" {
		t.Errorf("the admitted page, with the pass: Cache-Control = %q, want private, no-store", got)
	}

	// Expired: explained, with a form that enters afresh.
	q.set(c.Value, api.StatusExpired)
	body = send(h, "GET", "http://127.0.0.1:3000/waiting-room/gala", nil, withCookie).Body.String()
	if !strings.Contains(body, "Your admission has expired") || !strings.Contains(body, `name="again" value="1"`) {
		t.Errorf("expired page does not offer to enter again:\n%s", body)
	}
	// A no-show: expired with no admission, said as such.
	q.set(c.Value, statusNoShow)
	body = send(h, "GET", "http://127.0.0.1:3000/waiting-room/gala", nil, withCookie).Body.String()
	if !strings.Contains(body, "you did not come back in time") || !strings.Contains(body, `name="again" value="1"`) {
		t.Errorf("a no-show's page does not say so, or does not offer to enter again:\n%s", body)
	}

	// An unknown token: the cookie is cleared and the join form shown.
	w = send(h, "GET", "http://127.0.0.1:3000/waiting-room/gala", nil, http.Header{"Cookie": {"wr_token=AAAAAAAAAAAAAAAAAAAAAA"}})
	if cs := w.Result().Cookies(); len(cs) != 1 || cs[0].MaxAge >= 0 || !strings.Contains(w.Body.String(), `action="/waiting-room/gala/enter"`) {
		t.Errorf("unknown token: cookies %v; want it cleared and the join form", cs)
	}
}

func TestNoScriptEnterRefusals(t *testing.T) {
	q := newFakeQueue()
	q.add("gala", gala())
	closed := gala()
	closed.info.Closed = true
	q.add("closed", closed)
	full := gala()
	full.full = true
	q.add("full", full)
	h := newHandler(t, q, waitpage.Options{})
	post := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	tests := []struct {
		name, target string
		header       http.Header
		status       int
		says         string
	}{
		{"closed program", "/waiting-room/closed/enter", post, http.StatusConflict, "closed to new entries"},
		// A full line says so and offers the form again, to try later.
		{"full line", "/waiting-room/full/enter", post, http.StatusConflict, `The line is full for now. Please try again in a few minutes.`},
		{"unknown program", "/waiting-room/nope/enter", post, http.StatusNotFound, ""},
		{"cross-site form", "/waiting-room/gala/enter", http.Header{"Content-Type": post["Content-Type"], "Sec-Fetch-Site": {"cross-site"}}, http.StatusForbidden, ""},
		{"GET is not an enter", "/waiting-room/gala/enter", nil, http.StatusNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := "POST"
			if tt.header == nil {
				method = "GET"
			}
			w := send(h, method, "https://wr.example.com"+tt.target, strings.NewReader("key=k1"), tt.header)
			if w.Code != tt.status {
				t.Errorf("status = %d, want %d", w.Code, tt.status)
			}
			if body := w.Body.String(); !strings.Contains(body, tt.says) {
				t.Errorf("the page does not say %q:\n%s", tt.says, body)
			}
			if tt.name == "full line" && !strings.Contains(w.Body.String(), `action="/waiting-room/full/enter"`) {
				t.Error("a full line does not offer to try again")
			}
			if len(w.Result().Cookies()) != 0 {
				t.Error("a refused enter set a cookie")
			}
		})
	}
	if len(q.tokens) != 0 {
		t.Errorf("refused enters made %d tokens", len(q.tokens))
	}
}

func TestCookieSecureUnlessPlainLoopback(t *testing.T) {
	q := newFakeQueue()
	q.add("gala", gala())
	h := newHandler(t, q, waitpage.Options{})
	tests := []struct {
		target string
		header http.Header
		secure bool
	}{
		{"http://127.0.0.1:3000", nil, false},
		{"http://localhost:3000", nil, false},
		{"http://[::1]:3000", nil, false},
		{"https://127.0.0.1:3000", nil, true},
		{"http://127.0.0.1:3000", http.Header{"X-Forwarded-Proto": {"https"}}, true},
		{"http://wr.example.com", nil, true},
		{"https://abc.execute-api.eu-west-1.amazonaws.com", nil, true},
	}
	for _, tt := range tests {
		hdr := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
		for k, v := range tt.header {
			hdr[k] = v
		}
		w := send(h, "POST", tt.target+"/waiting-room/gala/enter", strings.NewReader(""), hdr)
		cs := w.Result().Cookies()
		if len(cs) != 1 || cs[0].Secure != tt.secure {
			t.Errorf("%s %v: cookies %v, want Secure=%v", tt.target, tt.header, cs, tt.secure)
		}
	}
}

// TestRefusesFraming: every answer of the page's paths forbids framing
// (clickjacking the join button or the pass's link), by CSP and by
// X-Frame-Options for browsers without frame-ancestors.
func TestRefusesFraming(t *testing.T) {
	q := newFakeQueue()
	q.add("gala", gala())
	h := newHandler(t, q, waitpage.Options{})
	page := send(h, "GET", "/waiting-room/gala", nil, nil).Body.String()
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	tests := []struct {
		name, method, target string
		header               http.Header
		status               int
	}{
		{"page", "GET", "/waiting-room/gala", nil, 200},
		{"unknown program", "GET", "/waiting-room/nope", nil, 404},
		{"malformed program", "GET", "/waiting-room/-bad!", nil, 400},
		{"no-JavaScript enter", "POST", "/waiting-room/gala/enter", form, 303},
		{"cross-site enter", "POST", "/waiting-room/gala/enter", http.Header{"Content-Type": form["Content-Type"], "Sec-Fetch-Site": {"cross-site"}}, 403},
		{"asset", "GET", assetRef.FindString(page), nil, 200},
		{"unknown asset", "GET", "/waiting-room/assets/app.00000000.js", nil, 404},
		{"other method", "PUT", "/waiting-room/gala", nil, 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := send(h, tt.method, "http://127.0.0.1:3000"+tt.target, strings.NewReader(""), tt.header)
			if w.Code != tt.status {
				t.Errorf("status = %d, want %d", w.Code, tt.status)
			}
			if got := w.Header().Values("X-Frame-Options"); !cmp.Equal(got, []string{"DENY"}) {
				t.Errorf("X-Frame-Options = %q, want DENY", got)
			}
			if csp := w.Header().Get("Content-Security-Policy"); !regexp.MustCompile(`(^|; )frame-ancestors 'none'(;|$)`).MatchString(csp) {
				t.Errorf("Content-Security-Policy = %q, want frame-ancestors 'none'", csp)
			}
		})
	}
}

// TestNoScriptRevoked: without JavaScript, a revoked token's page says
// its place was withdrawn, and offers to enter again.
func TestNoScriptRevoked(t *testing.T) {
	q := newFakeQueue()
	q.add("gala", gala())
	h := newHandler(t, q, waitpage.Options{})
	page := send(h, "GET", "http://127.0.0.1:3000/waiting-room/gala", nil, nil).Body.String()
	key := strings.SplitN(strings.SplitN(page, `name="key" value="`, 2)[1], `"`, 2)[0]
	w := send(h, "POST", "http://127.0.0.1:3000/waiting-room/gala/enter", strings.NewReader(url.Values{"key": {key}, "lang": {"en"}}.Encode()),
		http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
	c := w.Result().Cookies()[0]
	q.set(c.Value, api.StatusRevoked)
	body := send(h, "GET", "http://127.0.0.1:3000/waiting-room/gala?lang=en", nil, http.Header{"Cookie": {c.Name + "=" + c.Value}}).Body.String()
	for _, want := range []string{"Your place was withdrawn", "The organiser withdrew this place at ", `action="/waiting-room/gala/enter"`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}
}

// BenchmarkWorkerSolve solves fresh random challenges of each size with
// the page's own Web Worker in Chromium, one a loop; tries/op is the mean
// number of hashes a solve took (2^bits expected), ns/try the page's cost
// of one. docs/benchmarks.md, "Proof of work".
func BenchmarkWorkerSolve(b *testing.B) {
	q := newFakeQueue()
	q.add("gala", gala())
	srv, _ := q.serve(b, waitpage.Options{})
	ctx := browser.Tab(b)
	browser.Do(b, ctx, chromedp.Navigate(srv.URL+"/waiting-room/gala"))
	for bits := 14; bits <= 22; bits += 2 {
		b.Run(fmt.Sprintf("bits=%d", bits), func(b *testing.B) {
			var tries float64
			for b.Loop() {
				solution, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`new Promise((resolve) => {
					const w = new Worker(document.getElementById('wr').dataset.pow);
					w.onmessage = (e) => { if (e.data.solution !== undefined) { w.terminate(); resolve(e.data.solution); } };
					w.postMessage({ challenge: crypto.randomUUID(), bits: %d });
				})`, bits), chromedp.EvalAwaitPromise))
				if err != nil {
					b.Fatal(err)
				}
				n, err := strconv.ParseInt(solution, 36, 64)
				if err != nil {
					b.Fatalf("solution %q: %v", solution, err)
				}
				tries += float64(n + 1)
			}
			b.ReportMetric(tries/float64(b.N), "tries/op")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/tries, "ns/try")
		})
	}
}
