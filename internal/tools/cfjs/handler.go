package cfjs

import (
	"errors"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Handler runs the function on every request, as CloudFront does in front of
// an origin: it writes the response the function generates, or passes the
// request, as the function changed it, to next. An execution error answers
// 503 and an invalid result 502, as CloudFront does (FunctionExecutionError,
// FunctionValidationError).
func (f *Function) Handler(kvs KVS, now func() time.Time, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := http.Header{"Host": {r.Host}}
		maps.Copy(h, r.Header)
		ip, _, _ := net.SplitHostPort(r.RemoteAddr)
		res, err := f.Run(r.Context(), Event{Method: r.Method, URI: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery, Header: h, ViewerIP: ip}, kvs, now())
		if err != nil {
			slog.ErrorContext(r.Context(), "cloudfront function failed", "err", err, "path", r.URL.Path)
			code := http.StatusServiceUnavailable
			if errors.Is(err, ErrInvalidResult) {
				code = http.StatusBadGateway
			}
			http.Error(w, http.StatusText(code), code)
			return
		}
		if resp := res.Response; resp != nil {
			maps.Copy(w.Header(), resp.Header)
			for _, c := range resp.Cookies {
				w.Header().Add("Set-Cookie", strings.TrimSuffix(c.Name+"="+c.Value+"; "+c.Attributes, "; "))
			}
			w.WriteHeader(resp.StatusCode)
			if r.Method != http.MethodHead {
				_, _ = w.Write([]byte(resp.Body))
			}
			return
		}
		next.ServeHTTP(w, forward(r, res.Request))
	})
}

// forward is r changed as the function's request says.
func forward(r *http.Request, fr *Request) *http.Request {
	out := r.Clone(r.Context())
	out.URL.Path, out.URL.RawPath, out.URL.RawQuery = fr.URI, fr.URI, fr.RawQuery
	if p, err := url.PathUnescape(fr.URI); err == nil {
		out.URL.Path = p
	}
	out.RequestURI, out.Header = out.URL.RequestURI(), fr.Header.Clone()
	out.Header.Del("Host")
	var pairs []string
	for _, n := range slices.Sorted(maps.Keys(fr.Cookies)) {
		pairs = append(pairs, n+"="+fr.Cookies[n])
	}
	if len(pairs) > 0 {
		out.Header.Set("Cookie", strings.Join(pairs, "; "))
	}
	return out
}
