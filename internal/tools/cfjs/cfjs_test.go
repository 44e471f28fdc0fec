package cfjs_test

import (
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/tools/cfjs"
	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// eval runs body as the handler's body (with both modules imported) and
// returns the header x-out of the request it returns.
func eval(t *testing.T, kvs cfjs.KVS, body string) (string, error) {
	t.Helper()
	src := "import cf from 'cloudfront';\nimport crypto from 'crypto';\nconst kvs = cf.kvs();\n" +
		"async function handler(event) {\n const r = event.request;\n" + body + "\n}\n"
	f, err := cfjs.Compile(src)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	res, err := f.Run(context.Background(), cfjs.Event{Method: "GET", URI: "/"}, kvs, t0)
	if err != nil {
		return "", err
	}
	if res.Request == nil {
		t.Fatalf("Run returned no request: %+v", res)
	}
	return res.Request.Header.Get("X-Out"), nil
}

func out(expr string) string {
	return "r.headers['x-out'] = {value: String(" + expr + ")}; return r;"
}

func TestCompileImports(t *testing.T) {
	for _, tc := range []struct {
		src string
		ok  bool
	}{
		{"import cf from 'cloudfront';\nfunction handler(e) { return e.request; }", true},
		{"import crypto from \"crypto\"\nfunction handler(e) { return e.request; }", true},
		{"import fs from 'fs';\nfunction handler(e) { return e.request; }", false},
		{"import qs from 'querystring';\nfunction handler(e) { return e.request; }", false},
		{"import {kvs} from 'cloudfront';\nfunction handler(e) { return e.request; }", false},
		{"import * as cf from 'cloudfront';\nfunction handler(e) { return e.request; }", false},
		{"import 'cloudfront';\nfunction handler(e) { return e.request; }", false},
		{"function handler(e) { return e.request; }\n  import x from 'http';", false},
	} {
		_, err := cfjs.Compile(tc.src)
		if (err == nil) != tc.ok {
			t.Errorf("Compile(%q) error = %v, want ok %v", tc.src, err, tc.ok)
		}
	}
	if _, err := cfjs.Compile("function handler(e) { return e.request"); err == nil {
		t.Error("Compile of a syntax error: no error")
	}
}

func TestKVS(t *testing.T) {
	var m cfjs.Map
	m.Set("s", "hé")
	m.Set("j", `{"a":[1,"x"]}`)
	m.Set("gone", "x")
	m.Delete("gone")
	m.Fail("bad", errors.New("boom"))
	for _, tc := range []struct{ name, body, want, err string }{
		{"string default", out("await kvs.get('s')"), "hé", ""},
		{"string", out("await kvs.get('s', {format: 'string'})"), "hé", ""},
		{"json", out("(await kvs.get('j', {format: 'json'})).a[1]"), "x", ""},
		{"bytes not provided", out("await kvs.get('s', {format: 'bytes'}).catch((e) => e.name)"), "TypeError", ""},
		{"exists", out("[await kvs.exists('s'), await kvs.exists('nope'), await kvs.exists('gone')]"), "true,false,false", ""},
		{"missing rejects", out("await kvs.get('nope').then(() => 'resolved', (e) => e instanceof Error && e.message)"), `key "nope" does not exist`, ""},
		{"missing throws", "await kvs.get('nope'); return r;", "", "does not exist"},
		{"failure rejects", out("await kvs.get('bad').catch((e) => e.message)"), "key value store: boom", ""},
		{"exists failure rejects", out("await kvs.exists('bad').catch((e) => 'rejected')"), "rejected", ""},
		{"bad json", out("await kvs.get('s', {format: 'json'}).catch((e) => e.name)"), "SyntaxError", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := eval(t, &m, tc.body)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCrypto(t *testing.T) {
	const key, data = "k3y-é", "wr-edge-token.a.b.1.j"
	sum := func(h hash.Hash) []byte { h.Write([]byte(data)); return h.Sum(nil) }
	for _, tc := range []struct {
		js   string
		want string
	}{
		{"crypto.createHash('sha256').update(d).digest('hex')", hex.EncodeToString(sum(sha256.New()))},
		{"crypto.createHash('sha1').update(d).digest('base64')", base64.StdEncoding.EncodeToString(sum(sha1.New()))},
		{"crypto.createHash('md5').update(d).digest('base64url')", base64.RawURLEncoding.EncodeToString(sum(md5.New()))},
		{"crypto.createHash('sha256').update('wr-edge-').update(d.slice(8)).digest('hex')", hex.EncodeToString(sum(sha256.New()))},
		{"crypto.createHmac('sha256', k).update(d).digest('base64url')", base64.RawURLEncoding.EncodeToString(sum(hmac.New(sha256.New, []byte(key))))},
		{"crypto.createHmac('sha1', k).update(d).digest('hex')", hex.EncodeToString(sum(hmac.New(sha1.New, []byte(key))))},
		{"crypto.createHmac('md5', k).update(d).digest('base64')", base64.StdEncoding.EncodeToString(sum(hmac.New(md5.New, []byte(key))))},
	} {
		got, err := eval(t, nil, "const k = '"+key+"', d = '"+data+"';\n"+out(tc.js))
		if err != nil {
			t.Fatalf("%s: %v", tc.js, err)
		}
		if got != tc.want {
			t.Errorf("%s = %q, want %q", tc.js, got, tc.want)
		}
	}
	for _, js := range []string{
		"crypto.createHash('sha512')",
		"crypto.createHash('sha256').update('x').digest()",
		"crypto.createHash('sha256').update('x').digest('latin1')",
	} {
		if _, err := eval(t, nil, out(js)); err == nil {
			t.Errorf("%s: no error", js)
		}
	}
}

func TestRuntime(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"Date.now fixed", out("Date.now() === " + "1777636800000" + " && new Date().getTime() === Date.now()"), "true"},
		{"event", out("[event.version, event.context.eventType, event.viewer.ip, r.method, r.uri].join(' ')"), "1.0 viewer-request  GET /"},
		{"no setTimeout", out("[typeof setTimeout, typeof setInterval, typeof setImmediate, typeof clearTimeout].join()"), "undefined,undefined,undefined,undefined"},
		{"no Go plumbing", out("typeof __cfjs_go"), "undefined"},
		{"no require", out("[typeof require, typeof module, typeof process, typeof fetch, typeof XMLHttpRequest].join()"), "undefined,undefined,undefined,undefined,undefined"},
		{"unlisted built-ins", out("[typeof Proxy, typeof Reflect, typeof Map, typeof WeakMap, typeof BigInt].join()"), "undefined,undefined,undefined,undefined,undefined"},
		{"listed built-ins", out("[typeof Promise, typeof Uint8Array, typeof JSON, typeof Symbol, typeof globalThis].join()"), "function,function,object,function,object"},
		{"no eval", out("(() => { try { eval('1'); return 'ran'; } catch (e) { return e.name; } })()"), "EvalError"},
		{"no Function", out("(() => { try { (function(){}).constructor('return 1')(); return 'ran'; } catch (e) { return e.name; } })()"), "EvalError"},
		{"no AsyncFunction", out("(() => { try { Object.getPrototypeOf(handler).constructor('return 1'); return 'ran'; } catch (e) { return e.name; } })()"), "EvalError"},
		{"console", "console.log('a' + 1); " + out("'ok'"), "ok"},
		{"console comma syntax", out("(() => { try { console.log('a', 1); return 'ran'; } catch (e) { return e.name; } })()"), "TypeError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := eval(t, nil, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRunErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		invalid   bool
	}{
		{"throws", "function handler(e) { throw new Error('x'); }", false},
		{"rejects", "async function handler(e) { throw new Error('x'); }", false},
		{"no handler", "function h(e) { return e.request; }", false},
		{"never settles", "function handler(e) { return new Promise(() => {}); }", false},
		{"undefined", "function handler(e) {}", true},
		{"bad status", "function handler(e) { return {statusCode: 42}; }", true},
		{"bad uri", "function handler(e) { e.request.uri = 'x'; return e.request; }", true},
		{"header without value", "function handler(e) { e.request.headers.a = {}; return e.request; }", true},
		{"base64 body", "function handler(e) { return {statusCode: 200, body: {encoding: 'base64', data: 'eA=='}}; }", true},
		{"fractional status", "function handler(e) { return {statusCode: 200.5}; }", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := cfjs.Compile(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.Run(context.Background(), cfjs.Event{Method: "GET", URI: "/"}, nil, t0)
			if err == nil {
				t.Fatal("no error")
			}
			if got := errors.Is(err, cfjs.ErrInvalidResult); got != tc.invalid {
				t.Errorf("error %v: invalid result %v, want %v", err, got, tc.invalid)
			}
		})
	}
}

func TestRunCanceled(t *testing.T) {
	m := &cfjs.Map{}
	m.Set("spin", "1")
	f, err := cfjs.Compile("import cf from 'cloudfront';\nasync function handler(e) { while (await cf.kvs().get('spin') === '1') {} }")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.Run(ctx, cfjs.Event{Method: "GET", URI: "/"}, m, t0); !errors.Is(err, context.Canceled) {
		t.Errorf("Run with a canceled context: %v, want context.Canceled", err)
	}
	// Canceled while it runs: the loop stops.
	ctx, cancel = context.WithCancel(context.Background())
	spin := &cancelOnGet{Map: m, after: 1000, cancel: cancel}
	if _, err := f.Run(ctx, cfjs.Event{Method: "GET", URI: "/"}, spin, t0); !errors.Is(err, context.Canceled) {
		t.Errorf("Run canceled midway: %v, want context.Canceled", err)
	}
}

// cancelOnGet cancels a context at its after-th Get.
type cancelOnGet struct {
	*cfjs.Map
	after  int
	cancel context.CancelFunc
}

func (c *cancelOnGet) Get(ctx context.Context, key string) (string, error) {
	if c.after--; c.after == 0 {
		c.cancel()
	}
	return c.Map.Get(ctx, key)
}

func TestEventAndRequest(t *testing.T) {
	f, err := cfjs.Compile(`function handler(event) {
		const r = event.request;
		r.headers['x-seen'] = {value: JSON.stringify([r.querystring, r.cookies, r.headers['x-a'], r.headers.cookie === undefined])};
		delete r.querystring.b;
		r.querystring.c = {value: '3'};
		r.cookies.n = {value: 'v'};
		r.uri = '/new';
		return r;
	}`)
	if err != nil {
		t.Fatal(err)
	}
	ev := cfjs.Event{Method: "GET", URI: "/p", RawQuery: "z=1&b=2&z=%20x&e", ViewerIP: "192.0.2.1", Header: http.Header{
		"X-A":    {"1", "2"},
		"Cookie": {"a=1; b=2"},
	}}
	res, err := f.Run(context.Background(), ev, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	want := &cfjs.Request{
		Method: "GET", URI: "/new", RawQuery: "z=1&z=%20x&e=&c=3",
		Header: http.Header{
			"X-A":    {"1", "2"},
			"X-Seen": {`[{"z":{"value":"1","multiValue":[{"value":"1"},{"value":"%20x"}]},"b":{"value":"2"},"e":{"value":""}},{"a":{"value":"1"},"b":{"value":"2"}},{"value":"1","multiValue":[{"value":"1"},{"value":"2"}]},true]`},
		},
		Cookies: map[string]string{"a": "1", "b": "2", "n": "v"},
	}
	if diff := cmp.Diff(want, res.Request); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
}

func TestHandler(t *testing.T) {
	f, err := cfjs.Compile(`import cf from 'cloudfront';
const kvs = cf.kvs();
async function handler(event) {
	const r = event.request;
	if (r.uri === '/deny') {
		return {statusCode: 429, statusDescription: 'Too Many Requests',
			headers: {'retry-after': {value: '10'}},
			cookies: {b: {value: '2', attributes: 'Path=/'}, a: {value: '1'}},
			body: {encoding: 'text', data: await kvs.get('msg')}};
	}
	if (r.uri === '/boom') throw new Error('boom');
	if (r.uri === '/invalid') return {};
	delete r.querystring.drop;
	r.headers['x-edge'] = {value: 'yes'};
	r.cookies.added = {value: 'x'};
	return r;
}`)
	if err != nil {
		t.Fatal(err)
	}
	var m cfjs.Map
	m.Set("msg", "wait")
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Cookie("added")
		k, _ := r.Cookie("keep")
		_, _ = io.WriteString(w, r.URL.Path+"?"+r.URL.RawQuery+" "+r.Header.Get("X-Edge")+" "+c.Value+" "+k.Value)
	})
	srv := httptest.NewServer(f.Handler(&m, func() time.Time { return t0 }, next))
	defer srv.Close()
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	type got struct {
		Code      int
		Body      string
		SetCookie []string
		Retry     string
	}
	for _, tc := range []struct {
		path string
		want got
	}{
		{"/page?drop=1&keep=2", got{Code: 200, Body: "/page?keep=2 yes x k"}},
		{"/deny", got{Code: 429, Body: "wait", SetCookie: []string{"a=1", "b=2; Path=/"}, Retry: "10"}},
		{"/boom", got{Code: 503, Body: "Service Unavailable\n"}},
		{"/invalid", got{Code: 502, Body: "Bad Gateway\n"}},
	} {
		req, _ := http.NewRequest("GET", srv.URL+tc.path, nil)
		req.Header.Set("Cookie", "keep=k")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		g := got{Code: resp.StatusCode, Body: string(b), SetCookie: resp.Header.Values("Set-Cookie"), Retry: resp.Header.Get("Retry-After")}
		if diff := cmp.Diff(tc.want, g); diff != "" {
			t.Errorf("GET %s (-want +got):\n%s", tc.path, diff)
		}
	}
}

// One Function serves many goroutines, each run in its own runtime.
func TestRunConcurrent(t *testing.T) {
	f, err := cfjs.Compile("import crypto from 'crypto';\nfunction handler(e) { e.request.headers.h = {value: crypto.createHash('md5').update(e.request.uri).digest('hex')}; return e.request; }")
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 16)
	for i := range cap(errs) {
		go func() {
			uri := "/" + strings.Repeat("x", i)
			res, err := f.Run(context.Background(), cfjs.Event{Method: "GET", URI: uri}, nil, t0)
			if err == nil && res.Request.Header.Get("H") != hex.EncodeToString(sumMD5(uri)) {
				err = errors.New("wrong digest for " + uri)
			}
			errs <- err
		}()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func sumMD5(s string) []byte { h := md5.Sum([]byte(s)); return h[:] }

// The syntax runtime 2.0 lists compiles; what it lacks is refused.
func TestCompileSyntax(t *testing.T) {
	const h = "\nfunction handler(e) { return e.request; }"
	for _, tc := range []struct {
		src, refused string // refused: "" when src compiles
	}{
		{"const a = [1, 2].map((x) => x ** 2); let b = `${a}`; var c = {get d() { return 1; }, 'e': 2, f: function () {}};", ""},
		{"function f(a, ...rest) { return rest; } async function g() { return await f(1); } label: for (var i in {}) { break label; }", ""},
		{"for (const x of [1]) {}", "for...of"},
		{"const {a} = {a: 1};", "destructuring"},
		{"const [a] = [1];", "destructuring"},
		{"function f({a}) {}", "destructuring"},
		{"const a = 1, o = {a};", "shorthand property"},
		{"const o = {['a' + 1]: 1};", "computed property name"},
		{"const o = {m() {}};", "method shorthand"},
		{"const a = [...[1]];", "spread"},
		{"Math.max(...[1]);", "spread"},
		{"class A {}", "class"},
		{"const A = class {};", "class"},
		{"function* g() {}", "generator function"},
		{"function f() { async function g() {} }", "async closure"},
		{"const f = async function () {};", "async closure"},
		{"const f = async () => 1;", "async closure"},
		{"[1].forEach(async (x) => x);", "async closure"},
		{"function f(a = 1) {}", "default parameter"},
		{"const f = (a = 1) => a;", "default parameter"},
		{"const o = {}; o?.a;", "optional chaining"},
		{"const a = null ?? 1;", "??"},
		{"let a = 0; a ||= 1;", "logical assignment"},
		{"let a = 0; a &&= 1;", "logical assignment"},
		{"let a = 0; a ??= 1;", "logical assignment"},
		{"let a = 0; a += 1; a **= 2;", ""},
	} {
		_, err := cfjs.Compile(tc.src + h)
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("Compile(%q): %v", tc.src, err)
		case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused+" is not supported")):
			t.Errorf("Compile(%q) error = %v, want %q refused", tc.src, err, tc.refused)
		}
	}
}
