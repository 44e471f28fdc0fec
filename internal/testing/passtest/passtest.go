// Package passtest is a stand-in waiting room for tests of admission passes
// (local keys, a JWKS server the test controls, a settable clock) and the
// contract of passverify.ReplayGuard. Import it from _test.go files only.
package passtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/tools/localkeys"
	"github.com/example/waitingroom/internal/tools/simclock"
	"github.com/example/waitingroom/passverify"
)

const (
	Issuer         = "https://queue.example.com"   // the iss of the Room's passes
	WaitingRoomURL = Issuer + "/waiting-room/gala" // the waiting room of program "gala"
)

// Admission is a sample admission to "gala", with milliseconds a pass drops.
var Admission = admissionpass.Admission{
	ProgramID:  "gala",
	TokenID:    "qa2AFEZ5uMUwGcoY2YV5zg",
	Ticket:     4242,
	AdmittedAt: time.Date(2026, 5, 19, 10, 12, 1, 456e6, time.UTC),
	ExpiresAt:  time.Date(2026, 5, 19, 10, 22, 1, 456e6, time.UTC),
}

// Clock is a settable clock, safe for concurrent use.
type Clock = simclock.Fake

// NewClock returns a Clock at t.
func NewClock(t time.Time) *Clock { return simclock.NewFake(t) }

// Key is a local signing key and its private half, for crafting passes.
type Key struct {
	*localkeys.Key
	Private *ecdsa.PrivateKey
}

// NewKey returns a new random key.
func NewKey(t testing.TB) Key {
	t.Helper()
	priv := of(ecdsa.GenerateKey(elliptic.P256(), rand.Reader)).must(t)
	return Key{Key: of(localkeys.NewKey(priv)).must(t), Private: priv}
}

// KeyID returns the kid of k.
func (k Key) KeyID(t testing.TB) string {
	t.Helper()
	return of(issuer(t, Issuer, k).KeyID(context.Background())).must(t)
}

// issuer is an issuer iss of keys, the first the current one.
func issuer(t testing.TB, iss string, keys ...Key) *admissionpass.Issuer {
	t.Helper()
	var previous []admissionpass.Key
	for _, k := range keys[1:] {
		previous = append(previous, k.Key)
	}
	return of(localkeys.FixedIssuer(iss, keys[0].Key, previous...)).must(t)
}

// result is a call's answer and error.
type result[T any] struct {
	v   T
	err error
}

func of[T any](v T, err error) result[T] { return result[T]{v, err} }

// must returns the answer, stopping t if the call failed.
func (r result[T]) must(t testing.TB) T {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

// Room is a waiting room: it signs passes with Key and serves a JWKS,
// initially of Key alone, at JWKSURL.
type Room struct {
	Key Key

	srv          *httptest.Server
	fetches      atomic.Int32
	doc          atomic.Pointer[[]byte]
	cacheControl atomic.Pointer[string]
	status       atomic.Int64

	mu         sync.Mutex
	arrived    chan struct{} // of Hold: closed at the first held request
	held       chan struct{} // of Hold: closed by its release
	lastHeader http.Header
}

// NewRoom starts a Room, stopped when t ends.
func NewRoom(t testing.TB) *Room {
	t.Helper()
	r := &Room{Key: NewKey(t)}
	r.SetCacheControl(admissionpass.JWKSCacheControl)
	r.SetStatus(http.StatusOK)
	r.Publish(t, r.Key)
	r.srv = httptest.NewServer(http.HandlerFunc(r.serveJWKS))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *Room) serveJWKS(w http.ResponseWriter, req *http.Request) {
	r.fetches.Add(1)
	doc, cc, status := *r.doc.Load(), *r.cacheControl.Load(), int(r.status.Load())
	r.mu.Lock()
	held := r.held
	r.lastHeader = req.Header.Clone()
	if r.arrived != nil {
		close(r.arrived)
		r.arrived = nil
	}
	r.mu.Unlock()
	if held != nil {
		select {
		case <-held:
		case <-req.Context().Done():
			return
		}
	}
	if cc != "" {
		w.Header().Set("Cache-Control", cc)
	}
	w.Header().Set("Content-Type", admissionpass.JWKSContentType)
	w.WriteHeader(status)
	if status == http.StatusOK {
		_, _ = w.Write(doc)
	}
}

// JWKSURL returns the URL of the Room's JWKS.
func (r *Room) JWKSURL() string { return r.srv.URL + "/.well-known/jwks.json" }

// Publish makes the JWKS hold keys, the first as the current one.
func (r *Room) Publish(t testing.TB, keys ...Key) {
	t.Helper()
	r.PublishDocument(of(issuer(t, Issuer, keys...).JWKS(context.Background())).must(t))
}

// PublishDocument makes the JWKS answer doc.
func (r *Room) PublishDocument(doc []byte) { r.doc.Store(&doc) }

// SetCacheControl sets the JWKS answers' Cache-Control ("" for none).
func (r *Room) SetCacheControl(v string) { r.cacheControl.Store(&v) }

// SetStatus sets the JWKS answers' status; other than 200, they have no body.
func (r *Room) SetStatus(status int) { r.status.Store(int64(status)) }

// Hold makes the JWKS answers wait until release (or the request's end);
// arrived is closed when the first held request arrives.
func (r *Room) Hold() (arrived <-chan struct{}, release func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, held := make(chan struct{}), make(chan struct{})
	r.arrived, r.held = a, held
	var once sync.Once
	return a, func() { once.Do(func() { close(held) }) }
}

// Fetches returns how many times the JWKS was requested.
func (r *Room) Fetches() int { return int(r.fetches.Load()) }

// LastRequestHeader returns the header of the last JWKS request.
func (r *Room) LastRequestHeader() http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastHeader
}

// Pass returns a pass for a signed with key (the Room's Key if zero).
func (r *Room) Pass(t testing.TB, a admissionpass.Admission, key ...Key) string {
	t.Helper()
	k := r.Key
	if len(key) > 0 {
		k = key[0]
	}
	return IssuePass(t, Issuer, k, a)
}

// IssuePass signs a pass for a by iss with key.
func IssuePass(t testing.TB, iss string, key Key, a admissionpass.Admission) string {
	t.Helper()
	return of(issuer(t, iss, key).Issue(context.Background(), a)).must(t)
}

// Verifier returns a Verifier of the Room's passes for "gala" on clock, with
// change applied to its Config.
func (r *Room) Verifier(t testing.TB, clock *Clock, change func(*passverify.Config)) *passverify.Verifier {
	t.Helper()
	cfg := passverify.Config{JWKSURL: r.JWKSURL(), Issuer: Issuer, ProgramID: "gala", Now: clock.Now}
	if change != nil {
		change(&cfg)
	}
	return of(passverify.New(cfg)).must(t)
}

// WithPass returns target with ?admissionPass=pass added to its query.
func WithPass(target, pass string) string {
	sep := "?"
	if strings.Contains(target, "?") {
		sep = "&"
	}
	return target + sep + passverify.Param + "=" + url.QueryEscape(pass)
}
