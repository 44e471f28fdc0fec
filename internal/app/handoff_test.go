package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	_ "image/png"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/browser"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/simclock"
)

// TestHandoffEndToEnd: a person waiting in one browser (context 1) presses
// "Continue on another device", by keyboard; the panel shows the code and
// the QR code of the handoff URL, which a second browser (context 2, its
// own storage) "scans" (the test reads the QR image as rendered) and opens.
// The second browser takes the place: the same ticket and position under a
// new token id, the code gone from its address bar. The first browser's
// next poll, exactly when the server said, reads MOVED: it says so, forgets
// its token and polls no more. All over the real App, on memstore.
func TestHandoffEndToEnd(t *testing.T) {
	ctx := t.Context()
	cfg, err := config.FromEnv(func(string) string { return "" }, false)
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New()
	a := app.New(cfg, store, slog.New(slog.NewTextHandler(io.Discard, nil)),
		app.WithServiceOptions(queue.WithClock(simclock.NewFake(time.Now())))) // the queue stands still
	rec := &apiRecorder{h: a.LocalHandler("s3cret")}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	queuePath := "/api/v1/queues/programs/gala"

	call := func(method, path, token, body string) (int, []byte) {
		t.Helper()
		r, _ := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader(body))
		if token != "" {
			r.Header.Set(api.HeaderToken, token)
		} else {
			r.Header.Set("Authorization", "Bearer s3cret")
		}
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	poll := func(token string) (tok api.Token) {
		t.Helper()
		code, b := call("GET", queuePath, token, "")
		if code != http.StatusOK {
			t.Fatalf("GET %s with %s: %d %s", queuePath, token, code, b)
		}
		if err := json.Unmarshal(b, &tok); err != nil {
			t.Fatalf("GET %s: %q: %v", queuePath, b, err)
		}
		return tok
	}

	// Gala is paused, three people ahead: places stand still.
	if code, b := call("PUT", "/api/v1/admin/programs/gala", "", `{"admissionRatePerSecond":5,"paused":true,"displayName":"Gala"}`); code >= 300 {
		t.Fatalf("put gala: %d %s", code, b)
	}
	for range 3 {
		if code, b := call("POST", queuePath, "", ""); code != http.StatusCreated {
			t.Fatalf("enter: %d %s", code, b)
		}
	}
	issued := func() int64 {
		t.Helper()
		p, err := store.GetProgram(ctx, "gala")
		if err != nil {
			t.Fatal(err)
		}
		return p.Issued
	}
	if n := issued(); n != 3 {
		t.Fatalf("issued %d tickets for the three ahead", n)
	}

	// Person A, in the first browser, gets the fourth place.
	first := handoffTab(t)
	browser.Do(t, first, chromedp.Navigate(srv.URL+"/waiting-room/gala?lang=en"))
	browser.WaitFor(t, first, time.Minute, `document.getElementById('pos').textContent === '4'`)
	oldToken := storedPlace(t, first)
	if oldToken == "" {
		t.Fatal("the first browser keeps no token")
	}
	before := poll(oldToken)
	if before.Status != api.StatusWaiting || before.Ticket != 4 || before.Position != 4 {
		t.Fatalf("A's place = %+v, want WAITING, ticket 4, position 4", before)
	}
	if n := issued(); n != 4 {
		t.Fatalf("issued %d tickets with A's, want 4", n)
	}
	entered := rec.answers(t, "POST", queuePath, "")
	if len(entered) != 4 || entered[3].Status != http.StatusCreated {
		t.Fatalf("%d enters answered, want A's (the fourth) 201", len(entered))
	}
	var enterAnswer api.Token
	if err := json.Unmarshal(entered[3].Body, &enterAnswer); err != nil || enterAnswer.TokenID != oldToken || enterAnswer.RetryAfterMs <= 0 {
		t.Fatalf("A's enter answered %s (%v), want its token with a retryAfterMs", entered[3].Body, err)
	}

	// "Continue on another device", by keyboard.
	browser.Do(t, first, chromedp.Focus(chromedp.ID("hoOpen")), chromedp.KeyEvent("\r"))
	browser.WaitFor(t, first, time.Minute, `!document.getElementById('hoPanel').hidden && (i => i.complete && i.naturalWidth > 0)(document.getElementById('hoQr'))`)
	hs := rec.answers(t, "POST", queuePath+"/handoff", oldToken)
	if len(hs) != 1 || hs[0].Status != http.StatusCreated {
		t.Fatalf("handoff requests answered %d times, the first %s; want once, 201", len(hs), answerString(hs))
	}
	var h api.Handoff
	if err := json.Unmarshal(hs[0].Body, &h); err != nil {
		t.Fatalf("handoff answer %q: %v", hs[0].Body, err)
	}
	if !regexp.MustCompile(`^[0-9A-HJKMNP-TV-Z]{16}$`).MatchString(h.Code) || h.URL != srv.URL+"/waiting-room/gala#handoff="+h.Code {
		t.Fatalf("handoff answer = %+v, want a 16-character code and the page's URL with it in the fragment", h)
	}
	shown := browser.Eval[map[string]string](t, first, `(() => {
		const $ = (id) => document.getElementById(id);
		return {code: $('hoCode').textContent, alt: $('hoQr').alt, src: $('hoQr').src};
	})()`)
	if want := h.Code[:4] + " " + h.Code[4:8] + " " + h.Code[8:12] + " " + h.Code[12:]; shown["code"] != want {
		t.Errorf("code shown = %q, want %q", shown["code"], want)
	}
	if shown["alt"] != "QR code to continue on another device" {
		t.Errorf("QR alt = %q", shown["alt"])
	}
	if svg, ok := strings.CutPrefix(shown["src"], "data:image/svg+xml,"); !ok {
		t.Errorf("QR src = %.60q…, want the answer's SVG as a data: URL", shown["src"])
	} else if svg, err := url.PathUnescape(svg); err != nil || svg != h.QRSVG {
		t.Errorf("QR src is not the answer's SVG (%v)", err)
	}
	// The other device opens the URL the QR code holds (internal/qrsvg's tests read its codes back).
	link := h.URL
	browser.Do(t, first, chromedp.Click(chromedp.ID("hoClose")))
	browser.WaitFor(t, first, time.Minute, `document.getElementById('hoPanel').hidden`)

	// The second browser, its own storage, opens the link and takes the place.
	second := handoffTab(t)
	browser.Do(t, second, chromedp.Navigate(srv.URL+"/no-such-page")) // the origin, no place taken
	if n := browser.Eval[int](t, second, `localStorage.length`); n != 0 {
		t.Fatalf("the second browser's storage holds %d items, want its own, empty", n)
	}
	browser.Do(t, second, chromedp.Navigate(link))
	browser.WaitFor(t, second, time.Minute, `document.getElementById('pos').textContent === '4' && !document.getElementById('waiting').hidden`)
	newToken := storedPlace(t, second)
	if newToken == "" || newToken == oldToken {
		t.Fatalf("the second browser keeps token %q (the first's %q): want a new one", newToken, oldToken)
	}
	if href := browser.Eval[string](t, second, `location.href`); href != srv.URL+"/waiting-room/gala" {
		t.Errorf("the second browser's address = %q, want the code gone", href)
	}
	if st := browser.Eval[map[string]any](t, second, `JSON.parse(localStorage.getItem('waitingroom:gala'))`); st["handoff"] != nil || st["handoffKey"] != nil {
		t.Errorf("stored place = %v, want the code and its key gone once the answer is kept", st)
	}
	redeems := rec.answers(t, "POST", queuePath+"/handoff/redeem", "")
	if len(redeems) != 1 || redeems[0].Status != http.StatusCreated { // 201: this redeem moved it (docs/openapi.yaml)
		t.Fatalf("redeems answered %d times, the first %s, want once, 201", len(redeems), answerString(redeems))
	}
	var moved api.Token
	if err := json.Unmarshal(redeems[0].Body, &moved); err != nil || moved.TokenID != newToken || moved.Ticket != before.Ticket || moved.Status != api.StatusWaiting {
		t.Errorf("the redeem answered %s (%v), want the new token %s with A's ticket %d, WAITING", redeems[0].Body, err, newToken, before.Ticket)
	}
	if got := poll(newToken); got.Status != api.StatusWaiting || got.Ticket != before.Ticket || got.Position != before.Position || !got.IssuedAt.Equal(before.IssuedAt.Time) {
		t.Errorf("the moved place = %+v, want WAITING with A's ticket %d, position %d, issued at %v", got, before.Ticket, before.Position, before.IssuedAt)
	}
	if got := poll(oldToken); got.Status != api.StatusMoved || got.Position != 0 || got.RetryAfterMs != 0 || got.Ticket != before.Ticket {
		t.Errorf("the old token reads %+v, want MOVED without position or retryAfterMs", got)
	}
	if n := issued(); n != 4 {
		t.Errorf("issued %d tickets, want still 4: the move takes none", n)
	}
	// The first browser still keeps its token: its storage is its own.
	if got := storedPlace(t, first); got != oldToken {
		t.Errorf("the first browser's stored token = %q before its poll, want %q", got, oldToken)
	}

	// The first browser polls exactly when the last answer said, not before.
	started := func() int { return browser.Eval[int](t, first, `window.__fetches.length`) }
	n := started()
	if n != 2 { // the enter and the handoff
		t.Fatalf("the first browser made %d API requests, want the enter and the handoff: %v", n, browser.Eval[[]string](t, first, `window.__fetches`))
	}
	wait := float64(enterAnswer.RetryAfterMs)
	browser.Advance(t, first, wait-1)
	if started() != n {
		t.Fatalf("the first browser polled before the %v ms the server said", wait)
	}
	browser.Advance(t, first, 1)
	if started() != n+1 {
		t.Fatalf("the first browser did not poll at the %v ms the server said: %v", wait, browser.Eval[[]string](t, first, `window.__fetches`))
	}
	browser.WaitFor(t, first, time.Minute, `!document.getElementById('done').hidden`)
	if got := browser.Text(t, first, "doneTitle"); got != "Your place moved to another device." {
		t.Errorf("the first browser says %q, want the moved text", got)
	}
	if browser.Eval[bool](t, first, `!document.getElementById('waiting').hidden`) {
		t.Error("the first browser still shows the place")
	}
	if got := storedPlace(t, first); got != "" {
		t.Errorf("the first browser still keeps token %q after MOVED", got)
	}
	if p := browser.Pending(t, first); len(p) != 0 {
		t.Errorf("timers armed in the first browser after MOVED: %v", p)
	}
	polls := func() int { return len(rec.answers(t, "GET", queuePath, oldToken)) }
	m := polls()
	if fired := browser.Advance(t, first, float64(time.Hour/time.Millisecond)); fired != 0 || started() != n+1 || polls() != m {
		t.Errorf("in an hour after MOVED the first browser fired %d timers, made %d requests: want none", fired, started()-n-1)
	}
	if got := poll(newToken); got.Status != api.StatusWaiting || got.Ticket != before.Ticket {
		t.Errorf("the second browser's place = %+v after all, want A's, waiting", got)
	}
	if n := issued(); n != 4 {
		t.Errorf("issued %d tickets in the end, want 4", n)
	}
}

// fetchCounter records in window.__fetches each API request a document's
// fetch starts (method and path), as it starts it.
const fetchCounter = `(() => {
  window.__fetches = [];
  const fetch = window.fetch;
  window.fetch = function (input, init) {
    const u = new URL(typeof input === 'string' ? input : input.url, location.href);
    if (u.pathname.startsWith('/api/')) window.__fetches.push(((init && init.method) || 'GET') + ' ' + u.pathname);
    return fetch.apply(this, arguments);
  };
})();`

// handoffTab is a tab in a browser context of its own (its own storage),
// its pages' timers on a clock the test moves, their fetches counted.
func handoffTab(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(browser.Tab(t), 3*time.Minute)
	t.Cleanup(cancel)
	browser.FakeClock(t, ctx)
	browser.AddScript(t, ctx, fetchCounter)
	return ctx
}

// storedPlace is the token the page in ctx keeps for gala, or "".
func storedPlace(t *testing.T, ctx context.Context) string {
	t.Helper()
	return browser.Eval[string](t, ctx, `(JSON.parse(localStorage.getItem('waitingroom:gala')) || {}).token || ''`)
}

// apiRecorder passes requests to h and keeps the queue API's answers. A
// request is recorded as it comes, its answer as the handler returns:
// answers waits for those, since a client may read an answer (one larger
// than the server's buffer) a moment before the handler returns.
type apiRecorder struct {
	h  http.Handler
	mu sync.Mutex
	rs []*apiAnswer
}

type apiAnswer struct {
	Method, Path, Token string
	Status              int
	Body                []byte
	done                chan struct{} // closed once Status and Body are set
}

func (a *apiRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/api/v1/queues/") {
		a.h.ServeHTTP(w, r)
		return
	}
	rec := &apiAnswer{Method: r.Method, Path: r.URL.Path, Token: r.Header.Get(api.HeaderToken), done: make(chan struct{})}
	a.mu.Lock()
	a.rs = append(a.rs, rec)
	a.mu.Unlock()
	tw := &teeWriter{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		a.mu.Lock()
		rec.Status, rec.Body = tw.status, tw.body.Bytes()
		a.mu.Unlock()
		close(rec.done)
	}()
	a.h.ServeHTTP(tw, r)
}

// answerString shows the first of rs.
func answerString(rs []apiAnswer) string {
	if len(rs) == 0 {
		return "none"
	}
	return fmt.Sprintf("%s %s: %d %s", rs[0].Method, rs[0].Path, rs[0].Status, rs[0].Body)
}

// answers are the answers to the requests made so far with method on path
// and token, each awaited (a minute is a hang guard).
func (a *apiRecorder) answers(t *testing.T, method, path, token string) []apiAnswer {
	t.Helper()
	a.mu.Lock()
	var matched []*apiAnswer
	for _, r := range a.rs {
		if r.Method == method && r.Path == path && r.Token == token {
			matched = append(matched, r)
		}
	}
	a.mu.Unlock()
	out := make([]apiAnswer, 0, len(matched))
	for _, r := range matched {
		select {
		case <-r.done:
		case <-time.After(time.Minute):
			t.Fatalf("%s %s: no answer in a minute", method, path)
		}
		a.mu.Lock()
		out = append(out, apiAnswer{Method: r.Method, Path: r.Path, Token: r.Token, Status: r.Status, Body: r.Body})
		a.mu.Unlock()
	}
	return out
}

// teeWriter keeps a copy of the status and body it writes.
type teeWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
	body   bytes.Buffer
}

func (w *teeWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *teeWriter) Write(b []byte) (int, error) {
	w.wrote = true
	w.body.Write(b)
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *teeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
