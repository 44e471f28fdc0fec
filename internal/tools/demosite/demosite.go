// Package demosite is the local server's demo protected site: a page at
// GET /demo-site/{programId} behind a passverify.Gate, whose Done button
// (POST …/done) ends the admission with passverify.EndSession.
package demosite

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/passverify"
)

// Pattern is the demo page's route, in http.ServeMux syntax; Prefix is
// the path prefix of every request the Handler serves.
const (
	Pattern     = "GET " + Prefix + "{programId}"
	DonePattern = "POST " + Prefix + "{programId}/done"
	Prefix      = "/demo-site/"
)

// Programs says which programs exist; *queue.Service is one.
type Programs interface {
	// Showing answers a *queue.Error of KindNotFound for a program that does not exist.
	Showing(ctx context.Context, programID string) (queue.Showing, error)
}

// Config configures a Handler. API, Issuer and Programs are required.
type Config struct {
	API        string       // the waiting room's base URL, e.g. http://127.0.0.1:3000
	Issuer     string       // the iss of the waiting room's passes
	HTTPClient *http.Client // fetches the JWKS; nil for passverify's default
	Programs   Programs     // says which programs exist, and so get a gate
}

// URL returns the demo page of programID on the server at base (an http(s) origin).
func URL(base, programID string) string {
	return base + Prefix + url.PathEscape(programID)
}

// Handler serves the demo page of every program that exists, each behind
// its own single-use Gate with the cookie scoped to /demo-site/{programId}.
// Its cookie secret is made at start, so cookies die with the server.
type Handler struct {
	cfg    Config
	mux    *http.ServeMux
	secret []byte
	guard  *passverify.MemoryGuard

	mu    sync.Mutex
	gates map[string]*passverify.Gate // of programs that exist
	kept  map[string]keptPass         // the passes exchanged, by jti, until they expire ("" once ended here)
}

// keptPass is a pass the Gate exchanged, kept to end its admission.
type keptPass struct {
	pass  string
	until time.Time
}

// New returns the demo site for cfg; it fetches nothing until the first pass or cookie arrives.
func New(cfg Config) (*Handler, error) {
	if cfg.API == "" || cfg.Issuer == "" || cfg.Programs == nil {
		return nil, errors.New("demosite: API, Issuer and Programs are required")
	}
	if _, err := passverify.New(passverify.Config{JWKSURL: cfg.API + "/.well-known/jwks.json", Issuer: cfg.Issuer, ProgramID: "demo"}); err != nil {
		return nil, fmt.Errorf("demosite: %w", err)
	}
	h := &Handler{
		cfg:    cfg,
		mux:    http.NewServeMux(),
		secret: make([]byte, passverify.MinCookieSecretSize),
		guard:  passverify.NewMemoryGuard(0),
		gates:  map[string]*passverify.Gate{},
		kept:   map[string]keptPass{},
	}
	_, _ = rand.Read(h.secret) // never fails
	h.mux.HandleFunc(Pattern, h.serve(h.servePage))
	h.mux.HandleFunc(DonePattern, h.serve(h.serveDone))
	return h, nil
}

// keep records pass, exchanged for a cookie, until it expires; passes already expired go.
func (h *Handler) keep(_ context.Context, c passverify.Claims, pass string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	maps.DeleteFunc(h.kept, func(_ string, k keptPass) bool { return now.After(k.until) })
	h.kept[c.JTI] = keptPass{pass, c.ExpiresAt}
}

// passOf returns the pass kept for jti, and whether its admission was ended here.
func (h *Handler) passOf(jti string) (pass string, ended bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k, ok := h.kept[jti]
	return k.pass, ok && k.pass == ""
}

// ended records that jti's admission ended: the site refuses its cookie until the pass expires.
func (h *Handler) ended(jti string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.kept[jti] = keptPass{"", h.kept[jti].until}
}

// ServeHTTP serves the demo page; any other request is a plain 404.
// Every answer refuses to be framed (clickjacking).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	w.Header().Set("X-Frame-Options", "DENY")
	h.mux.ServeHTTP(w, r)
}

var errNoProgram = errors.New("no such program")

// serve serves page behind the Gate of the request's program.
func (h *Handler) serve(page func(http.ResponseWriter, *http.Request, *passverify.Gate)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		g, err := h.gate(r.Context(), r.PathValue("programId"))
		switch {
		case errors.Is(err, errNoProgram):
			w.Header().Set("Cache-Control", "no-store")
			http.Error(w, "No such program.", http.StatusNotFound)
		case err != nil:
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("Retry-After", "5")
			http.Error(w, "The demo site cannot check the program right now; retry shortly.", http.StatusServiceUnavailable)
		default:
			g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { page(w, r, g) })).ServeHTTP(w, r)
		}
	}
}

// gate returns the Gate of program id, built on first use if the program exists, else errNoProgram.
func (h *Handler) gate(ctx context.Context, id string) (*passverify.Gate, error) {
	if !queue.ValidProgramID(id) {
		return nil, errNoProgram
	}
	h.mu.Lock()
	g, ok := h.gates[id]
	h.mu.Unlock()
	if ok {
		return g, nil
	}
	_, err := h.cfg.Programs.Showing(ctx, id)
	if qe := (*queue.Error)(nil); errors.As(err, &qe) && qe.Kind == queue.KindNotFound {
		return nil, errNoProgram
	} else if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if g, ok := h.gates[id]; ok {
		return g, nil
	}
	v, err := passverify.New(passverify.Config{
		JWKSURL:    h.cfg.API + "/.well-known/jwks.json", // checked by New
		Issuer:     h.cfg.Issuer,
		ProgramID:  id,
		HTTPClient: h.cfg.HTTPClient,
	})
	if err != nil {
		return nil, err
	}
	g, err = passverify.NewGate(v, passverify.GateConfig{
		WaitingRoomURL: "/waiting-room/" + url.PathEscape(id),
		CookieSecrets:  [][]byte{h.secret},
		CookiePath:     Prefix + url.PathEscape(id),
		ReplayGuard:    h.guard,
		Exchanged:      h.keep,
	})
	if err != nil {
		return nil, err
	}
	h.gates[id] = g
	return g, nil
}

// servePage is the protected page, behind the Gate; a session ended here
// gets the done page, though its pass stays valid until it expires.
func (h *Handler) servePage(w http.ResponseWriter, r *http.Request, gate *passverify.Gate) {
	c, ok := passverify.FromContext(r.Context())
	if until, open := passverify.FailOpenFromContext(r.Context()); !ok && open {
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprintf(w, "Let in by the break-glass, until %s: the waiting room is not checking passes.\n", until.UTC().Format(time.RFC3339))
		return
	}
	if !ok { // only a Gate calls this
		http.Error(w, "no admission", http.StatusForbidden)
		return
	}
	if _, ended := h.passOf(c.JTI); ended {
		writeDone(w, r, gate, c.ProgramID)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "private, no-store")
	_ = pages.ExecuteTemplate(w, "page", struct {
		Program          string
		Ticket           int64
		Until, UntilText string
		Done             string
	}{c.ProgramID, c.Ticket, c.ExpiresAt.UTC().Format(time.RFC3339), c.ExpiresAt.UTC().Format("15:04:05 UTC, 2 January 2006"), Prefix + url.PathEscape(c.ProgramID) + "/done"})
}

// serveDone ends the admission of the pass behind the request's cookie, and the site's session.
func (h *Handler) serveDone(w http.ResponseWriter, r *http.Request, gate *passverify.Gate) {
	w.Header().Set("Cache-Control", "no-store")
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		// SameSite=Lax still lets other ports and sibling hosts post.
		http.Error(w, "Cross-site requests cannot end a session.", http.StatusForbidden)
		return
	}
	c, _ := passverify.FromContext(r.Context()) // behind the Gate
	pass, ended := h.passOf(c.JTI)
	switch {
	case ended:
	case pass == "": // exchanged before this server started
		gate.Forget(w, r)
		http.Error(w, "This demo site no longer holds your pass: your admission ends on its own when it expires.", http.StatusConflict)
		return
	default:
		err := passverify.EndSession(r.Context(), h.cfg.HTTPClient, h.cfg.API, c.ProgramID, pass)
		// A 403 (PASS_EXPIRED, INVALID_PASS, TOKEN_REVOKED) ends the session here all the same.
		if se := (*passverify.SessionError)(nil); err != nil && !(errors.As(err, &se) && se.Status == http.StatusForbidden) {
			w.Header().Set("Retry-After", "5")
			http.Error(w, "The waiting room did not end your admission; try again shortly.", http.StatusBadGateway)
			return
		}
		h.ended(c.JTI)
	}
	writeDone(w, r, gate, c.ProgramID)
}

// writeDone ends the site's session and writes the done page of program.
func writeDone(w http.ResponseWriter, r *http.Request, gate *passverify.Gate, program string) {
	gate.Forget(w, r)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = pages.ExecuteTemplate(w, "done", program)
}

// pages are the demo site's pages in one layout: "page", the protected page, and "done".
var pages = template.Must(template.New("pages").Parse(`{{define "top"}}<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.}}</title>
<style>body{font:1.125rem/1.5 system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem;color:#1a1a1a}</style>
</head>
<body>
<main>
{{end}}{{define "bottom"}}</main>
</body>
</html>
{{end}}{{define "done"}}{{template "top" print "Done: " .}}<h1>Done</h1>
<p>Your admission to <strong>{{.}}</strong> has ended: the waiting room can let the next person in.</p>
{{template "bottom"}}{{end}}{{define "page"}}{{template "top" print "You're in: " .Program}}<h1>You're in</h1>
<p>Welcome to <strong>{{.Program}}</strong>. The waiting room let you through with ticket <strong data-ticket>{{.Ticket}}</strong>.</p>
<p>Your admission is valid until <time datetime="{{.Until}}" data-expires>{{.UntilText}}</time>.</p>
<p>This page stands for the protected ticketing site: it checked your admission pass on its own, against the waiting room's published keys.</p>
<form method="post" action="{{.Done}}"><button type="submit">Done</button></form>
{{template "bottom"}}{{end}}`))
