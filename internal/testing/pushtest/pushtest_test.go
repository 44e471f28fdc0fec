package pushtest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/webpush"
)

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

type fixture struct {
	svc    *Service
	key    *ecdsa.PrivateKey
	client *webpush.Client
}

func setup(t *testing.T) fixture {
	t.Helper()
	key := newKey(t)
	svc := New(t, &key.PublicKey)
	return fixture{svc, key, &webpush.Client{
		HTTP:  svc.Client(),
		VAPID: webpush.NewVAPID(key, "mailto:ops@example.com", nil),
		Hosts: webpush.Hosts{svc.Host()},
	}}
}

func TestSendDelivered(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a, b := f.svc.Subscribe(), f.svc.Subscribe()
	if a.Endpoint == b.Endpoint {
		t.Fatal("two subscriptions share an endpoint")
	}
	msgs := []webpush.Message{
		{Payload: []byte(`{"turn":"now"}`), TTL: time.Hour, Urgency: "high", Topic: "turn"},
		{Payload: nil, TTL: 0},
		{Payload: bytes.Repeat([]byte("z"), webpush.MaxPayload), TTL: 1500 * time.Millisecond, Urgency: "low"},
	}
	for _, m := range msgs {
		got, after, err := f.client.Send(t.Context(), a.Subscription, m)
		if got != webpush.Delivered || after != 0 || err != nil {
			t.Fatalf("Send = %v, %v, %v; want delivered (rejections %+v)", got, after, err, f.svc.Rejections())
		}
	}
	if got, _, err := f.client.Send(t.Context(), b.Subscription, webpush.Message{Payload: []byte("b"), TTL: time.Minute}); got != webpush.Delivered {
		t.Fatalf("Send to b = %v, %v", got, err)
	}

	want := []Push{
		{Endpoint: a.Endpoint, Payload: []byte(`{"turn":"now"}`), TTL: time.Hour, Urgency: "high", Topic: "turn"},
		{Endpoint: a.Endpoint, Payload: []byte{}},
		{Endpoint: a.Endpoint, Payload: bytes.Repeat([]byte("z"), webpush.MaxPayload), TTL: time.Second, Urgency: "low"},
	}
	if diff := cmp.Diff(want, f.svc.Received(a.Endpoint)); diff != "" {
		t.Errorf("Received(a) (-want +got)\n%s", diff)
	}
	if diff := cmp.Diff([]Push{{Endpoint: b.Endpoint, Payload: []byte("b"), TTL: time.Minute}}, f.svc.Received(b.Endpoint)); diff != "" {
		t.Errorf("Received(b) (-want +got)\n%s", diff)
	}
	counts := map[string]int{}
	for _, p := range f.svc.All() {
		counts[p.Endpoint]++
	}
	if diff := cmp.Diff(map[string]int{a.Endpoint: 3, b.Endpoint: 1}, counts); diff != "" {
		t.Errorf("All() counts (-want +got)\n%s", diff)
	}
	if r := f.svc.Rejections(); len(r) != 0 {
		t.Errorf("rejections: %+v", r)
	}
}

func TestGoneAndFailNext(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a, b := f.svc.Subscribe(), f.svc.Subscribe()
	m := webpush.Message{Payload: []byte("x"), TTL: time.Minute}

	f.svc.FailNext(2, http.StatusServiceUnavailable)
	for range 2 {
		if got, after, err := f.client.Send(t.Context(), a.Subscription, m); got != webpush.Retry || after != time.Second || err != nil {
			t.Errorf("Send during FailNext(503) = %v, %v, %v; want retry after 1s", got, after, err)
		}
	}
	if got, _, _ := f.client.Send(t.Context(), a.Subscription, m); got != webpush.Delivered {
		t.Errorf("Send after FailNext = %v, want delivered", got)
	}
	f.svc.FailNext(1, http.StatusBadRequest)
	if got, _, err := f.client.Send(t.Context(), a.Subscription, m); got != webpush.Rejected || err == nil {
		t.Errorf("Send during FailNext(400) = %v, %v; want rejected", got, err)
	}

	f.svc.Gone(b.Endpoint)
	if got, _, err := f.client.Send(t.Context(), b.Subscription, m); got != webpush.Gone || err != nil {
		t.Errorf("Send to a gone endpoint = %v, %v; want gone", got, err)
	}
	unknown := a.Subscription
	unknown.Endpoint = strings.TrimSuffix(a.Endpoint, a.Endpoint[len(a.Endpoint)-4:]) + "AAAA"
	if got, _, _ := f.client.Send(t.Context(), unknown, m); got != webpush.Gone {
		t.Errorf("Send to an unknown endpoint = %v, want gone", got)
	}
	if got := len(f.svc.Received(a.Endpoint)); got != 1 {
		t.Errorf("Received(a) has %d pushes, want 1 (failed pushes are not recorded)", got)
	}
	if got := len(f.svc.All()); got != 1 {
		t.Errorf("All() has %d pushes, want 1", got)
	}
}

// TestVAPIDRefused sends pushes whose Authorization is wrong and expects 403s
// with the reason recorded.
func TestVAPIDRefused(t *testing.T) {
	t.Parallel()
	f := setup(t)
	sub := f.svc.Subscribe()
	other := newKey(t)
	past := func() time.Time { return time.Now().Add(-13 * time.Hour) }
	future := func() time.Time { return time.Now().Add(13 * time.Hour) }
	goodK := f.client.VAPID.PublicKey()
	headerFor := func(v *webpush.VAPID, endpoint string) string {
		h, err := v.Header(endpoint)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	withK := func(h, k string) string { tok, _, _ := strings.Cut(h, ", k="); return tok + ", k=" + k }

	tests := []struct {
		name   string
		auth   string
		reason string
	}{
		{"no header", "", "Authorization is not vapid"},
		{"bearer", "Bearer x", "Authorization is not vapid"},
		{"no k", strings.Split(headerFor(f.client.VAPID, sub.Endpoint), ",")[0], "Authorization is not vapid"},
		{"another key", headerFor(webpush.NewVAPID(other, "mailto:a@example.com", nil), sub.Endpoint), "k is not the expected"},
		{"another key, claiming ours", withK(headerFor(webpush.NewVAPID(other, "mailto:a@example.com", nil), sub.Endpoint), goodK), "JWT signature"},
		{"wrong aud", headerFor(f.client.VAPID, "https://fcm.googleapis.com/fcm/send/x"), "JWT aud"},
		{"wrong port in aud", headerFor(f.client.VAPID, "https://127.0.0.1:1/push/x"), "JWT aud"},
		{"expired", headerFor(webpush.NewVAPID(f.key, "mailto:a@example.com", past), sub.Endpoint), "JWT expired"},
		{"exp too far", headerFor(webpush.NewVAPID(f.key, "mailto:a@example.com", future), sub.Endpoint), "more than 24h"},
		{"bad sub", headerFor(webpush.NewVAPID(f.key, "ops@example.com", nil), sub.Endpoint), "JWT sub"},
		{"no sub", headerFor(webpush.NewVAPID(f.key, "", nil), sub.Endpoint), "JWT sub"},
		{"not a JWT", "vapid t=abc.def, k=" + goodK, "JWT:"},
	}
	for _, tt := range tests {
		body, err := webpush.Encrypt(sub.Subscription, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		if got := post(t, f.svc, sub.Endpoint, tt.auth, "aes128gcm", "60", body); got != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403", tt.name, got)
		}
	}
	rej := f.svc.Rejections()
	if len(rej) != len(tests) {
		t.Fatalf("%d rejections recorded, want %d: %+v", len(rej), len(tests), rej)
	}
	for i, tt := range tests {
		if rej[i].Status != http.StatusForbidden || rej[i].Endpoint != sub.Endpoint || !strings.Contains(rej[i].Reason, tt.reason) {
			t.Errorf("%s: rejection %+v, want 403 with reason containing %q", tt.name, rej[i], tt.reason)
		}
	}
	if n := len(f.svc.All()); n != 0 {
		t.Errorf("%d pushes recorded", n)
	}

	// Through webpush.Client: a push signed by another key is Rejected.
	c := *f.client
	c.VAPID = webpush.NewVAPID(other, "mailto:a@example.com", nil)
	if got, _, err := c.Send(t.Context(), sub.Subscription, webpush.Message{Payload: []byte("x")}); got != webpush.Rejected || err == nil {
		t.Errorf("Send signed by another key = %v, %v; want rejected", got, err)
	}
}

func TestRequestRefused(t *testing.T) {
	t.Parallel()
	f := setup(t)
	sub := f.svc.Subscribe()
	auth, err := f.client.VAPID.Header(sub.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	good, err := webpush.Encrypt(sub.Subscription, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	tampered := bytes.Clone(good)
	tampered[len(tampered)-1] ^= 1
	tests := []struct {
		name     string
		encoding string
		ttl      string
		body     []byte
		want     int
	}{
		{"aesgcm", "aesgcm", "60", good, http.StatusUnsupportedMediaType},
		{"no encoding", "", "60", good, http.StatusUnsupportedMediaType},
		{"no TTL", "aes128gcm", "", good, http.StatusBadRequest},
		{"bad TTL", "aes128gcm", "-1", good, http.StatusBadRequest},
		{"tampered", "aes128gcm", "60", tampered, http.StatusBadRequest},
		{"too large", "aes128gcm", "60", make([]byte, 4097), http.StatusRequestEntityTooLarge},
		{"good", "aes128gcm", "60", good, http.StatusCreated},
	}
	for _, tt := range tests {
		if got := post(t, f.svc, sub.Endpoint, auth, tt.encoding, tt.ttl, tt.body); got != tt.want {
			t.Errorf("%s: status %d, want %d", tt.name, got, tt.want)
		}
	}
	if got := len(f.svc.Rejections()); got != len(tests)-1 {
		t.Errorf("%d rejections, want %d", got, len(tests)-1)
	}
	if diff := cmp.Diff([]Push{{Endpoint: sub.Endpoint, Payload: []byte("x"), TTL: time.Minute}}, f.svc.Received(sub.Endpoint)); diff != "" {
		t.Errorf("Received (-want +got)\n%s", diff)
	}
}

// post sends one push by hand and returns the status, checking a 201's Location.
func post(t *testing.T, s *Service, endpoint, auth, encoding, ttl string, body []byte) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	if ttl != "" {
		req.Header.Set("TTL", ttl)
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusCreated && !strings.HasPrefix(resp.Header.Get("Location"), s.srv.URL+"/") {
		t.Errorf("201 with Location %q", resp.Header.Get("Location"))
	}
	return resp.StatusCode
}

func TestSubJSON(t *testing.T) {
	t.Parallel()
	f := setup(t)
	sub := f.svc.Subscribe()
	var js struct {
		Endpoint       string
		ExpirationTime *int64
		Keys           struct{ P256DH, Auth string }
	}
	raw := sub.JSON()
	var generic map[string]any
	if err := json.Unmarshal([]byte(raw), &generic); err != nil {
		t.Fatal(err)
	}
	if v, ok := generic["expirationTime"]; !ok || v != nil {
		t.Errorf("expirationTime = %v, %v; want present and null", v, ok)
	}
	if err := json.Unmarshal([]byte(raw), &js); err != nil {
		t.Fatal(err)
	}
	parsed, err := webpush.ParseSubscription(js.Endpoint, js.Keys.P256DH, js.Keys.Auth, webpush.Hosts{f.svc.Host()})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sub.Subscription, parsed); diff != "" {
		t.Errorf("ParseSubscription(JSON()) (-want +got)\n%s", diff)
	}
	if _, err := webpush.ValidEndpoint(sub.Endpoint, webpush.DefaultHosts); !errors.Is(err, webpush.ErrInvalidSubscription) {
		t.Errorf("the service's endpoint passes DefaultHosts: %v", err)
	}
	if got, want := f.svc.srv.URL, "https://"+f.svc.Host(); got != want {
		t.Errorf("Origin() = %s, want %s", got, want)
	}
}
