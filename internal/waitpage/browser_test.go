package waitpage_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
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

// tab opens a browser tab with a deadline for the whole test.
func tab(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(browser.Tab(t), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

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

// waitFor waits up to 10 s until expr is truthy in the page.
func waitFor(t *testing.T, ctx context.Context, expr string) {
	t.Helper()
	browser.WaitFor(t, ctx, 10*time.Second, expr)
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

// openGala is loadGala, then waits for the first position (1,234).
func openGala(t *testing.T, s *script, path string, first ...chromedp.Action[chromedp.Void]) (*fakeQueue, context.Context) {
	t.Helper()
	q, ctx := loadGala(t, s, path, first...)
	waitFor(t, ctx, `document.getElementById('pos').textContent === '1,234'`)
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
	q.checkSchedule(t)
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
	waitFor(t, ctx, `document.getElementById('state').textContent === 'Admission is paused for now. Your place is kept.'`)
	q.mu.Lock()
	s.info.Paused = false
	q.mu.Unlock()
	waitFor(t, ctx, `document.getElementById('state').hidden`)
	q.checkSchedule(t)
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
	time.Sleep(1500 * time.Millisecond) // longer than any retry the page makes by itself
	if n := len(q.recorded()); n != 1 {
		t.Fatalf("%d requests after a full line, want the one enter: the page must not loop", n)
	}
	q.setFull("gala", false)
	do(t, ctx, chromedp.Click(chromedp.ID("again")))
	waitFor(t, ctx, `document.getElementById('pos').textContent === '1,234'`)
}

func TestReloadAndSecondTabKeepThePlace(t *testing.T) {
	t.Parallel()
	q, ctx := openGala(t, gala(), "")
	first := storedToken(t, ctx, "gala")

	do(t, ctx, chromedp.Reload())
	waitFor(t, ctx, `document.getElementById('pos').textContent === '1,234'`)
	if got := storedToken(t, ctx, "gala"); got != first {
		t.Errorf("after a reload the token is %q, want %q", got, first)
	}

	second, cancel := chromedp.NewContext(ctx) // another tab of the same browser profile
	defer cancel()
	do(t, second, chromedp.Navigate(eval[string](t, ctx, "location.href")))
	waitFor(t, second, `document.getElementById('pos').textContent === '1,234'`)
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
// Idempotency-Key, so the person still gets one place.
func TestReloadDuringEnterKeepsOnePlace(t *testing.T) {
	t.Parallel()
	q := newFakeQueue()
	q.add("gala", gala())
	q.latency = 400 * time.Millisecond
	srv, _ := q.serve(t, waitpage.Options{})
	ctx := tab(t)
	do(t, ctx, chromedp.Navigate(srv.URL+"/waiting-room/gala"))
	do(t, ctx, chromedp.Reload())
	waitFor(t, ctx, `document.getElementById('pos').textContent !== '–'`)

	var keys []string
	for _, c := range q.recorded() {
		if c.Method == "POST" {
			keys = append(keys, c.Key)
		}
	}
	q.mu.Lock()
	tokens := len(q.tokens)
	q.mu.Unlock()
	if len(keys) != 2 || keys[0] == "" || keys[1] != keys[0] || tokens != 1 {
		t.Errorf("enters carried keys %q and made %d tokens, want two enters with one key, and one token", keys, tokens)
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
			waitFor(t, ctx, `document.getElementById('pos').textContent === '1,234'`)
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
	waitFor(t, ctx, `location.pathname.startsWith('/demo-site/') && document.getElementById('in')`)
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
	q.checkSchedule(t)
}

func TestAdmittedWithoutTarget(t *testing.T) {
	t.Parallel()
	s := gala()
	s.admitAfter = 2
	q, ctx := loadGala(t, s, "", phone)
	waitFor(t, ctx, `!document.getElementById('done').hidden`)
	if got := text(t, ctx, "doneTitle"); got != "It's your turn!" {
		t.Errorf("title = %q", got)
	}
	if got := text(t, ctx, "doneText"); !strings.Contains(got, "valid until") {
		t.Errorf("text = %q, want the pass's expiry", got)
	}
	screenshot(t, ctx, "admitted.png")
	q.checkSchedule(t)
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
			waitFor(t, ctx, `!document.getElementById('again').hidden`)
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
			waitFor(t, ctx, `document.getElementById('pos').textContent === '1,234'`)
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

func TestRetryAfterIsHonoured(t *testing.T) {
	s := gala()
	s.fail = map[int]int{2: 1} // the second poll: 503 with Retry-After: 1
	q, ctx := loadGala(t, s, "")
	waitFor(t, ctx, `document.getElementById('state').textContent.startsWith('Trouble reaching the server')`)
	waitFor(t, ctx, `document.getElementById('state').hidden`)
	calls := q.recorded()
	i := slices.IndexFunc(calls, func(c apiCall) bool { return c.Status == 503 })
	if i < 0 || i+1 >= len(calls) {
		t.Fatalf("no request after the 503: %+v", calls)
	}
	if gap := calls[i+1].Start.Sub(calls[i].End); gap < 950*time.Millisecond {
		t.Errorf("the request after a 503 with Retry-After: 1 came after %v", gap)
	}
	q.checkSchedule(t)
}

// The page's own requests, timed by the server: never earlier than the
// answer before asked, close to it, and never two at once, while the page
// is pelted with visibilitychange and online events. Not parallel, like
// the other timing test, so that it runs alone.
func TestPollsFollowRetryAfterExactly(t *testing.T) {
	s := gala()
	s.retry = []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, 180 * time.Millisecond, 420 * time.Millisecond, 120 * time.Millisecond}
	q, ctx := loadGala(t, s, "")
	waitFor(t, ctx, `document.getElementById('pos').textContent !== '–'`)
	eval[chromedp.Void](t, ctx, `setInterval(() => { document.dispatchEvent(new Event('visibilitychange')); dispatchEvent(new Event('online')); }, 25), 0`)
	deadline := time.Now().Add(time.Minute) // a hang guard: 15 polls take 4 s on an idle machine
	for len(q.recorded()) < 15 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	calls := q.recorded()
	if len(calls) < 15 {
		t.Fatalf("%d requests in a minute", len(calls))
	}
	q.checkSchedule(t)
	var late []time.Duration
	for i := 1; i < len(calls); i++ {
		late = append(late, calls[i].Start.Sub(calls[i-1].End)-calls[i-1].RetryAfter)
	}
	slices.Sort(late)
	if median := late[len(late)/2]; median > 250*time.Millisecond {
		t.Errorf("median lateness %v over retryAfterMs: the page does not follow it (%v)", median, late)
	}
}

func TestOfflineWaitsForOnline(t *testing.T) {
	t.Parallel()
	q, ctx := openGala(t, gala(), "")
	setOffline := func(off bool) {
		t.Helper()
		// The state sets navigator.onLine and fires offline/online; the rule
		// makes requests fail.
		_, err := chromedp.Call(ctx, network.OverrideNetworkState, network.OverrideNetworkStateParams{Offline: off, DownloadThroughput: -1, UploadThroughput: -1})
		if err != nil {
			t.Fatal(err)
		}
		_, err = chromedp.Call(ctx, network.EmulateNetworkConditionsByRule, network.EmulateNetworkConditionsByRuleParams{
			MatchedNetworkConditions: []*network.Conditions{{Offline: off, DownloadThroughput: -1, UploadThroughput: -1}},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	setOffline(true)
	waitFor(t, ctx, `document.getElementById('state').textContent.startsWith('You are offline')`)
	before := len(q.recorded())
	time.Sleep(700 * time.Millisecond) // several retryAfterMs
	if n := len(q.recorded()); n != before {
		t.Errorf("%d requests reached the server while offline", n-before)
	}
	setOffline(false)
	waitFor(t, ctx, `document.getElementById('state').hidden`)
	deadline := time.Now().Add(30 * time.Second) // a hang guard, generous for a busy machine
	for len(q.recorded()) == before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if len(q.recorded()) == before {
		t.Error("no poll after coming back online")
	}
	q.checkSchedule(t)
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
	do(t, ctx, chromedp.WaitVisible(chromedp.CSS("form button")))
	screenshot(t, ctx, "noscript-join.png")
	do(t, ctx, chromedp.Click(chromedp.CSS("form button")))
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
	waitFor(t, ctx, `document.getElementById('closing').textContent.startsWith('New entries closed at ')`)
	waitFor(t, ctx, `document.getElementById('state').textContent === 'The queue is closed to new entries. Your place is kept.'`)
	q.checkSchedule(t)

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
	waitFor(t, en, `document.getElementById('pos').textContent === '1,234'`)
	got = eval[[]string](t, en, `[document.querySelector('h1').textContent, document.getElementById('noticeText').textContent]`)
	if want := []string{s.info.DisplayName, s.notice}; !slices.Equal(got, want) {
		t.Errorf("h1, notice in English = %q, want the untranslated %q", got, want)
	}

	noscript := tab(t)
	if _, err := chromedp.Call(noscript, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	do(t, noscript, chromedp.Navigate(eval[string](t, ctx, "location.href")))
	do(t, noscript, chromedp.Click(chromedp.CSS("form button")))
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
	// The challenge's first solution is past 100,000 tries: the progress
	// shows before it is found.
	waitFor(t, ctx, `/^Checking your browser… [1-9][0-9]?%$/.test(document.getElementById('state').textContent)`)
	waitFor(t, ctx, `document.getElementById('pos').textContent === '1,500'`)
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
	do(t, ctx, chromedp.WaitVisible(chromedp.CSS("form button")))
	do(t, ctx, chromedp.Click(chromedp.CSS("form button")))
	do(t, ctx, chromedp.WaitNotPresent(chromedp.CSS("form button")))
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
