// Package httpapi is the waiting room's HTTP API as plain net/http
// handlers: the public queue routes (NewQueue), the admin routes (NewAdmin)
// and both together for the local server (New). Lambda serves the same
// handlers through Lambda, an API Gateway v2 adapter.
package httpapi

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/text/language"

	"github.com/example/waitingroom/internal/admissionpass"
	wire "github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/edge"
	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/qrsvg"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/settings"
	"github.com/example/waitingroom/internal/waitpage"
)

// MaxBodyBytes bounds request bodies; larger ones get 413.
const MaxBodyBytes = 16 << 10

// MaxHeaderBytes bounds a request's line and headers as sent; larger ones get 431.
const MaxHeaderBytes = 16 << 10

// Middleware wraps a handler, such as the admin routes' auth.
type Middleware = func(http.Handler) http.Handler

// Option configures a handler.
type Option func(*api)

// WithLogger sets the structured logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(a *api) { a.log = l } }

// WithPasses serves the JWKS of iss, the passes' issuer, on the public
// routes; without it (or with nil) that route answers 404.
func WithPasses(iss *admissionpass.Issuer) Option { return func(a *api) { a.passes = iss } }

// WithKeyring serves the admin key routes (list, rotate, revoke) over ring;
// without it (or with nil: fixed keys) they answer 409 NO_KEYRING.
func WithKeyring(ring *admissionpass.Keyring) Option { return func(a *api) { a.keys = ring } }

// WithObserver records every request in obs once answered, each as its
// route's Op (metrics.OpOther for no route); nil or absent records nothing.
func WithObserver(obs metrics.Observer) Option { return func(a *api) { a.obs = cmp.Or(obs, a.obs) } }

// api holds what every endpoint needs.
type api struct {
	svc       *queue.Service
	log       *slog.Logger
	obs       metrics.Observer
	unavRetry time.Duration // Retry-After of a 503
	passes    *admissionpass.Issuer
	jwksh     http.Handler           // the passes' JWKS, built once
	keys      *admissionpass.Keyring // nil: fixed keys, no key routes
	edge      *edge.Publisher        // nil: no edge gate
}

// NewQueue returns the public API over svc: enter, poll and leave; any
// other path answers the API's JSON 404.
func NewQueue(svc *queue.Service, opts ...Option) http.Handler {
	return newAPI(svc, opts).handler(func(r Route) bool { return !r.Admin }, nil)
}

// NewAdmin returns the admin API over svc, each route behind auth; any
// other path answers the API's JSON 404.
func NewAdmin(svc *queue.Service, auth Middleware, opts ...Option) http.Handler {
	return newAPI(svc, opts).handler(func(r Route) bool { return r.Admin }, auth)
}

// New returns the public and the admin API on one handler, the admin routes
// behind auth: the local server's.
func New(svc *queue.Service, auth Middleware, opts ...Option) http.Handler {
	return newAPI(svc, opts).handler(func(Route) bool { return true }, auth)
}

func newAPI(svc *queue.Service, opts []Option) *api {
	a := &api{svc: svc, log: slog.Default(), obs: metrics.Discard, unavRetry: 2 * time.Second}
	for _, o := range opts {
		o(a)
	}
	if a.passes != nil {
		a.jwksh = a.passes.JWKSHandler(func(w http.ResponseWriter, r *http.Request, err error) { a.writeError(w, r, keysError(err)) },
			&admissionpass.FailOpen{List: a.failingOpen, OnError: func(ctx context.Context, err error) {
				a.log.LogAttrs(ctx, slog.LevelError, "JWKS break-glasses", slog.String("requestId", requestID(ctx)), slog.String("error", err.Error()))
			}})
	}
	return a
}

// handler serves the Routes that keep accepts, with a JSON 405 (and Allow)
// for other methods on their paths and a JSON 404 for every other path.
func (a *api) handler(keep func(Route) bool, auth Middleware) http.Handler {
	mux := http.NewServeMux()
	methods := map[string][]string{} // path -> methods served
	ops := map[string]metrics.Op{}   // pattern -> op
	for _, rt := range Routes {
		if !keep(rt) {
			continue
		}
		ops[rt.Method+" "+rt.Path] = rt.Op
		h := passIssuer(a.endpoint(rt.serve)) // the admin signs bypass passes too
		if rt.Admin {
			h = auth(h)
		}
		mux.Handle(rt.Method+" "+rt.Path, h)
		methods[rt.Path] = append(methods[rt.Path], rt.Method)
	}
	for path, ms := range methods {
		slices.Sort(ms)
		allow := strings.Join(ms, ", ")
		h := a.endpoint(func(_ *api, w http.ResponseWriter, _ *http.Request) error {
			w.Header().Set("Allow", allow)
			return httpErrorf(http.StatusMethodNotAllowed, wire.CodeMethodNotAllowed, "Allowed methods: %s.", allow)
		})
		mux.Handle(path, h)
		// A GET pattern also matches HEAD; HEAD is not served.
		if slices.Contains(ms, http.MethodGet) {
			mux.Handle(http.MethodHead+" "+path, h)
		}
	}
	mux.Handle("/", a.endpoint(func(*api, http.ResponseWriter, *http.Request) error { return errNoRoute }))
	// observe reads the Pattern the mux sets on the same *http.Request, so
	// nothing between them may copy the request (logRequests does).
	observe := metrics.Middleware(a.obs, func(r *http.Request) metrics.Op { return cmp.Or(ops[r.Pattern], metrics.OpOther) })
	return a.logRequests(observe(a.recoverPanics(screen(mux))))
}

// endpoint serves serve, answering the error it returns.
func (a *api) endpoint(serve func(*api, http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := serve(a, w, r); err != nil {
			a.writeError(w, r, err)
		}
	})
}

// okOrCreated is 201 when created, else 200.
func okOrCreated(created bool) int {
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}

// header returns every value of the request header name, joined: two never pass for one.
func header(r *http.Request, name string) string {
	return strings.TrimSpace(strings.Join(r.Header.Values(name), ","))
}

func (a *api) enter(w http.ResponseWriter, r *http.Request) error {
	var body wire.EnterRequest
	if err := decodeWith(r, &body, nullable, true); err != nil {
		return err
	}
	v, created, err := a.svc.Enter(r.Context(), r.PathValue("programId"), queue.Entry{
		Token: header(r, wire.HeaderToken), IdempotencyKey: header(r, wire.HeaderIdempotencyKey),
		Challenge: header(r, wire.HeaderChallenge), Solution: header(r, wire.HeaderSolution),
		Push: body.Push, Enqueue: header(r, wire.HeaderEnqueueToken),
	})
	n := metrics.Note(r.Context())
	n.Account, n.Proof = v.Account, header(r, wire.HeaderSolution) != ""
	return writeToken(w, r, okOrCreated(created), v, err)
}

// handoff makes a code that moves the place of the token in X-Queue-Token to
// another device (201), with its URL, the body's page with the code in the
// fragment (which reaches no server), and that URL's QR code.
func (a *api) handoff(w http.ResponseWriter, r *http.Request) error {
	var body wire.HandoffRequest
	if err := decodeObject(r, &body); err != nil {
		return err
	}
	id := r.PathValue("programId")
	if !validPage(r, body.Page, id) {
		return httpErrorf(http.StatusBadRequest, wire.CodeInvalidPage, "page must be the absolute https URL of the program's waiting page, without query or fragment.")
	}
	code, expires, err := a.svc.MakeHandoff(r.Context(), id, header(r, wire.HeaderToken))
	if err != nil {
		return err
	}
	out := wire.Handoff{Code: code, URL: body.Page + "#handoff=" + code, ExpiresAt: wire.TimeOf(expires)}
	if out.QRSVG, err = qrsvg.SVG(out.URL); err != nil {
		return fmt.Errorf("handoff QR code: %w", err)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// validPage reports whether page is the absolute URL of programID's waiting
// page, on the origin of the request's Origin (if any): https (http on a
// loopback host), no credentials, query or fragment.
func validPage(r *http.Request, page, programID string) bool {
	u, err := url.Parse(page)
	if err != nil || len(page) > 1024 || u.User != nil || u.RawQuery != "" || strings.Contains(page, "#") || u.Host == "" ||
		!strings.HasSuffix(u.EscapedPath(), waitpage.PathPrefix+url.PathEscape(programID)) {
		return false
	}
	origin := header(r, "Origin")
	return settings.SecureURL(u) && (origin == "" || strings.EqualFold(origin, u.Scheme+"://"+u.Host))
}

// redeem moves the place of the body's handoff code to a new token (201;
// 200 for a retry with the request's Idempotency-Key, which answers it again).
func (a *api) redeem(w http.ResponseWriter, r *http.Request) error {
	var body wire.RedeemRequest
	if err := decodeObject(r, &body); err != nil {
		return err
	}
	v, moved, err := a.svc.Redeem(r.Context(), r.PathValue("programId"), body.Code, header(r, wire.HeaderIdempotencyKey))
	return writeToken(w, r, okOrCreated(moved), v, err)
}

func (a *api) poll(w http.ResponseWriter, r *http.Request) error {
	v, err := a.svc.Poll(r.Context(), r.PathValue("programId"), header(r, wire.HeaderToken))
	return writeToken(w, r, http.StatusOK, v, err)
}

// subscribe stores the body's push subscription on the token in X-Queue-Token (204).
func (a *api) subscribe(w http.ResponseWriter, r *http.Request) error {
	var sub wire.PushSubscription
	if err := decodeWith(r, &sub, nullable, false); err != nil {
		return err
	}
	return answer(w, http.StatusNoContent, nil, a.svc.Subscribe(r.Context(), r.PathValue("programId"), header(r, wire.HeaderToken), sub))
}

// unsubscribe ends the push subscription of the token in X-Queue-Token (204).
func (a *api) unsubscribe(w http.ResponseWriter, r *http.Request) error {
	return answer(w, http.StatusNoContent, nil, a.svc.Unsubscribe(r.Context(), r.PathValue("programId"), header(r, wire.HeaderToken)))
}

func (a *api) leave(w http.ResponseWriter, r *http.Request) error {
	return answer(w, http.StatusNoContent, nil, a.svc.Leave(r.Context(), r.PathValue("programId"), header(r, wire.HeaderToken)))
}

// endSession ends the admission of the pass in X-Admission-Pass; an unknown program,
// read through the program cache as a poll reads it, answers 404.
func (a *api) endSession(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("programId")
	if _, err := a.svc.Showing(r.Context(), id); err != nil {
		return err
	}
	return answer(w, http.StatusNoContent, nil, a.svc.EndSession(r.Context(), id, r.Header.Get(wire.HeaderAdmissionPass)))
}

// challenge hands out a proof-of-work challenge (200, also with bits 0 for none).
func (a *api) challenge(w http.ResponseWriter, r *http.Request) error {
	c, err := a.svc.Challenge(r.Context(), r.PathValue("programId"))
	return answer(w, http.StatusOK, wire.Challenge{Challenge: c.Challenge, Bits: c.Bits, ExpiresAt: wire.TimeOf(c.ExpiresAt)}, err)
}

// jwks serves the JWKS of the passes' keys.
func (a *api) jwks(w http.ResponseWriter, r *http.Request) error {
	if a.jwksh == nil {
		return errNoRoute
	}
	a.jwksh.ServeHTTP(w, r)
	return nil
}

// failingOpen lists the programs with a break-glass end, for the JWKS's failOpen member,
// which leaves out those past and lists again at most once per admissionpass.FailOpenTTL.
func (a *api) failingOpen(ctx context.Context) (map[string]time.Time, error) {
	all, err := edge.ListAll(ctx, a.svc)
	if err != nil {
		return nil, err
	}
	ends := map[string]time.Time{}
	for _, c := range all {
		if !c.Edge.FailOpenUntil.IsZero() {
			ends[c.ProgramID] = c.Edge.FailOpenUntil
		}
	}
	return ends, nil
}

// writeToken answers v with status, or returns err; a WAITING token also gets Retry-After.
func writeToken(w http.ResponseWriter, r *http.Request, status int, v queue.View, err error) error {
	if err != nil {
		return err
	}
	n := metrics.Note(r.Context())
	n.TokenStatus, n.Admitted = string(v.Status), v.FirstSighting
	if v.Status == queue.StatusWaiting {
		w.Header().Set(wire.HeaderRetryAfter, strconv.FormatInt(ceilSeconds(v.RetryAfter), 10))
		n.RetryAfter, n.EstimatedWait, n.Ticket, n.Position = v.RetryAfter, v.EstimatedWait, v.Ticket, v.Position
		if v.Shuffle != nil && v.Shuffle.Place > 0 {
			n.Ticket = v.Shuffle.Place // the line's order
		}
	}
	if status == http.StatusCreated { // a new ticket's position is the queue's length
		n.Waiting, n.WaitingKnown = v.Position, true
	}
	var prefs []language.Tag
	if len(v.Translations) > 0 { // read only when there is a choice: the poll's hot path
		prefs = languages(r)
	}
	writeJSON(w, status, TokenOf(v, prefs...))
	return nil
}

// languages are r's language preferences, most preferred first: ?lang= alone, else
// Accept-Language.
func languages(r *http.Request) []language.Tag {
	if r.URL.RawQuery != "" {
		if tag, ok := settings.ParseLanguage(r.URL.Query().Get("lang")); ok {
			return []language.Tag{tag}
		}
	}
	tags, _, err := language.ParseAcceptLanguage(header(r, "Accept-Language"))
	if err != nil {
		return nil
	}
	return tags
}

// TokenOf is v as the wire's Token, with the notice in the language of prefs where translated.
func TokenOf(v queue.View, prefs ...language.Tag) wire.Token {
	if len(v.Translations) > 0 && len(prefs) > 0 {
		v.Notice = v.NoticeIn(prefs...)
	}
	return wire.Token{
		TokenID:         v.TokenID,
		Status:          wire.Status(v.Status),
		Ticket:          v.Ticket,
		IssuedAt:        wire.TimeOf(v.IssuedAt),
		Position:        v.Position,
		RetryAfterMs:    v.RetryAfter.Milliseconds(),
		EstimatedWaitMs: v.EstimatedWait.Milliseconds(),
		Push:            v.Push,
		AdmittedAt:      wire.TimeOf(v.AdmittedAt),
		ExpiresAt:       wire.TimeOf(v.ExpiresAt),
		LeftAt:          wire.TimeOf(v.LeftAt),
		RevokedAt:       wire.TimeOf(v.RevokedAt),
		MovedAt:         wire.TimeOf(v.MovedAt),
		Notice:          v.Notice,
		Paused:          v.Paused,
		AdmissionPass:   v.AdmissionPass,
		EdgeToken:       v.EdgeToken,
		OpensAt:         wire.TimeOf(v.OpensAt),
		ClosesAt:        wire.TimeOf(v.ClosesAt),
		StatusLine:      v.StatusLine,
		Shuffle:         shuffleOf(v.Shuffle),
	}
}

// shuffleOf is v as the wire's Shuffle, nil for none.
func shuffleOf(v *queue.ShuffleView) *wire.Shuffle {
	if v == nil {
		return nil
	}
	return &wire.Shuffle{Commitment: v.Commitment, PublicKey: v.PublicKey, Seed: v.Seed, Prequeue: v.Prequeue, Place: v.Place}
}

// ceilSeconds is d in whole seconds, rounded up.
func ceilSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}
