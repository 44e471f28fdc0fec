package admissionpass_test

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/memstore"
)

// countingWrapper is a LocalWrapper that counts the keys it makes and
// opens: the KMS calls a KMSWrapper would make.
type countingWrapper struct {
	admissionpass.KeyWrapper
	made, opened atomic.Int64
	fail         atomic.Bool // every call fails
}

func (w *countingWrapper) NewKeyPair(ctx context.Context, encCtx map[string]string) (*ecdsa.PrivateKey, []byte, error) {
	if w.fail.Load() {
		return nil, nil, errors.New("KMS is down")
	}
	w.made.Add(1)
	return w.KeyWrapper.NewKeyPair(ctx, encCtx)
}

func (w *countingWrapper) Unwrap(ctx context.Context, wrapped []byte, encCtx map[string]string) (*ecdsa.PrivateKey, error) {
	if w.fail.Load() {
		return nil, errors.New("KMS is down")
	}
	w.opened.Add(1)
	return w.KeyWrapper.Unwrap(ctx, wrapped, encCtx)
}

func newCountingWrapper(t *testing.T) *countingWrapper {
	t.Helper()
	w, err := admissionpass.NewLocalWrapper()
	if err != nil {
		t.Fatal(err)
	}
	return &countingWrapper{KeyWrapper: w}
}

// setClock moves c to t.
func setClock(c *clock.Fake, t time.Time) { c.Advance(t.Sub(c.Now())) }

// instance is one function instance's issuer over a shared key store.
type instance struct {
	ring *admissionpass.Keyring
	iss  *admissionpass.Issuer
	wrap *countingWrapper
}

func newInstance(t *testing.T, store admissionpass.KeyStore, wrap admissionpass.KeyWrapper, clock *clock.Fake, opts ...admissionpass.KeyringOption) instance {
	t.Helper()
	cw := &countingWrapper{KeyWrapper: wrap}
	ring := admissionpass.NewKeyring(store, cw, append([]admissionpass.KeyringOption{admissionpass.WithKeyringClock(clock.Now)}, opts...)...)
	return instance{ring: ring, iss: admissionpass.NewSetIssuer(issuerURL, ring), wrap: cw}
}

// kids are the kids of a JWKS document.
func kids(t *testing.T, doc []byte) []string {
	t.Helper()
	var set struct {
		Keys []struct {
			Kid string `json:"kid"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(doc, &set); err != nil {
		t.Fatalf("JWKS: %v", err)
	}
	var out []string
	for _, k := range set.Keys {
		out = append(out, k.Kid)
	}
	slices.Sort(out)
	return out
}

// sign signs a pass at the clock's now and checks it with jwx against the
// JWKS the same instance publishes; it returns the pass's kid.
func (in instance) sign(t *testing.T, clock *clock.Fake) string {
	t.Helper()
	a := admission
	a.AdmittedAt = clock.Now().Truncate(time.Second)
	a.ExpiresAt = a.AdmittedAt.Add(10 * time.Minute)
	pass, err := in.iss.Issue(t.Context(), a)
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}
	doc, err := in.iss.JWKS(t.Context())
	if err != nil {
		t.Fatalf("JWKS: %v", err)
	}
	return verifyWithJWX(t, doc, pass, a.AdmittedAt.Add(time.Second)).Kid
}

// TestKeyringSchedule follows two instances through a rotation: the first
// pass makes the slot's key, the next one is published a lead before it
// signs, the old one leaves the JWKS once every pass it signed expired,
// and each instance opens each key once.
func TestKeyringSchedule(t *testing.T) {
	store := memstore.New()
	wrap := newCountingWrapper(t).KeyWrapper
	start := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC) // 9 h into a slot of 24 h
	clock := clock.NewFake(start)
	const retain = 2 * time.Hour // passes of up to 2 h: the next slot's lead is far
	a, b := newInstance(t, store, wrap, clock, admissionpass.WithRetain(retain)), newInstance(t, store, wrap, clock, admissionpass.WithRetain(retain))

	first := a.sign(t, clock)
	if got := b.sign(t, clock); got != first {
		t.Fatalf("instance b signs with %s, a with %s: want one key", got, first)
	}
	if a.wrap.made.Load()+b.wrap.made.Load() != 1 || a.wrap.opened.Load() != 0 || b.wrap.opened.Load() != 1 {
		t.Fatalf("keys made %d+%d, opened %d+%d: want one made (by a), opened once by b", a.wrap.made.Load(), b.wrap.made.Load(), a.wrap.opened.Load(), b.wrap.opened.Load())
	}

	slotEnd := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		name       string
		at         time.Time
		wantSigner string // "first" or "second"
		wantJWKS   int
	}{
		{"before the lead", slotEnd.Add(-admissionpass.DefaultLead - time.Minute), "first", 1},
		{"within the lead: the next key published", slotEnd.Add(-admissionpass.DefaultLead + 2*time.Minute), "first", 2},
		{"the next slot", slotEnd.Add(time.Second), "second", 2},
		{"within the retention", slotEnd.Add(retain - time.Minute), "second", 2},
		{"past the retention", slotEnd.Add(retain + 2*time.Minute), "second", 1},
	}
	var second string
	for _, s := range steps {
		setClock(clock, s.at)
		for _, in := range []instance{a, b} {
			kid := in.sign(t, clock)
			if second == "" && kid != first {
				second = kid
			}
			want := map[string]string{"first": first, "second": second}[s.wantSigner]
			if kid != want || want == "" {
				t.Errorf("%s: signs with %s, want the %s key (%s)", s.name, kid, s.wantSigner, want)
			}
			doc, err := in.iss.JWKS(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if got := kids(t, doc); len(got) != s.wantJWKS {
				t.Errorf("%s: JWKS holds %v, want %d keys", s.name, got, s.wantJWKS)
			}
		}
	}
	if made := a.wrap.made.Load() + b.wrap.made.Load(); made != 2 {
		t.Errorf("%d keys made over one rotation, want 2", made)
	}
	for name, in := range map[string]instance{"a": a, "b": b} {
		if calls := in.wrap.made.Load() + in.wrap.opened.Load(); calls != 2 {
			t.Errorf("instance %s made or opened a key %d times for 2 keys, want 2", name, calls)
		}
	}
}

// TestKeyringFirstKeyOnce: instances that all start without a key make one
// between them, and all sign with it.
func TestKeyringFirstKeyOnce(t *testing.T) {
	store := memstore.New()
	wrap := newCountingWrapper(t).KeyWrapper
	clock := clock.NewFake(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	const n = 8
	ins := make([]instance, n)
	got := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		ins[i] = newInstance(t, store, wrap, clock)
		wg.Go(func() { got[i], errs[i] = ins[i].iss.KeyID(t.Context()) })
	}
	wg.Wait()
	var made int64
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("instance %d: %v", i, errs[i])
		}
		made += ins[i].wrap.made.Load()
	}
	if made != 1 {
		t.Errorf("%d keys made by %d instances starting at once, want 1", made, n)
	}
	for i := range n {
		if got[i] != got[0] {
			t.Errorf("instance %d signs with %s, instance 0 with %s", i, got[i], got[0])
		}
	}
}

// TestKeyringRevokeAndRotate: a revoked signing key leaves the JWKS and a
// new key signs at once; a rotation publishes a key that signs a lead
// later; an unknown kid is ErrKeyNotFound.
func TestKeyringRevokeAndRotate(t *testing.T) {
	store := memstore.New()
	wrap := newCountingWrapper(t).KeyWrapper
	clock := clock.NewFake(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	a, b := newInstance(t, store, wrap, clock), newInstance(t, store, wrap, clock)
	old := a.sign(t, clock)
	b.sign(t, clock)

	repl, made, err := a.ring.Revoke(t.Context(), old)
	if err != nil || !made || repl.KeyID == old || !repl.SignFrom.Equal(clock.Now()) {
		t.Fatalf("Revoke: %+v %v %v, want a new key signing from now", repl, made, err)
	}
	if got := a.sign(t, clock); got != repl.KeyID {
		t.Errorf("after the revoke a signs with %s, want %s", got, repl.KeyID)
	}
	doc, _ := a.iss.JWKS(t.Context())
	if slices.Contains(kids(t, doc), old) {
		t.Errorf("the revoked key %s is still in the JWKS %s", old, doc)
	}
	// The other instance learns it on its next read.
	setClock(clock, clock.Now().Add(admissionpass.DefaultRefresh+time.Second))
	if got := b.sign(t, clock); got != repl.KeyID {
		t.Errorf("a refresh after the revoke, b signs with %s, want %s", got, repl.KeyID)
	}

	next, err := a.ring.Rotate(t.Context())
	if err != nil || !next.SignFrom.Equal(clock.Now().Add(admissionpass.DefaultLead)) {
		t.Fatalf("Rotate: %+v %v, want a key signing a lead from now", next, err)
	}
	if got := a.sign(t, clock); got != repl.KeyID {
		t.Errorf("right after the rotation a signs with %s, want %s until the lead passes", got, repl.KeyID)
	}
	states, err := a.ring.Keys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var gotStates []string
	for _, s := range states {
		gotStates = append(gotStates, s.State)
	}
	if diff := cmp.Diff([]string{"next", "signing", "revoked"}, gotStates); diff != "" {
		t.Errorf("key states, newest first (-want +got):\n%s", diff)
	}
	setClock(clock, next.SignFrom)
	if got := a.sign(t, clock); got != next.KeyID {
		t.Errorf("a lead after the rotation a signs with %s, want %s", got, next.KeyID)
	}
	if _, _, err := a.ring.Revoke(t.Context(), "no-such-kid"); !errors.Is(err, admissionpass.ErrKeyNotFound) {
		t.Errorf("Revoke of an unknown kid: %v, want ErrKeyNotFound", err)
	}
}

// TestKeyringUnavailable: without KMS, no key can be made: signing fails
// with ErrKeysUnavailable, and succeeds once KMS is back.
func TestKeyringUnavailable(t *testing.T) {
	store := memstore.New()
	clock := clock.NewFake(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	a := newInstance(t, store, newCountingWrapper(t).KeyWrapper, clock)
	a.wrap.fail.Store(true)
	if _, err := a.iss.KeyID(t.Context()); !errors.Is(err, admissionpass.ErrKeysUnavailable) {
		t.Fatalf("KeyID with KMS down: %v, want ErrKeysUnavailable", err)
	}
	a.wrap.fail.Store(false)
	setClock(clock, clock.Now().Add(10*time.Second))
	a.sign(t, clock)
}

// failingReads is a key store whose reads fail while fail is set.
type failingReads struct {
	admissionpass.KeyStore
	fail atomic.Bool
}

func (s *failingReads) PassKeys(ctx context.Context) ([]admissionpass.StoredKey, error) {
	if s.fail.Load() {
		return nil, errors.New("the table is throttled")
	}
	return s.KeyStore.PassKeys(ctx)
}

// TestKeyringStoreFault: once an instance has read the key set, a store
// that fails its later reads does not stop it signing.
func TestKeyringStoreFault(t *testing.T) {
	store := &failingReads{KeyStore: memstore.New()}
	clock := clock.NewFake(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	a := newInstance(t, store, newCountingWrapper(t).KeyWrapper, clock)
	first := a.sign(t, clock)
	store.fail.Store(true)
	for range 3 {
		clock.Advance(admissionpass.DefaultRefresh + time.Second)
		if got := a.sign(t, clock); got != first {
			t.Fatalf("with the store failing, signs with %s, want %s", got, first)
		}
	}
	b := newInstance(t, store, newCountingWrapper(t).KeyWrapper, clock)
	if _, err := b.iss.KeyID(t.Context()); !errors.Is(err, admissionpass.ErrKeysUnavailable) {
		t.Errorf("a new instance with the store failing: %v, want ErrKeysUnavailable", err)
	}
}

// TestKeyringJWKSFirst: on a new store the JWKS makes the first key, and
// the first pass is signed with it.
func TestKeyringJWKSFirst(t *testing.T) {
	clock := clock.NewFake(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	a := newInstance(t, memstore.New(), newCountingWrapper(t).KeyWrapper, clock)
	doc, err := a.iss.JWKS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := kids(t, doc)
	if len(got) != 1 {
		t.Fatalf("a new stack's JWKS holds %v, want one key", got)
	}
	if kid := a.sign(t, clock); kid != got[0] {
		t.Errorf("the first pass is signed with %s, want %s", kid, got[0])
	}
}
