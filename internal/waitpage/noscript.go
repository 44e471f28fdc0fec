package waitpage

import (
	"crypto/rand"
	"math"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/edgetoken"
)

// The no-JavaScript visitor's token is kept in cookieName, one per program's page.
const (
	cookieName   = "wr_token"
	cookieMaxAge = 24 * time.Hour
)

// noscriptData is the server-rendered view inside <noscript>.
type noscriptData struct {
	Heading     string
	Position    string // WAITING: the formatted position
	Wait        string // WAITING: the estimated wait in words
	State       string // a state line: paused, closed, opening at, trouble
	Closing     string // when new entries close, or closed; "" for no scheduled close
	Notice      string
	Text        string
	Refresh     int    // seconds until the page reloads itself; 0: never
	RefreshText string // says Refresh
	Redirect    string // ADMITTED: the target URL with the pass
	Form        *joinForm
}

// joinForm is the button that enters the queue without JavaScript.
type joinForm struct {
	Action, Key, Label string
	Again              bool // ignore the cookie's token: a fresh place
}

func joinView(lang language, programID string, again bool) *noscriptData {
	label := lang.t("join")
	if again {
		label = lang.t("enterAgain")
	}
	return &noscriptData{Form: &joinForm{
		Action: PathPrefix + url.PathEscape(programID) + "/enter",
		Key:    rand.Text(), Label: label, Again: again,
	}}
}

func troubleView(lang language) *noscriptData {
	return refreshing(lang, &noscriptData{State: lang.t("retrying")}, unavailableRetry*time.Second)
}

// refreshing sets d's reload to after, in whole seconds rounded up: never earlier than asked.
func refreshing(lang language, d *noscriptData, after time.Duration) *noscriptData {
	d.Refresh = max(1, int(math.Ceil(after.Seconds())))
	d.RefreshText = lang.t("noscriptRefresh", "n", strconv.Itoa(d.Refresh))
	return d
}

// noscriptView renders v for a browser without JavaScript.
func noscriptView(lang language, programID, back string, info PageInfo, v View) *noscriptData {
	switch v.Status {
	case api.StatusWaiting:
		d := &noscriptData{
			Heading: lang.t("youAreInLine"), Position: number(v.Position),
			Wait: lang.wait(time.Duration(v.EstimatedWaitMs) * time.Millisecond), Notice: v.Notice,
		}
		switch {
		case v.OpensAt.After(time.Now()):
			d.State = lang.t("opensAt", "t", clock(v.OpensAt.Time))
		case v.Paused:
			d.State = lang.t("paused")
		case info.Closed:
			d.State = lang.t("closedWaiting")
		}
		d.Closing = closingLine(lang, v.ClosesAt.Time)
		return refreshing(lang, d, v.RetryAfter())
	case api.StatusAdmitted:
		d := &noscriptData{Heading: lang.t("admittedTitle")}
		if u := admittedURL(back, info.TargetURL, v); u != "" {
			d.Redirect, d.Text = u, lang.t("redirecting")
		} else {
			d.Text = lang.t("admittedNoTarget", "t", clock(v.ExpiresAt.Time))
		}
		return d
	case api.StatusExpired, api.StatusLeft, api.StatusRevoked:
		// The texts of an ended place are keyed by its status ("left", "leftTitle").
		key, at := strings.ToLower(string(v.Status)), v.ExpiresAt
		switch v.Status {
		case api.StatusLeft:
			at = v.LeftAt
		case api.StatusRevoked:
			at = v.RevokedAt
		}
		d := joinView(lang, programID, true)
		d.Heading, d.Text = lang.t(key+"Title"), lang.t(key, "t", clock(at.Time))
		if v.Status == api.StatusExpired && at.IsZero() { // a no-show: admitted, never came to see
			d.Text = lang.t("noShow")
		}
		return d
	}
	return troubleView(lang)
}

// closingLine says when new entries close (or closed); "" for no scheduled close.
func closingLine(lang language, at time.Time) string {
	switch {
	case at.IsZero():
		return ""
	case at.After(time.Now()):
		return lang.t("closesAt", "t", clock(at))
	}
	return lang.t("closedAt", "t", clock(at))
}

// admittedURL is where v's holder goes: back (a path of this site, from
// the edge gate) with the edge token, else target with the pass added to
// its query; "" unless target is an absolute http(s) URL.
func admittedURL(back, target string, v View) string {
	if back != "" && v.EdgeToken != "" {
		return withParams(back, "", v.EdgeToken)
	}
	u, err := url.Parse(target)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return ""
	}
	return withParams(u.String(), v.AdmissionPass, "")
}

// withParams adds admissionPass and wrEdge, those not empty, to u's query.
func withParams(u, pass, edgeToken string) string {
	q := url.Values{}
	if pass != "" {
		q.Set("admissionPass", pass)
	}
	if edgeToken != "" {
		q.Set(edgetoken.TokenParam, edgeToken)
	}
	if len(q) == 0 {
		return u
	}
	u, frag, _ := strings.Cut(u, "#")
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	u += sep + q.Encode()
	if frag != "" {
		u += "#" + frag
	}
	return u
}

// returnPath is v if it is a path of this site to come back to, as the
// edge gate sends it: rooted at one /, printable, at most 2048 bytes, and
// under one of the program's guarded paths (as the gate reads them:
// without case, /x/ covering /x); else "".
func returnPath(v string, guarded []string) string {
	if !strings.HasPrefix(v, "/") || strings.HasPrefix(v, "//") || len(v) > 2048 ||
		strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '\\' }) {
		return ""
	}
	path, _, _ := strings.Cut(strings.ToLower(v), "?")
	for _, g := range guarded {
		g = strings.ToLower(g)
		if strings.HasPrefix(path, g) || strings.HasSuffix(g, "/") && path == strings.TrimSuffix(g, "/") {
			return v
		}
	}
	return ""
}

// idPattern matches the token ids and idempotency keys the fallback passes on.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// tokenCookie returns the token of the program page's cookie; "" when none or malformed.
func tokenCookie(r *http.Request) string {
	c, err := r.Cookie(cookieName)
	if err != nil || !idPattern.MatchString(c.Value) {
		return ""
	}
	return c.Value
}

// setTokenCookie sets the cookie of the program's page to token, or clears it for "":
// HttpOnly, SameSite=Lax, and Secure unless plainLoopback.
func setTokenCookie(w http.ResponseWriter, r *http.Request, programID, token string) {
	maxAge := int(cookieMaxAge.Seconds())
	if token == "" {
		maxAge = -1
	}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: token, Path: PathPrefix + programID, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: !plainLoopback(r),
	})
}

// plainLoopback reports whether r came over plain HTTP to a loopback host.
func plainLoopback(r *http.Request) bool {
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		return false
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.EqualFold(host, "localhost") || net.ParseIP(strings.Trim(host, "[]")).IsLoopback()
}
