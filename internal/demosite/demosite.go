// Package demosite is the protected site of the local server's demo: a
// page at GET /demo-site/{programId} behind package passverify's Gate,
// which checks admission passes against the waiting room's JWKS, fetched
// over HTTP, exactly as a ticketing site on another origin would. Without
// a valid pass the Gate sends people to /waiting-room/{programId}.
package demosite

import (
	"errors"
	"fmt"
	"html/template"
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
	Pattern = "GET " + Prefix + "{programId}"
	Prefix  = "/demo-site/"
)

// DefaultMaxPrograms is how many programs a Handler guards at most.
const DefaultMaxPrograms = 100

// Config configures a Handler. API and Issuer are required.
type Config struct {
	// API is the waiting room's base URL, e.g. http://127.0.0.1:3000: the
	// JWKS is fetched from API + /.well-known/jwks.json.
	API string
	// Issuer is the iss of the waiting room's passes.
	Issuer string
	// HTTPClient fetches the JWKS; nil for passverify's default.
	HTTPClient *http.Client
	// MaxPrograms bounds how many programs' gates are kept (a path names
	// any program); DefaultMaxPrograms when 0.
	MaxPrograms int
}

// URL returns the demo page of programID on the server at base (an
// http(s) origin without a trailing slash).
func URL(base, programID string) string {
	return base + Prefix + url.PathEscape(programID)
}

// Handler serves the demo page of any program, each behind its own Gate:
// single use (a MemoryGuard), the cookie scoped to /demo-site/{programId}.
type Handler struct {
	cfg Config
	mux *http.ServeMux

	mu    sync.Mutex
	gates map[string]http.Handler
}

// New returns the demo site for cfg. It fetches nothing until the first
// pass or cookie arrives.
func New(cfg Config) (*Handler, error) {
	if cfg.API == "" || cfg.Issuer == "" {
		return nil, errors.New("demosite: API and Issuer are required")
	}
	if cfg.MaxPrograms <= 0 {
		cfg.MaxPrograms = DefaultMaxPrograms
	}
	h := &Handler{cfg: cfg, mux: http.NewServeMux(), gates: map[string]http.Handler{}}
	h.mux.HandleFunc(Pattern, h.servePage)
	return h, nil
}

// ServeHTTP serves the demo page; any other request is a plain 404.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

func (h *Handler) servePage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("programId")
	gate, err := h.gate(id)
	if err != nil {
		w.Header().Set("Cache-Control", "no-store")
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	gate.ServeHTTP(w, r)
}

// gate returns the Gate of program id, built on first use.
func (h *Handler) gate(id string) (http.Handler, error) {
	if !queue.ValidProgramID(id) {
		return nil, errors.New("no such program")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if g, ok := h.gates[id]; ok {
		return g, nil
	}
	if len(h.gates) >= h.cfg.MaxPrograms {
		return nil, fmt.Errorf("the demo site guards at most %d programs", h.cfg.MaxPrograms)
	}
	v, err := passverify.New(passverify.Config{
		JWKSURL:    h.cfg.API + "/.well-known/jwks.json",
		Issuer:     h.cfg.Issuer,
		ProgramID:  id,
		HTTPClient: h.cfg.HTTPClient,
	})
	if err != nil {
		return nil, err
	}
	g, err := passverify.NewGate(v, passverify.GateConfig{
		WaitingRoomURL: "/waiting-room/" + url.PathEscape(id),
		CookiePath:     Prefix + url.PathEscape(id),
		ReplayGuard:    passverify.NewMemoryGuard(0),
	})
	if err != nil {
		return nil, err
	}
	h.gates[id] = g.Wrap(http.HandlerFunc(servePage))
	return h.gates[id], nil
}

var page = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>You're in: {{.Program}}</title>
<style>body{font:1.125rem/1.5 system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem;color:#1a1a1a}</style>
</head>
<body>
<main>
<h1>You're in</h1>
<p>Welcome to <strong>{{.Program}}</strong>. The waiting room let you through with ticket <strong data-ticket>{{.Ticket}}</strong>.</p>
<p>Your admission is valid until <time datetime="{{.Until}}" data-expires>{{.UntilText}}</time>.</p>
<p>This page stands for the protected ticketing site: it checked your admission pass on its own, against the waiting room's published keys.</p>
</main>
</body>
</html>
`))

// servePage is the protected page, behind the Gate.
func servePage(w http.ResponseWriter, r *http.Request) {
	c, ok := passverify.FromContext(r.Context())
	if !ok { // only a Gate calls this
		http.Error(w, "no admission", http.StatusForbidden)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "private, no-store")
	_ = page.Execute(w, struct {
		Program          string
		Ticket           int64
		Until, UntilText string
	}{c.ProgramID, c.Ticket, c.ExpiresAt.UTC().Format(time.RFC3339), c.ExpiresAt.UTC().Format("15:04:05 UTC, 2 January 2006")})
}
