package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/testing/browser"
)

// TestEdgeGateWalk walks the README's no-code story in Chromium on the real
// local server: the demo shop at /shop/ has no code of its own, and the
// edge gate (functions/edgegate/gate.js, run by cfjs) sends a person
// without an edge session to the waiting room, trades the admitted page's
// wrEdge token for the session cookie, lets everyone on the site stay
// through standby → on, and lets no tampered or foreign cookie through.
// The server runs on its real clock; the first page's timers run on a fake
// one (browser.FakeClock), so its poll fires when the test says, and every
// wait is on the page's state, under a hang guard.
func TestEdgeGateWalk(t *testing.T) {
	t.Parallel()
	const secret = "s3cret"
	base, _ := startWith(t, seams{}, map[string]string{"ADMIN_TOKEN": secret}) // no crowd, no program cache
	admin := base + "/api/v1/admin/programs/demo"
	// Nobody is admitted but by the test.
	if code, body := call(t, "PUT", admin, "", secret, `{"paused":true}`); code != 200 || body["edgeMode"] != "on" {
		t.Fatalf("pause the demo program: %d %v, want 200 with edgeMode on", code, body)
	}

	// 1. A first person opens a page of the shop: the gate sends them to
	// the waiting room, which remembers the page, and the page takes a place.
	first := tab(t)
	browser.FakeClock(t, first)
	if got, want := visit(t, first, base+"/shop/cart?item=3"), "/waiting-room/demo?return=%2Fshop%2Fcart%3Fitem%3D3"; got != want {
		t.Fatalf("first browser at /shop/cart?item=3 lands on %s, want %s", got, want)
	}
	browser.WaitFor(t, first, 30*time.Second, `document.getElementById('pos').textContent === '1'`)

	// 2. The admin admits the line; the page's next poll (fired now on its
	// clock) hears ADMITTED and sends the person back with wrEdge, which
	// the gate trades for the cookie, redirecting to the clean URL.
	if code, body := call(t, "POST", admin+"/admissions", "", secret, `{"count":1}`); code != 200 {
		t.Fatalf("admit 1: %d %v", code, body)
	}
	for polls := 0; ; polls++ {
		browser.WaitFor(t, first, 30*time.Second, `location.pathname.startsWith('/shop/') || __clock.pending().length > 0`)
		if browser.Eval[bool](t, first, `location.pathname.startsWith('/shop/')`) {
			t.Logf("the page left for the shop after %d poll(s) fired by the test", polls)
			break
		}
		if p := browser.Pending(t, first); len(p) != 1 || polls == 10 {
			t.Fatalf("after %d polls the waiting page has timers %v armed; want one, its next poll, until it is admitted", polls, p)
		}
		browser.Next(t, first)
	}
	checkShop(t, first, base+"/shop/cart?item=3", "/shop/cart", 1)
	signing := signingKey(t, base, secret)
	firstCookie := edgeCookie(t, first, base)
	checkCookie(t, "first browser", firstCookie, signing)
	t.Logf("first browser's cookie: %s=%s; Path=%s; Secure=%v; HttpOnly=%v; SameSite=%s; expires %v",
		firstCookie.Name, firstCookie.Value, firstCookie.Path, firstCookie.Secure, firstCookie.HTTPOnly, firstCookie.SameSite, time.Unix(int64(firstCookie.Expires), 0).UTC())

	// 3. A second person, without a cookie, is sent to the room.
	if got, want := visit(t, tab(t), base+"/shop/"), "/waiting-room/demo?return=%2Fshop%2F"; got != want {
		t.Errorf("second browser at /shop/ lands on %s, want %s", got, want)
	}

	// 4. standby: a third person gets an edge session at once (302 to the
	// same URL plus wrsb=1, with the cookie; the gate strips wrsb from
	// what the shop sees, not from the browser's URL). on: the first and
	// the third stay on the site, a fourth is sent to the room.
	setMode(t, admin, secret, "standby")
	third := tab(t)
	if got, want := visit(t, third, base+"/shop/"), "/shop/?wrsb=1"; got != want {
		t.Fatalf("third browser at /shop/ in standby lands on %s, want %s", got, want)
	}
	checkShop(t, third, base+"/shop/?wrsb=1", "/shop/", 1)
	thirdCookie := edgeCookie(t, third, base)
	checkCookie(t, "third browser (standby)", thirdCookie, signing)
	if f := strings.Split(thirdCookie.Value, "."); len(f) != 4 || !strings.HasPrefix(f[2], "sb") {
		t.Errorf("standby session %q, want a jti starting with sb", thirdCookie.Value)
	}
	setMode(t, admin, secret, "on")
	for _, b := range []struct {
		name string
		ctx  context.Context
	}{{"first", first}, {"third", third}} {
		if got := visit(t, b.ctx, base+"/shop/"); got != "/shop/" {
			t.Errorf("%s browser at /shop/ once the gate is on lands on %s, want the shop", b.name, got)
			continue
		}
		checkShop(t, b.ctx, base+"/shop/", "/shop/", 0)
	}
	if got, want := visit(t, tab(t), base+"/shop/"), "/waiting-room/demo?return=%2Fshop%2F"; got != want {
		t.Errorf("fourth browser at /shop/ once the gate is on lands on %s, want %s", got, want)
	}

	// 5. The cookie is a bearer credential: copied whole into a fresh
	// browser it passes; changed, or under another program's name, it
	// counts as none.
	if code, body := call(t, "PUT", base+"/api/v1/admin/programs/other", "", secret, `{"paused":true,"edgeMode":"on","edgePaths":["/shop/other/"]}`); code != 201 {
		t.Fatalf("create program other at /shop/other/: %d %v", code, body)
	}
	f := strings.Split(firstCookie.Value, ".") // kid.exp.jti.mac
	tests := []struct {
		name, cookie, value, path, want string
	}{
		{"copied whole", "wr-edge-demo", firstCookie.Value, "/shop/", "/shop/"},
		{"mac changed", "wr-edge-demo", strings.Join([]string{f[0], f[1], f[2], flip(f[3])}, "."), "/shop/", "/waiting-room/demo?return=%2Fshop%2F"},
		{"exp extended", "wr-edge-demo", strings.Join([]string{f[0], f[1] + "0", f[2], f[3]}, "."), "/shop/", "/waiting-room/demo?return=%2Fshop%2F"},
		{"jti changed", "wr-edge-demo", strings.Join([]string{f[0], f[1], f[2] + "x", f[3]}, "."), "/shop/", "/waiting-room/demo?return=%2Fshop%2F"},
		{"another program's name", "wr-edge-other", firstCookie.Value, "/shop/other/", "/waiting-room/other?return=%2Fshop%2Fother%2F"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := tab(t)
			if _, err := chromedp.Call(ctx, network.SetCookie, network.SetCookieParams{
				Name: tt.cookie, Value: tt.value, URL: base + "/", Path: "/",
				Secure: new(true), HTTPOnly: new(true), SameSite: network.CookieSameSiteLax,
			}); err != nil {
				t.Fatalf("set cookie %s: %v", tt.cookie, err)
			}
			if got := visit(t, ctx, base+tt.path); got != tt.want {
				t.Errorf("fresh browser with %s=%s at %s lands on %s, want %s", tt.cookie, tt.value, tt.path, got, tt.want)
			}
		})
	}
}

// tab is a fresh browser (no cookies, no storage) with a hang guard.
func tab(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(browser.Tab(t), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// visit opens url in the tab ctx, following the redirects, waits for the
// page to load and returns where it landed: its path and query.
func visit(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	browser.Do(t, ctx, chromedp.Navigate(url))
	return browser.Eval[string](t, ctx, `location.pathname + location.search`)
}

// checkShop checks that the tab ctx shows the shop's page of path at url,
// reached through that many HTTP redirects.
func checkShop(t *testing.T, ctx context.Context, url, path string, redirects int) {
	t.Helper()
	browser.WaitFor(t, ctx, 30*time.Second, `document.getElementById('page')`)
	got := browser.Eval[[]string](t, ctx, `[location.href, document.getElementById('page').textContent, String(performance.getEntriesByType('navigation')[0].redirectCount)]`)
	want := []string{url, "You are on " + path + ".", strconv.Itoa(redirects)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the shop: URL, text, redirects (-want +got):\n%s", diff)
	}
	if strings.Contains(got[0], "wrEdge") {
		t.Errorf("the shop's URL %s still carries the token", got[0])
	}
}

// edgeCookie is the wr-edge-demo cookie the tab ctx holds for the shop.
func edgeCookie(t *testing.T, ctx context.Context, base string) *network.Cookie {
	t.Helper()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/shop/"}})
	if err != nil {
		t.Fatalf("read the cookies: %v", err)
	}
	for _, c := range res.Cookies {
		if c.Name == "wr-edge-demo" {
			return c
		}
	}
	t.Fatalf("the browser holds no wr-edge-demo cookie for %s/shop/ (it holds %d others)", base, len(res.Cookies))
	return nil
}

// checkCookie checks c's attributes as the gate sets them (Path=/; Secure;
// HttpOnly; SameSite=Lax; Max-Age=3600, the default session) and that the
// key that signs at the time, kid, signed it.
func checkCookie(t *testing.T, who string, c *network.Cookie, kid string) {
	t.Helper()
	type attrs struct {
		Path                      string
		Secure, HTTPOnly, Session bool
		SameSite                  network.CookieSameSite
		Kid                       string
	}
	got := attrs{c.Path, c.Secure, c.HTTPOnly, c.Session, c.SameSite, strings.Split(c.Value, ".")[0]}
	want := attrs{"/", true, true, false, network.CookieSameSiteLax, kid}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s's wr-edge-demo cookie %q (-want +got):\n%s", who, c.Value, diff)
	}
	if left := time.Until(time.Unix(int64(c.Expires), 0)); left < 3500*time.Second || left > 3601*time.Second {
		t.Errorf("%s's cookie expires in %v, want about an hour (Max-Age=3600)", who, left)
	}
}

// signingKey is the id of the edge key that signs now, as the admin API lists it.
func signingKey(t *testing.T, base, secret string) string {
	t.Helper()
	code, body := call(t, "GET", base+"/api/v1/admin/edge/keys", "", secret, "")
	keys, _ := body["keys"].([]any)
	for _, k := range keys {
		if k, _ := k.(map[string]any); k["state"] == "signing" {
			return k["keyId"].(string)
		}
	}
	t.Fatalf("edge keys: %d %v, want one signing", code, body)
	return ""
}

func setMode(t *testing.T, admin, secret, mode string) {
	t.Helper()
	if code, body := call(t, "PUT", admin, "", secret, `{"edgeMode":"`+mode+`"}`); code != 200 || body["edgeMode"] != mode {
		t.Fatalf("switch the demo program to %s: %d %v", mode, code, body)
	}
}

// flip changes the first character of a base64url string.
func flip(s string) string {
	if s[0] == 'A' {
		return "B" + s[1:]
	}
	return "A" + s[1:]
}
