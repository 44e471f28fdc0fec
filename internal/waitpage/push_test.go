package waitpage_test

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/example/waitingroom/internal/testing/browser"
	"github.com/example/waitingroom/internal/waitpage"
)

// testPushKey is the VAPID public key of the tests' deployment: an
// uncompressed P-256 point, base64url without padding.
var testPushKey = func() []byte {
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	return k.PublicKey().Bytes()
}()

func pushOptions() waitpage.Options {
	key := base64.RawURLEncoding.EncodeToString(testPushKey)
	return waitpage.Options{PushKey: func(context.Context) string { return key }}
}

// fakeSubscription is what the fake push service's subscription gives as
// its toJSON().
const fakeSubscription = `{"endpoint":"https://push.example.net/send/wr-test-1","expirationTime":null,` +
	`"keys":{"p256dh":"BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM","auth":"tBHItJI5svbpez7KI4CCXg"}}`

// pushTab opens a tab instrumented as tab does, with the fake push service
// and the notification permission granted (permission "granted") or
// refused ("denied") for srv's origin.
func pushTab(t *testing.T, origin string, permission cdpbrowser.PermissionSetting, open func(testing.TB) context.Context) context.Context {
	t.Helper()
	ctx := tabIn(t, open)
	browser.FakePush(t, ctx, fakeSubscription, origin, permission)
	return ctx
}

// openPush serves s as program "gala" with a push key, and opens its page
// in a pushTab, driven to the first position of 1,234.
func openPush(t *testing.T, s *script, permission cdpbrowser.PermissionSetting) (*fakeQueue, context.Context, string) {
	return openPushIn(t, s, permission, browser.Tab)
}

// openPushIn is openPush in the browser of open.
func openPushIn(t *testing.T, s *script, permission cdpbrowser.PermissionSetting, open func(testing.TB) context.Context) (*fakeQueue, context.Context, string) {
	t.Helper()
	q := newFakeQueue()
	q.add("gala", s)
	srv, _ := q.serve(t, pushOptions())
	ctx := pushTab(t, srv.URL, permission, open)
	do(t, ctx, chromedp.Navigate(srv.URL+"/waiting-room/gala?lang=en"))
	drive(t, ctx, `document.getElementById('pos').textContent === '1,234'`)
	return q, ctx, srv.URL
}

const (
	pushOfferShown = `(b => b && !b.hidden && b.offsetParent !== null)(document.getElementById('pushOffer'))`
	pushStopShown  = `(b => b && !b.hidden && b.offsetParent !== null)(document.getElementById('pushStop'))`
)

// Without a push key, or in a browser without push, the page offers none.
func TestNoPushOffered(t *testing.T) {
	t.Parallel()
	t.Run("no push key", func(t *testing.T) {
		t.Parallel()
		q, ctx := openGala(t, gala(), "")
		if eval[bool](t, ctx, `!!document.getElementById('pushOffer') || !!document.querySelector('script[src*="/push."]') || 'pushBody' in document.getElementById('wr')`) {
			t.Error("the page offers notifications without a push key")
		}
		q.checkSchedule(t, ctx)
	})
	t.Run("no PushManager", func(t *testing.T) {
		t.Parallel()
		q := newFakeQueue()
		q.add("gala", gala())
		srv, _ := q.serve(t, pushOptions())
		ctx := tab(t)
		browser.AddScript(t, ctx, `delete window.PushManager;`)
		do(t, ctx, chromedp.Navigate(srv.URL+"/waiting-room/gala"))
		drive(t, ctx, `document.getElementById('pos').textContent === '1,234'`)
		if eval[bool](t, ctx, `!document.getElementById('push').hidden || 'pushBody' in document.getElementById('wr')`) {
			t.Error("the page offers notifications in a browser without PushManager")
		}
		q.checkSchedule(t, ctx)
	})
}

// TestPushSubscribeAndStop: the button, offered while waiting, asks for
// the permission on a click only, subscribes with the deployment's key,
// sends the subscription with the token, and says so; a person who comes
// back with a new token sends it with the enter, without a click; "Stop
// notifications" deletes it and unsubscribes.
func TestPushSubscribeAndStop(t *testing.T) {
	t.Parallel()
	q, ctx, _ := openPush(t, gala(), cdpbrowser.PermissionSettingGranted)
	token := storedToken(t, ctx, "gala")
	waitFor(t, ctx, pushOfferShown)
	if got := text(t, ctx, "pushOffer"); got != "Notify me when it's my turn" {
		t.Errorf("button = %q", got)
	}
	if got := eval[string](t, ctx, `document.getElementById('pushOffer').tagName + ' ' + document.getElementById('pushSay').getAttribute('role')`); got != "BUTTON status" {
		t.Errorf("button element and status role = %q, want BUTTON status", got)
	}
	if eval[bool](t, ctx, `'__subscribed' in window`) {
		t.Fatal("subscribed before a click")
	}
	screenshot(t, ctx, "push-offer.png")

	// With the keyboard: focus the button, press Enter.
	do(t, ctx, chromedp.Focus(chromedp.ID("pushOffer")), chromedp.KeyEvent("\r"))
	waitFor(t, ctx, pushStopShown)
	pushes := q.awaitPushes(t, ctx, 1)
	if p := pushes[0]; p.Method != http.MethodPut || p.Token != token || p.Body != fakeSubscription || p.ContentType != "application/json" || p.Status != 204 {
		t.Errorf("subscribe = %+v, want a PUT with token %s and body %s", p, token, fakeSubscription)
	}
	sub := eval[struct {
		UserVisibleOnly bool  `json:"userVisibleOnly"`
		Key             []int `json:"key"`
	}](t, ctx, `__subscribed`)
	key := make([]int, len(testPushKey))
	for i, b := range testPushKey {
		key[i] = int(b)
	}
	if !sub.UserVisibleOnly || !slices.Equal(sub.Key, key) {
		t.Errorf("subscribe(%+v), want userVisibleOnly and the deployment's key's 65 bytes", sub)
	}
	if got := text(t, ctx, "pushSay"); got != "We'll notify you when it's your turn." {
		t.Errorf("status after subscribing = %q", got)
	}
	if !eval[bool](t, ctx, `document.activeElement === document.getElementById('pushStop')`) {
		t.Error("the focus did not move to the stop button as the button it was on went")
	}
	if eval[bool](t, ctx, pushOfferShown) {
		t.Error("the button is still offered once subscribed")
	}
	screenshot(t, ctx, "push-on.png")

	// Back with a new token (the old place gone): the enter carries the
	// subscription, and the page says so without a click.
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`localStorage.removeItem('waitingroom:gala')`), chromedp.Reload())
	drive(t, ctx, `document.getElementById('pos').textContent === '1,234'`)
	var enter apiCall
	for _, c := range q.recorded() {
		if c.Method == http.MethodPost {
			enter = c
		}
	}
	if want := `{"push":` + fakeSubscription + `}`; enter.Body != want || enter.ContentType != "application/json" {
		t.Errorf("the enter back carried %q (%s), want %s", enter.Body, enter.ContentType, want)
	}
	newToken := storedToken(t, ctx, "gala")
	if newToken == token {
		t.Fatal("no new token")
	}
	waitFor(t, ctx, pushStopShown)
	if got := text(t, ctx, "pushSay"); got != "We'll notify you when it's your turn." {
		t.Errorf("status back = %q", got)
	}
	if n := len(q.awaitPushes(t, ctx, 1)); n != 1 {
		t.Errorf("%d push requests, want the first PUT only: the enter carried it", n)
	}

	do(t, ctx, chromedp.Click(chromedp.ID("pushStop")))
	waitFor(t, ctx, pushOfferShown+` && window.__unsubscribed === 1`)
	if p := q.awaitPushes(t, ctx, 2)[1]; p.Method != http.MethodDelete || p.Token != newToken || p.Status != 204 {
		t.Errorf("stop = %+v, want a DELETE with token %s", p, newToken)
	}
	if got := text(t, ctx, "pushSay"); got != "Notifications are off." {
		t.Errorf("status after stopping = %q", got)
	}
	if eval[bool](t, ctx, `localStorage.getItem('waitingroom:gala:push') !== null`) {
		t.Error("the choice is still kept after stopping")
	}
	q.checkSchedule(t, ctx)
}

// TestEnterWithARefusedSubscription: an enter whose kept subscription the
// server cannot use gets its place unsubscribed, in one request, and the
// button is offered again.
func TestEnterWithARefusedSubscription(t *testing.T) {
	t.Parallel()
	s := gala()
	q, ctx, _ := openPush(t, s, cdpbrowser.PermissionSettingGranted)
	waitFor(t, ctx, pushOfferShown)
	do(t, ctx, chromedp.Click(chromedp.ID("pushOffer")))
	waitFor(t, ctx, pushStopShown)
	q.mu.Lock()
	s.refusePush = true
	q.mu.Unlock()
	n := len(q.recorded())
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`localStorage.removeItem('waitingroom:gala')`), chromedp.Reload())
	drive(t, ctx, `document.getElementById('pos').textContent === '1,234'`)
	var enters []apiCall
	for _, c := range q.recorded()[n:] {
		if c.Method == http.MethodPost {
			enters = append(enters, c)
		}
	}
	if len(enters) != 1 || enters[0].Status != 201 || enters[0].Body == "" {
		t.Errorf("enters = %+v, want one, with the subscription, made", enters)
	}
	waitFor(t, ctx, pushOfferShown)
	q.checkSchedule(t, ctx)
}

// TestPushRefused: a refused permission, or a server that refuses the
// subscription, is said politely, and the page waits on as before.
func TestPushRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		permission cdpbrowser.PermissionSetting
		say        string
		puts       int
	}{
		{"permission denied", cdpbrowser.PermissionSettingDenied, "Notifications are blocked for this site, so we cannot notify you. Keep this page open: it updates by itself.", 0},
		{"subscription refused", cdpbrowser.PermissionSettingGranted, "Notifications could not be turned on. Keep this page open: it updates by itself.", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q, ctx, _ := openPush(t, gala(), tt.permission)
			if tt.puts > 0 { // the token is gone at the server: 404
				q.mu.Lock()
				for _, tok := range q.tokens {
					tok.program = "other"
				}
				q.mu.Unlock()
			}
			waitFor(t, ctx, pushOfferShown)
			do(t, ctx, chromedp.Click(chromedp.ID("pushOffer")))
			waitFor(t, ctx, `document.getElementById('pushSay').textContent !== ''`)
			if got := text(t, ctx, "pushSay"); got != tt.say {
				t.Errorf("status = %q, want %q", got, tt.say)
			}
			q.mu.Lock()
			puts := len(q.pushes)
			q.mu.Unlock()
			if puts != tt.puts || !eval[bool](t, ctx, pushOfferShown) {
				t.Errorf("%d subscription requests, want %d, and the button offered again", puts, tt.puts)
			}
			if tt.puts == 0 {
				q.checkSchedule(t, ctx) // the page polls on
				if p := browser.Pending(t, ctx); len(p) != 1 {
					t.Errorf("timers armed = %v, want the next poll", p)
				}
			}
		})
	}
}

// TestPushWakesThePage: a subscribed token's answers ask for a long
// retryAfterMs, which the page obeys to the millisecond; the service
// worker shows the queue's push messages as notifications, and at the
// turn the page polls at once, once, without waiting out the delay.
func TestPushWakesThePage(t *testing.T) {
	t.Parallel()
	s := gala()
	s.pushRetry = 10 * time.Minute
	// Chromium itself: its headless shell shows no notifications.
	q, ctx, origin := openPushIn(t, s, cdpbrowser.PermissionSettingGranted, browser.NotifyingTab)
	regs := browser.WatchWorkers(t, ctx)
	waitFor(t, ctx, pushOfferShown)
	do(t, ctx, chromedp.Click(chromedp.ID("pushOffer")))
	waitFor(t, ctx, pushStopShown)

	// The next answer says push: true and asks for ten minutes.
	drive(t, ctx, `__clock.pending()[0] === 600000`)
	if p := browser.Pending(t, ctx); !slices.Equal(p, []float64{600000}) {
		t.Fatalf("timers after a push: true answer = %v, want one of 600000 ms", p)
	}
	n := started(t, ctx)
	if fired := browser.Advance(t, ctx, 600000-1); fired != 0 || started(t, ctx) != n {
		t.Fatalf("1 ms before a push: true answer's 10 minutes, %d timers fired, %d requests went", fired, started(t, ctx)-n)
	}

	scope := origin + "/waiting-room/gala"
	id := regs.Await(t, ctx, scope)
	deliver := func(data string) { t.Helper(); browser.DeliverPush(t, ctx, origin, id, data) }

	// "Get ready": said on the page, no request.
	deliver(`{"program":"Gala","stage":"ready"}`)
	waitFor(t, ctx, `document.getElementById('pushSay').textContent === 'Get ready: your turn is coming soon.'`)
	if got := started(t, ctx); got != n {
		t.Errorf("a ready push made %d requests, want none", got-n)
	}
	checkNotes(t, ctx, scope, "ready", note{"Gala", "Get ready: your turn is coming soon.", "wr-ready", "en", false, false})

	// The turn: one poll at once, the ten minutes' timer cancelled.
	deliver(`{"program":"Gala","stage":"turn"}`)
	waitFor(t, ctx, `__started() === `+strconv.Itoa(n+1))
	q.awaitCalls(t, ctx, n+1)
	waitFor(t, ctx, `__clock.pending().length > 0`) // its answer handled
	if p := browser.Pending(t, ctx); !slices.Equal(p, []float64{600000}) {
		t.Errorf("timers after the turn's poll = %v, want only the new answer's 600000 ms", p)
	}
	if got := started(t, ctx); got != n+1 {
		t.Errorf("the turn made %d requests, want one", got-n)
	}
	page := pageCalls(t, ctx).Calls
	if gap := page[n].gapAfter(page[n-1]); gap != 10*time.Minute-time.Millisecond {
		t.Errorf("the turn's poll came %v after the answer before, want at once (the clock stood at 10 min − 1 ms)", gap)
	}

	checkNotes(t, ctx, scope, "turn", note{"Gala", "It's your turn! Go back to the waiting room to continue.", "wr-turn", "en", true, true})
}

// note is a notification shown.
type note struct {
	Title, Body, Tag, Lang       string
	Renotify, RequireInteraction bool
}

// checkNotes checks, in a subtest named name, that the notifications of the
// registration of scope are want (in a browser.NotifyingTab).
func checkNotes(t *testing.T, ctx context.Context, scope, name string, want ...note) {
	t.Run(name+" notification", func(t *testing.T) {
		if p := eval[string](t, ctx, `Notification.permission`); p != "granted" {
			t.Fatalf("Notification.permission is %q although granted through CDP (%s)", p, eval[string](t, ctx, `navigator.userAgent`))
		}
		notes := evalAwait[[]note](t, ctx, `navigator.serviceWorker.getRegistration('`+scope+`')
			.then((r) => r.getNotifications())
			.then((ns) => ns.map((n) => ({Title: n.title, Body: n.body, Tag: n.tag, Lang: n.lang, Renotify: n.renotify, RequireInteraction: n.requireInteraction})))`)
		if !slices.Equal(notes, want) {
			t.Errorf("notifications = %+v, want %+v", notes, want)
		}
	})
}

// evalAwait evaluates expr in the page and awaits the promise it gives.
func evalAwait[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// The service worker keeps its URL: it is served there, not hashed, checked
// for updates, as JavaScript, allowed the scopes under /waiting-room/, with
// the texts it names in every language; the page's CSP admits it.
func TestPushWorkerServed(t *testing.T) {
	q := newFakeQueue()
	q.add("gala", gala())
	h := newHandler(t, q, pushOptions())
	w := send(h, "GET", waitpage.PushWorkerPath, nil, nil)
	if w.Code != 200 || waitpage.PushWorkerPath != "/waiting-room/push-worker.js" {
		t.Fatalf("GET %s: status %d", waitpage.PushWorkerPath, w.Code)
	}
	want := map[string]string{
		"Content-Type":           "text/javascript; charset=utf-8",
		"Cache-Control":          "no-cache",
		"Service-Worker-Allowed": "/waiting-room/",
		"X-Content-Type-Options": "nosniff",
	}
	for k, v := range want {
		if got := w.Header().Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if csp := w.Header().Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'self';") || strings.Contains(csp, "worker-src") || strings.Contains(csp, "script-src") {
		t.Errorf("CSP = %q: default-src 'self' must be what governs workers", csp)
	}
	js := w.Body.String()
	for _, want := range []string{
		`"notifyTurn":"It's your turn! Go back to the waiting room to continue."`, `"notifyTurn":"입장하실 차례입니다! 대기실로 돌아가 계속 진행하세요."`,
		`"notifyReady":"Get ready: your turn is coming soon."`, `"notifyReady":"곧 차례입니다. 준비해 주세요."`,
		`"title":"Waiting room"`, `"title":"대기실"`,
	} {
		if !strings.Contains(js, want) {
			t.Errorf("the worker lacks %s", want)
		}
	}
	for _, unwanted := range []string{"/*TEXT*/", `"position"`, `"notifyOffer"`} {
		if strings.Contains(js, unwanted) {
			t.Errorf("the worker holds %s", unwanted)
		}
	}
	if head := send(h, "HEAD", waitpage.PushWorkerPath, nil, nil); head.Code != 200 || head.Body.Len() != 0 {
		t.Errorf("HEAD: status %d, %d B", head.Code, head.Body.Len())
	}
	if post := send(h, "POST", waitpage.PushWorkerPath, nil, nil); post.Code == 200 {
		t.Error("POST served the worker")
	}
}

// The page carries the push key, push.js and the button only when PushKey
// gives a key.
func TestPushKeyRendered(t *testing.T) {
	key := base64.RawURLEncoding.EncodeToString(testPushKey)
	tests := []struct {
		name string
		opts waitpage.Options
		want bool
	}{
		{"no PushKey", waitpage.Options{}, false},
		{"PushKey gives none", waitpage.Options{PushKey: func(context.Context) string { return "" }}, false},
		{"PushKey gives a key", pushOptions(), true},
	}
	q := newFakeQueue()
	q.add("gala", gala())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHandler(t, q, tt.opts)
			page := send(h, "GET", "/waiting-room/gala?lang=ko", nil, nil).Body.String()
			script := regexp.MustCompile(`<script src="(/waiting-room/assets/push\.[0-9a-f]{8}\.js)" defer></script>\s*<script src="/waiting-room/assets/app\.`).FindStringSubmatch(page)
			for what, got := range map[string]bool{
				"data-push-key":                strings.Contains(page, ` data-push-key="`+key+`"`),
				"push.js before app.js":        script != nil,
				"the button, in Korean":        strings.Contains(page, `<button id="pushOffer" class="button" type="button" data-t="notifyOffer">내 차례가 되면 알림 받기</button>`),
				"the status line, role=status": strings.Contains(page, `<p id="pushSay" role="status"></p>`),
			} {
				if got != tt.want {
					t.Errorf("%s: %v, want %v", what, got, tt.want)
				}
			}
			if !tt.want {
				if strings.Contains(page, "push") {
					t.Error("the page mentions push")
				}
				return
			}
			js := send(h, "GET", script[1], nil, nil)
			if js.Code != 200 || js.Header().Get("Cache-Control") != "public, max-age=31536000, immutable" {
				t.Fatalf("%s: status %d, Cache-Control %q", script[1], js.Code, js.Header().Get("Cache-Control"))
			}
			for _, want := range []string{`"notifyDenied":"Notifications are blocked`, `"notifyOn":"차례가 되면 알림으로 알려 드립니다."`} {
				if !strings.Contains(js.Body.String(), want) {
					t.Errorf("push.js lacks %s", want)
				}
			}
			t.Logf("with push: the HTML %d B more, push.js %d B (gzip %d B)", len(page)-len(send(newHandler(t, q, waitpage.Options{}), "GET", "/waiting-room/gala?lang=ko", nil, nil).Body.String()),
				js.Body.Len(), send(h, "GET", script[1], nil, http.Header{"Accept-Encoding": {"gzip"}}).Body.Len())
		})
	}
}
