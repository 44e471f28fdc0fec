package webpush

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/google/go-cmp/cmp"
)

func b64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("decoding %q: %v", s, err)
	}
	return b
}

// TestRFC8291AppendixA checks encrypt and Decrypt against the worked example
// of RFC 8291 Appendix A, byte for byte.
func TestRFC8291AppendixA(t *testing.T) {
	t.Parallel()
	const (
		plaintext = "When I grow up, I want to be a watermelon"
		asPublic  = "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
		asPrivate = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
		uaPublic  = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
		uaPrivate = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
		salt      = "DGv6ra1nlYgDCS1FRnbzlw"
		auth      = "BTBZMqHH6r4Tts7J_aSIgg"
		body      = "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
	)
	as, err := ecdh.P256().NewPrivateKey(b64(t, asPrivate))
	if err != nil {
		t.Fatal(err)
	}
	if got := base64.RawURLEncoding.EncodeToString(as.PublicKey().Bytes()); got != asPublic {
		t.Fatalf("as public key = %s, want %s", got, asPublic)
	}
	ua, err := ecdh.P256().NewPrivateKey(b64(t, uaPrivate))
	if err != nil {
		t.Fatal(err)
	}
	sub := Subscription{Endpoint: "https://fcm.googleapis.com/fcm/send/x", P256DH: b64(t, uaPublic), Auth: b64(t, auth)}
	if !bytes.Equal(ua.PublicKey().Bytes(), sub.P256DH) {
		t.Fatal("ua private key does not match ua public key")
	}

	got, err := encrypt(sub, []byte(plaintext), b64(t, salt), as)
	if err != nil {
		t.Fatal(err)
	}
	if enc := base64.RawURLEncoding.EncodeToString(got); enc != body {
		t.Errorf("encrypt:\n got %s\nwant %s", enc, body)
	}

	plain, err := Decrypt(ua, sub.Auth, b64(t, body))
	if err != nil {
		t.Fatal(err)
	}
	if string(plain) != plaintext {
		t.Errorf("Decrypt = %q, want %q", plain, plaintext)
	}
}

func newUA(t testing.TB) (*ecdh.PrivateKey, Subscription) {
	t.Helper()
	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, 16)
	rand.Read(auth)
	return priv, Subscription{Endpoint: "https://fcm.googleapis.com/fcm/send/abc", P256DH: priv.PublicKey().Bytes(), Auth: auth}
}

func TestEncryptRoundTrip(t *testing.T) {
	t.Parallel()
	for _, size := range []int{0, 1, 100, MaxPayload} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			t.Parallel()
			priv, sub := newUA(t)
			payload := make([]byte, size)
			rand.Read(payload)
			body, err := Encrypt(sub, payload)
			if err != nil {
				t.Fatal(err)
			}
			if want := headerLen + size + 1 + tagLen; len(body) != want {
				t.Errorf("len(body) = %d, want %d", len(body), want)
			}
			if len(body) > 4096 {
				t.Errorf("body of %d bytes exceeds 4096", len(body))
			}
			got, err := Decrypt(priv, sub.Auth, body)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, payload) {
				t.Error("Decrypt(Encrypt(p)) != p")
			}
			again, err := Encrypt(sub, payload)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(again[:headerLen], body[:headerLen]) {
				t.Error("two encryptions share salt and ephemeral key")
			}
		})
	}
}

func TestEncryptRefuses(t *testing.T) {
	t.Parallel()
	_, sub := newUA(t)
	if _, err := Encrypt(sub, make([]byte, MaxPayload+1)); !errors.Is(err, ErrPayloadTooLarge) {
		t.Errorf("Encrypt(%d bytes) error = %v, want ErrPayloadTooLarge", MaxPayload+1, err)
	}
	bad := sub
	bad.Auth = bad.Auth[:15]
	if _, err := Encrypt(bad, nil); !errors.Is(err, ErrInvalidSubscription) {
		t.Errorf("Encrypt with 15-byte auth: error = %v", err)
	}
	bad = sub
	bad.P256DH = append([]byte{}, sub.P256DH...)
	bad.P256DH[64] ^= 1 // off the curve
	if _, err := Encrypt(bad, nil); !errors.Is(err, ErrInvalidSubscription) {
		t.Errorf("Encrypt with a point off the curve: error = %v", err)
	}
}

func TestDecryptRefuses(t *testing.T) {
	t.Parallel()
	priv, sub := newUA(t)
	body, err := Encrypt(sub, []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := newUA(t)
	flip := func(i int) []byte {
		b := bytes.Clone(body)
		b[i] ^= 1
		return b
	}
	tests := []struct {
		name string
		priv *ecdh.PrivateKey
		auth []byte
		body []byte
	}{
		{"wrong key", other, sub.Auth, body},
		{"wrong auth", priv, make([]byte, 16), body},
		{"short auth", priv, sub.Auth[:8], body},
		{"tampered salt", priv, sub.Auth, flip(0)},
		{"tampered ciphertext", priv, sub.Auth, flip(len(body) - 20)},
		{"tampered tag", priv, sub.Auth, flip(len(body) - 1)},
		{"truncated", priv, sub.Auth, body[:len(body)-1]},
		{"header only", priv, sub.Auth, body[:headerLen]},
		{"empty", priv, sub.Auth, nil},
	}
	for _, tt := range tests {
		if _, err := Decrypt(tt.priv, tt.auth, tt.body); !errors.Is(err, ErrDecrypt) {
			t.Errorf("%s: error = %v, want ErrDecrypt", tt.name, err)
		}
	}
}

func TestParseSubscription(t *testing.T) {
	t.Parallel()
	_, sub := newUA(t)
	raw := base64.RawURLEncoding.EncodeToString
	padded := base64.URLEncoding.EncodeToString
	offCurve := bytes.Clone(sub.P256DH)
	offCurve[64] ^= 1
	tests := []struct {
		name                   string
		endpoint, p256dh, auth string
		wantErr                bool
	}{
		{"unpadded", sub.Endpoint, raw(sub.P256DH), raw(sub.Auth), false},
		{"padded", sub.Endpoint, padded(sub.P256DH), padded(sub.Auth), false},
		{"bad endpoint", "http://fcm.googleapis.com/x", raw(sub.P256DH), raw(sub.Auth), true},
		{"p256dh not base64url", sub.Endpoint, "+/" + raw(sub.P256DH)[2:], raw(sub.Auth), true},
		{"p256dh compressed", sub.Endpoint, raw(append([]byte{2}, sub.P256DH[1:33]...)), raw(sub.Auth), true},
		{"p256dh off the curve", sub.Endpoint, raw(offCurve), raw(sub.Auth), true},
		{"p256dh empty", sub.Endpoint, "", raw(sub.Auth), true},
		{"auth 15 bytes", sub.Endpoint, raw(sub.P256DH), raw(sub.Auth[:15]), true},
		{"auth 17 bytes", sub.Endpoint, raw(sub.P256DH), raw(append(bytes.Clone(sub.Auth), 0)), true},
	}
	for _, tt := range tests {
		got, err := ParseSubscription(tt.endpoint, tt.p256dh, tt.auth, DefaultHosts)
		if tt.wantErr {
			if !errors.Is(err, ErrInvalidSubscription) {
				t.Errorf("%s: error = %v, want ErrInvalidSubscription", tt.name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if diff := cmp.Diff(sub, got); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", tt.name, diff)
		}
	}
}

func TestValidEndpoint(t *testing.T) {
	t.Parallel()
	hosts := append(Hosts{"127.0.0.1:8443", "push.example:8443", "[::1]:9443"}, DefaultHosts...)
	long := "https://fcm.googleapis.com/fcm/send/" + strings.Repeat("a", MaxEndpointLen)
	tests := []struct {
		endpoint string
		ok       bool
	}{
		{"https://fcm.googleapis.com/fcm/send/abc:def", true},
		{"https://FCM.googleapis.com/fcm/send/abc", true},
		{"https://fcm.googleapis.com:443/fcm/send/abc", true},
		{"https://updates.push.services.mozilla.com/wpush/v2/gAAA", true},
		{"https://web.push.apple.com/QGx", true},
		{"https://api.push.apple.com/3/device/x", true},
		{"https://a.b.push.apple.com/x", true},
		{"https://wns2-by3p.notify.windows.com/w/?token=x", true},
		{"https://127.0.0.1:8443/push/x", true},
		{"https://push.example:8443/x", true},
		{"https://[::1]:9443/x", true},
		{long[:MaxEndpointLen], true},

		{"", false},
		{"http://fcm.googleapis.com/fcm/send/abc", false},
		{"ftp://fcm.googleapis.com/x", false},
		{"fcm.googleapis.com/fcm/send/abc", false},
		{"https://user:pw@fcm.googleapis.com/fcm/send/abc", false},
		{"https://user@fcm.googleapis.com/fcm/send/abc", false},
		{"https://fcm.googleapis.com/fcm/send/abc#frag", false},
		{"https://fcm.googleapis.com/fcm/send/abc#", false},
		{long, false},
		{"https://evil.com/x", false},
		{"https://push.apple.com/x", false}, // ".push.apple.com" is subdomains only
		{"https://evil.com.push.apple.com.attacker/x", false},
		{"https://evilpush.apple.com/x", false},
		{"https://.push.apple.com/x", false},
		{"https://a..push.apple.com/x", false},
		{"https://.a.push.apple.com/x", false},
		{"https://fcm.googleapis.com.evil.com/x", false},
		{"https://xfcm.googleapis.com/x", false},
		{"https://fcm.googleapis.com:8443/x", false},
		{"https://fcm.googleapis.com:/x", false},
		{"https://127.0.0.1/x", false},
		{"https://127.0.0.1:9999/x", false},
		{"https://[::1]/x", false},
		{"https://142.250.0.1/x", false},
		{"https://push.example/x", false},
		{"https://push.example:9443/x", false},
		{"https://fcm_googleapis.com/x", false},
		{"https:///x", false},
		{"https:opaque", false},
	}
	for _, tt := range tests {
		u, err := ValidEndpoint(tt.endpoint, hosts)
		switch {
		case tt.ok && err != nil:
			t.Errorf("ValidEndpoint(%q) = %v, want ok", tt.endpoint, err)
		case !tt.ok && !errors.Is(err, ErrInvalidSubscription):
			t.Errorf("ValidEndpoint(%q) error = %v, want ErrInvalidSubscription", tt.endpoint, err)
		case !tt.ok && tt.endpoint != "" && strings.Contains(err.Error(), tt.endpoint):
			t.Errorf("ValidEndpoint(%q) error echoes the endpoint: %v", tt.endpoint, err)
		case tt.ok && u.String() == "":
			t.Errorf("ValidEndpoint(%q) returned an empty URL", tt.endpoint)
		}
	}
}

// clock is a settable time source for VAPID.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// splitHeader returns the t and k of a "vapid t=..., k=..." header.
func splitHeader(t *testing.T, h string) (string, string) {
	t.Helper()
	rest, ok := strings.CutPrefix(h, "vapid t=")
	if !ok {
		t.Fatalf("header %q does not start with vapid t=", h)
	}
	tok, k, ok := strings.Cut(rest, ", k=")
	if !ok {
		t.Fatalf("header %q has no , k=", h)
	}
	return tok, k
}

type vapidClaims struct {
	Aud string `json:"aud"`
	Exp int64  `json:"exp"`
	Sub string `json:"sub"`
}

// verifyJWT checks tok's ES256 signature with pub (go-jose, independent of the
// signer) and returns its claims.
func verifyJWT(t *testing.T, tok string, pub *ecdsa.PublicKey) vapidClaims {
	t.Helper()
	header, _, _ := strings.Cut(tok, ".")
	var h map[string]string
	if err := json.Unmarshal(b64(t, header), &h); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"typ": "JWT", "alg": "ES256"}, h); diff != "" {
		t.Errorf("JWT header (-want +got)\n%s", diff)
	}
	parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	var c vapidClaims
	if err := parsed.Claims(pub, &c); err != nil {
		t.Fatalf("JWT does not verify: %v", err)
	}
	return c
}

func TestVAPIDHeader(t *testing.T) {
	t.Parallel()
	key := newKey(t)
	clk := &clock{t: time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)}
	v := NewVAPID(key, "mailto:ops@example.com", clk.now)

	pub, _ := key.PublicKey.Bytes()
	if got, want := v.PublicKey(), base64.RawURLEncoding.EncodeToString(pub); got != want {
		t.Errorf("PublicKey() = %s, want %s", got, want)
	}

	h1, err := v.Header("https://fcm.googleapis.com/fcm/send/a")
	if err != nil {
		t.Fatal(err)
	}
	tok1, k := splitHeader(t, h1)
	if k != v.PublicKey() {
		t.Errorf("k = %s, want %s", k, v.PublicKey())
	}
	want := vapidClaims{Aud: "https://fcm.googleapis.com", Exp: clk.now().Add(Lifetime).Unix(), Sub: "mailto:ops@example.com"}
	if diff := cmp.Diff(want, verifyJWT(t, tok1, &key.PublicKey)); diff != "" {
		t.Errorf("claims (-want +got)\n%s", diff)
	}
	if parsed, err := jwt.ParseSigned(tok1, []jose.SignatureAlgorithm{jose.ES256}); err != nil {
		t.Fatal(err)
	} else if parsed.Claims(&newKey(t).PublicKey, &vapidClaims{}) == nil {
		t.Error("JWT verifies with another key")
	}

	// Same origin (explicit default port too): the same JWT.
	for _, ep := range []string{"https://fcm.googleapis.com/fcm/send/b", "https://FCM.googleapis.com:443/x"} {
		h, err := v.Header(ep)
		if err != nil {
			t.Fatal(err)
		}
		if h != h1 {
			t.Errorf("Header(%s) is not the cached header of its origin", ep)
		}
	}

	// Another origin: another JWT, with its aud.
	h2, err := v.Header("https://updates.push.services.mozilla.com/wpush/v2/x")
	if err != nil {
		t.Fatal(err)
	}
	tok2, _ := splitHeader(t, h2)
	if tok2 == tok1 {
		t.Error("two origins share a JWT")
	}
	if c := verifyJWT(t, tok2, &key.PublicKey); c.Aud != "https://updates.push.services.mozilla.com" {
		t.Errorf("aud = %q", c.Aud)
	}
	h3, _ := v.Header("https://127.0.0.1:8443/push/x")
	tok3, _ := splitHeader(t, h3)
	if c := verifyJWT(t, tok3, &key.PublicKey); c.Aud != "https://127.0.0.1:8443" {
		t.Errorf("aud = %q, want https://127.0.0.1:8443", c.Aud)
	}

	// Reused until Refresh before exp, then replaced.
	clk.add(Lifetime - Refresh - time.Second)
	if h, _ := v.Header("https://fcm.googleapis.com/y"); h != h1 {
		t.Error("JWT replaced before exp-Refresh")
	}
	clk.add(time.Second)
	h4, _ := v.Header("https://fcm.googleapis.com/y")
	if h4 == h1 {
		t.Fatal("JWT not replaced at exp-Refresh")
	}
	tok4, _ := splitHeader(t, h4)
	if c := verifyJWT(t, tok4, &key.PublicKey); c.Exp != clk.now().Add(Lifetime).Unix() {
		t.Errorf("new exp = %d, want %d", c.Exp, clk.now().Add(Lifetime).Unix())
	}
	if h, _ := v.Header("https://fcm.googleapis.com/z"); h != h4 {
		t.Error("renewed JWT not cached")
	}

	if _, err := v.Header("not a url"); err == nil {
		t.Error("Header of a non-URL succeeded")
	}
}

func TestVAPIDCacheBounded(t *testing.T) {
	t.Parallel()
	v := NewVAPID(newKey(t), "https://example.com/contact", nil)
	origin := func(i int) string { return fmt.Sprintf("https://h%d.push.apple.com", i) }
	first, _ := v.Header(origin(0) + "/x")
	for i := 1; i <= 2*MaxOrigins; i++ {
		if _, err := v.Header(origin(i) + "/x"); err != nil {
			t.Fatal(err)
		}
		v.mu.Lock()
		n := len(v.cache)
		v.mu.Unlock()
		if n > MaxOrigins {
			t.Fatalf("cache holds %d origins, more than %d", n, MaxOrigins)
		}
	}
	if again, _ := v.Header(origin(0) + "/x"); again == first {
		t.Error("evicted origin's JWT still served")
	}
}

func TestVAPIDConcurrent(t *testing.T) {
	t.Parallel()
	key := newKey(t)
	v := NewVAPID(key, "mailto:a@example.com", nil)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for j := range 20 {
				h, err := v.Header(fmt.Sprintf("https://h%d.notify.windows.com/w", (i+j)%80))
				if err != nil || !strings.HasPrefix(h, "vapid t=") {
					t.Errorf("Header: %q, %v", h, err)
				}
			}
		})
	}
	wg.Wait()
}

// fakeService is a plain TLS server answering pushes with whatever answer says.
type fakeService struct {
	srv    *httptest.Server
	mu     sync.Mutex
	reqs   []*http.Request
	bodies [][]byte
}

func newFake(t *testing.T, answer http.HandlerFunc) *fakeService {
	f := &fakeService{}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, r)
		f.bodies = append(f.bodies, b)
		f.mu.Unlock()
		answer(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeService) host() string { return strings.TrimPrefix(f.srv.URL, "https://") }

func TestSend(t *testing.T) {
	t.Parallel()
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		name      string
		answer    http.HandlerFunc
		want      Outcome
		wantAfter func(time.Duration) bool
		wantErr   bool
	}{
		{"201", status(201, nil), Delivered, zero, false},
		{"200", status(200, nil), Delivered, zero, false},
		{"202", status(202, nil), Delivered, zero, false},
		{"404", status(404, nil), Gone, zero, false},
		{"410", status(410, nil), Gone, zero, false},
		{"503 retry-after seconds", status(503, map[string]string{"Retry-After": "120"}), Retry,
			func(d time.Duration) bool { return d == 120*time.Second }, false},
		{"500", status(500, nil), Retry, zero, false},
		{"429 retry-after date", status(429, map[string]string{"Retry-After": date}), Retry,
			func(d time.Duration) bool { return d > 60*time.Second && d <= 90*time.Second }, false},
		{"400", status(400, nil), Rejected, zero, true},
		{"403", status(403, nil), Rejected, zero, true},
		{"413", status(413, nil), Rejected, zero, true},
		{"302", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}, Rejected, zero, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tt.answer)
			priv, sub := newUA(t)
			sub.Endpoint = f.srv.URL + "/push/abc"
			key := newKey(t)
			userClient := f.srv.Client()
			c := &Client{HTTP: userClient, VAPID: NewVAPID(key, "mailto:a@example.com", nil), Hosts: Hosts{f.host()}}
			m := Message{Payload: []byte("hello " + tt.name), TTL: 90 * time.Second, Urgency: "high", Topic: "queue-42"}

			got, after, err := c.Send(t.Context(), sub, m)
			if got != tt.want {
				t.Errorf("outcome = %v, want %v (err %v)", got, tt.want, err)
			}
			if !tt.wantAfter(after) {
				t.Errorf("retry-after = %v", after)
			}
			if (err != nil) != tt.wantErr {
				t.Errorf("err = %v, want error %v", err, tt.wantErr)
			}
			if userClient.CheckRedirect != nil {
				t.Error("Send changed the caller's http.Client")
			}

			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.reqs) != 1 {
				t.Fatalf("push service got %d requests, want 1 (redirects must not be followed)", len(f.reqs))
			}
			r := f.reqs[0]
			gotHeaders := map[string]string{}
			for _, h := range []string{"Content-Encoding", "Content-Type", "TTL", "Urgency", "Topic"} {
				gotHeaders[h] = r.Header.Get(h)
			}
			wantHeaders := map[string]string{
				"Content-Encoding": "aes128gcm", "Content-Type": "application/octet-stream",
				"TTL": "90", "Urgency": "high", "Topic": "queue-42",
			}
			if diff := cmp.Diff(wantHeaders, gotHeaders); diff != "" {
				t.Errorf("headers (-want +got)\n%s", diff)
			}
			if r.Method != http.MethodPost || r.URL.Path != "/push/abc" {
				t.Errorf("request %s %s", r.Method, r.URL.Path)
			}
			tok, k := splitHeader(t, r.Header.Get("Authorization"))
			if k != c.VAPID.PublicKey() {
				t.Errorf("k = %s", k)
			}
			if c := verifyJWT(t, tok, &key.PublicKey); c.Aud != f.srv.URL {
				t.Errorf("aud = %s, want %s", c.Aud, f.srv.URL)
			}
			plain, err := Decrypt(priv, sub.Auth, f.bodies[0])
			if err != nil {
				t.Fatal(err)
			}
			if string(plain) != string(m.Payload) {
				t.Errorf("payload = %q, want %q", plain, m.Payload)
			}
		})
	}
}

func zero(d time.Duration) bool { return d == 0 }

func status(code int, headers map[string]string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(code)
		io.WriteString(w, strings.Repeat("x", 10<<10)) // more than Send reads
	}
}

func TestSendNotSent(t *testing.T) {
	t.Parallel()
	f := newFake(t, status(201, nil))
	_, sub := newUA(t)
	sub.Endpoint = f.srv.URL + "/push/abc"
	v := NewVAPID(newKey(t), "mailto:a@example.com", nil)
	good := &Client{HTTP: f.srv.Client(), VAPID: v, Hosts: Hosts{f.host()}}
	tests := []struct {
		name   string
		client *Client
		sub    Subscription
		m      Message
		is     error
	}{
		{"host not allowed", &Client{HTTP: f.srv.Client(), VAPID: v, Hosts: Hosts{"127.0.0.1:1"}}, sub, Message{}, ErrInvalidSubscription},
		{"default hosts", &Client{HTTP: f.srv.Client(), VAPID: v}, sub, Message{}, ErrInvalidSubscription},
		{"payload too large", good, sub, Message{Payload: make([]byte, MaxPayload+1)}, ErrPayloadTooLarge},
		{"bad keys", good, Subscription{Endpoint: sub.Endpoint, P256DH: sub.P256DH, Auth: nil}, Message{}, ErrInvalidSubscription},
		{"no VAPID", &Client{HTTP: f.srv.Client(), Hosts: Hosts{f.host()}}, sub, Message{}, nil},
	}
	for _, tt := range tests {
		got, _, err := tt.client.Send(t.Context(), tt.sub, tt.m)
		if got != Rejected || err == nil {
			t.Errorf("%s: Send = %v, %v; want Rejected and an error", tt.name, got, err)
		}
		if tt.is != nil && !errors.Is(err, tt.is) {
			t.Errorf("%s: error %v is not %v", tt.name, err, tt.is)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) != 0 {
		t.Errorf("%d requests reached the push service", len(f.reqs))
	}
}

func TestSendTransportError(t *testing.T) {
	t.Parallel()
	f := newFake(t, status(201, nil))
	_, sub := newUA(t)
	sub.Endpoint = f.srv.URL + "/push/abc"
	c := &Client{HTTP: f.srv.Client(), VAPID: NewVAPID(newKey(t), "mailto:a@example.com", nil), Hosts: Hosts{f.host()}}
	f.srv.Close()
	got, _, err := c.Send(context.Background(), sub, Message{Payload: []byte("x")})
	if got != Retry || err == nil {
		t.Fatalf("Send to a closed server = %v, %v; want Retry and an error", got, err)
	}
	var ue *url.Error
	if errors.As(err, &ue) || strings.Contains(err.Error(), "/push/abc") {
		t.Errorf("error %v names the endpoint (a browser's secret, bound for the logs)", err)
	}
	var op *net.OpError
	if !errors.As(err, &op) {
		t.Errorf("error %v does not wrap the transport error", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, _, err := c.Send(ctx, sub, Message{}); got != Retry || !errors.Is(err, context.Canceled) {
		t.Errorf("Send with a canceled context = %v, %v", got, err)
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	tests := map[string]time.Duration{
		"":                              0,
		"30":                            30 * time.Second,
		" 5 ":                           5 * time.Second,
		"-1":                            0,
		"soon":                          0,
		"Mon, 07 Dec 2026 03:02:00 GMT": 2 * time.Minute,
		"Mon, 07 Dec 2026 02:00:00 GMT": 0,
	}
	got := map[string]time.Duration{}
	for v := range tests {
		got[v] = retryAfter(v, now)
	}
	if diff := cmp.Diff(tests, got); diff != "" {
		t.Errorf("retryAfter (-want +got)\n%s", diff)
	}
}
