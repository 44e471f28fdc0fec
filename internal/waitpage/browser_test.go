package waitpage_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/testing/browser"
	"github.com/example/waitingroom/internal/waitpage"
)

func TestMain(m *testing.M) { browser.Main(m) }

// hangGuard bounds a whole test's use of its tabs: only a hang reaches it.
const hangGuard = 2 * time.Minute

// tab opens a browser tab, instrumented, with a hang guard for the whole
// test.
func tab(t *testing.T) context.Context { return tabIn(t, browser.Tab) }

// tabIn is tab in the browser of open (browser.Tab or browser.NotifyingTab).
func tabIn(t *testing.T, open func(testing.TB) context.Context) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(open(t), hangGuard)
	t.Cleanup(cancel)
	instrument(t, ctx)
	return ctx
}

// instrument makes the pages the tab ctx loads from now on run their
// timers on a clock the test moves (browser.FakeClock) and record their
// API requests (pageRecorder).
func instrument(t *testing.T, ctx context.Context) {
	t.Helper()
	browser.FakeClock(t, ctx)
	browser.AddScript(t, ctx, pageRecorder)
}

// pageRecorder records each API request the page's fetch makes (not the
// challenge's, the push subscription's, a handoff's nor a DELETE; a
// redeem's, yes):
// its document, method, start, and the moment its answer came, on the
// page's clock, in sessionStorage so that the record outlives
// a navigation of the tab, with the most ever in flight at once in one
// document; window.__started() counts the current document's. It also
// keeps in window.__seen every text the state line showed, in order.
const pageRecorder = `(() => {
  const KEY = '__wr';
  let rec = null;
  try { rec = JSON.parse(sessionStorage.getItem(KEY)); } catch {}
  rec = rec || { calls: [], maxAtOnce: 0, docs: 0 };
  const doc = ++rec.docs;
  const save = () => { try { sessionStorage.setItem(KEY, JSON.stringify(rec)); } catch {} };
  save();
  let inFlight = 0;
  const real = window.fetch;
  window.fetch = function (input, init) {
    const url = new URL(input instanceof Request ? input.url : String(input), location.href);
    if (!url.pathname.startsWith('/api/') || /\/(challenge|push|handoff)$/.test(url.pathname) || (init && init.method === 'DELETE')) return real.apply(this, arguments);
    const c = { doc, method: (init && init.method) || 'GET', start: performance.now(), end: -1 };
    rec.calls.push(c);
    rec.maxAtOnce = Math.max(rec.maxAtOnce, ++inFlight);
    save();
    const settle = () => { inFlight--; c.end = performance.now(); save(); };
    return real.apply(this, arguments).then((r) => { settle(); return r; }, (e) => { settle(); throw e; });
  };
  window.__started = () => rec.calls.filter((c) => c.doc === doc).length;
  const seen = window.__seen = [];
  new MutationObserver(() => {
    const el = document.getElementById('state');
    if (el && el.textContent !== seen[seen.length - 1]) seen.push(el.textContent);
  }).observe(document, { subtree: true, childList: true, characterData: true });
})();`

// pageCall is an API request as pageRecorder recorded it, at times of the
// page's clock in milliseconds.
type pageCall struct {
	Doc    int     `json:"doc"`
	Method string  `json:"method"`
	Start  float64 `json:"start"`
	End    float64 `json:"end"` // -1: no answer came
}

// gapAfter is the page's time from prev's answer to c's start.
func (c pageCall) gapAfter(prev pageCall) time.Duration {
	return time.Duration((c.Start - prev.End) * float64(time.Millisecond))
}

// pageRecord is pageRecorder's record of the tab.
type pageRecord struct {
	Calls     []pageCall `json:"calls"`
	MaxAtOnce int        `json:"maxAtOnce"`
}

func pageCalls(t *testing.T, ctx context.Context) pageRecord {
	t.Helper()
	return eval[pageRecord](t, ctx, `JSON.parse(sessionStorage.getItem('__wr'))`)
}

// started is how many API requests the current page has made.
func started(t *testing.T, ctx context.Context) int {
	t.Helper()
	return eval[int](t, ctx, `__started()`)
}

// drive fires the page's timers one at a time, each once the page has
// handled the answer before it, until expr holds: the page moves exactly
// as far as its own schedule takes it, at no real time. It fails t when
// expr does not hold after 50 timers.
func drive(t *testing.T, ctx context.Context, expr string) {
	t.Helper()
	for range 50 {
		waitFor(t, ctx, `(`+expr+`) || __clock.pending().length > 0`)
		if eval[bool](t, ctx, `!!(`+expr+`)`) {
			return
		}
		browser.Next(t, ctx)
	}
	t.Fatalf("%s does not hold after 50 of the page's timers", expr)
}

// ms is d in the page's milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func storedToken(t *testing.T, ctx context.Context, program string) string {
	t.Helper()
	return eval[string](t, ctx, `(JSON.parse(localStorage.getItem('waitingroom:`+program+`')) || {}).token || ''`)
}

var (
	do         = browser.Do
	text       = browser.Text
	screenshot = browser.Screenshot
)

func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	return browser.Eval[T](t, ctx, expr)
}

// waitFor waits until expr is truthy in the page: an event of the page,
// its network or the browser, never of the page's clock, which stands
// still until the test moves it; a minute is a hang guard.
func waitFor(t *testing.T, ctx context.Context, expr string) {
	t.Helper()
	browser.WaitFor(t, ctx, time.Minute, expr)
}

// phone is the viewport of a common phone, at scale 1 to keep screenshots
// small.
var phone = chromedp.EmulateViewport(390, 760, chromedp.EmulateMobile)

func gala() *script {
	return &script{
		info: waitpage.PageInfo{
			DisplayName: "Gala concert — general sale",
			Message:     "Tickets for both nights are sold here. Stay on this page: we take you in when it is your turn.",
		},
		start: 1500, step: 133, floor: 1234,
		retry:     []time.Duration{150 * time.Millisecond, 250 * time.Millisecond},
		perPerson: 200 * time.Millisecond,
		notice:    "Saturday is sold out; Sunday still has seats.",
	}
}

// loadGala serves s as program "gala" and opens its waiting room (path
// after /waiting-room/gala) in a new tab after the actions first.
func loadGala(t *testing.T, s *script, path string, first ...chromedp.Action[chromedp.Void]) (*fakeQueue, context.Context) {
	t.Helper()
	q := newFakeQueue()
	q.add("gala", s)
	srv, _ := q.serve(t, waitpage.Options{})
	ctx := tab(t)
	do(t, ctx, append(first, chromedp.Navigate(srv.URL+"/waiting-room/gala"+path))...)
	return q, ctx
}

// openGala is loadGala, then drives the page to the first position of
// 1,234 (the enter and two polls).
func openGala(t *testing.T, s *script, path string, first ...chromedp.Action[chromedp.Void]) (*fakeQueue, context.Context) {
	t.Helper()
	q, ctx := loadGala(t, s, path, first...)
	drive(t, ctx, `document.getElementById('pos').textContent === '1,234'`)
	return q, ctx
}

func TestWaitingShowsThePlace(t *testing.T) {
	t.Parallel()
	q, ctx := openGala(t, gala(), "?lang=en", phone)

	for id, want := range map[string]string{
		"eta":        "about 4 minutes", // 1,234 × 200 ms
		"noticeText": "Saturday is sold out; Sunday still has seats.",
	} {
		if got := text(t, ctx, id); got != want {
			t.Errorf("#%s = %q, want %q", id, got, want)
		}
	}
	if got := eval[string](t, ctx, `document.querySelector('h1').textContent`); got != "Gala concert — general sale" {
		t.Errorf("h1 = %q", got)
	}
	bar := eval[map[string]any](t, ctx, `(b => ({max: b.max, value: b.value, text: b.getAttribute('aria-valuetext'), label: document.getElementById(b.getAttribute('aria-labelledby')).textContent}))(document.querySelector('progress#bar'))`)
	if bar["max"] != 1500.0 || bar["value"] != 266.0 || bar["text"] != "18%" || bar["label"] == "" {
		t.Errorf("progress bar = %v, want max 1500 (first position seen), value 266, 18%%, labelled", bar)
	}
	if eval[bool](t, ctx, `document.getElementById('state').hidden`) != true {
		t.Errorf("state line shown while nothing is wrong: %q", text(t, ctx, "state"))
	}
	if !strings.HasPrefix(text(t, ctx, "updated"), "Last update: ") {
		t.Errorf("#updated = %q", text(t, ctx, "updated"))
	}
	// The first place is announced; the next ones at most every 30 s.
	if got := eval[string](t, ctx, `document.querySelector('[aria-live=polite]').textContent`); got != "Your place in line: 1,500. Estimated wait: about 5 minutes" {
		t.Errorf("live region = %q, want the first place announced", got)
	}
	screenshot(t, ctx, "waiting.png")
	q.checkSchedule(t, ctx)
}

// The state lines of a person in line, after the operator changed the
// program and the page was reloaded.
func TestStateLines(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		edit  func(*script)
		state string
		eta   string
	}{
		{"paused", func(s *script) { s.info.Paused, s.step, s.perPerson = true, 0, 0 }, "Admission is paused for now. Your place is kept.", "not known yet"},
		{"closed", func(s *script) { s.info.Closed = true }, "The queue is closed to new entries. Your place is kept.", "about 4 minutes"},
		{"opens later", func(s *script) { s.opensAt, s.perPerson = time.Now().Add(time.Hour), 0 }, "Admission opens at ", "not known yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := gala()
			q, ctx := openGala(t, s, "")
			q.mu.Lock()
			tt.edit(s)
			q.mu.Unlock()
			do(t, ctx, chromedp.Reload())
			waitFor(t, ctx, `document.getElementById('updated').textContent !== ''`)
			if got := text(t, ctx, "state"); !strings.HasPrefix(got, tt.state) {
				t.Errorf("state line = %q, want %q…", got, tt.state)
			}
			if got := text(t, ctx, "eta"); got != tt.eta {
				t.Errorf("eta = %q, want %q", got, tt.eta)
			}
		})
	}
}

// A pause and a resume reach an open page through the answers' paused,
// without a reload.
func TestPauseReachesAnOpenPage(t *testing.T) {
	t.Parallel()
	s := gala()
	q, ctx := openGala(t, s, "?lang=en")
	q.mu.Lock()
	s.info.Paused = true
	q.mu.Unlock()
	drive(t, ctx, `document.getElementById('state').textContent === 'Admission is paused for now. Your place is kept.'`)
	q.mu.Lock()
	s.info.Paused = false
	q.mu.Unlock()
	drive(t, ctx, `document.getElementById('state').hidden`)
	q.checkSchedule(t, ctx)
}

func TestClosedToNewcomers(t *testing.T) {
	t.Parallel()
	s := gala()
	s.info.Closed = true
	_, ctx := loadGala(t, s, "")
	waitFor(t, ctx, `!document.getElementById('done').hidden`)
	if got := text(t, ctx, "doneTitle"); got != "This queue is closed to new entries." {
		t.Errorf("title = %q", got)
	}
	if storedToken(t, ctx, "gala") != "" {
		t.Error("a token was kept although the enter was refused")
	}
}

// TestFullLineOffersToTryAgain: a full line (409 QUEUE_FULL) is said, with
// a button to try again; the page does not enter again by itself, and a
// try once there is room takes a place.
func TestFullLineOffersToTryAgain(t *testing.T) {
	t.Parallel()
	s := gala()
	s.full = true
	q, ctx := loadGala(t, s, "")
	waitFor(t, ctx, `!document.getElementById('again').hidden`)
	if got := text(t, ctx, "doneTitle"); got != "The line is full for now. Please try again in a few minutes." {
		t.Errorf("title = %q", got)
	}
	if got := text(t, ctx, "again"); got != "Try again" {
		t.Errorf("button = %q", got)
	}
	if storedToken(t, ctx, "gala") != "" {
		t.Error("a token was kept although the enter was refused")
	}
	// Nothing is armed to try again, and an hour of the page's time brings
	// no request.
	if p := browser.Pending(t, ctx); len(p) != 0 {
		t.Errorf("timers armed after a full line: %v, want none", p)
	}
	if fired := browser.Advance(t, ctx, ms(time.Hour)); fired != 0 {
		t.Errorf("%d timers fired in an hour after a full line, want none", fired)
	}
	if n, m := started(t, ctx), len(q.recorded()); n != 1 || m != 1 {
		t.Fatalf("the page made %d requests and the server answered %d after a full line, want the one enter: the page must not loop", n, m)
	}
	q.setFull("gala", false)
	do(t, ctx, chromedp.Click(chromedp.ID("again")))
	drive(t, ctx, `document.getElementById('pos').textContent === '1,234'`)
}

func TestReloadAndSecondTabKeepThePlace(t *testing.T) {
	t.Parallel()
	q, ctx := openGala(t, gala(), "")
	first := storedToken(t, ctx, "gala")

	do(t, ctx, chromedp.Reload())
	drive(t, ctx, `document.getElementById('pos').textContent === '1,234'`)
	if got := storedToken(t, ctx, "gala"); got != first {
		t.Errorf("after a reload the token is %q, want %q", got, first)
	}

	second, cancel := chromedp.NewContext(ctx) // another tab of the same browser profile
	defer cancel()
	instrument(t, second)
	do(t, second, chromedp.Navigate(eval[string](t, ctx, "location.href")))
	drive(t, second, `document.getElementById('pos').textContent === '1,234'`)
	if got := storedToken(t, second, "gala"); got != first {
		t.Errorf("a second tab has token %q, want %q", got, first)
	}
	n := 0
	for _, c := range q.recorded() {
		if c.Method == "POST" {
			n++
		} else if c.Token != first {
			t.Errorf("a poll carried token %q, want %q", c.Token, first)
		}
	}
	if n != 1 {
		t.Errorf("%d enters, want 1", n)
	}
}

// A reload while the first enter is still in flight sends the same
// Idempotency-Key, so the person still gets one place: the server holds
// the first enter until the reloaded page has sent the second, then makes
// the place for the first and gives it back to the second.
func TestReloadDuringEnterKeepsOnePlace(t *testing.T) {
	t.Parallel()
	q := newFakeQueue()
	q.add("gala", gala())
	arrived := []chan struct{}{make(chan struct{}), make(chan struct{})}
	release := []chan struct{}{make(chan struct{}), make(chan struct{})}
	posts := 0
	q.arrive = func(c apiCall) {
		if c.Method != http.MethodPost {
			return
		}
		q.mu.Lock()
		n := posts
		posts++
		q.mu.Unlock()
		if n < len(arrived) {
			close(arrived[n])
			<-release[n]
		}
	}
	srv, _ := q.serve(t, waitpage.Options{})
	var released [2]sync.Once
	letGo := func(n int) { released[n].Do(func() { close(release[n]) }) }
	t.Cleanup(func() { letGo(0); letGo(1) }) // before the server closes
	ctx := tab(t)
	await := func(n int) {
		t.Helper()
		select {
		case <-arrived[n]:
		case <-ctx.Done():
			t.Fatalf("waiting for enter %d: %v", n+1, ctx.Err())
		}
	}

	do(t, ctx, chromedp.Navigate(srv.URL+"/waiting-room/gala"))
	await(0)
	do(t, ctx, chromedp.Reload())
	await(1)
	letGo(0)
	q.awaitCalls(t, ctx, 1)
	letGo(1)
	waitFor(t, ctx, `document.getElementById('pos').textContent !== '–'`)

	var keys []string
	var statuses []int
	for _, c := range q.awaitCalls(t, ctx, 2) {
		if c.Method == "POST" {
			keys, statuses = append(keys, c.Key), append(statuses, c.Status)
		}
	}
	q.mu.Lock()
	tokens := len(q.tokens)
	q.mu.Unlock()
	if len(keys) != 2 || keys[0] == "" || keys[1] != keys[0] || tokens != 1 {
		t.Errorf("enters carried keys %q and made %d tokens, want two enters with one key, and one token", keys, tokens)
	}
	if !slices.Equal(statuses, []int{http.StatusCreated, http.StatusOK}) {
		t.Errorf("enters answered %v, want 201 (the place made) then 200 (the same place)", statuses)
	}
}

func TestLanguages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, query, acceptLanguage string
		lang, label, eta            string
	}{
		{"query ko", "?lang=ko", "", "ko", "내 대기 순서", "약 4분"},
		{"query en over a Korean browser", "?lang=en", "ko-KR", "en", "Your place in line", "about 4 minutes"},
		{"navigator.language ko", "", "ko-KR,ko", "ko", "내 대기 순서", "약 4분"},
		{"unknown language falls back to English", "", "fr-FR", "en", "Your place in line", "about 4 minutes"},
		// Names of Object.prototype's properties are no language either:
		// the page shows its text and polls.
		{"query constructor", "?lang=constructor", "", "en", "Your place in line", "about 4 minutes"},
		{"query __proto__ then the browser's", "?lang=__proto__", "ko-KR,ko", "ko", "내 대기 순서", "약 4분"},
	}
	q := newFakeQueue()
	q.add("gala", gala())
	srv, _ := q.serve(t, waitpage.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := tab(t)
			if tt.acceptLanguage != "" {
				ua := eval[string](t, ctx, `navigator.userAgent`)
				if _, err := chromedp.Call(ctx, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{UserAgent: ua, AcceptLanguage: tt.acceptLanguage}); err != nil {
					t.Fatal(err)
				}
			}
			do(t, ctx, chromedp.Navigate(srv.URL+"/waiting-room/gala"+tt.query))
			drive(t, ctx, `document.getElementById('pos').textContent === '1,234'`)
			got := eval[[]string](t, ctx, `[document.documentElement.lang, document.querySelector('[data-t=position]').textContent, document.getElementById('eta').textContent]`)
			if want := []string{tt.lang, tt.label, tt.eta}; !slices.Equal(got, want) {
				t.Errorf("lang, label, eta = %q, want %q", got, want)
			}
		})
	}
}

func TestAdmittedGoesToTheTargetWithThePass(t *testing.T) {
	t.Parallel()
	q := newFakeQueue()
	s := gala()
	s.admitAfter = 3
	q.add("gala", s)
	srv, site := q.serve(t, waitpage.Options{})
	target := srv.URL + "/demo-site/gala?from=wr&x=a%20b"
	q.mu.Lock()
	s.info.TargetURL = target
	q.mu.Unlock()

	ctx := tab(t)
	do(t, ctx, phone, chromedp.Navigate(srv.URL+"/waiting-room/gala"))
	drive(t, ctx, `location.pathname.startsWith('/demo-site/') && document.getElementById('in')`)
	screenshot(t, ctx, "admitted-site.png")

	q.mu.Lock()
	var pass string
	for _, tok := range q.tokens {
		pass = tok.pass
	}
	q.mu.Unlock()
	site.mu.Lock()
	defer site.mu.Unlock()
	if len(site.passes) != 1 || site.passes[0] != pass {
		t.Errorf("the site got passes %q, want [%q]", site.passes, pass)
	}
	if want := "from=wr&x=a%20b&admissionPass="; len(site.query) != 1 || !strings.HasPrefix(site.query[0], want) {
		t.Errorf("the site's query = %q, want the target's query kept, then the pass: %s…", site.query, want)
	}
	q.checkSchedule(t, ctx)
}

func TestAdmittedWithoutTarget(t *testing.T) {
	t.Parallel()
	s := gala()
	s.admitAfter = 2
	q, ctx := loadGala(t, s, "", phone)
	drive(t, ctx, `!document.getElementById('done').hidden`)
	if got := text(t, ctx, "doneTitle"); got != "It's your turn!" {
		t.Errorf("title = %q", got)
	}
	if got := text(t, ctx, "doneText"); !strings.Contains(got, "valid until") {
		t.Errorf("text = %q, want the pass's expiry", got)
	}
	screenshot(t, ctx, "admitted.png")
	q.checkSchedule(t, ctx)
}

func TestEndedOffersToEnterAgain(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status      api.Status
		title, text string // text: a part of it
	}{
		{api.StatusExpired, "Your admission has expired", "Your admission window ended at "},
		{statusNoShow, "Your admission has expired", "you did not come back in time"},
		{api.StatusLeft, "You left the queue", "You left"},
		{api.StatusRevoked, "Your place was withdrawn", "The organiser withdrew this place at "},
	}
	for _, tt := range tests {
		t.Run(string(tt.status), func(t *testing.T) {
			t.Parallel()
			q, ctx := openGala(t, gala(), "")
			old := storedToken(t, ctx, "gala")
			q.set(old, tt.status)
			drive(t, ctx, `!document.getElementById('again').hidden`)
			if got := text(t, ctx, "doneTitle"); got != tt.title {
				t.Errorf("title = %q, want %q", got, tt.title)
			}
			if got := text(t, ctx, "doneText"); !strings.Contains(got, tt.text) {
				t.Errorf("text = %q, want it to say %q", got, tt.text)
			}
			if got := text(t, ctx, "again"); got != "Join the queue again" {
				t.Errorf("button = %q", got)
			}
			do(t, ctx, chromedp.Click(chromedp.ID("again")))
			drive(t, ctx, `document.getElementById('pos').textContent === '1,234'`)
			if got := storedToken(t, ctx, "gala"); got == old || got == "" {
				t.Errorf("after entering again the token is %q, want a new one", got)
			}
			calls := q.recorded()
			var posts []apiCall
			for _, c := range calls {
				if c.Method == "POST" {
					posts = append(posts, c)
				}
			}
			if len(posts) != 2 || posts[1].Token != "" || posts[1].Key == posts[0].Key {
				t.Errorf("enters = %+v, want a second one with a new key and no token", posts)
			}
		})
	}
}

// TestRetryAfterIsHonoured: a 503 with Retry-After: 1 is said on the
// state line, and the page asks again exactly a second of its time later,
// not a millisecond sooner, then recovers.
func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	s := gala()
	s.fail = map[int]int{2: 1} // the second poll: 503 with Retry-After: 1
	q, ctx := loadGala(t, s, "")
	drive(t, ctx, `document.getElementById('state').textContent.startsWith('Trouble reaching the server')`)
	if p := browser.Pending(t, ctx); !slices.Equal(p, []float64{1000}) {
		t.Fatalf("timers armed after a 503 with Retry-After: 1: %v, want one of 1000 ms", p)
	}
	n := started(t, ctx)
	if fired := browser.Advance(t, ctx, 999); fired != 0 || started(t, ctx) != n {
		t.Errorf("999 ms after a 503 with Retry-After: 1, %d timers fired and %d requests went", fired, started(t, ctx)-n)
	}
	if fired := browser.Advance(t, ctx, 1); fired != 1 || started(t, ctx) != n+1 {
		t.Errorf("1000 ms after a 503 with Retry-After: 1, %d timers fired and %d requests went, want one of each", fired, started(t, ctx)-n)
	}
	waitFor(t, ctx, `document.getElementById('state').hidden`)
	calls := q.awaitCalls(t, ctx, n+1)
	i := slices.IndexFunc(calls, func(c apiCall) bool { return c.Status == 503 })
	if i < 0 || i+1 >= len(calls) {
		t.Fatalf("no request after the 503: %+v", calls)
	}
	page := pageCalls(t, ctx).Calls
	if gap := page[i+1].gapAfter(page[i]); gap != time.Second {
		t.Errorf("the request after a 503 with Retry-After: 1 came after %v of the page's time, want 1s", gap)
	}
	q.checkSchedule(t, ctx)
}

// TestPollsFollowRetryAfterExactly: each answer arms exactly one timer, of
// its retryAfterMs; the page asks again exactly then, not a millisecond
// sooner, and never two at once, while it is pelted with visibilitychange
// and online events before the delay, at its last millisecond and while
// its request is held at the server.
func TestPollsFollowRetryAfterExactly(t *testing.T) {
	t.Parallel()
	s := gala()
	s.retry = []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, 180 * time.Millisecond, 420 * time.Millisecond, 120 * time.Millisecond}
	q, ctx := loadGala(t, s, "")
	waitFor(t, ctx, `document.getElementById('pos').textContent !== '–'`)
	if v := eval[string](t, ctx, `document.visibilityState`); v != "visible" {
		t.Fatalf("visibilityState = %q: the page would ignore visibilitychange", v)
	}

	// The server holds each poll until the test lets it go.
	arrived, release, stop := make(chan struct{}), make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stop) }) // before the server closes
	q.mu.Lock()
	q.arrive = func(c apiCall) {
		select {
		case arrived <- struct{}{}:
			select {
			case <-release:
			case <-stop:
			}
		case <-stop:
		}
	}
	q.mu.Unlock()
	const pelt = `(() => {
		for (let i = 0; i < 5; i++) {
			document.dispatchEvent(new Event('visibilitychange'));
			dispatchEvent(new Event('online'));
		}
		return __started();
	})()`

	const requests = 15
	for n := 1; n < requests; n++ {
		waitFor(t, ctx, `__clock.pending().length > 0`) // answer n handled
		want := ms(q.recorded()[n-1].RetryAfter)
		if p := browser.Pending(t, ctx); !slices.Equal(p, []float64{want}) {
			t.Fatalf("after answer %d, which asked for %v ms, the page armed %v, want one timer of it", n, want, p)
		}
		if got := eval[int](t, ctx, pelt); got != n {
			t.Fatalf("events before the delay made request %d", got)
		}
		if fired := browser.Advance(t, ctx, want-1); fired != 0 {
			t.Fatalf("%d timers fired 1 ms before answer %d's %v ms", fired, n, want)
		}
		if got := eval[int](t, ctx, pelt); got != n {
			t.Fatalf("events 1 ms before answer %d's delay made request %d", n, got)
		}
		if fired := browser.Advance(t, ctx, 1); fired != 1 || started(t, ctx) != n+1 {
			t.Fatalf("at answer %d's delay %d timers fired and the page made %d requests, want one poll", n, fired, started(t, ctx)-n)
		}
		select {
		case <-arrived:
		case <-ctx.Done():
			t.Fatalf("waiting for poll %d at the server: %v", n, ctx.Err())
		}
		if got := eval[int](t, ctx, pelt); got != n+1 {
			t.Fatalf("events while poll %d was in flight made request %d", n, got)
		}
		release <- struct{}{}
		q.awaitCalls(t, ctx, n+1)
	}
	waitFor(t, ctx, `__clock.pending().length > 0`)

	q.checkSchedule(t, ctx)
	calls, page := q.recorded(), pageCalls(t, ctx).Calls
	if len(page) != requests {
		t.Fatalf("the page made %d requests, want %d", len(page), requests)
	}
	for i := 1; i < len(page); i++ {
		if late := page[i].gapAfter(page[i-1]) - calls[i-1].RetryAfter; late != 0 {
			t.Errorf("request %d came %v late on the page's clock, want exactly at retryAfterMs", i, late)
		}
	}
}

func TestOfflineWaitsForOnline(t *testing.T) {
	t.Parallel()
	q, ctx := openGala(t, gala(), "")
	setOffline := func(off bool) {
		t.Helper()
		// The state sets navigator.onLine and fires offline/online; the rule
		// makes requests fail. Going online, the rule goes first, so that the
		// poll the online event makes can pass.
		state := func() {
			_, err := chromedp.Call(ctx, network.OverrideNetworkState, network.OverrideNetworkStateParams{Offline: off, DownloadThroughput: -1, UploadThroughput: -1})
			if err != nil {
				t.Fatal(err)
			}
		}
		if off {
			state()
		}
		_, err := chromedp.Call(ctx, network.EmulateNetworkConditionsByRule, network.EmulateNetworkConditionsByRuleParams{
			MatchedNetworkConditions: []*network.Conditions{{Offline: off, DownloadThroughput: -1, UploadThroughput: -1}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if !off {
			state()
		}
	}
	setOffline(true)
	waitFor(t, ctx, `!navigator.onLine`)
	before, answered := started(t, ctx), len(q.recorded())
	// The next poll falls due offline: the page says so and sends nothing,
	// and arms nothing, for ten minutes of its time.
	if d := browser.Next(t, ctx); d < 0 {
		t.Fatal("no poll armed before going offline")
	}
	if got := text(t, ctx, "state"); !strings.HasPrefix(got, "You are offline") {
		t.Errorf("state line when a poll falls due offline = %q, want You are offline…", got)
	}
	if fired := browser.Advance(t, ctx, ms(10*time.Minute)); fired != 0 {
		t.Errorf("%d timers fired while offline, want none", fired)
	}
	if n := started(t, ctx) - before; n != 0 {
		t.Errorf("the page made %d requests while offline", n)
	}
	if n := len(q.recorded()) - answered; n != 0 {
		t.Errorf("%d requests reached the server while offline", n)
	}
	setOffline(false)
	waitFor(t, ctx, `document.getElementById('state').hidden`)
	if n := started(t, ctx) - before; n != 1 {
		t.Fatalf("the page made %d requests on coming back online, want one poll", n)
	}
	q.awaitCalls(t, ctx, answered+1)
	waitFor(t, ctx, `__clock.pending().length > 0`) // its answer handled
	q.checkSchedule(t, ctx)
}

// Without JavaScript: the form enters, the cookie keeps the place, the
// page refreshes itself after the server's delay, and an admission
// redirects to the target with the pass.
func TestWithoutJavaScript(t *testing.T) {
	t.Parallel()
	q := newFakeQueue()
	s := gala()
	s.retry = []time.Duration{time.Second}
	s.admitAfter = 2
	q.add("gala", s)
	srv, site := q.serve(t, waitpage.Options{})
	q.mu.Lock()
	s.info.TargetURL = srv.URL + "/demo-site/gala"
	q.mu.Unlock()

	ctx := tab(t)
	if _, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, phone, chromedp.Navigate(srv.URL+"/waiting-room/gala"))
	do(t, ctx, chromedp.WaitVisible(chromedp.CSS("form[method=post] button")))
	screenshot(t, ctx, "noscript-join.png")
	do(t, ctx, chromedp.Click(chromedp.CSS("form[method=post] button")))
	do(t, ctx, chromedp.WaitVisible(chromedp.CSS("noscript p.position, section > p.position")))
	pos, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("section > p.position")))
	if err != nil || pos != "1,367" {
		t.Errorf("position = %q (%v), want 1,367", pos, err)
	}
	refresh, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(`meta[http-equiv=refresh]`), "content"))
	if err != nil || refresh.Value != "1" {
		t.Errorf("meta refresh = %+v (%v), want 1 (second)", refresh, err)
	}
	screenshot(t, ctx, "noscript-waiting.png")

	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{srv.URL + "/waiting-room/gala"}})
	if err != nil || len(cookies.Cookies) != 1 {
		t.Fatalf("cookies = %+v (%v)", cookies, err)
	}
	c := cookies.Cookies[0]
	if !c.HTTPOnly || c.Secure || c.SameSite != network.CookieSameSiteLax || c.Path != "/waiting-room/gala" {
		t.Errorf("cookie = %+v, want HttpOnly, SameSite=Lax, not Secure on plain-HTTP loopback, Path=/waiting-room/gala", c)
	}

	// The refresh polls again, is admitted, and goes on to the site.
	do(t, ctx, chromedp.WaitVisible(chromedp.ID("in")))
	site.mu.Lock()
	defer site.mu.Unlock()
	if len(site.passes) != 1 || !strings.HasPrefix(site.passes[0], "eyJ") {
		t.Errorf("the site got passes %q", site.passes)
	}
}

// TestFramingRefused: a page that frames the waiting room gets no page in
// the frame (here even on the same origin), while the site's page, which
// allows framing, loads in the frame beside it.
func TestFramingRefused(t *testing.T) {
	t.Parallel()
	q := newFakeQueue()
	q.add("gala", gala())
	h, err := waitpage.New(q, waitpage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(waitpage.PathPrefix, h)
	mux.Handle("/api/", q.apiHandler())
	mux.HandleFunc("GET /demo-site/{programId}", (&site{}).serve)
	mux.HandleFunc("GET /frame", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		const count = `onload="window.loaded = (window.loaded || 0) + 1"`
		fmt.Fprintf(w, `<!doctype html><title>Framer</title><iframe id="wr" src="/waiting-room/gala" %s></iframe><iframe id="site" src="/demo-site/gala" %s></iframe>`, count, count)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ctx := tab(t)
	do(t, ctx, chromedp.Navigate(srv.URL+"/frame"))
	waitFor(t, ctx, `window.loaded === 2`)
	got := eval[[]bool](t, ctx, `['wr', 'site'].map((id) => {
		try { return !!document.getElementById(id).contentDocument.querySelector('h1'); } catch { return false; }
	})`)
	if want := []bool{false, true}; !slices.Equal(got, want) {
		t.Errorf("a page in the frame (waiting room, site) = %v, want %v", got, want)
	}
}

// TestScheduledClose: a page in line says when new entries close, and once
// the answers carry a close that has passed, without a reload, that they
// closed and the place is kept; a newcomer then is told entries closed,
// and when.
func TestScheduledClose(t *testing.T) {
	t.Parallel()
	s := gala()
	s.info.ClosesAt = time.Now().Add(time.Hour)
	q, ctx := openGala(t, s, "?lang=en")
	if got := text(t, ctx, "closing"); !strings.HasPrefix(got, "New entries close at ") {
		t.Errorf("closing line before the close = %q, want New entries close at …", got)
	}
	q.mu.Lock()
	s.info.ClosesAt = time.Now() // the next answers carry a close that has passed
	q.mu.Unlock()
	drive(t, ctx, `document.getElementById('closing').textContent.startsWith('New entries closed at ')`)
	waitFor(t, ctx, `document.getElementById('state').textContent === 'The queue is closed to new entries. Your place is kept.'`)
	q.checkSchedule(t, ctx)

	late := tab(t)
	do(t, late, chromedp.Navigate(strings.Replace(eval[string](t, ctx, "location.href"), "?lang=en", "?lang=ko", 1)))
	waitFor(t, late, `!document.getElementById('done').hidden`)
	if got := eval[[]string](t, late, `[document.getElementById('doneTitle').textContent, document.getElementById('doneText').textContent]`); got[0] != "이 대기열은 새로운 접수가 마감되었습니다." || !strings.HasPrefix(got[1], "신규 대기 접수는 ") {
		t.Errorf("a newcomer after the close sees %q, want closed, and when", got)
	}

	noscript := tab(t)
	if _, err := chromedp.Call(noscript, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	do(t, noscript, chromedp.Navigate(strings.Replace(eval[string](t, ctx, "location.href"), "?lang=en", "", 1)))
	got, err := chromedp.Run(noscript, chromedp.Text(chromedp.CSS("section.card:not(#live)")))
	want := "This queue is closed to new entries.\n\nNew entries closed at " + clockUTC(s.info.ClosesAt) + "."
	if err != nil || got != want {
		t.Errorf("the page without JavaScript after the close = %q (%v), want %q", got, err, want)
	}
}

// clockUTC is how the server-rendered page writes a time.
func clockUTC(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

// TestTranslatedTexts: the page shows the program's texts in its language,
// each falling back to the untranslated one, and its polls ask for the
// notice in that language, with JavaScript and without.
func TestTranslatedTexts(t *testing.T) {
	t.Parallel()
	s := gala()
	s.texts = map[string]api.Texts{"ko": {DisplayName: "갈라 콘서트 — 일반 판매", Notice: "토요일은 매진되었습니다."}}
	q, ctx := openGala(t, s, "?lang=ko")
	got := eval[[]string](t, ctx, `[document.title, document.querySelector('h1').textContent, document.querySelector('.message').textContent, document.getElementById('noticeText').textContent]`)
	if want := []string{"갈라 콘서트 — 일반 판매", "갈라 콘서트 — 일반 판매", s.info.Message, "토요일은 매진되었습니다."}; !slices.Equal(got, want) {
		t.Errorf("title, h1, message, notice in Korean = %q, want %q (the message untranslated)", got, want)
	}
	for _, c := range q.recorded() {
		if c.Lang != "ko" {
			t.Errorf("a %s asked for lang %q, want ko", c.Method, c.Lang)
		}
	}

	en := tab(t)
	do(t, en, chromedp.Navigate(strings.Replace(eval[string](t, ctx, "location.href"), "?lang=ko", "?lang=en", 1)))
	drive(t, en, `document.getElementById('pos').textContent === '1,234'`)
	got = eval[[]string](t, en, `[document.querySelector('h1').textContent, document.getElementById('noticeText').textContent]`)
	if want := []string{s.info.DisplayName, s.notice}; !slices.Equal(got, want) {
		t.Errorf("h1, notice in English = %q, want the untranslated %q", got, want)
	}

	noscript := tab(t)
	if _, err := chromedp.Call(noscript, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	do(t, noscript, chromedp.Navigate(eval[string](t, ctx, "location.href")))
	do(t, noscript, chromedp.Click(chromedp.CSS("form[method=post] button")))
	do(t, noscript, chromedp.WaitVisible(chromedp.CSS("section > p.position")))
	notice, err := chromedp.Run(noscript, chromedp.Text(chromedp.CSS("section.card:not(#live) > p.notice")))
	if err != nil || notice != "공지 토요일은 매진되었습니다." {
		t.Errorf("notice without JavaScript = %q (%v), want the Korean one", notice, err)
	}
}

// TestChallengeSolvedInAWorker: on a program that asks each enter for a
// proof of work of 16 bits, the page says it checks the browser, with its
// progress while a Web Worker solves the challenge, then enters with the
// proof and shows the place.
func TestChallengeSolvedInAWorker(t *testing.T) {
	t.Parallel()
	s := gala()
	s.challengeBits = 16
	q, ctx := loadGala(t, s, "?lang=en")
	drive(t, ctx, `document.getElementById('pos').textContent === '1,500'`)
	// The challenge's first solution is past 100,000 tries and the worker
	// posts its progress every 20,000: the state line showed it before.
	seen := eval[[]string](t, ctx, `__seen`)
	if !slices.ContainsFunc(seen, regexp.MustCompile(`^Checking your browser… [1-9][0-9]?%$`).MatchString) {
		t.Errorf("state lines shown = %q, want the solving's progress", seen)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var posts []int
	for _, c := range q.calls {
		if c.Method == "POST" {
			posts = append(posts, c.Status)
		}
	}
	if !slices.Equal(posts, []int{403, 201}) {
		t.Errorf("enters answered %v, want 403 (no proof) then 201 (with it)", posts)
	}
	used := 0
	for _, u := range q.challenges {
		if u {
			used++
		}
	}
	if used != 1 {
		t.Errorf("%d challenges used, want 1", used)
	}
}

// TestWithoutJavaScriptOnAGuardedProgram: without JavaScript the page
// cannot solve a program's proof of work: its join form is answered 403
// with a page that says to turn JavaScript on, and nobody takes a place.
func TestWithoutJavaScriptOnAGuardedProgram(t *testing.T) {
	t.Parallel()
	q := newFakeQueue()
	s := gala()
	s.challengeBits = 16
	q.add("gala", s)
	srv, _ := q.serve(t, waitpage.Options{})
	ctx := tab(t)
	if _, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, chromedp.Navigate(srv.URL+"/waiting-room/gala?lang=en"))
	do(t, ctx, chromedp.WaitVisible(chromedp.CSS("form[method=post] button")))
	do(t, ctx, chromedp.Click(chromedp.CSS("form[method=post] button")))
	do(t, ctx, chromedp.WaitNotPresent(chromedp.CSS("form[method=post] button")))
	body, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
	if err != nil || !strings.Contains(body, "turn JavaScript on, then reload this page") {
		t.Errorf("page after the join = %q (%v), want it to say JavaScript is needed", body, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.tokens) != 0 {
		t.Errorf("%d tokens made without a proof", len(q.tokens))
	}
}
