package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/testing/browser"
	"github.com/example/waitingroom/internal/testing/clocktest"
	"github.com/example/waitingroom/internal/tools/bench"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the waiting state's screenshot, from the real server, to docs/img/waiting-room.png")

// recordCalls wraps the page's fetch: every API request it makes is kept
// in sessionStorage (so it survives a reload and the redirect to the
// site), with its start and end as the page's clock says, how many were
// in flight when it started, and what the answer said.
const recordCalls = `(() => {
  if (!location.pathname.startsWith('/waiting-room/')) return;
  const KEY = 'e2e:calls';
  const doc = performance.timeOrigin;
  const orig = window.fetch.bind(window);
  let inFlight = 0;
  window.fetch = async (input, init = {}) => {
    const h = new Headers(init.headers || {});
    const c = { doc, method: init.method || 'GET', token: h.get('X-Queue-Token') || '', start: performance.now(), atOnce: ++inFlight };
    const keep = () => {
      const all = JSON.parse(sessionStorage.getItem(KEY) || '[]');
      all.push(c);
      sessionStorage.setItem(KEY, JSON.stringify(all));
    };
    let res;
    try {
      res = await orig(input, init);
    } catch (e) {
      c.end = performance.now(); inFlight--; c.httpStatus = 0; keep();
      throw e;
    }
    c.end = performance.now();
    inFlight--;
    c.httpStatus = res.status;
    try {
      const b = await res.clone().json();
      Object.assign(c, { status: b.status, tokenId: b.tokenId, ticket: b.ticket, position: b.position, retryAfterMs: b.retryAfterMs, admissionPass: b.admissionPass });
    } catch { /* not JSON */ }
    keep();
    return res;
  };
})();`

// pageCall is one request of recordCalls.
type pageCall struct {
	Doc           float64 `json:"doc"` // the document's time origin, Unix ms
	Method        string  `json:"method"`
	Token         string  `json:"token"`
	Start         float64 `json:"start"` // ms since Doc
	End           float64 `json:"end"`
	AtOnce        int     `json:"atOnce"`
	HTTPStatus    int     `json:"httpStatus"`
	Status        string  `json:"status"`
	TokenID       string  `json:"tokenId"`
	Ticket        int64   `json:"ticket"`
	Position      int64   `json:"position"`
	RetryAfterMs  float64 `json:"retryAfterMs"`
	AdmissionPass string  `json:"admissionPass"`
}

// TestWaitingRoomEndToEnd is a person's visit on the real local server
// (in-memory store): 1,233 people are already in line; the page enters and
// shows the place, the progress bar and the estimate, in English and in
// Korean; a reload keeps the token; the admin admits people over HTTP and
// the first poll after the admission takes effect hears it, and goes to
// the demo site with the pass, where the person is in. The page's timers
// and the server's clock move together, only when the test moves them
// (lockstep), so every poll's timing is exact: each starts exactly the
// retryAfterMs of the answer before it after that answer, never two at once.
func TestWaitingRoomEndToEnd(t *testing.T) {
	t.Parallel()
	const secret = "s3cret"
	server := clocktest.NewManual(time.Now())
	// The default program cache (PROGRAM_CACHE_TTL empty), as deployed:
	// an admission takes effect at the effectiveAt it answers.
	base, _ := startWith(t, seams{clock: server}, map[string]string{"ADMIN_TOKEN": secret, "POLL_TIERS": "100:1s,inf:1s+-400ms", "PROGRAM_CACHE_TTL": ""}, "-demo-rate", "2")
	admin := base + "/api/v1/admin/programs/demo"
	pageURL := base + "/waiting-room/demo"
	// The demo program sends admitted people to the demo site; the admin
	// adds a notice, which shows once it takes effect.
	if code, body := call(t, "PUT", admin, "", secret, `{"notice":"Saturday is sold out; Sunday still has seats."}`); code != 200 || body["targetUrl"] != base+"/demo-site/demo" {
		t.Fatalf("the demo program: %d %v, want its targetUrl the demo site", code, body)
	}
	server.Advance(config.DefaultProgramCacheTTL)
	crowd(t, base+"/api/v1/queues/programs/demo", 1233)

	ctx, cancel := context.WithTimeout(browser.Tab(t), 90*time.Second)
	defer cancel()
	browser.FakeClock(t, ctx)
	browser.AddScript(t, ctx, recordCalls)
	steps := lockstep{t: t, ctx: ctx, server: server}
	browser.Do(t, ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Navigate(pageURL+"?lang=en"))
	browser.WaitFor(t, ctx, 10*time.Second, `document.getElementById('pos').textContent !== '–'`)

	// WAITING, the place the server answered, the estimate, the bar.
	calls := recorded(t, ctx)
	first := calls[0]
	if first.Method != "POST" || first.HTTPStatus != 201 || first.Status != "WAITING" || first.Ticket != 1234 {
		t.Fatalf("the page's first request: %+v, want an enter answered 201 WAITING with ticket 1234", first)
	}
	token := first.TokenID
	checkShows(t, ctx, "Your place in line", "about ")
	if got := browser.Text(t, ctx, "noticeText"); got != "Saturday is sold out; Sunday still has seats." {
		t.Errorf("notice = %q", got)
	}
	if got := browser.Eval[string](t, ctx, `document.querySelector('h1').textContent`); got != demoProfile.DisplayName {
		t.Errorf("title = %q, want the demo program's %q", got, demoProfile.DisplayName)
	}

	// A reload keeps the token: it polls at once, it does not enter again.
	before := len(calls)
	browser.Do(t, ctx, chromedp.Reload())
	browser.WaitFor(t, ctx, 10*time.Second, `(JSON.parse(sessionStorage.getItem('e2e:calls')) || []).length > `+fmt.Sprint(before))
	if got := storedToken(t, ctx); got != token {
		t.Errorf("after a reload the page keeps token %q, want %q", got, token)
	}
	for _, c := range recorded(t, ctx)[before:] {
		if c.Method != "GET" || c.Token != token {
			t.Errorf("after the reload: %s with token %q, want GET with %q", c.Method, c.Token, token)
		}
	}
	if code, body := call(t, "GET", admin, "", secret, ""); code != 200 || body["issued"] != float64(1234) {
		t.Errorf("counters after the reload: %d %v, want 1234 issued", code, body)
	}

	// Korean, in a second tab (on real timers): the same place, Korean text.
	ko, cancelKo := chromedp.NewContext(ctx)
	browser.Do(t, ko, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Navigate(pageURL+"?lang=ko"))
	browser.WaitFor(t, ko, 10*time.Second, `document.getElementById('pos').textContent !== '–'`)
	if got := browser.Eval[[]string](t, ko, `[document.documentElement.lang, document.querySelector('[data-t=position]').textContent, document.getElementById('eta').textContent, document.querySelector('[data-t=keepOpen]').textContent]`); got[0] != "ko" || got[1] != "내 대기 순서" || !strings.HasPrefix(got[2], "약 ") || !strings.HasSuffix(got[2], "분") || !strings.HasPrefix(got[3], "이 페이지를 열어 두세요") {
		t.Errorf("Korean page: lang, label, estimate, hint = %q", got)
	}
	if got := storedToken(t, ko); got != token {
		t.Errorf("the Korean tab has token %q, want the same place %q", got, token)
	}
	browser.Screenshot(t, ko, "waiting-ko.png")
	cancelKo()

	// The admin admits 400 people: the first poll after it takes effect
	// moves the place and the bar.
	effective := admit(t, admin, secret, 400)
	for at := (time.Time{}); at.Before(effective); {
		at, _ = steps.poll()
	}
	if s := checkShows(t, ctx, "Your place in line", "about "); s.BarValue < 400 || s.Calls[len(s.Calls)-1].Position > first.Position-400 {
		t.Errorf("after 400 admitted: place %d, progress bar value %v; want at most %d and at least 400", s.Calls[len(s.Calls)-1].Position, s.BarValue, first.Position-400)
	}
	png := browser.Screenshot(t, ctx, "waiting-en.png")
	if *updateScreenshot {
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "img", "waiting-room.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Ten polls more to measure, then the admin admits everyone left: the
	// polls before the admission takes effect hear WAITING, the first at
	// or after it ADMITTED; the page goes to the site.
	for range 10 {
		steps.poll()
	}
	code, counters := call(t, "GET", admin, "", secret, "")
	if code != 200 {
		t.Fatalf("counters: %d %v", code, counters)
	}
	effective = admit(t, admin, secret, int64(counters["waiting"].(float64)))
	var (
		at   time.Time
		last pageCall
	)
	for last.Status != "ADMITTED" {
		at, last = steps.poll()
		if at.Before(effective) != (last.Status == "WAITING") {
			t.Fatalf("a poll %v after the admission takes effect answered %s", at.Sub(effective), last.Status)
		}
	}
	browser.WaitFor(t, ctx, 15*time.Second, `location.pathname === '/demo-site/demo' && document.querySelector('h1')`)
	if last.TokenID != token || strings.Count(last.AdmissionPass, ".") != 2 {
		t.Fatalf("the page's last answer: %+v, want ADMITTED for %s with a pass (a JWS)", last, token)
	}
	// The site took the pass (its Gate exchanges it for a cookie and
	// redirects once to the clean URL; without a valid one it would have
	// sent the person back to the waiting room) and says the person is in.
	site := browser.Eval[[]string](t, ctx, `[location.href, document.querySelector('h1').textContent, document.querySelector('[data-ticket]').textContent, String(performance.getEntriesByType('navigation')[0].redirectCount)]`)
	if want := []string{base + "/demo-site/demo", "You're in", "1234", "1"}; !slices.Equal(site, want) {
		t.Errorf("the site: URL, heading, ticket, redirects = %q, want %q", site, want)
	}
	browser.Screenshot(t, ctx, "admitted.png")
	checkSchedule(t, recorded(t, ctx))
}

// lockstep moves the page's fake clock (browser.FakeClock) and the
// server's together, one poll at a time.
type lockstep struct {
	t      *testing.T
	ctx    context.Context
	server clocktest.Manual
}

// poll waits for the page to arm its next poll, moves both clocks to it,
// fires it, and returns the server's time at the poll and its answer.
func (l lockstep) poll() (time.Time, pageCall) {
	l.t.Helper()
	browser.WaitFor(l.t, l.ctx, 10*time.Second, `__clock.pending().length > 0`)
	pending := browser.Pending(l.t, l.ctx)
	if len(pending) != 1 {
		l.t.Fatalf("the page has timers armed in %v ms; want one, its next poll", pending)
	}
	n := len(recorded(l.t, l.ctx))
	l.server.Advance(time.Duration(pending[0] * float64(time.Millisecond)))
	at := l.server.Now()
	browser.Next(l.t, l.ctx)
	browser.WaitFor(l.t, l.ctx, 10*time.Second, fmt.Sprintf(`(JSON.parse(sessionStorage.getItem('e2e:calls')) || []).length > %d`, n))
	return at, recorded(l.t, l.ctx)[n]
}

// crowd makes n people enter url, 8 at a time.
func crowd(t *testing.T, url string, n int) {
	t.Helper()
	eightAtATime(n, func() bool {
		resp, err := http.Post(url, "", nil)
		if err != nil {
			t.Error(err)
			return false
		}
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Errorf("enter: %d", resp.StatusCode)
			return false
		}
		return true
	})
}

// eightAtATime calls enter n times from eight goroutines and returns when
// all are done; a goroutine stops at its first call that answers false.
func eightAtATime(n int, enter func() bool) {
	next := make(chan struct{}, n)
	for range n {
		next <- struct{}{}
	}
	close(next)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range next {
				if !enter() {
					return
				}
			}
		})
	}
	wg.Wait()
}

// admit admits n people to the program at url and returns when the
// admission takes effect.
func admit(t *testing.T, url, secret string, n int64) time.Time {
	t.Helper()
	code, body := call(t, "POST", url+"/admissions", "", secret, fmt.Sprintf(`{"count": %d}`, n))
	if code != 200 {
		t.Fatalf("admit %d: %d %v", n, code, body)
	}
	at, _ := body["effectiveAt"].(string)
	effective, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		t.Fatalf("admit %d: effectiveAt %q: %v", n, at, err)
	}
	return effective
}

// shown is the page's state: the answers it got and what it shows.
type shown struct {
	Calls    []pageCall `json:"calls"`
	Pos      string     `json:"pos"`
	Label    string     `json:"label"`
	ETA      string     `json:"eta"`
	BarMax   float64    `json:"barMax"`
	BarValue float64    `json:"barValue"`
}

// checkShows waits until the page shows the last answer it got, and
// checks that it is WAITING with label, an estimate starting with eta, and
// the progress bar from the first position seen to this one.
func checkShows(t *testing.T, ctx context.Context, label, eta string) shown {
	t.Helper()
	// The recorder keeps an answer just before the page reads it.
	browser.WaitFor(t, ctx, 5*time.Second, `(c => c.status === 'WAITING' && document.getElementById('pos').textContent === new Intl.NumberFormat('en').format(c.position))(JSON.parse(sessionStorage.getItem('e2e:calls')).at(-1))`)
	s := browser.Eval[shown](t, ctx, `({calls: JSON.parse(sessionStorage.getItem('e2e:calls')), pos: document.getElementById('pos').textContent,
		label: document.querySelector('[data-t=position]').textContent, eta: document.getElementById('eta').textContent,
		barMax: document.getElementById('bar').max, barValue: document.getElementById('bar').value})`)
	last := s.Calls[len(s.Calls)-1]
	var firstPos int64
	for _, c := range s.Calls {
		firstPos = max(firstPos, c.Position)
	}
	if s.Pos != bench.Thousands(last.Position) || s.Label != label || !strings.HasPrefix(s.ETA, eta) {
		t.Errorf("the page shows position, label, estimate %q, %q, %q; want %q, %q, %q…, as the answer %+v", s.Pos, s.Label, s.ETA, bench.Thousands(last.Position), label, eta, last)
	}
	if s.BarMax != float64(firstPos) || s.BarValue != float64(firstPos-last.Position) {
		t.Errorf("progress bar max %v value %v, want %d (the first position) and %d", s.BarMax, s.BarValue, firstPos, firstPos-last.Position)
	}
	return s
}

// checkSchedule fails t unless each request of one document started
// exactly the retryAfterMs of the answer before it after that answer (on
// the page's fake clock), and none while another was in flight.
func checkSchedule(t *testing.T, calls []pageCall) {
	t.Helper()
	n := 0
	for i, c := range calls {
		if c.AtOnce != 1 {
			t.Errorf("request %d started with %d in flight", i, c.AtOnce)
		}
		if i == 0 || calls[i-1].Doc != c.Doc {
			continue
		}
		prev := calls[i-1]
		if gap := c.Start - prev.End; gap != prev.RetryAfterMs {
			t.Errorf("request %d came %.0f ms after an answer that asked for %.0f ms", i, gap, prev.RetryAfterMs)
		}
		n++
	}
	if n < 10 {
		t.Errorf("only %d polls measured; the test should see more", n)
	}
	t.Logf("%d requests, %d gaps measured", len(calls), n)
}

func recorded(t *testing.T, ctx context.Context) []pageCall {
	t.Helper()
	calls := browser.Eval[[]pageCall](t, ctx, `JSON.parse(sessionStorage.getItem('e2e:calls')) || []`)
	if len(calls) == 0 {
		t.Fatal("the page made no request")
	}
	return calls
}

func storedToken(t *testing.T, ctx context.Context) string {
	t.Helper()
	return browser.Eval[string](t, ctx, `(JSON.parse(localStorage.getItem('waitingroom:demo')) || {}).token || ''`)
}

// TestChallengePageEndToEnd: on the real local server, a program that asks
// each enter for a proof of work of 16 bits (challengeBits) is entered by
// the page in Chromium: its first enter is refused CHALLENGE_REQUIRED, its
// Web Worker solves the server's challenge, and the enter with the proof
// reaches WAITING.
func TestChallengePageEndToEnd(t *testing.T) {
	t.Parallel()
	const secret = "s3cret"
	base := start(t, map[string]string{"ADMIN_TOKEN": secret}, "-demo-program", "")
	if code, body := call(t, "PUT", base+"/api/v1/admin/programs/guarded", "", secret, `{"challengeBits":16,"paused":true}`); code != 201 {
		t.Fatalf("create the program: %d %v", code, body)
	}
	ctx, cancel := context.WithTimeout(browser.Tab(t), 60*time.Second)
	defer cancel()
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: recordCalls}); err != nil {
		t.Fatal(err)
	}
	browser.Do(t, ctx, chromedp.Navigate(base+"/waiting-room/guarded?lang=en"))
	browser.WaitFor(t, ctx, 30*time.Second, `document.getElementById('pos').textContent === '1'`)
	var enters []int
	for _, c := range recorded(t, ctx) {
		if c.Method == "POST" {
			enters = append(enters, c.HTTPStatus)
		}
	}
	if !slices.Equal(enters, []int{403, 201}) {
		t.Errorf("the page's enters answered %v, want 403 (no proof) then 201 (with the worker's)", enters)
	}
	if code, body := call(t, "GET", base+"/api/v1/admin/programs/guarded", "", secret, ""); code != 200 || body["issued"] != float64(1) {
		t.Errorf("counters: %d %v, want 1 ticket issued", code, body)
	}
}
