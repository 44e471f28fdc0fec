package passverify

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Param is the query parameter that brings a pass to the site.
const Param = "admissionPass"

// DefaultCookieName names the cookie that a Gate exchanges a pass for.
const DefaultCookieName = "admission_pass"

// GateConfig configures a Gate; WaitingRoomURL and CookieSecrets are required.
type GateConfig struct {
	// WaitingRoomURL is where a request without a valid pass is sent: an
	// absolute http(s) URL, or an absolute path on the site's own origin.
	WaitingRoomURL string
	// CookieSecrets authenticate the cookies, each of at least
	// MinCookieSecretSize random bytes: the first signs, every one verifies.
	CookieSecrets [][]byte
	CookieName    string // default DefaultCookieName
	CookiePath    string // default "/"
	// ReplayGuard, if set, lets each pass be exchanged for a cookie once.
	ReplayGuard ReplayGuard
	// Refused, if set, answers the requests the Gate turns away instead of
	// the default (a 303 to WaitingRoomURL, or a 403 page for a pass
	// already used); err is nil without a pass, else matches ErrInvalid.
	// It is not called during the program's break-glass (Wrap).
	Refused func(w http.ResponseWriter, r *http.Request, err error)
	// Exchanged, if set, is given each pass the Gate exchanges and its
	// claims, before the cookie (which does not hold the pass) is set.
	Exchanged func(ctx context.Context, c Claims, pass string)
}

// Gate is net/http middleware that lets in only the requests that carry a
// valid pass for its Verifier's program. It is safe for concurrent use.
type Gate struct {
	v    *Verifier
	cfg  GateConfig // with the defaults filled in
	keys [][]byte   // MAC keys derived from CookieSecrets, the first signs
}

// NewGate returns a Gate that checks passes with v.
func NewGate(v *Verifier, cfg GateConfig) (*Gate, error) {
	if v == nil {
		return nil, errors.New("passverify: NewGate needs a Verifier")
	}
	u, err := url.Parse(cfg.WaitingRoomURL)
	absolute := err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
	sameSite := err == nil && u.Scheme == "" && u.Host == "" && strings.HasPrefix(u.Path, "/") &&
		!strings.HasPrefix(cfg.WaitingRoomURL, "//") && !strings.HasPrefix(cfg.WaitingRoomURL, `/\`)
	if !absolute && !sameSite {
		return nil, fmt.Errorf("passverify: WaitingRoomURL %q is neither an absolute http(s) URL nor an absolute path", cfg.WaitingRoomURL)
	}
	keys, err := sessionKeys(cfg.CookieSecrets)
	if err != nil {
		return nil, err
	}
	cfg.WaitingRoomURL = u.String()
	cfg.CookieName = cmp.Or(cfg.CookieName, DefaultCookieName)
	cfg.CookiePath = cmp.Or(cfg.CookiePath, "/")
	if !strings.HasPrefix(cfg.CookiePath, "/") {
		return nil, fmt.Errorf("passverify: CookiePath %q does not start with /", cfg.CookiePath)
	}
	return &Gate{v: v, cfg: cfg, keys: keys}, nil
}

// Wrap returns next behind the gate: a valid ?admissionPass= on a GET or
// HEAD is exchanged for a cookie (once, with a ReplayGuard) and redirected
// (303) without it, a request with a valid cookie goes to next with its
// claims (FromContext), and any other is refused; 503 with Retry-After when
// the pass cannot be checked. During the program's break-glass (the JWKS's
// failOpen), a request that would be refused goes to next instead, marked
// for FailOpenFromContext.
func (g *Gate) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Only a GET or HEAD: a form posting a stranger's pass would swap the session.
		if pass, ok := queryPass(r.URL.RawQuery); ok && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			if err := g.exchange(w, r, pass); err != nil {
				g.turnAway(w, r, next, err)
			}
			return
		}
		claims, err := g.session(r)
		switch {
		case err == nil:
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), claimsKey{}, claims)))
			return
		case errors.Is(err, http.ErrNoCookie):
			err = nil
		case errors.Is(err, ErrInvalid):
			g.Forget(w, r)
		}
		g.turnAway(w, r, next, err)
	})
}

// turnAway lets r through to next, marked, during the program's break-glass,
// and else refuses it for err.
func (g *Gate) turnAway(w http.ResponseWriter, r *http.Request, next http.Handler, err error) {
	if until, ok := g.v.FailingOpen(r.Context()); ok {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), failOpenKey{}, until)))
		return
	}
	g.refuse(w, r, err)
}

// exchange verifies the pass of the query and answers with the cookie, or
// returns why it cannot, having answered nothing.
func (g *Gate) exchange(w http.ResponseWriter, r *http.Request, pass string) error {
	ctx := r.Context()
	claims, s, err := g.v.verify(ctx, pass)
	if err == nil && g.cfg.ReplayGuard != nil && !g.holds(r, claims.JTI) {
		var first bool
		if first, err = g.cfg.ReplayGuard.FirstUse(ctx, claims.JTI, claims.ExpiresAt.Add(g.v.cfg.Leeway)); err != nil {
			err = fmt.Errorf("passverify: replay guard: %v", err) // not ErrInvalid, whatever the guard says: 503
		} else if !first {
			err = fmt.Errorf("%w: jti %q", ErrReplayed, claims.JTI)
		}
	}
	if err != nil {
		return err
	}
	if g.cfg.Exchanged != nil {
		g.cfg.Exchanged(ctx, claims, pass)
	}
	maxAge := int((claims.ExpiresAt.Sub(g.v.cfg.Now()) + time.Second - 1) / time.Second)
	w.Header().Set("Cache-Control", "no-store")
	http.SetCookie(w, g.cookie(r, g.seal(s), max(maxAge, 1), claims.ExpiresAt))
	w.Header().Set("Location", withoutPass(r.URL))
	w.WriteHeader(http.StatusSeeOther)
	return nil
}

// Forget drops the Gate's cookie from the browser that sent r.
func (g *Gate) Forget(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, g.cookie(r, "", -1, time.Time{}))
}

// holds reports whether r's cookie is valid for the pass jti: no replay.
func (g *Gate) holds(r *http.Request, jti string) bool {
	claims, err := g.session(r)
	return err == nil && claims.JTI == jti
}

// session opens r's cookie; its error is http.ErrNoCookie without one.
func (g *Gate) session(r *http.Request) (Claims, error) {
	c, err := r.Cookie(g.cfg.CookieName)
	if err != nil {
		return Claims{}, err
	}
	return g.open(r.Context(), c.Value)
}

// cookie returns the Gate's cookie: HttpOnly, SameSite=Lax, and Secure
// unless r came over plain HTTP to a loopback host.
func (g *Gate) cookie(r *http.Request, value string, maxAge int, expires time.Time) *http.Cookie {
	return &http.Cookie{
		Name:     g.cfg.CookieName,
		Value:    value,
		Path:     g.cfg.CookiePath,
		MaxAge:   maxAge,
		Expires:  expires,
		HttpOnly: true,
		Secure:   r.TLS != nil || !loopback(r.Host),
		SameSite: http.SameSiteLaxMode,
	}
}

// refuse answers, never to be cached, a request whose pass cannot be
// checked (503), or one turned away (err nil or matching ErrInvalid): with
// Refused if set, else a 303 to the waiting room, or a 403 page for a pass
// already used (the waiting room would send it back).
func (g *Gate) refuse(w http.ResponseWriter, r *http.Request, err error) {
	w.Header().Set("Cache-Control", "no-store")
	switch {
	case err != nil && !errors.Is(err, ErrInvalid):
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Retry-After", "5")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("The admission pass cannot be checked right now; retry shortly.\n"))
	case g.cfg.Refused != nil:
		g.cfg.Refused(w, r, err)
	case errors.Is(err, ErrReplayed):
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		_ = replayedPage.Execute(w, g.cfg.WaitingRoomURL)
	default:
		w.Header().Set("Location", g.cfg.WaitingRoomURL)
		w.WriteHeader(http.StatusSeeOther)
	}
}

var replayedPage = template.Must(template.New("replayed").Parse(`<!doctype html>
<html lang="en"><meta charset="utf-8"><title>Admission pass already used</title>
<p>This admission pass has already been used, in another browser or tab.</p>
<p><a href="{{.}}">Back to the waiting room</a></p>
</html>
`))

type claimsKey struct{}

// FromContext returns, in a handler behind a Gate, the claims of the pass
// that the request's cookie was exchanged for.
func FromContext(ctx context.Context) (Claims, bool) {
	c, ok := ctx.Value(claimsKey{}).(Claims)
	return c, ok
}

type failOpenKey struct{}

// FailOpenFromContext reports whether, in a handler behind a Gate, the
// request came in without a valid pass or cookie because the program's
// break-glass is on, and until when it lasts.
func FailOpenFromContext(ctx context.Context) (until time.Time, ok bool) {
	until, ok = ctx.Value(failOpenKey{}).(time.Time)
	return until, ok
}

// queryPass returns the value of Param in rawQuery, if present.
func queryPass(rawQuery string) (string, bool) {
	for part := range strings.SplitSeq(rawQuery, "&") {
		if value, ok := passParam(part); ok {
			v, err := url.QueryUnescape(value)
			return v, err == nil
		}
	}
	return "", false
}

// passParam returns the escaped value of the query part key=value, if Param.
func passParam(part string) (string, bool) {
	key, value, _ := strings.Cut(part, "=")
	k, err := url.QueryUnescape(key)
	return value, err == nil && k == Param
}

// withoutPass returns u's path and query, without Param and otherwise
// unchanged, as a Location on the same host.
func withoutPass(u *url.URL) string {
	kept := slices.DeleteFunc(strings.Split(u.RawQuery, "&"), func(part string) bool {
		_, isPass := passParam(part)
		return part == "" || isPass
	})
	// "//host" or "/\host" would send the browser to another host.
	path := "/" + strings.TrimLeft(u.EscapedPath(), `/\`)
	if len(kept) == 0 {
		return path
	}
	return path + "?" + strings.Join(kept, "&")
}

// loopback reports whether host[:port] is localhost, *.localhost or a loopback IP.
func loopback(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return host == "localhost" || strings.HasSuffix(host, ".localhost") || net.ParseIP(host).IsLoopback()
}
