// Package pushtest is a Web Push service for tests, on 127.0.0.1: it hands out
// subscriptions, verifies each push's VAPID JWT (RFC 8292), decrypts its
// payload (RFC 8291) and records it.
package pushtest

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/example/waitingroom/internal/webpush"
)

// Service is an HTTPS push service that accepts pushes signed with one VAPID
// key to the subscriptions it made. Safe for concurrent use.
type Service struct {
	srv    *httptest.Server
	vapid  *ecdsa.PublicKey
	vapidK []byte // uncompressed public key

	mu      sync.Mutex
	subs    map[string]Sub // by endpoint
	pushes  []Push
	refused []Rejection
	failN   int
	failSt  int
}

// Sub is a subscription made by Subscribe, with the browser's private key.
type Sub struct {
	webpush.Subscription
	Private *ecdh.PrivateKey
}

// JSON returns the subscription as PushSubscription.toJSON() serialises it,
// keys in unpadded base64url.
func (s Sub) JSON() string {
	enc := base64.RawURLEncoding.EncodeToString
	b, _ := json.Marshal(map[string]any{"endpoint": s.Endpoint, "expirationTime": nil,
		"keys": map[string]string{"p256dh": enc(s.P256DH), "auth": enc(s.Auth)}})
	return string(b)
}

// Push is one push the service accepted, decrypted, with its RFC 8030 headers.
type Push struct {
	Endpoint string
	Payload  []byte
	TTL      time.Duration
	Urgency  string
	Topic    string
}

// Rejection is one push the service refused for a reason of its own: the
// status answered and why.
type Rejection struct {
	Endpoint string
	Status   int
	Reason   string
}

// New starts a Service that accepts pushes signed with vapidPublic's private
// key; it closes with t.Cleanup.
func New(t testing.TB, vapidPublic *ecdsa.PublicKey) *Service {
	t.Helper()
	k, err := vapidPublic.Bytes()
	if err != nil {
		t.Fatalf("pushtest: VAPID public key: %v", err)
	}
	s := &Service{vapid: vapidPublic, vapidK: k, subs: map[string]Sub{}}
	s.srv = httptest.NewTLSServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// Client returns an HTTP client that trusts the service's certificate.
func (s *Service) Client() *http.Client { return s.srv.Client() }

// Host returns the service's "127.0.0.1:port", for webpush.Hosts.
func (s *Service) Host() string { return strings.TrimPrefix(s.srv.URL, "https://") }

// Subscribe returns a new subscription whose endpoint is on this service.
func (s *Service) Subscribe() Sub {
	priv, _ := ecdh.P256().GenerateKey(rand.Reader)
	auth, id := make([]byte, 16), make([]byte, 12)
	rand.Read(auth)
	rand.Read(id)
	endpoint := s.srv.URL + "/push/" + base64.RawURLEncoding.EncodeToString(id)
	sub := Sub{webpush.Subscription{Endpoint: endpoint, P256DH: priv.PublicKey().Bytes(), Auth: auth}, priv}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs[endpoint] = sub
	return sub
}

// Received returns the pushes delivered to endpoint, in order.
func (s *Service) Received(endpoint string) []Push {
	return slices.DeleteFunc(s.All(), func(p Push) bool { return p.Endpoint != endpoint })
}

// All returns every push received, in order.
func (s *Service) All() []Push {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.pushes)
}

// Rejections returns every push refused for a bad VAPID header, request or body, in order.
func (s *Service) Rejections() []Rejection {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.refused)
}

// Gone unsubscribes endpoint: later pushes to it answer 410 Gone, as to any unknown endpoint.
func (s *Service) Gone(endpoint string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.subs, endpoint)
}

// FailNext makes the next n pushes answer status unchecked and unrecorded;
// 429 and 503 answers carry Retry-After: 1.
func (s *Service) FailNext(n, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failN, s.failSt = n, status
}

func (s *Service) serve(w http.ResponseWriter, r *http.Request) {
	endpoint := s.srv.URL + r.URL.Path
	s.mu.Lock()
	sub, known := s.subs[endpoint]
	fail := 0
	if s.failN > 0 {
		s.failN, fail = s.failN-1, s.failSt
	}
	s.mu.Unlock()
	switch {
	case fail == http.StatusTooManyRequests || fail == http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
		fallthrough
	case fail != 0:
		http.Error(w, "pushtest: failing as told", fail)
		return
	case !known:
		http.Error(w, "pushtest: no such subscription", http.StatusGone)
		return
	}
	p, status, reason := s.accept(r, sub)
	s.mu.Lock()
	defer s.mu.Unlock()
	if status != http.StatusCreated {
		s.refused = append(s.refused, Rejection{Endpoint: endpoint, Status: status, Reason: reason})
		http.Error(w, "pushtest: "+reason, status)
		return
	}
	s.pushes = append(s.pushes, p)
	w.Header().Set("Location", s.srv.URL+"/message/"+strconv.Itoa(len(s.pushes)))
	w.WriteHeader(http.StatusCreated)
}

// accept checks and decrypts one push to sub: it returns the push and 201, or
// the status to answer and why.
func (s *Service) accept(r *http.Request, sub Sub) (Push, int, string) {
	if reason := s.checkVAPID(r.Header.Get("Authorization")); reason != "" {
		return Push{}, http.StatusForbidden, reason
	}
	if ce := r.Header.Get("Content-Encoding"); ce != "aes128gcm" {
		return Push{}, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Encoding %q, want aes128gcm", ce)
	}
	ttl, err := strconv.ParseUint(r.Header.Get("TTL"), 10, 31)
	if err != nil {
		return Push{}, http.StatusBadRequest, fmt.Sprintf("TTL %q is not a number of seconds", r.Header.Get("TTL"))
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 4097))
	if err != nil || len(body) > 4096 { // what RFC 8291 §4 lets a push service refuse
		return Push{}, http.StatusRequestEntityTooLarge, "body unreadable or longer than 4096 bytes"
	}
	payload, err := webpush.Decrypt(sub.Private, sub.Auth, body)
	if err != nil {
		return Push{}, http.StatusBadRequest, err.Error()
	}
	return Push{Endpoint: sub.Endpoint, Payload: payload, TTL: time.Duration(ttl) * time.Second,
		Urgency: r.Header.Get("Urgency"), Topic: r.Header.Get("Topic")}, http.StatusCreated, ""
}

var vapidAuth = regexp.MustCompile(`^(?i:vapid) +t=([^,\s]+), *k=([A-Za-z0-9_-]+)=*$`)

// checkVAPID verifies an Authorization header per RFC 8292 (k, ES256 signature,
// aud, exp at most 24 h ahead, sub) and returns why it is refused, or "".
func (s *Service) checkVAPID(h string) string {
	m := vapidAuth.FindStringSubmatch(h)
	if m == nil {
		return "Authorization is not vapid t=..., k=..."
	}
	if key, err := base64.RawURLEncoding.DecodeString(m[2]); err != nil || subtle.ConstantTimeCompare(key, s.vapidK) != 1 {
		return "k is not the expected VAPID public key"
	}
	tok, err := jwt.ParseSigned(m[1], []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return "JWT: " + err.Error()
	}
	var c jwt.Claims
	if err := tok.Claims(s.vapid, &c); err != nil {
		return "JWT signature: " + err.Error()
	}
	now := time.Now()
	switch {
	case len(c.Audience) != 1 || c.Audience[0] != s.srv.URL:
		return fmt.Sprintf("JWT aud %q, want %q", []string(c.Audience), s.srv.URL)
	case c.Expiry == nil:
		return "JWT has no exp"
	case !c.Expiry.Time().After(now):
		return "JWT expired"
	case c.Expiry.Time().After(now.Add(24 * time.Hour)):
		return "JWT exp more than 24h ahead"
	case !strings.HasPrefix(c.Subject, "mailto:") && !strings.HasPrefix(c.Subject, "https:"):
		return fmt.Sprintf("JWT sub %q is not mailto: or https:", c.Subject)
	}
	return ""
}
