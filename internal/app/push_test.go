package app_test

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/notify"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/browser"
	"github.com/example/waitingroom/internal/testing/pushtest"
	"github.com/example/waitingroom/internal/tools/localkeys"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/simclock"
	"github.com/example/waitingroom/internal/webpush"
)

func TestMain(m *testing.M) { browser.Main(m) }

// TestPushEndToEnd: a person on the page, in Chromium, asks to be
// notified; the page sends the subscription (a push service of the
// test's own stands in for the browser's) to the App's handler; the App's
// sender, ticked a second at a time on the service's clock, pushes "ready"
// and then "turn" there, each once, VAPID-signed and encrypted (the push
// service checks and decrypts them); the turn's payload, delivered to the
// page's service worker, shows the notification, and the page polls at once
// and finds the person admitted.
func TestPushEndToEnd(t *testing.T) {
	ctx := t.Context()
	cfg, err := config.FromEnv(func(string) string { return "" }, false)
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New()
	wrap, err := localkeys.NewWrapper()
	if err != nil {
		t.Fatal(err)
	}
	key, err := notify.Key(ctx, store, wrap, time.Now()) // the one the sender opens
	if err != nil {
		t.Fatal(err)
	}
	ps := pushtest.New(t, &key.PublicKey)
	clk := simclock.NewFake(time.Now())
	a := app.New(cfg, store, slog.New(slog.NewTextHandler(io.Discard, nil)), app.WithServiceOptions(queue.WithClock(clk)),
		app.WithPush(app.Push{Subject: "mailto:ops@example.com", Hosts: webpush.Hosts{ps.Host()}, Wrap: wrap, HTTP: ps.Client(), Clock: clk}))
	sender, err := a.Sender(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.LocalHandler("s3cret"))
	t.Cleanup(srv.Close)

	// Gala admits 5 a second once resumed, 50 in line ahead; "ready" 30 s ahead.
	send := func(method, path, body string) {
		t.Helper()
		r, _ := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer s3cret")
		res, err := http.DefaultClient.Do(r)
		if err != nil || res.StatusCode >= 300 {
			t.Fatalf("%s %s: %v %v", method, path, res, err)
		}
		res.Body.Close()
	}
	send("PUT", "/api/v1/admin/programs/gala", `{"admissionRatePerSecond":5,"paused":true,"displayName":"Gala","pushLeadSeconds":30}`)
	for range 50 {
		send("POST", "/api/v1/queues/programs/gala", "")
	}

	tab, cancel := context.WithTimeout(browser.NotifyingTab(t), 2*time.Minute)
	defer cancel()
	sub := ps.Subscribe()
	browser.FakePush(t, tab, sub.JSON(), srv.URL, cdpbrowser.PermissionSettingGranted)
	workers := browser.WatchWorkers(t, tab)
	browser.Do(t, tab, chromedp.Navigate(srv.URL+"/waiting-room/gala?lang=en"))
	browser.WaitFor(t, tab, time.Minute, `(b => b && !b.hidden && b.offsetParent !== null)(document.getElementById('pushOffer'))`)
	if got := browser.Eval[string](t, tab, `document.getElementById('wr').dataset.pushKey`); got != mustKey(t, key) {
		t.Errorf("the page's push key %q, want the stack's VAPID key", got)
	}
	browser.Do(t, tab, chromedp.Click(chromedp.ID("pushOffer")))
	browser.WaitFor(t, tab, time.Minute, `document.getElementById('pushSay').textContent === "We'll notify you when it's your turn."`)
	listed, _, err := store.Subscribed(ctx, "gala", 0, 1000, 0)
	if err != nil || len(listed) != 1 {
		t.Fatalf("subscribed: %+v, %v; want the page's token alone", listed, err)
	}

	// Admission starts; the sender ticks each second until the turn is told.
	send("PUT", "/api/v1/admin/programs/gala", `{"paused":false}`)
	var stages []notify.Payload
	for i := 0; i < 600 && len(stages) < 2; i++ {
		clk.Advance(time.Second)
		if err := sender.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		stages = stages[:0]
		for _, p := range ps.Received(sub.Endpoint) {
			var pl notify.Payload
			if err := json.Unmarshal(p.Payload, &pl); err != nil {
				t.Fatalf("payload %q: %v", p.Payload, err)
			}
			stages = append(stages, pl)
		}
	}
	for range 5 { // and nothing more after
		clk.Advance(time.Second)
		_ = sender.Tick(ctx)
	}
	want := []notify.Payload{{Program: "Gala", Stage: "ready"}, {Program: "Gala", Stage: "turn"}}
	pushes := ps.Received(sub.Endpoint)
	if len(pushes) != 2 || !cmp.Equal(stages, want) {
		t.Fatalf("pushes %+v, want ready then turn, once each", stages)
	}
	if r := ps.Rejections(); len(r) != 0 {
		t.Errorf("the push service refused %+v", r)
	}

	// The turn, delivered to the page's service worker: a notification,
	// and a poll at once that finds the admission.
	id := workers.Await(t, tab, srv.URL+"/waiting-room/gala")
	browser.DeliverPush(t, tab, srv.URL, id, string(pushes[1].Payload))
	browser.WaitFor(t, tab, time.Minute, `!document.getElementById('done').hidden`)
	notes, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`navigator.serviceWorker.getRegistration(location.pathname)
		.then((r) => r.getNotifications()).then((ns) => ns.map((n) => n.title + '|' + n.tag))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(notes, []string{"Gala|wr-turn"}) {
		t.Errorf("notifications %q, want the turn's", notes)
	}
}

// mustKey is key's public half as the page subscribes with it.
func mustKey(t *testing.T, key *ecdsa.PrivateKey) string {
	t.Helper()
	s, err := notify.ApplicationServerKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
