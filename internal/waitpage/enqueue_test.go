package waitpage_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/testing/browser"
	"github.com/example/waitingroom/internal/waitpage"
)

// TestEnqueueToken: a program that takes people signed in on the site.
// Without a token, or with a bad one, the enter is refused and the page
// stops and sends the person to the site to sign in. A site's link with
// #enqueue=JWT: the fragment goes before any request, the enter carries
// the token (its polls do not), and the page keeps the account's place;
// the token is never stored. (A device that holds a place asks first:
// TestEnqueueWhereAPlaceIsHeld.)
func TestEnqueueToken(t *testing.T) {
	t.Parallel()
	s := gala()
	s.requireEnqueue = true
	s.info.TargetURL = "https://tickets.example.com/gala?x=1"
	q := newFakeQueue()
	q.add("gala", s)
	srv, _ := q.serve(t, waitpage.Options{})
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

	// A device that holds no place enters with the site's token at once.
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
	if got := storedToken(t, ctx, "gala"); got != q.accounts[jwt] {
		t.Errorf("stored token %q, want the account's %q", got, q.accounts[jwt])
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

// awaitLeaves waits until the fake has answered n DELETEs of a place, or
// ctx ends, and returns them.
func (q *fakeQueue) awaitLeaves(t *testing.T, ctx context.Context, n int) []apiCall {
	t.Helper()
	return q.await(t, ctx, fmt.Sprint(n, " DELETEs"), func() []apiCall { return q.leaves }, atLeast(n))
}

// TestEnqueueWhereAPlaceIsHeld: a site's link (#enqueue=JWT) opened on a
// device that holds a place enters nothing at once: the page polls that
// place first. WAITING asks; "Keep this place" drops the site's token
// and keeps the place; "Enter with my account" enters with the token,
// keeps the account's place and gives up the held one with one DELETE.
// A place that ended, or that the queue does not know, enters at once.
func TestEnqueueWhereAPlaceIsHeld(t *testing.T) {
	t.Parallel()
	const jwt = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhY2N0LTgifQ.c2ln"
	for _, how := range []string{"keep", "enter", "left", "unknown"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			s := gala()
			s.requireEnqueue = true
			q := newFakeQueue()
			q.add("gala", s)
			srv, _ := q.serve(t, waitpage.Options{})
			held, _ := q.place(t)
			switch how {
			case "left":
				q.set(held, api.StatusLeft)
			case "unknown":
				held = "AAAAAAAAAAAAAAAAAAAAAA"
			}
			ctx := tab(t)
			page := srv.URL + "/waiting-room/gala?lang=en"
			do(t, ctx, chromedp.Navigate(srv.URL+"/no-page"))
			eval[any](t, ctx, `localStorage.setItem('waitingroom:gala', JSON.stringify({token: '`+held+`'}))`)
			do(t, ctx, chromedp.Navigate(page+"#enqueue="+jwt))

			if how == "left" || how == "unknown" {
				drive(t, ctx, `(JSON.parse(localStorage.getItem('waitingroom:gala')) || {}).token !== '`+held+`' && document.getElementById('pos').textContent !== '–'`)
				calls := q.recorded()
				if len(calls) < 2 || calls[0].Method != http.MethodGet || calls[0].Token != held || calls[1].Method != http.MethodPost || calls[1].Enqueue != jwt {
					t.Fatalf("requests = %+v, want a poll of the held place, then an enter with the site's token", calls)
				}
				if got := storedToken(t, ctx, "gala"); got != q.accounts[jwt] || !eval[bool](t, ctx, `document.getElementById('enqAsk').hidden`) {
					t.Errorf("stored %q, want the account's %q, and no prompt", got, q.accounts[jwt])
				}
				if ls := q.leavesOf(); len(ls) != 0 {
					t.Errorf("DELETEs = %+v, want none", ls)
				}
				return
			}

			drive(t, ctx, `!!document.getElementById('enqAsk') && !document.getElementById('enqAsk').hidden`)
			got := eval[map[string]string](t, ctx, `(() => {
				const $ = (id) => document.getElementById(id);
				return {ask: document.querySelector('#enqAsk p').textContent, yes: $('enqYes').textContent, no: $('enqNo').textContent,
					cls: $('enqAsk').className, live: $('announce').textContent, hash: location.hash};
			})()`)
			want := map[string]string{"ask": "Enter as the account you signed in with on the site? This device's current place will be given up.",
				"yes": "Enter with my account", "no": "Keep this place", "cls": "handoff",
				"live": "Enter as the account you signed in with on the site? This device's current place will be given up.", "hash": ""}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			drive(t, ctx, `__started() >= 3 && document.getElementById('pos').textContent === '1,234'`) // the prompt waits: the polls go on
			for _, c := range q.recorded() {
				if c.Method != http.MethodGet || c.Token != held || c.Enqueue != "" {
					t.Fatalf("before the choice: %+v, want polls of the held place only", c)
				}
			}
			screenshot(t, ctx, "enqueue-ask.png")
			n := len(q.recorded())
			if how == "keep" {
				do(t, ctx, chromedp.Click(chromedp.ID("enqNo")))
				waitFor(t, ctx, `document.getElementById('enqAsk').hidden`)
				drive(t, ctx, `__started() >= `+strconv.Itoa(n+3))
				for _, c := range q.recorded() {
					if c.Method != http.MethodGet || c.Token != held || c.Enqueue != "" {
						t.Errorf("after Keep: %+v, want polls of the held place only", c)
					}
				}
				if got := storedToken(t, ctx, "gala"); got != held || len(q.leavesOf()) != 0 || q.statusOf(held) != api.StatusWaiting {
					t.Errorf("stored %q (held %q), DELETEs %+v: want the held place kept", got, held, q.leavesOf())
				}
				q.checkSchedule(t, ctx)
				return
			}
			do(t, ctx, chromedp.Click(chromedp.ID("enqYes")))
			drive(t, ctx, `(JSON.parse(localStorage.getItem('waitingroom:gala')) || {}).token !== '`+held+`'`)
			q.awaitLeaves(t, ctx, 1)
			drive(t, ctx, `__started() >= `+strconv.Itoa(n+5))
			var enters []apiCall
			for _, c := range q.recorded()[n:] {
				if c.Method == http.MethodPost {
					enters = append(enters, c)
				} else if c.Enqueue != "" || c.Token != held && c.Token != q.accounts[jwt] {
					t.Errorf("after the choice: %+v, want polls without the site's token", c)
				}
			}
			if len(enters) != 1 || enters[0].Enqueue != jwt || enters[0].Key == "" || enters[0].Status != http.StatusCreated {
				t.Errorf("enters = %+v, want one, with the site's token", enters)
			}
			if tok := storedToken(t, ctx, "gala"); tok != q.accounts[jwt] || tok == held {
				t.Errorf("stored %q, want the account's %q", tok, q.accounts[jwt])
			}
			if ls := q.leavesOf(); len(ls) != 1 || ls[0].Token != held || ls[0].Status != http.StatusNoContent || q.statusOf(held) != api.StatusLeft {
				t.Errorf("DELETEs = %+v, held place %s: want it left, once", ls, q.statusOf(held))
			}
		})
	}
}
