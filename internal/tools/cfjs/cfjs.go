// Package cfjs runs a CloudFront Function (runtime cloudfront-js-2.0,
// viewer-request) on goja, with as much of the runtime as the edge gate
// uses: the event object, cf.kvs(), crypto hashes and HMACs, console.log and
// a Date frozen for the run. It refuses what the runtime lacks: other
// imports, syntax past what runtime 2.0 lists, eval and the Function
// constructor; goja has no timers, require or network to begin with.
package cfjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/dop251/goja"
)

// ErrInvalidResult is the error of a run whose function returned something
// CloudFront would not accept (its FunctionValidationError).
var ErrInvalidResult = errors.New("cfjs: invalid function result")

// Event is the viewer request a function runs on.
type Event struct {
	Method   string
	URI      string // the path, as received (still percent-encoded)
	RawQuery string // the query string without '?', as received
	Header   http.Header
	ViewerIP string
}

// Request is the request a function lets through, with its changes.
type Request struct {
	Method   string
	URI      string
	RawQuery string            // rebuilt from the querystring object, in its order
	Header   http.Header       // without Cookie
	Cookies  map[string]string // the cookies to send on, the first value of each
}

// Cookie is a cookie of a generated response, sent as Set-Cookie: Name=Value; Attributes.
type Cookie struct{ Name, Value, Attributes string }

// Response is a response the function generated instead of forwarding.
type Response struct {
	StatusCode int
	Header     http.Header
	Cookies    []Cookie // sorted by name
	Body       string
}

// Result is the outcome of a run: exactly one of Request and Response is set.
type Result struct {
	Request  *Request
	Response *Response
}

// Function is a compiled CloudFront Function; it is safe for concurrent use.
type Function struct{ prog *goja.Program }

var (
	importLine = regexp.MustCompile(`^\s*import\b`)
	allowed    = regexp.MustCompile(`^\s*import\s+([A-Za-z_$][\w$]*)\s+from\s+(?:'(cloudfront|crypto)'|"(cloudfront|crypto)")\s*;?\s*$`)
)

// Compile checks and compiles src once. The only imports it accepts are the
// default imports of the 'cloudfront' and 'crypto' modules, one a line; it
// refuses the syntax runtime 2.0 lacks (for...of, destructuring, classes...).
func Compile(src string) (*Function, error) {
	lines := strings.Split(src, "\n")
	for i, l := range lines {
		if m := allowed.FindStringSubmatch(l); m != nil {
			lines[i] = "const " + m[1] + " = __cfjs_" + m[2] + m[3] + ";" // the same line count: positions still match src
		} else if importLine.MatchString(l) {
			return nil, fmt.Errorf("cfjs: line %d: unsupported import %q (only the default imports of 'cloudfront' and 'crypto')", i+1, strings.TrimSpace(l))
		}
	}
	tree, err := goja.Parse("function.js", strings.Join(lines, "\n"))
	if err != nil {
		return nil, fmt.Errorf("cfjs: parse: %w", err)
	}
	if err := checkSyntax(tree); err != nil {
		return nil, err
	}
	prog, err := goja.CompileAST(tree, true)
	if err != nil {
		return nil, fmt.Errorf("cfjs: compile: %w", err)
	}
	return &Function{prog: prog}, nil
}

// prelude takes the Go functions read (of the KVS: null for a missing key),
// digest and log from __cfjs_go, removes from goja what runtime 2.0 refuses
// (dynamic code) or does not list, defines console and the two modules, and
// returns the helpers Run calls the handler and reads its result with.
var prelude = goja.MustCompile("prelude.js", `(function (g, read, digest, log) {
	delete g.__cfjs_go;
	var no = function () { throw new EvalError('dynamic code evaluation is not supported'); };
	[function () {}, async function () {}, function* () {}].forEach(function (f) {
		Object.defineProperty(Object.getPrototypeOf(f), 'constructor', {value: no});
	});
	g.eval = g.Function = no;
	['Proxy', 'Reflect', 'Map', 'Set', 'WeakMap', 'WeakSet', 'WeakRef', 'FinalizationRegistry', 'BigInt'].forEach(function (n) { delete g[n]; });
	g.console = {log: function (m) {
		if (arguments.length !== 1) throw new TypeError('console.log takes one argument in CloudFront Functions');
		log(String(m));
	}};
	var handle = {
		get: async function (k, o) {
			var f = o && o.format !== undefined ? String(o.format) : 'string', v = read(String(k));
			if (v === null) throw new Error('key "' + k + '" does not exist');
			if (f === 'json') return JSON.parse(v);
			if (f !== 'string') throw new TypeError('kvs: format ' + f + ' is not provided by cfjs (string, json)');
			return v;
		},
		exists: async function (k) { return read(String(k)) !== null; },
	};
	g.__cfjs_cloudfront = {kvs: function () { return handle; }};
	function hash(alg, key) {
		if (['md5', 'sha1', 'sha256'].indexOf(alg) < 0) throw new TypeError('crypto: algorithm ' + alg + ' is not provided by cfjs (md5, sha1, sha256)');
		var data = '', done = false, h = {
			update: function (s) {
				if (done || typeof s !== 'string') throw new TypeError('crypto: update takes a string (no Buffer in cfjs), before digest');
				data += s;
				return h;
			},
			digest: function (enc) {
				if (done) throw new TypeError('crypto: digest already called');
				done = true;
				return digest(alg, key, data, String(enc));
			},
		};
		return h;
	}
	g.__cfjs_crypto = {
		createHash: function (alg) { return hash(String(alg), null); },
		createHmac: function (alg, key) {
			if (typeof key !== 'string') throw new TypeError('crypto: createHmac takes a string key (no Buffer in cfjs)');
			return hash(String(alg), key);
		},
	};
	// fields makes [[name, value], ...] an object of {value}, with multiValue for a name given more than once.
	function fields(pairs) {
		var o = {};
		(pairs || []).forEach(function (p) {
			var f = o[p[0]];
			if (!f) o[p[0]] = {value: p[1]};
			else (f.multiValue = f.multiValue || [{value: f.value}]).push({value: p[1]});
		});
		return o;
	}
	// pairs is the converse, [[name, value, attributes], ...], multiValue first.
	function pairs(o, what) {
		var out = [];
		Object.keys(o || {}).forEach(function (n) {
			var f = o[n];
			(f && f.multiValue && f.multiValue.length ? f.multiValue : [f]).forEach(function (v) {
				if (!v || typeof v.value !== 'string') throw new TypeError(what + ' ' + n + ' without a string value');
				out.push([n, v.value, typeof v.attributes === 'string' ? v.attributes : '']);
			});
		});
		return out;
	}
	return {
		Handle: function (j) {
			var e = JSON.parse(j);
			if (typeof g.handler !== 'function') throw new TypeError('cfjs: no function handler');
			return g.handler({version: '1.0', context: {eventType: 'viewer-request'}, viewer: {ip: e.ip}, request: {method: e.method,
				uri: e.uri, querystring: fields(e.query), headers: fields(e.headers), cookies: fields(e.cookies)}});
		},
		// Result throws for what CloudFront would refuse (undefined...).
		Result: function (r) {
			var h = {}, c = pairs(r.cookies, 'cookie'), b = r.body;
			pairs(r.headers, 'header').forEach(function (p) {
				var n = p[0].toLowerCase().replace(/(^|-)[a-z]/g, function (m) { return m.toUpperCase(); });
				(h[n] = h[n] || []).push(p[1]);
			});
			if (r.statusCode !== undefined) {
				if (!Number.isInteger(r.statusCode) || r.statusCode < 100 || r.statusCode > 599) throw new TypeError('statusCode ' + r.statusCode);
				if (b !== null && typeof b === 'object') {
					if (b.encoding !== undefined && b.encoding !== 'text') throw new TypeError('body encoding ' + b.encoding + ' is not provided by cfjs');
					b = b.data;
				}
				c = c.map(function (p) { return {Name: p[0], Value: p[1], Attributes: p[2]}; })
					.sort(function (x, y) { return x.Name < y.Name ? -1 : x.Name > y.Name ? 1 : 0; }); // stable
				return JSON.stringify({Response: {StatusCode: r.statusCode, Header: h, Cookies: c.length ? c : undefined, Body: b}});
			}
			if (typeof r.uri !== 'string' || r.uri[0] !== '/') throw new TypeError('neither a response (statusCode) nor a request (uri starting with /)');
			var q = pairs(r.querystring, 'querystring').map(function (p) { return p[0] + '=' + p[1]; }), ck = {};
			c.reverse().forEach(function (p) { ck[p[0]] = p[1]; });
			delete h.Cookie;
			return JSON.stringify({Request: {Method: r.method, URI: r.uri, RawQuery: q.join('&'), Header: h, Cookies: ck}});
		},
	};
})(globalThis, __cfjs_go.read, __cfjs_go.digest, __cfjs_go.log)`, false)

// Run runs the function's handler on ev in a fresh runtime, with kvs as its
// key value store and now as the time of the whole run. A JavaScript
// exception, a rejected promise or ctx ending is an error.
func (f *Function) Run(ctx context.Context, ev Event, kvs KVS, now time.Time) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("cfjs: %w", err)
	}
	r := goja.New()
	r.SetTimeSource(func() time.Time { return now })
	stop := context.AfterFunc(ctx, func() { r.Interrupt(ctx.Err()) })
	defer stop()
	log := func(m string) { slog.DebugContext(ctx, "cloudfront function", "log", m) }
	_ = r.Set("__cfjs_go", map[string]any{"read": read(ctx, r, kvs), "digest": digest, "log": log})
	var helpers struct { // Handle runs the handler on eventJSON's event, Result makes its result a Result's JSON
		Handle, Result func(goja.Value) (goja.Value, error)
	}
	p, err := r.RunProgram(prelude)
	if err == nil {
		err = r.ExportTo(p, &helpers)
	}
	if err != nil {
		return Result{}, fmt.Errorf("cfjs: prelude: %w", err)
	}
	if _, err := r.RunProgram(f.prog); err != nil {
		return Result{}, fmt.Errorf("cfjs: load: %w", err)
	}
	out, err := helpers.Handle(r.ToValue(eventJSON(ev)))
	if err != nil {
		return Result{}, fmt.Errorf("cfjs: handler: %w", err)
	}
	// Every job has run by now (goja drains its queue when the call returns),
	// and nothing here settles later: a pending promise never will.
	if p, ok := out.Export().(*goja.Promise); ok {
		switch p.State() {
		case goja.PromiseStateRejected:
			return Result{}, fmt.Errorf("cfjs: handler: rejected: %s", p.Result())
		case goja.PromiseStatePending:
			return Result{}, errors.New("cfjs: handler: promise never settled")
		}
		out = p.Result()
	}
	js, err := helpers.Result(out)
	var res Result
	if err == nil {
		err = json.Unmarshal([]byte(js.String()), &res)
	}
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrInvalidResult, err)
	}
	return res, nil
}

// eventJSON is ev as the prelude's event reads it: the query's, headers' and
// cookies' [name, value] pairs in order, headers by name, without Cookie.
func eventJSON(ev Event) string {
	q, h, c := [][2]string{}, [][2]string{}, [][2]string{}
	for kv := range strings.SplitSeq(ev.RawQuery, "&") {
		if n, v, _ := strings.Cut(kv, "="); kv != "" {
			q = append(q, [2]string{n, v})
		}
	}
	for _, n := range slices.Sorted(maps.Keys(ev.Header)) {
		for _, v := range ev.Header[n] {
			if !strings.EqualFold(n, "Cookie") {
				h = append(h, [2]string{strings.ToLower(n), v})
			}
		}
	}
	for _, ck := range (&http.Request{Header: ev.Header}).Cookies() {
		c = append(c, [2]string{ck.Name, ck.Value})
	}
	b, _ := json.Marshal(map[string]any{"method": ev.Method, "uri": ev.URI, "ip": ev.ViewerIP, "query": q, "headers": h, "cookies": c})
	return string(b)
}
