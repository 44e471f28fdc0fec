package httpapi_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/clocktest"
	"github.com/example/waitingroom/internal/testing/fixtures"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/simclock"
)

// The kids of the keys a seqWrapper makes first, second and third: the
// events name them.
const (
	kid1 = "PkmVDDHQGu0IsdZAeEubbcKQ-lmi9-unR51IrmUSJzk"
	kid2 = "TXdoUAegjwJUSvQU8TcLPUN-vx22qHyYITvcF531TOs"
	kid3 = "KEqnHBj-WTuGWny_FtXm7OoU-anEHyBaDV8WjylkRa0"
	// unknownKID is well formed, and no key's.
	unknownKID = "unknownKeyFixture00000000000000000000000000"
)

// seqWrapper is a KeyWrapper whose keys are the same in every run: the
// nth key it makes is testKey(n), "wrapped" as n.
type seqWrapper struct {
	mu sync.Mutex
	n  uint64
}

func (w *seqWrapper) NewKeyPair(context.Context, map[string]string) (*ecdsa.PrivateKey, []byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	return testKey(w.n), binary.BigEndian.AppendUint64(nil, w.n), nil
}

func (w *seqWrapper) Unwrap(_ context.Context, wrapped []byte, _ map[string]string) (*ecdsa.PrivateKey, error) {
	if len(wrapped) != 8 {
		return nil, errors.New("not a seqWrapper's key")
	}
	return testKey(binary.BigEndian.Uint64(wrapped)), nil
}

// testKey is the nth P-256 key of the tests: its scalar is SHA-256 of
// its name.
func testKey(n uint64) *ecdsa.PrivateKey {
	scalar := sha256.Sum256(fmt.Appendf(nil, "waiting room test key %d", n))
	k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), scalar[:])
	if err != nil {
		panic(err)
	}
	return k
}

// TestKIDs holds the constants to the keys they name: their RFC 7638
// thumbprints.
func TestKIDs(t *testing.T) {
	for i, want := range []string{kid1, kid2, kid3} {
		tp, err := (&jose.JSONWebKey{Key: &testKey(uint64(i + 1)).PublicKey}).Thumbprint(crypto.SHA256)
		if err != nil {
			t.Fatal(err)
		}
		if got := base64.RawURLEncoding.EncodeToString(tp); got != want {
			t.Errorf("key %d: kid %s, want %s", i+1, got, want)
		}
	}
}

// eventKeyring is the keyring the sample events meet: kept in a store of
// its own, at t0, made with seqWrapper, whose first key (kid1) already
// signs, as after a first pass.
func eventKeyring(t testing.TB) *admissionpass.Keyring {
	t.Helper()
	ring := admissionpass.NewKeyring(memstore.New(), &seqWrapper{}, admissionpass.WithKeyringClock(clocktest.NewFrozen(t0)))
	if _, err := ring.SigningKey(t.Context()); err != nil {
		t.Fatal(err)
	}
	return ring
}

// panicKeyStore panics on every call, as a bug would.
type panicKeyStore struct{ admissionpass.KeyStore }

// brokenKeyStore fails every read of the keys with errSecret.
type brokenKeyStore struct{ admissionpass.KeyStore }

func (brokenKeyStore) PassKeys(context.Context) ([]admissionpass.StoredKey, error) {
	return nil, errSecret
}

// faultyStore is a memstore whose reads of the signing keys fail with
// errSecret while fail is set.
type faultyStore struct {
	*memstore.Store
	fail atomic.Bool
}

func (s *faultyStore) PassKeys(ctx context.Context) ([]admissionpass.StoredKey, error) {
	if s.fail.Load() {
		return nil, errSecret
	}
	return s.Store.PassKeys(ctx)
}

// keysUnavailable is the answer to a key route while the keys cannot be
// read.
const keysUnavailable = `{"code":"KEYS_UNAVAILABLE","message":"The signing keys are briefly unavailable; retry shortly."}`

// TestKeyRoutes drives the keyring's admin routes on an App over an
// in-memory store, its keyring at t0 with seqWrapper's keys, through the
// local handler (the bearer secret): the list, a rotation, the revocation
// of the key that signs and of others, what the JWKS then publishes and
// which key signs, the refusals, and a store fault. One info line, with
// its actor, logs each rotation and revocation.
func TestKeyRoutes(t *testing.T) {
	cfg, err := config.FromEnv(func(string) string { return "" }, false)
	if err != nil {
		t.Fatal(err)
	}
	store := &faultyStore{Store: memstore.New()}
	var logs bytes.Buffer
	a := app.New(cfg, store, slog.New(slog.NewJSONHandler(&logs, nil)),
		// The keyring stays at t0; the service's clock moves on as it
		// sleeps (the change delay of a bypass issuance).
		app.WithKeyring("https://queue.example.com", nil, &seqWrapper{}, admissionpass.WithKeyringClock(clocktest.NewFrozen(t0))),
		app.WithServiceOptions(queue.WithClock(simclock.NewFake(t0))))
	h := checked(t, a.LocalHandler("s3cret"))
	const (
		next1 = `{"keyId":"` + kid2 + `","state":"next","signFrom":"2026-05-19T10:15:00.123Z","createdAt":"2026-05-19T10:00:00.123Z"}`
		slot  = `{"keyId":"` + kid1 + `","state":"signing","signFrom":"2026-05-19T00:00:00.000Z","createdAt":"2026-05-19T10:00:00.123Z"}`
		repl  = `{"keyId":"` + kid3 + `","state":"signing","signFrom":"2026-05-19T10:00:00.123Z","createdAt":"2026-05-19T10:00:00.123Z"}`
		gone1 = `{"keyId":"` + kid1 + `","state":"revoked","signFrom":"2026-05-19T00:00:00.000Z","createdAt":"2026-05-19T10:00:00.123Z","revokedAt":"2026-05-19T10:00:00.123Z"}`
	)
	steps := []struct {
		name, method, path, body string
		status                   int
		want                     string   // the exact JSON; "" to skip
		jwks                     []string // for the JWKS: its kids, sorted
		signer                   string   // for bypass passes: the kid of their key
		fail                     bool     // the store fails the key reads
	}{
		{name: "list before any pass", method: "GET", path: api.KeysPath, status: 200, want: `{"rotationSeconds":86400,"keys":[]}`},
		{name: "create a program", method: "PUT", path: "/api/v1/admin/programs/gala", body: `{"paused":true}`, status: 201},
		{name: "a first pass makes the slot's key", method: "POST", path: "/api/v1/admin/programs/gala/passes", body: `{"count":1,"validSeconds":60}`, status: 200, signer: kid1},
		{name: "list: one signing key", method: "GET", path: api.KeysPath, status: 200, want: `{"rotationSeconds":86400,"keys":[` + slot + `]}`},
		{name: "rotate", method: "POST", path: api.KeysPath, status: 201, want: `{"key":` + next1 + `}`},
		{name: "rotate again: the pending key", method: "POST", path: api.KeysPath, status: 201, want: `{"key":` + next1 + `}`},
		{name: "list: next and signing", method: "GET", path: api.KeysPath, status: 200, want: `{"rotationSeconds":86400,"keys":[` + next1 + `,` + slot + `]}`},
		{name: "JWKS: both", method: "GET", path: api.JWKSPath, status: 200, jwks: []string{kid1, kid2}},
		{name: "the signing key still signs", method: "POST", path: "/api/v1/admin/programs/gala/passes", body: `{"count":1,"validSeconds":60}`, status: 200, signer: kid1},
		{name: "revoke the signing key", method: "DELETE", path: "/api/v1/admin/keys/" + kid1, status: 200, want: `{"revoked":"` + kid1 + `","replacement":` + repl + `}`},
		{name: "list after the revoke", method: "GET", path: api.KeysPath, status: 200, want: `{"rotationSeconds":86400,"keys":[` + next1 + `,` + repl + `,` + gone1 + `]}`},
		{name: "JWKS: without the revoked key", method: "GET", path: api.JWKSPath, status: 200, jwks: []string{kid3, kid2}},
		{name: "the replacement signs", method: "POST", path: "/api/v1/admin/programs/gala/passes", body: `{"count":1,"validSeconds":60}`, status: 200, signer: kid3},
		{name: "revoke it again", method: "DELETE", path: "/api/v1/admin/keys/" + kid1, status: 200, want: `{"revoked":"` + kid1 + `"}`},
		{name: "revoke the next key", method: "DELETE", path: "/api/v1/admin/keys/" + kid2, status: 200, want: `{"revoked":"` + kid2 + `"}`},
		{name: "JWKS: the signing key alone", method: "GET", path: api.JWKSPath, status: 200, jwks: []string{kid3}},
		{name: "unknown key", method: "DELETE", path: "/api/v1/admin/keys/" + unknownKID, status: 404, want: `{"code":"KEY_NOT_FOUND","message":"No signing key has this id."}`},
		{name: "not a key id", method: "DELETE", path: "/api/v1/admin/keys/not-a-key-id", status: 400, want: invalidKeyID},
		{name: "a kid too long", method: "DELETE", path: "/api/v1/admin/keys/" + kid1 + "A", status: 400, want: invalidKeyID},
		{name: "a kid in standard base64", method: "DELETE", path: "/api/v1/admin/keys/" + strings.ReplaceAll(kid1, "-", "+"), status: 400, want: invalidKeyID},
		{name: "a kid not in canonical base64url", method: "DELETE", path: "/api/v1/admin/keys/" + kid1[:42] + "l", status: 400, want: invalidKeyID},
		{name: "list: store fault", method: "GET", path: api.KeysPath, status: 503, want: keysUnavailable, fail: true},
		{name: "rotate: store fault", method: "POST", path: api.KeysPath, status: 503, want: keysUnavailable, fail: true},
		{name: "revoke: store fault", method: "DELETE", path: "/api/v1/admin/keys/" + kid3, status: 503, want: keysUnavailable, fail: true},
		{name: "the store is back", method: "GET", path: api.KeysPath, status: 200},
	}
	for _, s := range steps {
		store.fail.Store(s.fail)
		r := httptest.NewRequest(s.method, s.path, strings.NewReader(s.body))
		r.Header.Set("Authorization", "Bearer s3cret")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		body := w.Body.String()
		if w.Code != s.status {
			t.Errorf("%s: status %d, want %d (body %s)", s.name, w.Code, s.status, body)
			continue
		}
		if s.want != "" {
			var got, want any
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("%s: body is not JSON: %v: %s", s.name, err, body)
			}
			if err := json.Unmarshal([]byte(s.want), &want); err != nil {
				t.Fatalf("%s: bad want: %v", s.name, err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: body (-want +got):\n%s", s.name, diff)
			}
		}
		if s.jwks != nil {
			if diff := cmp.Diff(s.jwks, jwksKIDs(t, body)); diff != "" {
				t.Errorf("%s: the JWKS's kids (-want +got):\n%s", s.name, diff)
			}
		}
		if s.signer != "" {
			if diff := cmp.Diff(s.signer, passKID(t, body)); diff != "" {
				t.Errorf("%s: the pass's kid (-want +got):\n%s", s.name, diff)
			}
		}
		if strings.HasPrefix(s.path, api.KeysPath) {
			if got := w.Header().Get("Cache-Control"); got != "no-store" {
				t.Errorf("%s: Cache-Control %q, want no-store", s.name, got)
			}
			if got := w.Header().Get("Retry-After"); (got != "") != (w.Code == 503) {
				t.Errorf("%s: Retry-After %q on a %d, want one on a 503 only", s.name, got, w.Code)
			}
		}
		if strings.Contains(body, "10.0.0.12") || strings.Contains(body, "arn:") {
			t.Errorf("%s: the body leaks the store's error: %s", s.name, body)
		}
	}

	// One info line a change of the keyring, with its actor.
	type line struct{ Level, Msg, Action, Actor, KeyID, Replacement string }
	var changes []line
	for l := range strings.Lines(logs.String()) {
		var e line
		if json.Unmarshal([]byte(l), &e) == nil && strings.HasSuffix(e.Action, "-key") {
			changes = append(changes, e)
		}
	}
	want := []line{
		{"INFO", "admin change", "rotate-key", httpapi.LocalActor, kid2, ""},
		{"INFO", "admin change", "rotate-key", httpapi.LocalActor, kid2, ""},
		{"INFO", "admin change", "revoke-key", httpapi.LocalActor, kid1, kid3},
		{"INFO", "admin change", "revoke-key", httpapi.LocalActor, kid1, ""},
		{"INFO", "admin change", "revoke-key", httpapi.LocalActor, kid2, ""},
	}
	if diff := cmp.Diff(want, changes); diff != "" {
		t.Errorf("the keyring's log lines (-want +got):\n%s", diff)
	}
	if !strings.Contains(logs.String(), "10.0.0.12") {
		t.Errorf("the store faults are not logged with their cause: %s", logs.String())
	}
}

const invalidKeyID = `{"code":"INVALID_KEY_ID","message":"The key id must be a keyId as the key list shows it: 43 characters of A-Z, a-z, 0-9, '-' and '_'."}`

// jwksKIDs is the sorted kids of a JWKS document.
func jwksKIDs(t *testing.T, doc string) []string {
	t.Helper()
	var set struct{ Keys []struct{ KID string } }
	if err := json.Unmarshal([]byte(doc), &set); err != nil {
		t.Fatalf("JWKS: %v: %s", err, doc)
	}
	var kids []string
	for _, k := range set.Keys {
		kids = append(kids, k.KID)
	}
	slices.Sort(kids)
	return kids
}

// passKID is the kid in the header of the first pass of a bypass answer.
func passKID(t *testing.T, body string) string {
	t.Helper()
	var b api.BypassPasses
	if err := json.Unmarshal([]byte(body), &b); err != nil || len(b.Passes) == 0 {
		t.Fatalf("no passes (%v): %s", err, body)
	}
	head, _, _ := strings.Cut(b.Passes[0], ".")
	raw, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		t.Fatal(err)
	}
	var h struct{ KID string }
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatal(err)
	}
	return h.KID
}

// TestKeyRoutesNoKeyring: with fixed keys (no keyring), every key route's
// sample event answers 409 NO_KEYRING through the Lambda adapter, whatever
// the kid.
func TestKeyRoutesNoKeyring(t *testing.T) {
	h := checkedLambda(t, httpapi.Lambda(httpapi.New(newService(t), httpapi.IAMAuth(), httpapi.WithLogger(discard), httpapi.WithPasses(passIssuer(t, "")))))
	const want = `{"code":"NO_KEYRING","message":"Passes are signed with fixed key files (PASS_KEY_FILE), not with a keyring: there are no keys to list, rotate or revoke; a fixed key is rotated by a restart."}`
	for _, event := range []string{"admin-keys", "admin-keys-rotate", "admin-keys-revoke", "admin-error-unknown-key", "admin-error-invalid-key-id"} {
		t.Run(event, func(t *testing.T) {
			resp := invoke(t, h, fixtures.Event(t, event))
			if resp.StatusCode != http.StatusConflict {
				t.Errorf("status %d, want 409", resp.StatusCode)
			}
			assertJSONEqual(t, resp.Body, want)
		})
	}
}

// TestKeyRoutesStoreFault: while the key store fails, every key route's
// sample event answers 503 KEYS_UNAVAILABLE with Retry-After through the
// Lambda adapter, its cause logged with the request id and never shown;
// a bug in the store is a 500.
func TestKeyRoutesStoreFault(t *testing.T) {
	var logs bytes.Buffer
	broken := admissionpass.NewKeyring(brokenKeyStore{}, &seqWrapper{})
	h := checkedLambda(t, httpapi.Lambda(httpapi.New(newService(t), httpapi.IAMAuth(),
		httpapi.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))), httpapi.WithKeyring(broken))))
	for _, event := range []string{"admin-keys", "admin-keys-rotate", "admin-keys-revoke", "admin-error-unknown-key"} {
		t.Run(event, func(t *testing.T) {
			resp := invoke(t, h, fixtures.Event(t, event))
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Headers["Retry-After"] == "" {
				t.Errorf("status %d, Retry-After %q; want 503 with one", resp.StatusCode, resp.Headers["Retry-After"])
			}
			assertJSONEqual(t, resp.Body, keysUnavailable)
		})
	}
	if !strings.Contains(logs.String(), "10.0.0.12") || !strings.Contains(logs.String(), `"requestId":"JKJaXmPLvHcKEYL="`) {
		t.Errorf("key store faults must be logged with their cause and request id; logs: %s", logs.String())
	}

	buggy := checkedLambda(t, httpapi.Lambda(httpapi.New(newService(t), httpapi.IAMAuth(), httpapi.WithLogger(discard),
		httpapi.WithKeyring(admissionpass.NewKeyring(panicKeyStore{}, &seqWrapper{})))))
	if resp := invoke(t, buggy, fixtures.Event(t, "admin-keys")); resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("a bug: status %d, want 500 (%s)", resp.StatusCode, resp.Body)
	}
}
