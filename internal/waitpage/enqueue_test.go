package waitpage_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/example/waitingroom/internal/testing/browser"
	"github.com/example/waitingroom/internal/waitpage"
)

// TestEnqueueToken: a program that takes people signed in on the site.
// Without a token, or with a bad one, the enter is refused and the page
// stops and sends the person to the site to sign in. A site's link with
// #enqueue=JWT: the fragment goes before any request, the enter carries
// the token (its polls do not), and the page keeps the account's place
// whatever token it held; the token is never stored.
func TestEnqueueToken(t *testing.T) {
	t.Parallel()
	s := gala()
	s.requireEnqueue = true
	s.info.TargetURL = "https://tickets.example.com/gala?x=1"
	q := newFakeQueue()
	q.add("gala", s)
	srv, _ := q.serve(t, waitpage.Options{})
	held, _ := q.place(t)
	ctx := tab(t)
	page := srv.URL + "/waiting-room/gala?lang=en"

	refused := func(frag, code string) {
		t.Helper()
		n := len(q.recorded())
		do(t, ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(page+frag))
		waitFor(t, ctx, `!document.getElementById('done').hidden`)
		got := eval[map[string]string](t, ctx, `(() => {
			const $ = (id) => document.getElementById(id);
			return {title: $('doneTitle').textContent, text: $('doneText').textContent, link: $('go').textContent,
				href: $('go').hidden ? '' : $('go').href, again: String($('again').hidden), hash: location.hash};
		})()`)
		want := map[string]string{"title": "This queue takes people signed in on the site.", "text": "",
			"link": "Go to the site to sign in", "href": s.info.TargetURL, "again": "true", "hash": ""}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q", code, k, got[k], v)
			}
		}
		calls := q.recorded()[n:]
		if len(calls) != 1 || calls[0].Method != http.MethodPost || calls[0].Status != http.StatusForbidden {
			t.Errorf("%s: requests = %+v, want one enter, refused", code, calls)
		}
		if p := browser.Pending(t, ctx); len(p) != 0 {
			t.Errorf("%s: timers armed after the refusal: %v", code, p)
		}
	}
	refused("", "ENQUEUE_TOKEN_REQUIRED")
	refused("#enqueue=bad.eyJzdWIiOiJ4In0.sig", "INVALID_ENQUEUE_TOKEN")

	// The device holds another place; the site's token wins.
	eval[any](t, ctx, `localStorage.setItem('waitingroom:gala', JSON.stringify({token: '`+held+`'}))`)
	const jwt = "eyJhbGciOiJFUzI1NiIsImtpZCI6ImsxIn0.eyJzdWIiOiJhY2N0LTcifQ.c2ln_-"
	n := len(q.recorded())
	do(t, ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(page+"#enqueue="+jwt))
	drive(t, ctx, `document.getElementById('pos').textContent === '1,234'`)
	calls := q.recorded()[n:]
	if c := calls[0]; c.Method != http.MethodPost || c.Enqueue != jwt || c.Key == "" || c.Status != http.StatusCreated {
		t.Errorf("first request = %+v, want an enter with the enqueue token", c)
	}
	for _, c := range calls[1:] {
		if c.Method != http.MethodGet || c.Enqueue != "" || c.Token != q.accounts[jwt] {
			t.Errorf("after the enter: %+v, want polls of the account's place, without the enqueue token", c)
		}
	}
	if got := eval[string](t, ctx, `location.href`); got != page {
		t.Errorf("address = %q, want no fragment", got)
	}
	if got := storedToken(t, ctx, "gala"); got == held || got != q.accounts[jwt] {
		t.Errorf("stored token %q, want the account's %q (held %q)", got, q.accounts[jwt], held)
	}
	if eval[bool](t, ctx, `JSON.stringify(localStorage).includes('`+jwt[:20]+`') || JSON.stringify(sessionStorage).includes('`+jwt[:20]+`')`) {
		t.Error("the enqueue token is stored")
	}

	// Another device of the account (the same token) gets the same place.
	ctx2 := tab(t)
	do(t, ctx2, chromedp.Navigate(page+"#enqueue="+jwt))
	drive(t, ctx2, `document.getElementById('pos').textContent !== '–'`)
	if got, want := storedToken(t, ctx2, "gala"), storedToken(t, ctx, "gala"); got != want {
		t.Errorf("second device's token %q, want the account's %q", got, want)
	}
	if !strings.Contains(text(t, ctx2, "pos"), ",") {
		t.Errorf("second device shows %q", text(t, ctx2, "pos"))
	}
}
