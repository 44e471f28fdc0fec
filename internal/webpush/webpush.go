// Package webpush validates push subscriptions, encrypts payloads (RFC 8291),
// signs them with VAPID (RFC 8292) and POSTs them (RFC 8030). The reasoning
// lives in docs/design.md, "Your turn by push".
package webpush

import (
	"bytes"
	"cmp"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

const (
	// MaxEndpointLen is the longest endpoint URL, in bytes, ValidEndpoint accepts.
	MaxEndpointLen = 1024
	// MaxPayload is the longest plaintext Encrypt accepts: what fits one
	// 4096-byte record with its header, padding delimiter and tag (RFC 8291 §4).
	MaxPayload = recordSize - headerLen - 1 - tagLen

	recordSize = 4096
	saltLen    = 16
	keyLen     = 65 // uncompressed P-256 point
	authLen    = 16
	tagLen     = 16
	headerLen  = saltLen + 4 + 1 + keyLen // salt, rs, idlen, keyid = 86
	maxAnswer  = 4 << 10                  // bytes of a push service's answer read
)

var (
	// ErrInvalidSubscription marks every error about a subscription a client
	// handed in; the rest of such an error's message is safe to show it.
	ErrInvalidSubscription = errors.New("invalid push subscription")
	// ErrPayloadTooLarge is Encrypt's (and Send's) error for a payload longer than MaxPayload.
	ErrPayloadTooLarge = fmt.Errorf("webpush: payload longer than %d bytes", MaxPayload)
	// ErrDecrypt is Decrypt's error for a body it cannot decrypt.
	ErrDecrypt = errors.New("webpush: cannot decrypt push message")
)

func invalid(why string) error { return fmt.Errorf("%w: %s", ErrInvalidSubscription, why) }

// Subscription is what a browser's PushManager hands out, keys as raw bytes.
type Subscription struct {
	Endpoint string
	P256DH   []byte // the browser's ECDH P-256 public key, 65 bytes uncompressed
	Auth     []byte // the 16-byte authentication secret
}

// ParseSubscription validates the endpoint (ValidEndpoint) and the base64url keys
// of PushSubscription.toJSON(). Its errors wrap ErrInvalidSubscription.
func ParseSubscription(endpoint, p256dh, auth string, allowed Hosts) (Subscription, error) {
	if _, err := ValidEndpoint(endpoint, allowed); err != nil {
		return Subscription{}, err
	}
	pub, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(p256dh, "="))
	if _, err2 := ecdh.P256().NewPublicKey(pub); err != nil || err2 != nil {
		return Subscription{}, invalid("p256dh must be an uncompressed P-256 point in base64url")
	}
	secret, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(auth, "="))
	if err != nil || len(secret) != authLen {
		return Subscription{}, invalid("auth must be 16 bytes in base64url")
	}
	return Subscription{Endpoint: endpoint, P256DH: pub, Auth: secret}, nil
}

// Hosts is the set of push-service hosts endpoints may name: "fcm.googleapis.com"
// matches that host, ".push.apple.com" any subdomain of it, and
// "127.0.0.1:8443" exactly that host and port.
type Hosts []string

// DefaultHosts are the browsers' push services: FCM, Mozilla autopush, Apple and WNS.
var DefaultHosts = Hosts{"fcm.googleapis.com", "updates.push.services.mozilla.com",
	"web.push.apple.com", ".push.apple.com", ".notify.windows.com"}

// Allows reports whether host (a name, or host:port) equals an entry of h or,
// having no port, is a subdomain of an entry starting with a dot; case is ignored.
func (h Hosts) Allows(host string) bool {
	host = strings.ToLower(host)
	for _, e := range h {
		e = strings.ToLower(e)
		labels, under := strings.CutSuffix(host, e) // host is labels + e, labels neither empty nor with an empty label
		exact := e != "" && e[0] != '.' && host == e
		if exact || len(e) > 1 && e[0] == '.' && under && !strings.Contains("."+labels+".", "..") {
			return true
		}
	}
	return false
}

// ValidEndpoint checks an endpoint URL: https, at most MaxEndpointLen bytes, no
// userinfo or fragment, and a host allowed by h, on port 443 unless that exact
// host:port is listed (an IP literal only as an exact entry). Its errors wrap
// ErrInvalidSubscription and do not echo the endpoint.
func ValidEndpoint(raw string, h Hosts) (*url.URL, error) {
	if len(raw) > MaxEndpointLen {
		return nil, invalid("endpoint longer than 1024 bytes")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || strings.Contains(raw, "#") {
		return nil, invalid("endpoint must be an https URL without userinfo or fragment")
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" && !strings.HasSuffix(u.Host, ":") {
		port = "443"
	}
	name := port == "443" && !strings.Contains(host, ":") && net.ParseIP(host) == nil
	if port == "" || !h.Allows(net.JoinHostPort(host, port)) && !(name && h.Allows(host)) {
		return nil, invalid("endpoint host is not an allowed push service")
	}
	return u, nil
}

// Encrypt encrypts payload for sub per RFC 8291 (one aes128gcm record, a random
// salt, a fresh ephemeral key); beyond MaxPayload it returns ErrPayloadTooLarge.
func Encrypt(sub Subscription, payload []byte) ([]byte, error) {
	salt := make([]byte, saltLen)
	rand.Read(salt)
	return encrypt(sub, payload, salt, must(ecdh.P256().GenerateKey(rand.Reader)))
}

// encrypt is Encrypt with the salt and the application server's ephemeral key given.
func encrypt(sub Subscription, payload, salt []byte, ephemeral *ecdh.PrivateKey) ([]byte, error) {
	if len(payload) > MaxPayload {
		return nil, ErrPayloadTooLarge
	}
	if len(sub.Auth) != authLen {
		return nil, invalid("auth must be 16 bytes")
	}
	ua, err := ecdh.P256().NewPublicKey(sub.P256DH)
	if err != nil {
		return nil, invalid("p256dh must be an uncompressed P-256 point")
	}
	asPublic := ephemeral.PublicKey().Bytes()
	gcm, nonce := contentKeys(must(ephemeral.ECDH(ua)), sub.Auth, ua.Bytes(), asPublic, salt)
	header := binary.BigEndian.AppendUint32(bytes.Clone(salt), recordSize) // RFC 8188 §2.1: salt, rs, idlen, keyid
	header = append(append(header, keyLen), asPublic...)
	return gcm.Seal(header, nonce, append(bytes.Clone(payload), 0x02), nil), nil
}

// contentKeys derives the AES-128-GCM key and nonce of RFC 8291 §3.4 and RFC 8188 §2.2.
func contentKeys(ecdhSecret, auth, uaPublic, asPublic, salt []byte) (cipher.AEAD, []byte) {
	prk := must(hkdf.Extract(sha256.New, ecdhSecret, auth))
	ikm := must(hkdf.Expand(sha256.New, prk, "WebPush: info\x00"+string(uaPublic)+string(asPublic), 32))
	prk = must(hkdf.Extract(sha256.New, ikm, salt))
	cek := must(hkdf.Expand(sha256.New, prk, "Content-Encoding: aes128gcm\x00", 16))
	nonce := must(hkdf.Expand(sha256.New, prk, "Content-Encoding: nonce\x00", 12))
	return must(cipher.NewGCM(must(aes.NewCipher(cek)))), nonce
}

// must is for calls that cannot fail on this package's fixed sizes and valid P-256 keys.
func must[T any](v T, err error) T {
	if err != nil {
		panic("webpush: " + err.Error())
	}
	return v
}

// Decrypt is the browser's side of Encrypt: the plaintext of a one-record
// aes128gcm body, or an error wrapping ErrDecrypt.
func Decrypt(priv *ecdh.PrivateKey, auth, body []byte) ([]byte, error) {
	if priv == nil || len(auth) != authLen || len(body) < headerLen+tagLen+1 || body[saltLen+4] != keyLen ||
		uint64(len(body)-headerLen) > uint64(binary.BigEndian.Uint32(body[saltLen:])) {
		return nil, fmt.Errorf("%w: not one aes128gcm record for this key", ErrDecrypt)
	}
	asPublic := body[saltLen+5 : headerLen]
	as, err := ecdh.P256().NewPublicKey(asPublic)
	if err != nil {
		return nil, fmt.Errorf("%w: bad sender key", ErrDecrypt)
	}
	gcm, nonce := contentKeys(must(priv.ECDH(as)), auth, priv.PublicKey().Bytes(), asPublic, body[:saltLen])
	plain, err := gcm.Open(nil, nonce, body[headerLen:], nil)
	if err != nil {
		return nil, fmt.Errorf("%w: authentication failed", ErrDecrypt)
	}
	if plain, ok := bytes.CutSuffix(bytes.TrimRight(plain, "\x00"), []byte{0x02}); ok {
		return plain, nil
	}
	return nil, fmt.Errorf("%w: no last-record padding delimiter", ErrDecrypt)
}

// Outcome classifies a push service's answer.
type Outcome int

const (
	Delivered Outcome = iota // any 2xx
	Gone                     // 404 or 410: the subscription is dead; drop it
	Retry                    // 429, 5xx or a transport error: try again (after Retry-After if given)
	Rejected                 // any other answer, a redirect, or a push that could not be made
)

// Message is one push: the plaintext, its TTL (sent in whole seconds) and the
// optional Urgency and Topic headers of RFC 8030 §5, sent as given.
type Message struct {
	Payload []byte
	TTL     time.Duration
	Urgency string
	Topic   string
}

// Client sends pushes over HTTP (HTTP nil: default settings) with VAPID; the
// endpoint is re-checked against Hosts (DefaultHosts when nil) on every send.
type Client struct {
	HTTP  *http.Client
	VAPID *VAPID
	Hosts Hosts
}

// Send encrypts m for sub and POSTs it, following no redirect, and returns the
// Outcome and the answer's Retry-After (0 if none). The error is non-nil for a
// transport error (Retry), a push not made (Rejected) and a Rejected answer.
func (c *Client) Send(ctx context.Context, sub Subscription, m Message) (Outcome, time.Duration, error) {
	hosts := c.Hosts
	if hosts == nil {
		hosts = DefaultHosts
	}
	u, err := ValidEndpoint(sub.Endpoint, hosts)
	if err != nil {
		return Rejected, 0, err
	}
	if c.VAPID == nil {
		return Rejected, 0, errors.New("webpush: Client has no VAPID key")
	}
	body, err := Encrypt(sub, m.Payload)
	if err != nil {
		return Rejected, 0, err
	}
	auth, err := c.VAPID.Header(u.String())
	if err != nil {
		return Rejected, 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return Rejected, 0, fmt.Errorf("webpush: building request: %w", err)
	}
	for k, v := range map[string]string{"Content-Encoding": "aes128gcm", "Content-Type": "application/octet-stream",
		"TTL": strconv.FormatInt(int64(max(m.TTL, 0)/time.Second), 10), "Urgency": m.Urgency, "Topic": m.Topic, "Authorization": auth} {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	hc := *cmp.Or(c.HTTP, &http.Client{}) // a copy: the caller's client keeps its own CheckRedirect
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := hc.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // its message holds the endpoint, which is the browser's secret
		}
		return Retry, 0, fmt.Errorf("webpush: push service %s unreachable: %w", u.Host, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	after := retryAfter(resp.Header.Get("Retry-After"), time.Now())
	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
		return Delivered, after, nil
	case s == http.StatusNotFound || s == http.StatusGone:
		return Gone, after, nil
	case s == http.StatusTooManyRequests || s >= 500:
		return Retry, after, nil
	}
	return Rejected, after, fmt.Errorf("webpush: push service %s refused the push: %s: %q", u.Host, resp.Status, answer[:min(len(answer), 256)])
}

// retryAfter parses a Retry-After header (delay-seconds or an HTTP-date); 0 if absent or invalid.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Duration(min(max(n, 0), 1<<31)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
