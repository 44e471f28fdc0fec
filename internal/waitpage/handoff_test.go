package waitpage_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/testing/browser"
	"github.com/example/waitingroom/internal/waitpage"
)

const hoOpenShown = `(b => !!b && !b.hidden && b.offsetParent !== null)(document.getElementById('hoOpen'))`

// awaitHandoffs waits until the fake has answered n handoff requests, or
// ctx ends, and returns them.
func (q *fakeQueue) awaitHandoffs(t *testing.T, ctx context.Context, n int) []apiCall {
	t.Helper()
	return q.await(t, ctx, fmt.Sprint(n, " handoff requests"), func() []apiCall { return q.handoffs }, atLeast(n))
}

// awaitCall waits until a request recorded after the first n matches, or ctx ends.
func (q *fakeQueue) awaitCall(t *testing.T, ctx context.Context, n int, match func(apiCall) bool) {
	t.Helper()
	q.await(t, ctx, "a request", func() []apiCall { return q.calls }, func(c []apiCall) bool {
		return len(c) > n && slices.ContainsFunc(c[n:], match)
	})
}

// codeOf is the code the fake handed out for tokenID.
func (q *fakeQueue) codeOf(tokenID string) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	for c, h := range q.codes {
		if h.token == tokenID {
			return c
		}
	}
	return ""
}

// TestHandoffPanel: "Continue on another device", pressed by keyboard,
// asks for a code with the token and the page's address, shows the code
// grouped in fours in a monospace font, the QR code as an image of the
// answer's SVG with its alt text, and how long the code is valid; focus
// goes to the panel's heading, which is announced; Escape, then Close,
// hide it and give focus back to the button. The polls go on meanwhile.
func TestHandoffPanel(t *testing.T) {
	t.Parallel()
	q := newFakeQueue()
	q.add("gala", gala())
	srv, _ := q.serve(t, waitpage.Options{})
	ctx := tab(t)
	do(t, ctx, phone, chromedp.Navigate(srv.URL+"/waiting-room/gala?lang=en"))
	drive(t, ctx, `document.getElementById('pos').textContent === '1,234'`)
	tok := storedToken(t, ctx, "gala")
	if !eval[bool](t, ctx, hoOpenShown) {
		t.Fatal("no Continue on another device button while WAITING")
	}
	if got := text(t, ctx, "hoOpen"); got != "Continue on another device" {
		t.Errorf("button = %q", got)
	}

	open := func(n int) string {
		t.Helper()
		do(t, ctx, chromedp.Focus(chromedp.ID("hoOpen")), chromedp.KeyEvent("\r"))
		waitFor(t, ctx, `!document.getElementById('hoPanel').hidden`)
		h := q.awaitHandoffs(t, ctx, n)[n-1]
		if h.Method != http.MethodPost || h.Token != tok || h.ContentType != "application/json" || h.Body != `{"page":"`+srv.URL+`/waiting-room/gala"}` || h.Status != http.StatusCreated {
			t.Errorf("handoff request = %+v, want a POST with the token and the page's address (no query), answered 201", h)
		}
		return q.codeOf(tok)
	}
	code := open(1)
	// The QR image loads (a valid SVG, allowed by the page's policy).
	waitFor(t, ctx, `(i => i.complete && i.naturalWidth > 0)(document.getElementById('hoQr'))`)
	got := eval[map[string]string](t, ctx, `(() => {
		const $ = (id) => document.getElementById(id);
		return {code: $('hoCode').textContent, src: $('hoQr').src, alt: $('hoQr').alt, tag: $('hoQr').tagName,
			font: getComputedStyle($('hoCode')).fontFamily, valid: $('hoValid').textContent,
			focus: document.activeElement.id, live: $('announce').textContent, button: String($('hoOpen').hidden)};
	})()`)
	if want := code[:4] + " " + code[4:8] + " " + code[8:12] + " " + code[12:]; got["code"] != want {
		t.Errorf("code shown = %q, want %q", got["code"], want)
	}
	if !strings.Contains(got["font"], "monospace") {
		t.Errorf("the code's font = %q, want a monospace one", got["font"])
	}
	svg, ok := strings.CutPrefix(got["src"], "data:image/svg+xml,")
	if svg, err := url.PathUnescape(svg); !ok || err != nil || svg != fakeQR || got["tag"] != "IMG" {
		t.Errorf("QR = <%s src=%q>, want an img of the answer's SVG as a data: URL", got["tag"], got["src"])
	}
	if got["alt"] != "QR code to continue on another device" {
		t.Errorf("QR alt = %q", got["alt"])
	}
	if got["valid"] != "The code works once, for 5 minutes." {
		t.Errorf("validity = %q", got["valid"])
	}
	if got["focus"] != "hoTitle" || got["live"] != "Continue on another device. The code works once, for 5 minutes." {
		t.Errorf("focus on #%s, live region %q: want the panel's heading, announced", got["focus"], got["live"])
	}
	if got["button"] != "true" {
		t.Error("the button stays shown over its open panel")
	}
	screenshot(t, ctx, "handoff.png")

	closed := func(how string) {
		t.Helper()
		waitFor(t, ctx, `document.getElementById('hoPanel').hidden`)
		if got := eval[string](t, ctx, `document.activeElement.id`); got != "hoOpen" || !eval[bool](t, ctx, hoOpenShown) {
			t.Errorf("after %s the focus is on #%s, want the button, shown", how, got)
		}
	}
	do(t, ctx, chromedp.KeyEvent(kb.Escape))
	closed("Escape")
	open(2)
	if got := eval[string](t, ctx, `document.activeElement.id`); got != "hoTitle" {
		t.Errorf("opened again, the focus is on #%s", got)
	}
	do(t, ctx, chromedp.Click(chromedp.ID("hoClose")))
	closed("Close")

	// The polls went on, on their schedule; the handoffs are none of them.
	drive(t, ctx, `__started() >= 5`)
	q.checkSchedule(t, ctx)
}

// TestHandoffRefusedForAnAccount: the place of an account follows the
// account: the server refuses its handoff, and the page says so.
func TestHandoffRefusedForAnAccount(t *testing.T) {
	t.Parallel()
	s := gala()
	s.account = true
	q, ctx := openGala(t, s, "?lang=en")
	do(t, ctx, chromedp.Click(chromedp.ID("hoOpen")))
	waitFor(t, ctx, `document.getElementById('state').textContent.startsWith('This place belongs to your account')`)
	if hs := q.awaitHandoffs(t, ctx, 1); hs[0].Status != http.StatusConflict {
		t.Errorf("handoff answered %d, want 409", hs[0].Status)
	}
	if !eval[bool](t, ctx, `document.getElementById('hoPanel').hidden`) || !eval[bool](t, ctx, hoOpenShown) {
		t.Error("after a refusal the panel shows, or the button does not")
	}
}

// place makes a WAITING place of program "gala" at the fake, as another
// device's enter would, and a handoff code for it.
func (q *fakeQueue) place(t *testing.T) (tokenID, code string) {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	v, _, err := q.enter("gala", "", "another-device", "en")
	if err != nil {
		t.Fatal(err)
	}
	return v.TokenID, q.newHandoff(v.TokenID)
}

// TestHandoffRedeem: a page opened with #handoff=CODE drops the fragment,
// redeems the code once with an Idempotency-Key, keeps the place's new
// token and polls with it; the old token reads MOVED. An answer lost (a
// 503 with Retry-After: 1) is asked again after exactly that, with the
// same key, and answers the same token (200: a retry's).
func TestHandoffRedeem(t *testing.T) {
	t.Parallel()
	for _, lost := range []bool{false, true} {
		t.Run(map[bool]string{false: "answered", true: "answer lost"}[lost], func(t *testing.T) {
			t.Parallel()
			q := newFakeQueue()
			q.add("gala", gala())
			srv, _ := q.serve(t, waitpage.Options{})
			old, code := q.place(t)
			if lost {
				q.loseRedeems = 1
			}
			ctx := tab(t)
			do(t, ctx, chromedp.Navigate(srv.URL+"/waiting-room/gala?lang=en#handoff="+code))
			drive(t, ctx, `document.getElementById('pos').textContent === '1,234'`)

			calls := q.recorded()
			var redeems []apiCall
			for _, c := range calls {
				if c.Redeem {
					redeems = append(redeems, c)
				}
			}
			wantStatus := []int{http.StatusCreated} // the place moved
			if lost {
				wantStatus = []int{http.StatusServiceUnavailable, http.StatusOK}
			}
			if len(redeems) != len(wantStatus) || !calls[0].Redeem {
				t.Fatalf("requests = %+v, want %d redeem(s) first", calls, len(wantStatus))
			}
			for i, r := range redeems {
				if r.Status != wantStatus[i] || r.Key == "" || r.Key != redeems[0].Key || r.Body != `{"code":"`+code+`"}` || r.ContentType != "application/json" || r.Lang != "en" {
					t.Errorf("redeem %d = %+v, want the code, with one Idempotency-Key, answered %d", i+1, r, wantStatus[i])
				}
			}
			if lost {
				page := pageCalls(t, ctx).Calls
				if gap := page[1].gapAfter(page[0]); gap != time.Second {
					t.Errorf("the redeem after a 503 with Retry-After: 1 came after %v of the page's time, want 1s", gap)
				}
			}
			if href := eval[string](t, ctx, `location.href`); href != srv.URL+"/waiting-room/gala?lang=en" {
				t.Errorf("address after the redeem = %q, want no fragment", href)
			}
			tok := storedToken(t, ctx, "gala")
			q.mu.Lock()
			moved, tokens := q.tokens[old].status, len(q.tokens)
			q.mu.Unlock()
			if tok == "" || tok == old || tokens != 2 || moved != statusMoved {
				t.Errorf("stored token %q (old %q), %d tokens, old one %s: want one new token kept, the old MOVED", tok, old, tokens, moved)
			}
			polls := 0
			for _, c := range calls[len(redeems):] {
				if c.Method != http.MethodGet || c.Token != tok {
					t.Errorf("after the redeem: %+v, want polls with the new token", c)
				}
				polls++
			}
			if polls == 0 {
				t.Error("no poll after the redeem")
			}
			if st := eval[map[string]any](t, ctx, `JSON.parse(localStorage.getItem('waitingroom:gala'))`); st["handoff"] != nil || st["handoffKey"] != nil || st["key"] != nil {
				t.Errorf("stored place = %v, want the redeem's code and key gone once its answer is kept", st)
			}
			q.checkSchedule(t, ctx)
		})
	}
}

// TestHandoffRedeemRefused: a code that is used, unknown or expired,
// malformed, or whose place is no longer waiting is said, and the page
// goes on as without one: it enters, and shows the place.
func TestHandoffRedeemRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		code   func(q *fakeQueue, t *testing.T) string
		status int
		say    string
	}{
		{"used", func(q *fakeQueue, t *testing.T) string {
			_, code := q.place(t)
			q.codes[code].used = true
			return code
		}, http.StatusConflict, "This place has already moved to another device."},
		{"unknown", func(q *fakeQueue, t *testing.T) string { return "0123456789ABCDEF" }, http.StatusNotFound, "This code is not valid or has expired. Make a new one on the first device."},
		{"malformed", func(q *fakeQueue, t *testing.T) string { return "K7QM" }, http.StatusBadRequest, "This code is not valid or has expired. Make a new one on the first device."},
		{"not waiting", func(q *fakeQueue, t *testing.T) string {
			tok, code := q.place(t)
			q.tokens[tok].status = api.StatusLeft
			return code
		}, http.StatusConflict, "This place is no longer waiting, so it could not move here."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := newFakeQueue()
			q.add("gala", gala())
			srv, _ := q.serve(t, waitpage.Options{})
			code := tt.code(q, t)
			q.mu.Lock()
			before := len(q.tokens)
			q.mu.Unlock()
			ctx := tab(t)
			do(t, ctx, chromedp.Navigate(srv.URL+"/waiting-room/gala?lang=en#handoff="+code))
			drive(t, ctx, `document.getElementById('pos').textContent === '1,234'`)
			if got := text(t, ctx, "state"); got != tt.say {
				t.Errorf("state line = %q, want %q", got, tt.say)
			}
			calls := q.recorded()
			if len(calls) < 2 || !calls[0].Redeem || calls[0].Status != tt.status || calls[1].Method != http.MethodPost || calls[1].Redeem || calls[1].Status != http.StatusCreated {
				t.Fatalf("requests = %+v, want the redeem refused (%d), then an enter", calls, tt.status)
			}
			q.mu.Lock()
			after := len(q.tokens)
			q.mu.Unlock()
			if after != before+1 || storedToken(t, ctx, "gala") == "" || eval[bool](t, ctx, `location.hash !== ''`) {
				t.Errorf("%d new tokens, stored %q, hash %q: want one place entered, kept, and no fragment", after-before, storedToken(t, ctx, "gala"), eval[string](t, ctx, `location.hash`))
			}
			q.checkSchedule(t, ctx)
		})
	}
}

// TestMovedStopsPolling: once the place moved to another device the page
// says so, sends nothing more and arms nothing, and forgets the token, so
// that a reload enters afresh.
func TestMovedStopsPolling(t *testing.T) {
	t.Parallel()
	q, ctx := openGala(t, gala(), "?lang=en")
	q.set(storedToken(t, ctx, "gala"), statusMoved)
	drive(t, ctx, `!document.getElementById('done').hidden`)
	if got := text(t, ctx, "doneTitle"); got != "Your place moved to another device." {
		t.Errorf("title = %q", got)
	}
	if eval[bool](t, ctx, hoOpenShown) || eval[bool](t, ctx, `!document.getElementById('waiting').hidden`) {
		t.Error("the place, or the handoff button, still shows")
	}
	if got := storedToken(t, ctx, "gala"); got != "" {
		t.Errorf("stored token = %q after MOVED, want none", got)
	}
	waitFor(t, ctx, `document.getElementById('announce').textContent.startsWith('Your place moved')`)
	if p := browser.Pending(t, ctx); len(p) != 0 {
		t.Errorf("timers armed after MOVED: %v, want none", p)
	}
	n, m := started(t, ctx), len(q.recorded())
	if fired := browser.Advance(t, ctx, ms(time.Hour)); fired != 0 {
		t.Errorf("%d timers fired in an hour after MOVED, want none", fired)
	}
	if started(t, ctx) != n || len(q.recorded()) != m {
		t.Errorf("requests after MOVED: the page made %d, the server answered %d; want none", started(t, ctx)-n, len(q.recorded())-m)
	}
	q.checkSchedule(t, ctx)

	do(t, ctx, chromedp.Reload())
	drive(t, ctx, `document.getElementById('pos').textContent === '1,234'`)
	posts := slices.DeleteFunc(q.recorded(), func(c apiCall) bool { return c.Method != http.MethodPost })
	if len(posts) != 2 || posts[1].Token != "" || posts[1].Key == posts[0].Key {
		t.Errorf("enters = %+v, want a second one after the reload, with a new key", posts)
	}
}

// redeems are the redeem requests among calls.
func redeems(calls []apiCall) []apiCall {
	return slices.DeleteFunc(calls, func(c apiCall) bool { return !c.Redeem })
}

// leavesOf is the DELETEs of a place the fake answered.
func (q *fakeQueue) leavesOf() []apiCall {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]apiCall(nil), q.leaves...)
}

// statusOf is the status of tokenID at the fake.
func (q *fakeQueue) statusOf(tokenID string) api.Status {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.tokens[tokenID].status
}

// storedPlace is the place the page keeps for program gala.
func storedPlace(t *testing.T, ctx context.Context) map[string]any {
	t.Helper()
	return eval[map[string]any](t, ctx, `JSON.parse(localStorage.getItem('waitingroom:gala')) || {}`)
}

// TestHandoffTypedCode: a code typed by hand (lowercase, with spaces and
// dashes) is sent as typed and redeemed; a refusal is said by the form
// and keeps this device's place; a code that moves a place here is kept,
// and this device's own place is then left, once, with its old token.
func TestHandoffTypedCode(t *testing.T) {
	t.Parallel()
	q, ctx := openGala(t, gala(), "?lang=en")
	mine := storedToken(t, ctx, "gala")
	attrs := eval[map[string]string](t, ctx, `(i => ({label: document.querySelector('label[for=hoIn]').textContent, ac: i.autocomplete,
		cap: i.getAttribute('autocapitalize'), spell: i.getAttribute('spellcheck'), max: String(i.maxLength),
		button: i.form.querySelector('[type=submit]').textContent, shown: String(i.offsetParent !== null)}))(document.getElementById('hoIn'))`)
	want := map[string]string{"label": "Have a code from another device?", "ac": "off", "cap": "characters", "spell": "false", "max": "24", "button": "Move it here", "shown": "true"}
	for k, v := range want {
		if attrs[k] != v {
			t.Errorf("the code field's %s = %q, want %q", k, attrs[k], v)
		}
	}
	submit := func(code string) {
		t.Helper()
		do(t, ctx, chromedp.SetValue(chromedp.ID("hoIn"), code), chromedp.Click(chromedp.CSS("#hoForm [type=submit]")))
	}

	submit("0123-4567 89ab cdef")
	drive(t, ctx, `document.getElementById('hoSay').textContent !== ''`)
	if got := text(t, ctx, "hoSay"); got != "This code is not valid or has expired. Make a new one on the first device." {
		t.Errorf("refusal said %q", got)
	}
	if st := storedPlace(t, ctx); st["token"] != mine || st["handoff"] != nil || st["handoffKey"] != nil {
		t.Errorf("after a refusal the stored place is %v, want this device's place, without the code", st)
	}

	other, code := q.place(t)
	typed := strings.ToLower(code[:4] + " " + code[4:8] + "-" + code[8:12] + " " + code[12:])
	submit("  " + typed + " ")
	drive(t, ctx, `(JSON.parse(localStorage.getItem('waitingroom:gala')) || {}).token !== '`+mine+`'`)
	drive(t, ctx, `__started() >= 6`)
	rs := redeems(q.recorded())
	if len(rs) != 2 || rs[1].Body != `{"code":"`+typed+`"}` || rs[1].Status != http.StatusCreated || rs[1].Key == "" || rs[1].Key == rs[0].Key {
		t.Fatalf("redeems = %+v, want the typed code, with a key of its own, moved (201)", rs)
	}
	tok := storedToken(t, ctx, "gala")
	if tok == "" || q.statusOf(other) != statusMoved {
		t.Errorf("stored %q; the other device's token is %s, want MOVED", tok, q.statusOf(other))
	}
	q.awaitLeaves(t, ctx, 1) // after the old place's answer
	if ls := q.leavesOf(); len(ls) != 1 || ls[0].Token != mine || ls[0].Status != http.StatusNoContent || q.statusOf(mine) != api.StatusLeft {
		t.Errorf("DELETEs = %+v, this device's old place %s: want one, with the old token, which left", ls, q.statusOf(mine))
	}
	for _, c := range q.recorded() {
		if c.Method == http.MethodGet && c.Token != mine && c.Token != tok {
			t.Errorf("a poll with %q", c.Token)
		}
	}
	if got := eval[string](t, ctx, `document.getElementById('hoIn').value + document.getElementById('hoSay').textContent`); got != "" {
		t.Errorf("after the move the form shows %q", got)
	}
}

// TestHandoffLinkWhereAPlaceIsHeld: a handoff link opened on a device
// that holds a place in the line redeems nothing at once. A WAITING place
// asks; "Move it here" redeems, then leaves the old place; "Keep this
// place" drops the code. An ADMITTED place keeps its turn and says the
// code was not used.
func TestHandoffLinkWhereAPlaceIsHeld(t *testing.T) {
	t.Parallel()
	for _, choice := range []string{"hoYes", "hoNo", "admitted"} {
		t.Run(choice, func(t *testing.T) {
			t.Parallel()
			q, ctx := openGala(t, gala(), "?lang=en")
			mine := storedToken(t, ctx, "gala")
			if choice == "admitted" {
				q.mu.Lock()
				tk := q.tokens[mine]
				tk.status, tk.expiresAt, tk.pass = api.StatusAdmitted, time.Now().Add(10*time.Minute), "h.p.s"
				q.mu.Unlock()
			}
			other, code := q.place(t)
			page := eval[string](t, ctx, `location.href`)
			n := len(q.recorded())
			do(t, ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(page+"#handoff="+code))
			if choice == "admitted" {
				waitFor(t, ctx, `!document.getElementById('done').hidden`)
				if got := text(t, ctx, "doneText"); !strings.HasPrefix(got, "The code was not used: this device has been admitted. You have been admitted.") {
					t.Errorf("said %q", got)
				}
			} else {
				drive(t, ctx, `!document.getElementById('hoAsk').hidden`)
				if got := eval[string](t, ctx, `document.querySelector('#hoAsk p').textContent`); got != "Bring your place from the other device here? This device's place will be given up." {
					t.Errorf("prompt = %q", got)
				}
				if got := text(t, ctx, "pos"); got != "1,234" || location(t, ctx) != page {
					t.Errorf("the place shows %q at %q, want this device's, and no fragment", got, location(t, ctx))
				}
				drive(t, ctx, `__started() >= 3`) // the prompt waits: the polls go on
				if rs := redeems(q.recorded()); len(rs) != 0 {
					t.Fatalf("redeemed before the choice: %+v", rs)
				}
				do(t, ctx, chromedp.Click(chromedp.ID(choice)))
				waitFor(t, ctx, `document.getElementById('hoAsk').hidden`)
				if choice == "hoYes" {
					drive(t, ctx, `(JSON.parse(localStorage.getItem('waitingroom:gala')) || {}).token !== '`+mine+`'`)
				}
				drive(t, ctx, `__started() >= 6`)
			}
			calls := q.recorded()[n:]
			rs, ls := redeems(calls), q.leavesOf()
			if choice != "hoYes" {
				if len(rs) != 0 || len(ls) != 0 || storedToken(t, ctx, "gala") != mine || q.statusOf(other) != api.StatusWaiting {
					t.Errorf("redeems %+v, DELETEs %+v, stored %q (mine %q): want none, and this device's place kept", rs, ls, storedToken(t, ctx, "gala"), mine)
				}
				if st := storedPlace(t, ctx); st["handoff"] != nil {
					t.Errorf("stored place = %v, want no code", st)
				}
				return
			}
			ls = q.awaitLeaves(t, ctx, 1) // after the old place's answer
			tok := storedToken(t, ctx, "gala")
			if len(rs) != 1 || rs[0].Body != `{"code":"`+code+`"}` || rs[0].Status != http.StatusCreated || q.statusOf(other) != statusMoved {
				t.Errorf("redeems = %+v, want the link's code, moved", rs)
			}
			if len(ls) != 1 || ls[0].Token != mine || q.statusOf(mine) != api.StatusLeft || tok == mine || tok == "" {
				t.Errorf("DELETEs %+v, stored %q: want the old place (%q) left once, the new one kept", ls, tok, mine)
			}
		})
	}
}

func location(t *testing.T, ctx context.Context) string {
	t.Helper()
	return eval[string](t, ctx, `location.href`)
}

// TestHandoffStaleCodeForgotten: a redeem answered MOVED (its retry, after
// the new token moved on to a third device) or HANDOFF_REFUSED is said,
// its code and key leave the stored place, and the page enters instead;
// a reload redeems nothing again.
func TestHandoffStaleCodeForgotten(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"MOVED", "HANDOFF_REFUSED"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			s := gala()
			q := newFakeQueue()
			q.add("gala", s)
			srv, _ := q.serve(t, waitpage.Options{})
			_, code := q.place(t)
			say := "This place has already moved to another device."
			if how == "MOVED" {
				q.loseRedeems = 1
			} else {
				s.account = true
				say = "This place belongs to an account: sign in on the site instead."
			}
			ctx := tab(t)
			do(t, ctx, chromedp.Navigate(srv.URL+"/waiting-room/gala?lang=en#handoff="+code))
			if how == "MOVED" { // the lost answer's new token moves on before the retry
				first := q.awaitCalls(t, ctx, 1)[0]
				q.mu.Lock()
				q.tokens[q.redeemKeys[first.Key].token].status = statusMoved
				q.mu.Unlock()
			}
			drive(t, ctx, `document.getElementById('pos').textContent === '1,234'`)
			if !slices.Contains(eval[[]string](t, ctx, `__seen`), say) {
				t.Errorf("the state line showed %q, want %q", eval[[]string](t, ctx, `__seen`), say)
			}
			if st := storedPlace(t, ctx); st["handoff"] != nil || st["handoffKey"] != nil || st["token"] == nil {
				t.Errorf("stored place = %v, want a token entered, no code", st)
			}
			want := map[string]int{"MOVED": 2, "HANDOFF_REFUSED": 1}[how]
			if rs := redeems(q.recorded()); len(rs) != want || rs[want-1].Status != map[string]int{"MOVED": 200, "HANDOFF_REFUSED": 409}[how] {
				t.Fatalf("redeems = %+v", rs)
			}
			do(t, ctx, chromedp.Reload())
			drive(t, ctx, `__started() >= 2`)
			if rs := redeems(q.recorded()); len(rs) != want {
				t.Errorf("after a reload, redeems = %+v, want no new one", rs)
			}
			q.checkSchedule(t, ctx)
		})
	}
}

// TestHandoffKeepsAnAdmittedPlace: a place this device holds that is
// admitted while a typed code's redeem is under way keeps its turn: once
// the redeem answers, the page asks that place again and, not WAITING, it
// sends no DELETE (which would give the admission up).
func TestHandoffKeepsAnAdmittedPlace(t *testing.T) {
	t.Parallel()
	q, ctx := openGala(t, gala(), "?lang=en")
	mine := storedToken(t, ctx, "gala")
	_, code := q.place(t)
	q.mu.Lock()
	q.arrive = func(c apiCall) {
		if c.Redeem {
			q.mu.Lock()
			tk := q.tokens[mine]
			tk.status, tk.expiresAt, tk.pass = api.StatusAdmitted, time.Now().Add(10*time.Minute), "h.p.s"
			q.mu.Unlock()
		}
	}
	q.mu.Unlock()
	n := len(q.recorded())
	do(t, ctx, chromedp.SetValue(chromedp.ID("hoIn"), code), chromedp.Click(chromedp.CSS("#hoForm [type=submit]")))
	drive(t, ctx, `(JSON.parse(localStorage.getItem('waitingroom:gala')) || {}).token !== '`+mine+`'`)
	// The page asks the old place once the redeem answered (a fetch of its
	// own, on no timer).
	q.awaitCall(t, ctx, n, func(c apiCall) bool {
		return c.Method == http.MethodGet && c.Token == mine && c.Status == http.StatusOK
	})
	drive(t, ctx, `__started() >= `+strconv.Itoa(started(t, ctx)+3))
	if rs := redeems(q.recorded()[n:]); len(rs) != 1 || rs[0].Status != http.StatusCreated {
		t.Errorf("redeems = %+v, want one, moved", rs)
	}
	if ls := q.leavesOf(); len(ls) != 0 || q.statusOf(mine) != api.StatusAdmitted {
		t.Errorf("DELETEs = %+v, old place %s: want none, and the admission kept", ls, q.statusOf(mine))
	}
}
