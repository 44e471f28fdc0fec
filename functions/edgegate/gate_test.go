package edgegate_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example/waitingroom/functions/edgegate"
	"github.com/example/waitingroom/internal/edgetoken"
	"github.com/example/waitingroom/internal/tools/cfjs"
	"github.com/google/go-cmp/cmp"
)

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

const (
	attrs = "Path=/; Secure; HttpOnly; SameSite=Lax; Max-Age=3600"
	busy  = `{"code":"WAITING_ROOM","message":"This site is queueing visitors: open the waiting room to take your place.","waitingRoom":"/waiting-room/gala"}`
)

// fixture is a gate with a key set (k2 current, k1 previous), two programs
// (opera at /opera/, gala at /, longest prefix first), both on, in a fresh store.
type fixture struct {
	fn        *cfjs.Function
	kvs       *cfjs.Map
	cur, prev edgetoken.Key
	keys      edgetoken.Keys
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	fn, err := cfjs.Compile(edgegate.Source)
	if err != nil {
		t.Fatal(err)
	}
	prev, err := edgetoken.NewKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	cur, err := edgetoken.NewKey("k2")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{fn: fn, kvs: &cfjs.Map{}, cur: cur, prev: prev, keys: edgetoken.Keys{Current: prev}.Rotated(cur)}
	f.set(t, "keys", f.keys)
	f.set(t, "site", map[string]any{
		"routes": [][2]string{{"/opera/", "opera"}, {"/", "gala"}},
		"bypass": []string{"/robots.txt", "/favicon.ico", "/health", "/static/"},
		"static": []string{"css", "js", "png", "woff2"},
		"api":    []string{"/api/"},
		"json":   true,
	})
	f.set(t, "p.gala", map[string]any{"mode": "on", "failOpenUntil": 0, "session": 3600})
	f.set(t, "p.opera", map[string]any{"mode": "on"})
	return f
}

func (f *fixture) set(t *testing.T, key string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	f.kvs.Set(key, string(b))
}

// outcome is what a run did, in comparable form.
type outcome struct {
	Pass     bool   // the request went on
	Target   string // the request that went on: uri?query
	Status   int
	Location string
	Cache    string
	Retry    string
	Type     string
	Body     string
	Cookies  []cfjs.Cookie
}

func (o outcome) room() bool {
	return o.Status == http.StatusFound && strings.HasPrefix(o.Location, "/waiting-room/")
}

func pass(target string) outcome { return outcome{Pass: true, Target: target} }

func room(program, ret string) outcome {
	return outcome{Status: 302, Location: "/waiting-room/" + program + "?return=" + url.QueryEscape(ret), Cache: "no-store"}
}

func (o outcome) String() string { b, _ := json.Marshal(o); return string(b) }

var tooMany = outcome{Status: 429, Retry: "10", Type: "application/json", Cache: "no-store", Body: busy}

// req is a request line and headers, e.g. req("GET /show?a=1", "Cookie", "x=y").
type req struct {
	line   string
	header []string
}

func (f *fixture) run(t *testing.T, r req) outcome {
	t.Helper()
	method, target, _ := strings.Cut(r.line, " ")
	uri, query, _ := strings.Cut(target, "?")
	h := http.Header{"Host": {"example.com"}}
	for i := 0; i+1 < len(r.header); i += 2 {
		h.Add(r.header[i], r.header[i+1])
	}
	res, err := f.fn.Run(context.Background(), cfjs.Event{Method: method, URI: uri, RawQuery: query, Header: h, ViewerIP: "192.0.2.7"}, f.kvs, now)
	if err != nil {
		t.Fatalf("%s: Run: %v", r.line, err)
	}
	if rq := res.Request; rq != nil {
		tg := rq.URI
		if rq.RawQuery != "" {
			tg += "?" + rq.RawQuery
		}
		return outcome{Pass: true, Target: tg}
	}
	rs := res.Response
	return outcome{
		Status: rs.StatusCode, Location: rs.Header.Get("Location"), Cache: rs.Header.Get("Cache-Control"),
		Retry: rs.Header.Get("Retry-After"), Type: rs.Header.Get("Content-Type"), Body: rs.Body, Cookies: rs.Cookies,
	}
}

func exp(d time.Duration) time.Time { return now.Add(d) }

func cookie(program, value string) []string {
	return []string{"Cookie", edgetoken.CookieName(program) + "=" + value}
}

// field replaces field i of a dot-separated credential.
func field(cred string, i int, v string) string {
	f := strings.Split(cred, ".")
	f[i] = v
	return strings.Join(f, ".")
}

func TestGate(t *testing.T) {
	f := newFixture(t)
	tok := f.cur.Token("gala", exp(time.Minute), "j1")
	prevTok := f.prev.Token("gala", exp(time.Minute), "j1")
	sess := f.cur.Session("gala", exp(time.Hour), "j1")
	issued := []cfjs.Cookie{{Name: "wr-edge-gala", Value: f.cur.Session("gala", exp(time.Hour), "j1"), Attributes: attrs}}
	exchange := outcome{Status: 302, Location: "/show?a=1&b=2", Cache: "no-store", Cookies: issued}
	roomShow := room("gala", "/show?a=1&b=2")
	// The token fields are kid.program.exp.jti.mac, the session's kid.exp.jti.mac.
	tampered := func(cred string, i int) string {
		v := strings.Split(cred, ".")[i]
		return field(cred, i, flip(v, len(v)-1))
	}

	for _, tc := range []struct {
		name string
		r    req
		want outcome
	}{
		{"valid cookie passes", req{"GET /show?a=1", cookie("gala", sess)}, pass("/show?a=1")},
		{"valid cookie of previous key passes", req{"GET /show", cookie("gala", f.prev.Session("gala", exp(time.Hour), "j1"))}, pass("/show")},
		{"valid cookie strips a token", req{"GET /show?a=1&wrEdge=x", cookie("gala", sess)}, pass("/show?a=1")},
		{"valid token is exchanged", req{"GET /show?a=1&wrEdge=" + tok + "&b=2", nil}, exchange},
		{"token of previous key is exchanged", req{"GET /show?a=1&wrEdge=" + prevTok + "&b=2", nil}, exchange},
		{"token expiring next second", req{"GET /show?wrEdge=" + f.cur.Token("gala", exp(time.Second), "j1"), nil},
			outcome{Status: 302, Location: "/show", Cache: "no-store", Cookies: issued}},
		{"expired token", req{"GET /show?a=1&wrEdge=" + f.cur.Token("gala", now, "j1") + "&b=2", nil}, roomShow},
		{"expired cookie", req{"GET /show?a=1&b=2", cookie("gala", f.cur.Session("gala", now, "j1"))}, roomShow},
		{"token kid tampered", req{"GET /show?a=1&b=2&wrEdge=" + field(tok, 0, "k1"), nil}, roomShow},
		{"token program tampered", req{"GET /show?a=1&b=2&wrEdge=" + field(tok, 1, "opera"), nil}, roomShow},
		{"token exp tampered", req{"GET /show?a=1&b=2&wrEdge=" + field(tok, 2, strconv.FormatInt(exp(time.Hour).Unix(), 10)), nil}, roomShow},
		{"token exp with sign", req{"GET /show?a=1&b=2&wrEdge=" + field(tok, 2, "+"+strings.Split(tok, ".")[2]), nil}, roomShow},
		{"token jti tampered", req{"GET /show?a=1&b=2&wrEdge=" + field(tok, 3, "j2"), nil}, roomShow},
		{"token mac tampered", req{"GET /show?a=1&b=2&wrEdge=" + tampered(tok, 4), nil}, roomShow},
		{"token mac empty", req{"GET /show?a=1&b=2&wrEdge=" + field(tok, 4, ""), nil}, roomShow},
		{"cookie kid tampered", req{"GET /show?a=1&b=2", cookie("gala", field(sess, 0, "k1"))}, roomShow},
		{"cookie exp tampered", req{"GET /show?a=1&b=2", cookie("gala", field(sess, 1, strconv.FormatInt(exp(2*time.Hour).Unix(), 10)))}, roomShow},
		{"cookie jti tampered", req{"GET /show?a=1&b=2", cookie("gala", field(sess, 2, "j2"))}, roomShow},
		{"cookie mac tampered", req{"GET /show?a=1&b=2", cookie("gala", tampered(sess, 3))}, roomShow},
		{"cookie program tampered", req{"GET /show?a=1&b=2", cookie("gala", f.cur.Session("opera", exp(time.Hour), "j1"))}, roomShow},
		{"another program's token", req{"GET /show?a=1&b=2&wrEdge=" + f.cur.Token("opera", exp(time.Minute), "j1"), nil}, roomShow},
		{"another program's cookie", req{"GET /show?a=1&b=2", cookie("opera", f.cur.Session("opera", exp(time.Hour), "j1"))}, roomShow},
		{"cookie as token", req{"GET /show?a=1&b=2&wrEdge=" + sess, nil}, roomShow},
		{"token as cookie", req{"GET /show?a=1&b=2", cookie("gala", tok)}, roomShow},
		{"session mac in token shape", req{"GET /show?a=1&b=2&wrEdge=" + field(tok, 4, strings.Split(sess, ".")[3]), nil}, roomShow},
		{"token mac in session shape", req{"GET /show?a=1&b=2", cookie("gala", field(sess, 3, strings.Split(tok, ".")[4]))}, roomShow},
		{"unknown kid", req{"GET /show?a=1&b=2&wrEdge=" + must(edgetoken.NewKey("k9")).Token("gala", exp(time.Minute), "j1"), nil}, roomShow},
		{"no credential", req{"GET /show?a=1&b=2", nil}, roomShow},
		{"query kept, token removed", req{"GET /show?a=1&wrEdge=bad&b=%20x%26", nil}, room("gala", "/show?a=1&b=%20x%26")},
		{"no query", req{"GET /", nil}, room("gala", "/")},
		{"HEAD is a page", req{"HEAD /show", nil}, room("gala", "/show")},
		{"POST is sent to the room", req{"POST /form", nil}, room("gala", "/form")},
		{"bypass exact", req{"GET /robots.txt?wrEdge=x", nil}, pass("/robots.txt?wrEdge=x")},
		{"bypass exact with subpath", req{"GET /health/live", nil}, pass("/health/live")},
		{"bypass prefix", req{"GET /static/app", nil}, pass("/static/app")},
		{"not bypass: longer name", req{"GET /healthy", nil}, room("gala", "/healthy")},
		{"static extension", req{"GET /img/logo.PNG", nil}, pass("/img/logo.PNG")},
		{"no extension: a segment named like one", req{"GET /docs/css", nil}, room("gala", "/docs/css")},
		{"static extension, last segment only", req{"GET /v1.css/page", nil}, room("gala", "/v1.css/page")},
		{"longest prefix: opera", req{"GET /opera/tosca", cookie("opera", f.cur.Session("opera", exp(time.Hour), "j1"))}, pass("/opera/tosca")},
		{"longest prefix: gala cookie at opera", req{"GET /opera/tosca", cookie("gala", sess)}, room("opera", "/opera/tosca")},
		{"/opera/ covers /opera", req{"GET /opera", cookie("gala", sess)}, room("opera", "/opera")},
		{"routes match without case", req{"GET /OPERA/tosca", cookie("gala", sess)}, room("opera", "/OPERA/tosca")},
		// A path written otherwise is matched as an origin would read it.
		{"encoded letter", req{"GET /%6Fpera/tosca", cookie("gala", sess)}, room("opera", "/%6Fpera/tosca")},
		{"encoded slash", req{"GET /opera%2Ftosca", cookie("gala", sess)}, room("opera", "/opera%2Ftosca")},
		{"double slash", req{"GET //opera/tosca", cookie("gala", sess)}, room("opera", "/opera/tosca")},
		{"backslash", req{"GET /\\opera\\tosca", cookie("gala", sess)}, room("opera", "/opera\\tosca")},
		{"dot segments out of a bypass", req{"GET /static/../opera/tosca", cookie("gala", sess)}, room("opera", "/static/../opera/tosca")},
		{"encoded dot segments", req{"GET /static/%2e%2e/opera/tosca", cookie("gala", sess)}, room("opera", "/static/%2e%2e/opera/tosca")},
		{"a ;param before a static extension", req{"GET /opera/buy;x.css", cookie("gala", sess)}, room("opera", "/opera/buy;x.css")},
		{"a script before a static extension", req{"GET /opera/buy.php/x.css", cookie("gala", sess)}, room("opera", "/opera/buy.php/x.css")},
		{"an encoded static extension", req{"GET /opera/x%2ecss", cookie("gala", sess)}, room("opera", "/opera/x%2ecss")},
		// Redirects stay on the site; every token and cookie of the name is tried.
		{"token at //host stays here", req{"GET //evil.example/x?wrEdge=" + tok, nil},
			outcome{Status: 302, Location: "/evil.example/x", Cache: "no-store", Cookies: issued}},
		{"token after a planted one", req{"GET /show?a=1&b=2&wrEdge=junk&wrEdge=" + tok, nil}, exchange},
		{"cookie after a planted one", req{"GET /show", []string{"Cookie", "wr-edge-gala=junk; wr-edge-gala=" + sess}}, pass("/show")},
		{"api prefix gets JSON", req{"GET /api/seats", nil}, tooMany},
		{"Accept JSON gets JSON", req{"GET /show", []string{"Accept", "application/json"}}, tooMany},
		{"Accept JSON and HTML is a page", req{"GET /show", []string{"Accept", "text/html, application/json"}}, room("gala", "/show")},
		{"api with valid cookie passes", req{"POST /api/seats", cookie("gala", sess)}, pass("/api/seats")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, f.run(t, tc.r)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.r.line, diff)
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// The cookie the gate issues is one edgetoken verifies, for its program only.
func TestIssuedCookieVerifies(t *testing.T) {
	f := newFixture(t)
	got := f.run(t, req{"GET /opera/x?wrEdge=" + f.prev.Token("opera", exp(time.Minute), "jti-7"), nil})
	if got.Status != 302 || len(got.Cookies) != 1 || got.Cookies[0].Name != "wr-edge-opera" {
		t.Fatalf("got %v, want a 302 with cookie wr-edge-opera", got)
	}
	// opera has no session setting: the default, an hour.
	e, jti, err := f.keys.VerifySession(got.Cookies[0].Value, "opera", now)
	if err != nil || !e.Equal(exp(time.Hour)) || jti != "jti-7" {
		t.Errorf("VerifySession = %v, %q, %v; want %v, jti-7", e, jti, err, exp(time.Hour))
	}
	if _, _, err := f.keys.VerifySession(got.Cookies[0].Value, "gala", now); err == nil {
		t.Error("the opera cookie verifies for gala")
	}
	if !strings.HasPrefix(got.Cookies[0].Value, "k2.") {
		t.Errorf("cookie %q not signed with the current key (its From is 0)", got.Cookies[0].Value)
	}
	// And the gate lets it through.
	if o := f.run(t, req{"GET /opera/x", cookie("opera", got.Cookies[0].Value)}); !o.Pass {
		t.Errorf("issued cookie refused: %v", o)
	}
}

// A new key verifies at once but signs only from its From on; until then
// the previous key signs the cookies the gate issues.
func TestSigningKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		from time.Time
		kid  string
	}{
		{"new key not yet signing", now.Add(time.Second), "k1"},
		{"new key signing from now", now, "k2"},
		{"new key signing since", now.Add(-time.Minute), "k2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.keys.Current.From = tc.from.Unix()
			f.set(t, "keys", f.keys)
			if want := f.keys.Signing(now).ID; want != tc.kid {
				t.Fatalf("edgetoken signs with %s, want %s", want, tc.kid)
			}
			for _, r := range []req{
				{"GET /show?wrEdge=" + f.cur.Token("gala", exp(time.Minute), "j1"), nil},
				{"GET /show?wrEdge=" + f.prev.Token("gala", exp(time.Minute), "j1"), nil},
			} {
				o := f.run(t, r)
				want := []cfjs.Cookie{{Name: "wr-edge-gala", Value: f.keys.Signing(now).Session("gala", exp(time.Hour), "j1"), Attributes: attrs}}
				if diff := cmp.Diff(want, o.Cookies); diff != "" {
					t.Errorf("%s: cookies (-want +got):\n%s", r.line, diff)
				}
			}
			f.set(t, "p.gala", map[string]string{"mode": "standby"})
			o := f.run(t, req{"GET /show", nil})
			if len(o.Cookies) != 1 || !strings.HasPrefix(o.Cookies[0].Value, tc.kid+".") {
				t.Errorf("standby cookie %v, want one signed by %s", o.Cookies, tc.kid)
			}
		})
	}
}

func TestModes(t *testing.T) {
	type p = map[string]any
	for _, tc := range []struct {
		name  string
		gala  p // nil: p.gala missing
		r     req
		want  outcome
		check func(*testing.T, *fixture, outcome)
	}{
		{name: "off passes, token stripped", gala: p{"mode": "off"}, r: req{"GET /show?a=1&wrEdge=x", nil}, want: pass("/show?a=1")},
		{name: "missing program is off", r: req{"GET /show?wrEdge=x&a=1", nil}, want: pass("/show?a=1")},
		{name: "unknown mode is on", gala: p{"mode": "maybe"}, r: req{"GET /show", nil}, want: room("gala", "/show")},
		{name: "on", gala: p{"mode": "on"}, r: req{"GET /show", nil}, want: room("gala", "/show")},
		{name: "break-glass ahead passes", gala: p{"mode": "on", "failOpenUntil": now.Unix() + 1}, r: req{"GET /show?wrEdge=x", nil}, want: pass("/show")},
		{name: "break-glass now is over", gala: p{"mode": "on", "failOpenUntil": now.Unix()}, r: req{"GET /show", nil}, want: room("gala", "/show")},
		{name: "break-glass past is over", gala: p{"mode": "on", "failOpenUntil": now.Unix() - 60}, r: req{"GET /api/x", nil}, want: tooMany},
		{name: "standby: valid cookie passes", gala: p{"mode": "standby"}, r: req{"GET /show", []string{"Cookie", "wr-edge-gala=SESSION"}}, want: pass("/show")},
		{name: "standby: page gets a cookie", gala: p{"mode": "standby", "session": 600}, r: req{"GET /show?a=1&wrEdge=bad", nil},
			check: func(t *testing.T, f *fixture, o outcome) {
				if o.Status != 302 || o.Location != "/show?a=1&wrsb=1" || o.Cache != "no-store" || len(o.Cookies) != 1 {
					t.Fatalf("got %v, want 302 to /show?a=1&wrsb=1 with a cookie", o)
				}
				c := o.Cookies[0]
				e, jti, err := f.keys.VerifySession(c.Value, "gala", now)
				if c.Name != "wr-edge-gala" || err != nil || !e.Equal(exp(10*time.Minute)) || !strings.HasPrefix(jti, "sb") || len(jti) < 8 ||
					c.Attributes != "Path=/; Secure; HttpOnly; SameSite=Lax; Max-Age=600" {
					t.Errorf("cookie %+v: VerifySession = %v, %q, %v", c, e, jti, err)
				}
				if strings.Trim(jti[2:], "0123456789abcdefghijklmnopqrstuvwxyz") != "" {
					t.Errorf("jti %q is not sb + base36", jti)
				}
			}},
		{name: "standby: cookies refused, no loop", gala: p{"mode": "standby"}, r: req{"GET /show?a=1&wrsb=1", nil}, want: pass("/show?a=1")},
		{name: "standby: JSON passes without cookie", gala: p{"mode": "standby"}, r: req{"GET /api/x", nil}, want: pass("/api/x")},
		{name: "standby: POST passes without cookie", gala: p{"mode": "standby"}, r: req{"POST /show?wrEdge=x", nil}, want: pass("/show")},
		{name: "standby: HEAD is a page", gala: p{"mode": "standby"}, r: req{"HEAD /show", nil},
			check: func(t *testing.T, _ *fixture, o outcome) {
				if o.Status != 302 || o.Location != "/show?wrsb=1" {
					t.Errorf("got %v, want 302 to /show?wrsb=1", o)
				}
			}},
		{name: "session setting", gala: p{"mode": "on", "session": 120}, r: req{"GET /show?wrEdge=TOKEN", nil},
			check: func(t *testing.T, f *fixture, o outcome) {
				want := []cfjs.Cookie{{Name: "wr-edge-gala", Value: f.cur.Session("gala", exp(2*time.Minute), "j1"),
					Attributes: "Path=/; Secure; HttpOnly; SameSite=Lax; Max-Age=120"}}
				if diff := cmp.Diff(want, o.Cookies); diff != "" {
					t.Errorf("cookies (-want +got):\n%s", diff)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.kvs.Delete("p.gala")
			if tc.gala != nil {
				f.set(t, "p.gala", tc.gala)
			}
			// TOKEN and SESSION stand for valid credentials, made here with the fixture's key.
			fill := strings.NewReplacer("TOKEN", f.cur.Token("gala", exp(time.Minute), "j1"), "SESSION", f.cur.Session("gala", exp(time.Minute), "sbx")).Replace
			r := req{line: fill(tc.r.line)}
			for _, h := range tc.r.header {
				r.header = append(r.header, fill(h))
			}
			got := f.run(t, r)
			if tc.check != nil {
				tc.check(t, f, got)
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", r.line, diff)
			}
		})
	}
}

func TestStore(t *testing.T) {
	failure := errAt("store unreachable")
	for _, tc := range []struct {
		name  string
		setup func(*testing.T, *fixture)
		r     func(*fixture) req
		want  outcome
	}{
		{"missing keys, mode on: room", func(_ *testing.T, f *fixture) { f.kvs.Delete("keys") },
			func(f *fixture) req {
				return req{"GET /show", cookie("gala", f.cur.Session("gala", exp(time.Hour), "j"))}
			},
			room("gala", "/show")},
		{"missing keys, mode off: pass", func(t *testing.T, f *fixture) {
			f.kvs.Delete("keys")
			f.set(t, "p.gala", map[string]string{"mode": "off"})
		},
			func(*fixture) req { return req{"GET /show", nil} }, pass("/show")},
		{"missing site: everything passes", func(_ *testing.T, f *fixture) { f.kvs.Delete("site") },
			func(*fixture) req { return req{"GET /show", nil} }, pass("/show")},
		{"no route: pass", func(t *testing.T, f *fixture) {
			f.set(t, "site", map[string]any{"routes": [][2]string{{"/opera/", "opera"}}})
		}, func(*fixture) req { return req{"GET /show?wrEdge=x", nil} }, pass("/show?wrEdge=x")},
		{"longest prefix, shortest listed first", func(t *testing.T, f *fixture) {
			f.set(t, "site", map[string]any{"routes": [][2]string{{"/", "gala"}, {"/opera/", "opera"}, {"/op", "gala"}}})
		}, func(*fixture) req { return req{"GET /opera/x", nil} }, room("opera", "/opera/x")},
		{"site defaults fill in", func(t *testing.T, f *fixture) {
			f.set(t, "site", map[string]any{"routes": [][2]string{{"/", "gala"}}})
		}, func(*fixture) req { return req{"GET /favicon.ico", nil} }, pass("/favicon.ico")},
		{"site defaults: api", func(t *testing.T, f *fixture) {
			f.set(t, "site", map[string]any{"routes": [][2]string{{"/", "gala"}}})
		}, func(*fixture) req { return req{"GET /api/x", nil} }, tooMany},
		{"json rule off", func(t *testing.T, f *fixture) {
			f.set(t, "site", map[string]any{"routes": [][2]string{{"/", "gala"}}, "json": false})
		}, func(*fixture) req { return req{"GET /show", []string{"Accept", "application/json"}} }, room("gala", "/show")},
		{"failing program read: closed", func(_ *testing.T, f *fixture) { f.kvs.Fail("p.gala", failure) },
			func(f *fixture) req {
				return req{"GET /show", cookie("gala", f.cur.Session("gala", exp(time.Hour), "j"))}
			},
			room("gala", "/show")},
		{"failing program read with mode off stored: closed", func(t *testing.T, f *fixture) {
			f.set(t, "p.gala", map[string]string{"mode": "off"})
			f.kvs.Fail("p.gala", failure)
		}, func(*fixture) req { return req{"GET /api/x", nil} }, tooMany},
		{"failing keys read: closed", func(_ *testing.T, f *fixture) { f.kvs.Fail("keys", failure) },
			func(f *fixture) req {
				return req{"GET /show?wrEdge=" + f.cur.Token("gala", exp(time.Minute), "j"), nil}
			},
			room("gala", "/show")},
		{"malformed keys: closed", func(_ *testing.T, f *fixture) { f.kvs.Set("keys", "{") },
			func(f *fixture) req {
				return req{"GET /show", cookie("gala", f.cur.Session("gala", exp(time.Hour), "j"))}
			},
			room("gala", "/show")},
		{"failing site read: no routes, pass", func(_ *testing.T, f *fixture) { f.kvs.Fail("site", failure) },
			func(*fixture) req { return req{"GET /show", nil} }, pass("/show")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.setup(t, f)
			r := tc.r(f)
			if diff := cmp.Diff(tc.want, f.run(t, r)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", r.line, diff)
			}
		})
	}
}

// flip changes byte i of s to another base64url character.
func flip(s string, i int) string {
	c := byte('A')
	if s[i] == 'A' {
		c = 'B'
	}
	return s[:i] + string(c) + s[i+1:]
}

type errAt string

func (e errAt) Error() string { return string(e) }

// No single changed character of a valid token or cookie gets anyone in.
func TestEveryCharacterMatters(t *testing.T) {
	f := newFixture(t)
	tok := f.cur.Token("gala", exp(time.Minute), "jti-1")
	sess := f.prev.Session("gala", exp(time.Hour), "jti-1")
	if o := f.run(t, req{"GET /show?wrEdge=" + tok, nil}); o.Status != 302 || len(o.Cookies) != 1 {
		t.Fatalf("valid token: %v", o)
	}
	if o := f.run(t, req{"GET /show", cookie("gala", sess)}); !o.Pass {
		t.Fatalf("valid cookie: %v", o)
	}
	for i := range tok {
		if o := f.run(t, req{"GET /show?wrEdge=" + flip(tok, i), nil}); !o.room() {
			t.Errorf("token with byte %d changed (%s): %v", i, flip(tok, i), o)
		}
	}
	for i := range sess {
		if o := f.run(t, req{"GET /show", cookie("gala", flip(sess, i))}); !o.room() {
			t.Errorf("cookie with byte %d changed (%s): %v", i, flip(sess, i), o)
		}
	}
	// Cut short or lengthened, neither passes either.
	for _, bad := range []string{tok[:len(tok)-1], tok + "A", tok + ".x", "." + tok} {
		if o := f.run(t, req{"GET /show?wrEdge=" + bad, nil}); !o.room() {
			t.Errorf("token %s: %v", bad, o)
		}
	}
	for _, bad := range []string{sess[:len(sess)-1], sess + "A", sess + ".x", "." + sess} {
		if o := f.run(t, req{"GET /show", cookie("gala", bad)}); !o.room() {
			t.Errorf("cookie %s: %v", bad, o)
		}
	}
}

func TestSize(t *testing.T) {
	if n := len(edgegate.Source); n >= 10240 {
		t.Errorf("gate.js is %d bytes; CloudFront Functions take at most 10,240", n)
	}
	if !strings.HasPrefix(edgegate.Source, "import cf from 'cloudfront';\nimport crypto from 'crypto';\n") {
		t.Error("gate.js does not start with the two imports")
	}
}

// The gate in front of a site over HTTP: token, cookie, then in.
func TestHandler(t *testing.T) {
	f := newFixture(t)
	site := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "site "+r.URL.RequestURI())
	})
	srv := httptest.NewServer(f.fn.Handler(f.kvs, func() time.Time { return now }, site))
	defer srv.Close()
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	get := func(path, cookie string) *http.Response {
		t.Helper()
		r, _ := http.NewRequest("GET", srv.URL+path, nil)
		if cookie != "" {
			r.Header.Set("Cookie", cookie)
		}
		resp, err := c.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}

	resp := get("/show?a=1", "")
	if resp.StatusCode != 302 || resp.Header.Get("Location") != "/waiting-room/gala?return=%2Fshow%3Fa%3D1" {
		t.Fatalf("no credential: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp = get("/show?a=1&wrEdge="+f.cur.Token("gala", exp(time.Minute), "j1"), "")
	sc := resp.Header.Get("Set-Cookie")
	if resp.StatusCode != 302 || resp.Header.Get("Location") != "/show?a=1" || resp.Header.Get("Cache-Control") != "no-store" ||
		sc != "wr-edge-gala="+f.cur.Session("gala", exp(time.Hour), "j1")+"; "+attrs {
		t.Fatalf("token: %d %q %q", resp.StatusCode, resp.Header.Get("Location"), sc)
	}
	resp = get("/show?a=1", strings.SplitN(sc, ";", 2)[0]+"; other=1")
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "site /show?a=1" {
		t.Errorf("with cookie: %d %q", resp.StatusCode, b)
	}
	resp = get("/api/x", "")
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "10" || resp.Header.Get("Content-Type") != "application/json" || string(b) != busy {
		t.Errorf("api: %d %v %q", resp.StatusCode, resp.Header, b)
	}
}
