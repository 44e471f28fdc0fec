// Package waitpage serves the waiting-room page at GET
// /waiting-room/{programId}: an embedded HTML template whose content-hashed
// JavaScript calls the queue's JSON API, and a form-and-cookie fallback for
// browsers without JavaScript. It reads programs through Programs.
package waitpage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/api"
)

// Errors a Programs implementation wraps for the page's status; any other error is logged
// and shown as a 503 page that reloads.
var (
	ErrInvalidProgram  = errors.New("waitpage: malformed program id")                        // 400
	ErrProgramNotFound = errors.New("waitpage: program not found")                           // 404
	ErrTokenNotFound   = errors.New("waitpage: token not found")                             // the fallback offers a fresh join
	ErrClosed          = errors.New("waitpage: program closed to new entries")               // 409
	ErrFull            = errors.New("waitpage: the line is full")                            // 409
	ErrNeedsScript     = errors.New("waitpage: the program's enter needs the page's script") // 403: a proof of work
)

// Programs is what the page needs from the queue: a program's page settings and, for the
// no-JavaScript fallback, the JSON API's enter and poll; texts come in lang where translated.
type Programs interface {
	Page(ctx context.Context, programID, lang string) (PageInfo, error)
	// Enter enters the queue, or answers a still valid tokenID (or idempotencyKey) again.
	Enter(ctx context.Context, programID, tokenID, idempotencyKey, lang string) (View, error)
	Poll(ctx context.Context, programID, tokenID, lang string) (View, error)
}

// PageInfo is the operator-set part of a program that the page shows.
type PageInfo struct {
	DisplayName string    // the page's title, in the page's language where translated; the program id when empty
	Message     string    // plain text under the title, likewise; none when empty
	TargetURL   string    // http(s) URL admitted people are sent to with ?admissionPass=…; none when empty
	Paused      bool      // admission is paused (when the page loads; answers then say)
	Closed      bool      // the program takes no new entries
	ClosesAt    time.Time // the scheduled close to new entries; zero: none
	EdgePaths   []string  // the site's paths the edge gate guards for the program: a ?return= must be under one
}

// View is one answer about a token: the JSON API's Token.
type View = api.Token

// Options customise a Handler; the zero value is usable.
type Options struct {
	// APIBase is the queue API's route without the program id, a path or an absolute URL;
	// "/api/v1/queues/programs/" when empty.
	APIBase string
	LogoURL string // an image above the title: an https URL or a path; none when empty
	// Override is an html/template whose {{define}}s replace the "head", "brand" or "footer" blocks.
	Override string
	Logger   *slog.Logger // receives the errors shown as 503; slog.Default() when nil
	// PushKey returns the deployment's VAPID public key (base64url, an
	// uncompressed P-256 point: the applicationServerKey) for each page; ""
	// or a nil PushKey: the deployment sends no push, and the page offers none.
	PushKey func(ctx context.Context) string
}

// Route prefixes the Handler serves.
const (
	PathPrefix  = "/waiting-room/"
	assetPrefix = PathPrefix + "assets/"
)

// Route is one method and path pattern the Handler serves (http.ServeMux's syntax).
type Route struct{ Method, Path string }

// Routes lists what the Handler serves: the page, the no-JavaScript enter form, the
// assets and the push notifications' service worker. Every other GET under PathPrefix
// is a friendly 404.
var Routes = []Route{
	{http.MethodGet, PathPrefix + "{programId}"},
	{http.MethodPost, PathPrefix + "{programId}/enter"},
	{http.MethodGet, assetPrefix + "{file}"},
	{http.MethodGet, PushWorkerPath},
}

// PushWorkerPath is the service worker that shows push messages; its URL stays the
// same across versions (not content-hashed), as a service worker's must.
const PushWorkerPath = PathPrefix + "push-worker.js"

const defaultAPIBase = "/api/v1/queues/programs/"

// Handler serves the waiting-room page and its assets under PathPrefix.
type Handler struct {
	programs Programs
	tmpl     *template.Template
	apiBase  string
	logo     string
	pushKey  func(context.Context) string
	csp      string
	log      *slog.Logger
	mux      *http.ServeMux
}

// New returns a Handler over programs; it fails on an APIBase, LogoURL or Override that
// does not parse.
func New(programs Programs, opts Options) (*Handler, error) {
	h := &Handler{programs: programs, apiBase: cmp.Or(opts.APIBase, defaultAPIBase), logo: opts.LogoURL, pushKey: opts.PushKey, log: cmp.Or(opts.Logger, slog.Default())}
	apiOrigin, err := pathOrHTTPURL(h.apiBase, true)
	if err != nil {
		return nil, fmt.Errorf("waitpage: APIBase: %w", err)
	}
	if err := CheckLogoURL(h.logo); err != nil {
		return nil, fmt.Errorf("waitpage: LogoURL: %w", err)
	}
	h.tmpl, err = parsePage(opts.Override)
	if err != nil {
		return nil, err
	}
	// Scripts, and the service worker, only from this origin; images, styles and fonts also from https; in no frame.
	h.csp = "default-src 'self'; img-src 'self' https: data:; style-src 'self' https:; font-src 'self' https:; connect-src " +
		strings.TrimSpace("'self' "+apiOrigin) + "; base-uri 'none'; form-action 'self'; object-src 'none'; frame-ancestors 'none'"

	h.mux = http.NewServeMux()
	h.mux.HandleFunc(Routes[0].Method+" "+Routes[0].Path, h.page)
	h.mux.Handle(Routes[1].Method+" "+Routes[1].Path, http.NewCrossOriginProtection().Handler(http.HandlerFunc(h.enter)))
	h.mux.HandleFunc(Routes[2].Method+" "+Routes[2].Path, serveAsset)
	h.mux.HandleFunc(Routes[3].Method+" "+Routes[3].Path, servePushWorker) // more specific than the page's
	h.mux.HandleFunc("GET "+PathPrefix, h.notFound)
	return h, nil
}

// ServeHTTP serves the Routes, each answer with the page's Content-Security-Policy.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", h.csp)
	hdr.Set("X-Frame-Options", "DENY") // for browsers without frame-ancestors
	h.mux.ServeHTTP(w, r)
}

// CheckLogoURL reports why s cannot be Options.LogoURL: empty, a path or an https URL.
func CheckLogoURL(s string) error {
	if s == "" {
		return nil
	}
	_, err := pathOrHTTPURL(s, false)
	return err
}

// pathOrHTTPURL checks that s is a path rooted at "/" or an absolute https (or, allowHTTP,
// http) URL, and returns the URL's origin ("" for a path).
func pathOrHTTPURL(s string, allowHTTP bool) (string, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", err
	case u.Scheme == "" && u.Host == "" && strings.HasPrefix(s, "/") && !strings.HasPrefix(s, "//"):
		return "", nil
	case u.Host != "" && (u.Scheme == "https" || allowHTTP && u.Scheme == "http"):
		return u.Scheme + "://" + u.Host, nil
	}
	return "", fmt.Errorf("%q is neither a path nor an https URL", s)
}

// page is GET /waiting-room/{programId}.
func (h *Handler) page(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("programId")
	lang := requestLang(r)
	info, err := h.programs.Page(r.Context(), id, lang.code)
	if err != nil {
		h.fail(w, r, lang, err)
		return
	}
	d := h.data(lang, id, info)
	d.Return = returnPath(r.URL.Query().Get("return"), info.EdgePaths)
	if h.pushKey != nil {
		d.PushKey = h.pushKey(r.Context())
	}
	w.Header().Set("Cache-Control", "private, no-store") // a person's place, pass or key
	if tok := tokenCookie(r); tok != "" {
		v, err := h.programs.Poll(r.Context(), id, tok, lang.code)
		switch {
		case err == nil:
			d.NoScript = noscriptView(lang, id, d.Return, info, v)
		case errors.Is(err, ErrTokenNotFound):
			setTokenCookie(w, r, id, "")
			d.NoScript = joinView(lang, id, false)
		default:
			h.logError(r, err)
			d.NoScript = troubleView(lang)
		}
	} else if info.Closed {
		d.NoScript = &noscriptData{State: lang.t("closedEnter"), Closing: closingLine(lang, info.ClosesAt)}
	} else {
		d.NoScript = joinView(lang, id, false)
		d.NoScript.Closing = closingLine(lang, info.ClosesAt)
	}
	h.render(w, http.StatusOK, d)
}

// enter is POST /waiting-room/{programId}/enter, the no-JavaScript form: it enters (or
// resumes with the cookie's token), sets the cookie and answers 303 to the page.
func (h *Handler) enter(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("programId")
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	_ = r.ParseForm() // a bad body leaves the fields empty: a plain new enter
	lang := requestLang(r)
	if l, ok := tableLang(r.PostForm.Get("lang")); ok {
		lang = l
	}
	key := r.PostForm.Get("key")
	if !idPattern.MatchString(key) {
		key = ""
	}
	tok := ""
	if r.PostForm.Get("again") == "" {
		tok = tokenCookie(r)
	}
	v, err := h.programs.Enter(r.Context(), id, tok, key, lang.code)
	if errors.Is(err, ErrClosed) || errors.Is(err, ErrFull) || errors.Is(err, ErrNeedsScript) {
		info, perr := h.programs.Page(r.Context(), id, lang.code)
		if perr != nil {
			h.fail(w, r, lang, perr)
			return
		}
		d := h.data(lang, id, info)
		d.NoScript = &noscriptData{State: lang.t("closedEnter")}
		if errors.Is(err, ErrFull) {
			// Full for now: say so, and offer to try again (no loop).
			d.NoScript = joinView(lang, id, false)
			d.NoScript.State = lang.t("fullEnter")
		}
		status := http.StatusConflict
		if errors.Is(err, ErrNeedsScript) {
			d.NoScript.State, status = lang.t("needsScript"), http.StatusForbidden
		}
		d.NoScript.Closing = closingLine(lang, info.ClosesAt)
		h.render(w, status, d)
		return
	}
	if err != nil {
		h.fail(w, r, lang, err)
		return
	}
	setTokenCookie(w, r, id, v.TokenID)
	next := PathPrefix + url.PathEscape(id) + "?lang=" + lang.code
	if back := r.PostForm.Get("return"); back != "" && returnPath(back, []string{"/"}) != "" { // checked again by the page
		next += "&return=" + url.QueryEscape(back)
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// notFound is every other GET under PathPrefix.
func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) {
	h.fail(w, r, requestLang(r), ErrProgramNotFound)
}

// fail renders the friendly page for err: 400, 404, or 503 with Retry-After and a refresh.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, lang language, err error) {
	d := h.data(lang, "", PageInfo{})
	status, key := http.StatusServiceUnavailable, "unavailable" // key: the card's texts
	switch {
	case errors.Is(err, ErrInvalidProgram):
		status, key = http.StatusBadRequest, "badRequest"
	case errors.Is(err, ErrProgramNotFound):
		status, key = http.StatusNotFound, "notFound"
	default:
		h.logError(r, err)
		d.Refresh = unavailableRetry
		w.Header().Set("Retry-After", fmt.Sprint(unavailableRetry))
	}
	d.Error = &errorData{Title: lang.t(key + "Title"), Text: lang.t(key)}
	d.Title = d.Error.Title
	h.render(w, status, d)
}

// unavailableRetry is the delay, in seconds, after which a 503 page reloads.
const unavailableRetry = 5

func (h *Handler) logError(r *http.Request, err error) {
	h.log.ErrorContext(r.Context(), "waiting-room page", "path", r.URL.Path, "err", err)
}
