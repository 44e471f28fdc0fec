package admissionpass_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/google/go-cmp/cmp"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/testing/await"
	"github.com/example/waitingroom/internal/testing/clocktest"
	"github.com/example/waitingroom/internal/testing/kmstest"
	"github.com/example/waitingroom/internal/testing/storetest"
	"github.com/example/waitingroom/internal/tools/localkeys"
	"github.com/example/waitingroom/internal/tools/simclock"
)

// TestMemoryKeyStore holds MemoryKeyStore to KeyStore's contract, and its
// DropExpired to the keys' expiry.
func TestMemoryKeyStore(t *testing.T) {
	storetest.PassKeys(t, localkeys.NewKeyStore())

	s := localkeys.NewKeyStore()
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	k := admissionpass.StoredKey{SignFrom: at, KeyID: "kid", Expires: at.Add(time.Hour)}
	if ok, err := s.ClaimPassKey(t.Context(), at, "claim", at, at); !ok || err != nil {
		t.Fatalf("ClaimPassKey: %v %v", ok, err)
	}
	if ok, err := s.PutPassKey(t.Context(), k, "claim"); !ok || err != nil {
		t.Fatalf("PutPassKey: %v %v", ok, err)
	}
	for _, step := range []struct {
		now  time.Time
		want int
	}{{k.Expires, 1}, {k.Expires.Add(time.Millisecond), 0}} {
		s.DropExpired(step.now)
		if keys, err := s.PassKeys(t.Context()); err != nil || len(keys) != step.want {
			t.Errorf("after DropExpired(%v): %d keys %v, want %d", step.now, len(keys), err, step.want)
		}
	}
}

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
	w, err := localkeys.NewWrapper()
	if err != nil {
		t.Fatal(err)
	}
	return &countingWrapper{KeyWrapper: w}
}

// setClock moves c to t.
func setClock(c *simclock.Fake, t time.Time) { c.Advance(t.Sub(c.Now())) }

// instance is one function instance's issuer over a shared key store.
type instance struct {
	ring *admissionpass.Keyring
	iss  *admissionpass.Issuer
	wrap *countingWrapper
}

func newInstance(t *testing.T, store admissionpass.KeyStore, wrap admissionpass.KeyWrapper, clock clock.Clock, opts ...admissionpass.KeyringOption) instance {
	t.Helper()
	cw := &countingWrapper{KeyWrapper: wrap}
	ring := admissionpass.NewKeyring(store, cw, append([]admissionpass.KeyringOption{admissionpass.WithKeyringClock(clock)}, opts...)...)
	return instance{ring: ring, iss: admissionpass.NewSetIssuer(issuerURL, ring), wrap: cw}
}

// setup is a key store, a wrapper shared by the instances, a clock at
// start and a first instance.
func setup(t *testing.T, start time.Time) (*localkeys.KeyStore, admissionpass.KeyWrapper, *simclock.Fake, instance) {
	t.Helper()
	store, wrap, clock := localkeys.NewKeyStore(), newCountingWrapper(t).KeyWrapper, simclock.NewFake(start)
	return store, wrap, clock, newInstance(t, store, wrap, clock)
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
func (in instance) sign(t *testing.T, clock *simclock.Fake) string {
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
	store := localkeys.NewKeyStore()
	wrap := newCountingWrapper(t).KeyWrapper
	start := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC) // 9 h into a slot of 24 h
	clock := simclock.NewFake(start)
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
		// Made 13 min before its slot, the next key is published a whole
		// lead before it signs: the first key signs 2 min more.
		{"the next slot, the next key published less than a lead", slotEnd.Add(time.Second), "first", 2},
		{"the next slot", slotEnd.Add(2*time.Minute + time.Second), "second", 2},
		// The first key stopped signing when the second started (2 min
		// past its slot): it is published the retention after that.
		{"within the retention", slotEnd.Add(2*time.Minute + retain - time.Minute), "second", 2},
		{"past the retention", slotEnd.Add(2*time.Minute + retain + time.Minute), "second", 1},
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
// between them, and all sign with it. Every instance claims the slot before
// any claim is answered; the maker stores its key only once the others
// wait for it, on the keyring's clock.
func TestKeyringFirstKeyOnce(t *testing.T) {
	const n = 8
	store := &firstKeyStore{KeyStore: localkeys.NewKeyStore(), claims: await.Barrier{N: n}, put: make(chan struct{})}
	wrap := newCountingWrapper(t).KeyWrapper
	clk := clocktest.NewManual(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	ins := make([]instance, n)
	got := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		ins[i] = newInstance(t, store, wrap, clk)
		wg.Go(func() { got[i], errs[i] = ins[i].iss.KeyID(t.Context()) })
	}
	// The n-1 that lost the claim sleep until their next read; the maker's
	// key is then stored, and their next read finds it.
	if err := clk.BlockUntilContext(t.Context(), n-1); err != nil {
		t.Fatal(err)
	}
	close(store.put)
	if err := store.stored.Wait(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
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

// firstKeyStore holds its first claims until all have arrived, and every
// key until put is closed.
type firstKeyStore struct {
	admissionpass.KeyStore
	claims await.Barrier
	put    chan struct{}
	stored await.Counter
}

func (s *firstKeyStore) ClaimPassKey(ctx context.Context, signFrom time.Time, claim string, now, staleBefore time.Time) (bool, error) {
	if _, err := s.claims.Arrive(ctx); err != nil {
		return false, err
	}
	return s.KeyStore.ClaimPassKey(ctx, signFrom, claim, now, staleBefore)
}

func (s *firstKeyStore) PutPassKey(ctx context.Context, k admissionpass.StoredKey, claim string) (bool, error) {
	select {
	case <-s.put:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	defer s.stored.Add()
	return s.KeyStore.PutPassKey(ctx, k, claim)
}

// TestKeyringRevokeAndRotate: a revoked signing key leaves the JWKS and a
// new key signs at once; a rotation publishes a key that signs a lead
// later; an unknown kid is ErrKeyNotFound.
func TestKeyringRevokeAndRotate(t *testing.T) {
	store := localkeys.NewKeyStore()
	wrap := newCountingWrapper(t).KeyWrapper
	clock := simclock.NewFake(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
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
	store := localkeys.NewKeyStore()
	clock := simclock.NewFake(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
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
	store := &failingReads{KeyStore: localkeys.NewKeyStore()}
	clock := simclock.NewFake(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
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
	clock := simclock.NewFake(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	a := newInstance(t, localkeys.NewKeyStore(), newCountingWrapper(t).KeyWrapper, clock)
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

// plant stores k in its slot as a writer of the table could, bypassing
// the keyring.
func plant(t *testing.T, store admissionpass.KeyStore, k admissionpass.StoredKey) {
	t.Helper()
	claim := "planted-" + k.KeyID
	if ok, err := store.ClaimPassKey(t.Context(), k.SignFrom, claim, k.Created, k.Created.Add(-time.Minute)); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if ok, err := store.PutPassKey(t.Context(), k, claim); err != nil || !ok {
		t.Fatalf("put: %v %v", ok, err)
	}
}

// TestKeyringRefusesPlantedKeys: a key written to the table by anyone but
// its maker is never published nor used: a public key that its wrapped
// private key does not hold, and a well-wrapped key for a slot years
// ahead.
func TestKeyringRefusesPlantedKeys(t *testing.T) {
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	store, wrap, clock, a := setup(t, now)
	good := a.sign(t, clock)

	attackerDER, attackerKID := attackerKey(t)
	// A key for the next slot: the attacker's public half, junk for the
	// private one.
	next := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	plant(t, store, admissionpass.StoredKey{SignFrom: next, KeyID: attackerKID, Public: attackerDER, Wrapped: []byte("junk"), Created: now})
	// A well-wrapped key (its maker could call KMS) for a slot in 2100.
	priv, wrapped, err := wrap.NewKeyPair(t.Context(), map[string]string{"purpose": admissionpass.EncryptionPurpose, "signFrom": "4102444800000"})
	if err != nil {
		t.Fatal(err)
	}
	farDER, _ := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	far := thumbprint(t, &priv.PublicKey)
	plant(t, store, admissionpass.StoredKey{SignFrom: time.UnixMilli(4102444800000).UTC(), KeyID: far, Public: farDER, Wrapped: wrapped, Created: now})

	// Before the planted slot both sign with the good key; once in it,
	// the junk stops the rotation (a table writer can stop the signing,
	// as it can delete the queue) but is never trusted.
	for _, at := range []time.Time{now.Add(2 * time.Minute), next.Add(-time.Minute), next.Add(time.Hour)} {
		setClock(clock, at)
		b := newInstance(t, store, wrap, clock) // a cold start
		for name, in := range map[string]instance{"warm": a, "cold": b} {
			doc, err := in.iss.JWKS(t.Context())
			if err != nil {
				t.Fatalf("%v %s: JWKS: %v", at, name, err)
			}
			if got := kids(t, doc); slices.Contains(got, attackerKID) || slices.Contains(got, far) || !slices.Contains(got, good) {
				t.Errorf("%v, %s instance: the JWKS %v publishes a planted key, or not the good one %s", at, name, got, good)
			}
			if at.After(next) {
				continue
			}
			if kid := in.sign(t, clock); kid != good {
				t.Errorf("%v, %s instance: signs with %s, want the good key %s", at, name, kid, good)
			}
		}
	}
}

// TestKeyringRevokeWhileKMSDown: a revoke of the signing key whose
// replacement cannot be made leaves no key signing (never an older one),
// and the next request once KMS is back makes the replacement.
func TestKeyringRevokeWhileKMSDown(t *testing.T) {
	start := time.Date(2026, 12, 2, 0, 5, 0, 0, time.UTC)
	_, _, clock, a := setup(t, start)
	first := a.sign(t, clock)
	// The next day: a second key signs, the first is still published.
	setClock(clock, start.Add(24*time.Hour-20*time.Minute))
	a.sign(t, clock)
	setClock(clock, start.Add(24*time.Hour))
	second := a.sign(t, clock)
	if second == first {
		t.Fatal("no rotation")
	}
	a.wrap.fail.Store(true)
	if _, _, err := a.ring.Revoke(t.Context(), second); err == nil {
		t.Fatal("Revoke with KMS down made a replacement")
	}
	if _, err := a.iss.Issue(t.Context(), admission); err == nil {
		t.Fatal("with the signing key revoked and no replacement, a pass was signed (with an older key)")
	}
	a.wrap.fail.Store(false)
	setClock(clock, clock.Now().Add(10*time.Second))
	got := a.sign(t, clock)
	if got == first || got == second {
		t.Errorf("after KMS is back signs with %s, want a new key (first %s, revoked %s)", got, first, second)
	}
}

// TestKeyringNoRequestInTheLead: with no request in the lead before a
// slot (a sale at midnight, its crowd polling with nothing to sign), the
// old key signs a lead past its slot while the new one is published, and
// never after; days later a new key signs at once.
func TestKeyringNoRequestInTheLead(t *testing.T) {
	_, _, clock, a := setup(t, time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	first := a.sign(t, clock)
	midnight := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	setClock(clock, midnight.Add(time.Minute))
	if got := a.sign(t, clock); got != first {
		t.Errorf("a minute past the slot, with the new key just made, signs with %s, want the old key %s until the new one is a lead old", got, first)
	}
	setClock(clock, midnight.Add(time.Minute+admissionpass.DefaultLead))
	second := a.sign(t, clock)
	if second == first {
		t.Errorf("a lead after the new key was made, still signs with the old key")
	}
	// Three days without a request: the old keys may not sign.
	setClock(clock, midnight.Add(72*time.Hour+time.Minute))
	if got := a.sign(t, clock); got == first || got == second {
		t.Errorf("three days later signs with an old key %s", got)
	}
}

// TestKeyringOpenFailureBackoff: a key that cannot be opened is tried
// again once retryMaking has passed, not on every signature.
func TestKeyringOpenFailureBackoff(t *testing.T) {
	store, wrap, clock, a := setup(t, time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	b := newInstance(t, store, wrap, clock)
	a.sign(t, clock)
	b.wrap.fail.Store(true)
	for range 100 {
		if _, err := b.iss.Issue(t.Context(), admission); !errors.Is(err, admissionpass.ErrKeysUnavailable) {
			t.Fatalf("Issue with KMS down: %v, want ErrKeysUnavailable", err)
		}
	}
	b.wrap.fail.Store(false)
	if _, err := b.iss.Issue(t.Context(), admission); err == nil {
		t.Error("right after KMS came back, an open was tried within the back-off")
	}
	setClock(clock, clock.Now().Add(6*time.Second))
	b.sign(t, clock)
	if got := b.wrap.opened.Load(); got != 1 {
		t.Errorf("%d opens, want 1", got)
	}
}

// panickyReads is a key store whose first read panics.
type panickyReads struct {
	admissionpass.KeyStore
	panicked atomic.Bool
}

func (s *panickyReads) PassKeys(ctx context.Context) ([]admissionpass.StoredKey, error) {
	if s.panicked.CompareAndSwap(false, true) {
		panic("a store bug")
	}
	return s.KeyStore.PassKeys(ctx)
}

// TestKeyringReadPanic: a read that panics leaves the keyring able to read
// again, instead of every later call waiting for it.
func TestKeyringReadPanic(t *testing.T) {
	store := &panickyReads{KeyStore: localkeys.NewKeyStore()}
	clock := simclock.NewFake(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	a := newInstance(t, store, newCountingWrapper(t).KeyWrapper, clock)
	func() {
		defer func() { _ = recover() }()
		_, _ = a.iss.KeyID(t.Context())
	}()
	if !store.panicked.Load() {
		t.Fatal("the read did not panic")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := a.iss.KeyID(ctx); err != nil {
		t.Fatalf("after a read that panicked: %v", err)
	}
}

// TestKeyringColdStartOpensOneKey: a day after a rotation, a cold
// instance that only signs opens the one key that signs (one KMS call),
// however many passes; serving the JWKS opens the previous key too.
func TestKeyringColdStartOpensOneKey(t *testing.T) {
	start := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	store, wrap, clock, a := setup(t, start)
	a.sign(t, clock)
	setClock(clock, time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC).Add(-admissionpass.DefaultLead+time.Minute))
	a.sign(t, clock) // makes the next key
	setClock(clock, time.Date(2026, 12, 3, 1, 0, 0, 0, time.UTC))
	cold := newInstance(t, store, wrap, clock)
	for range 100 {
		if _, err := cold.iss.Issue(t.Context(), admission); err != nil {
			t.Fatal(err)
		}
	}
	if got := cold.wrap.opened.Load(); got != 1 {
		t.Errorf("a cold instance signing 100 passes opened %d keys, want 1", got)
	}
	doc, err := cold.iss.JWKS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got, opened := kids(t, doc), cold.wrap.opened.Load(); len(got) != 2 || opened != 2 {
		t.Errorf("its JWKS holds %v after %d opens, want the previous key too, opened once", got, opened)
	}
}

// TestKeyringRotationShortensTheOldKey: after a rotation, the old key
// stays published the retention after the new one started signing, not
// after its own slot; a key stored for a slot days ahead is listed as next
// but neither published nor signing.
func TestKeyringRotationShortensTheOldKey(t *testing.T) {
	start := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	const retain = 2 * time.Hour
	store, wrap, clock, _ := setup(t, start)
	a := newInstance(t, store, wrap, clock, admissionpass.WithRetain(retain))
	old := a.sign(t, clock)
	k, err := a.ring.Rotate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	setClock(clock, k.SignFrom.Add(retain+time.Minute)) // 3 h 16 min in: the old slot lasts to midnight
	doc, err := a.iss.JWKS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := kids(t, doc); slices.Contains(got, old) || a.sign(t, clock) != k.KeyID {
		t.Errorf("the retention after the rotated key started, the JWKS holds %v: want the new key %s alone", got, k.KeyID)
	}
	far := time.Date(2026, 12, 9, 0, 0, 0, 0, time.UTC)
	priv, wrapped, err := wrap.NewKeyPair(t.Context(), map[string]string{"purpose": admissionpass.EncryptionPurpose, "signFrom": fmt.Sprint(far.UnixMilli())})
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	farKID := thumbprint(t, &priv.PublicKey)
	plant(t, store, admissionpass.StoredKey{SignFrom: far, KeyID: farKID, Public: der, Wrapped: wrapped, Created: clock.Now()})
	setClock(clock, clock.Now().Add(admissionpass.DefaultRefresh+time.Second))
	states, err := a.ring.Keys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(states) == 0 || states[0].KeyID != farKID || states[0].State != "next" {
		t.Errorf("keys %+v: want the key stored for a week ahead first, as next", states)
	}
	doc, _ = a.iss.JWKS(t.Context())
	if slices.Contains(kids(t, doc), farKID) {
		t.Error("a key for a slot a week ahead is published")
	}
}

// keyStates are the keys' states as "kid state", newest first.
func keyStates(t *testing.T, ring *admissionpass.Keyring) []string {
	t.Helper()
	states, err := ring.Keys(t.Context())
	if err != nil {
		t.Fatalf("Keys: %v", err)
	}
	var out []string
	for _, s := range states {
		out = append(out, s.KeyID+" "+s.State)
	}
	return out
}

// TestKeyringKeysShowTheRealSigner: a key planted with a wrapped half
// that does not open, newer than the key that signs and old enough to
// sign, is listed as unusable, and the key that really signs as signing;
// a cold instance that cannot open any key answers ErrKeysUnavailable
// rather than a list it cannot tell.
func TestKeyringKeysShowTheRealSigner(t *testing.T) {
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	store, wrap, clock, a := setup(t, now)
	good := a.sign(t, clock)

	der, planted := attackerKey(t)
	plant(t, store, admissionpass.StoredKey{SignFrom: now.Add(time.Minute), KeyID: planted, Public: der,
		Wrapped: []byte("garbage"), Created: now.Add(-admissionpass.DefaultLead)})
	setClock(clock, now.Add(admissionpass.DefaultRefresh+time.Minute))

	want := []string{planted + " unusable", good + " signing"}
	if diff := cmp.Diff(want, keyStates(t, a.ring)); diff != "" {
		t.Errorf("key states, newest first (-want +got):\n%s", diff)
	}
	if got := a.sign(t, clock); got != good {
		t.Errorf("signs with %s, want the key listed as signing %s", got, good)
	}

	b := newInstance(t, store, wrap, clock)
	b.wrap.fail.Store(true)
	if _, err := b.ring.Keys(t.Context()); !errors.Is(err, admissionpass.ErrKeysUnavailable) {
		t.Errorf("Keys with KMS down on a cold instance: %v, want ErrKeysUnavailable", err)
	}
}

// TestKeyringRotateWhilePending: rotations while the key of an earlier
// one has not started signing return that key, so ten rotations within
// the lead add one key to the store and the JWKS; once it signs, or once
// it is revoked, a rotation makes a new key.
func TestKeyringRotateWhilePending(t *testing.T) {
	store, _, clock, a := setup(t, time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	first := a.sign(t, clock)
	var pending admissionpass.StoredKey
	for i := range 10 {
		k, err := a.ring.Rotate(t.Context())
		if err != nil {
			t.Fatalf("rotation %d: %v", i, err)
		}
		if i == 0 {
			pending = k
		} else if k.KeyID != pending.KeyID {
			t.Errorf("rotation %d made %s, want the pending key %s", i, k.KeyID, pending.KeyID)
		}
		clock.Advance(admissionpass.DefaultLead / 12) // ten rotations within the lead
	}
	stored, err := store.PassKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 2 {
		t.Errorf("after ten rotations the store holds %d keys, want 2 (the signer and one rotated key)", len(stored))
	}
	doc, err := a.iss.JWKS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{first, pending.KeyID}
	slices.Sort(want)
	if diff := cmp.Diff(want, kids(t, doc)); diff != "" {
		t.Errorf("JWKS kids (-want +got):\n%s", diff)
	}

	setClock(clock, pending.SignFrom)
	if got := a.sign(t, clock); got != pending.KeyID {
		t.Fatalf("from its signFrom signs with %s, want the rotated key %s", got, pending.KeyID)
	}
	second, err := a.ring.Rotate(t.Context())
	if err != nil || second.KeyID == pending.KeyID || !second.SignFrom.Equal(clock.Now().Add(admissionpass.DefaultLead)) {
		t.Fatalf("rotation once the rotated key signs: %+v %v, want a new key signing a lead from now", second, err)
	}
	if _, _, err := a.ring.Revoke(t.Context(), second.KeyID); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	third, err := a.ring.Rotate(t.Context())
	if err != nil || third.KeyID == second.KeyID {
		t.Errorf("rotation after the pending key was revoked: %+v %v, want a new key", third, err)
	}
}

// attackerKey is a P-256 public key no keyring made: its DER and its kid.
func attackerKey(t *testing.T) ([]byte, string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return der, thumbprint(t, &k.PublicKey)
}

// countingKMS is one instance's KMS client, counting the keys it makes
// and opens by slot (the encryption context's signFrom).
type countingKMS struct {
	admissionpass.KMSWrapAPI
	mu           sync.Mutex
	made, opened map[string]int
}

func (c *countingKMS) GenerateDataKeyPair(ctx context.Context, in *kms.GenerateDataKeyPairInput, optFns ...func(*kms.Options)) (*kms.GenerateDataKeyPairOutput, error) {
	c.mu.Lock()
	c.made[in.EncryptionContext["signFrom"]]++
	c.mu.Unlock()
	return c.KMSWrapAPI.GenerateDataKeyPair(ctx, in, optFns...)
}

func (c *countingKMS) Decrypt(ctx context.Context, in *kms.DecryptInput, optFns ...func(*kms.Options)) (*kms.DecryptOutput, error) {
	c.mu.Lock()
	c.opened[in.EncryptionContext["signFrom"]]++
	c.mu.Unlock()
	return c.KMSWrapAPI.Decrypt(ctx, in, optFns...)
}

// kmsInstance is one function instance: its keyring over the shared store,
// wrapped by the KMS key through its own counting client, and its issuer.
type kmsInstance struct {
	kms *countingKMS
	iss *admissionpass.Issuer
}

func newKMSInstances(n int, store admissionpass.KeyStore, client admissionpass.KMSWrapAPI, keyID string, opts ...admissionpass.KeyringOption) []kmsInstance {
	out := make([]kmsInstance, n)
	for i := range out {
		c := &countingKMS{KMSWrapAPI: client, made: map[string]int{}, opened: map[string]int{}}
		ring := admissionpass.NewKeyring(store, admissionpass.NewKMSWrapper(c, keyID), opts...)
		out[i] = kmsInstance{kms: c, iss: admissionpass.NewSetIssuer(issuerURL, ring)}
	}
	return out
}

// kmsCalls is the proxy's count of the wrapper's two operations.
func kmsCalls(p *kmstest.Proxy) (made, opened, total int64) {
	return p.Calls("GenerateDataKeyPair"), p.Calls("Decrypt"), p.Total()
}

// signedPass is a pass and the instant to verify it at.
type signedPass struct {
	pass string
	at   time.Time
}

// issueAt signs n passes on in at a.AdmittedAt, with 4 goroutines.
func issueAt(t *testing.T, in kmsInstance, n int, at time.Time) []signedPass {
	t.Helper()
	const signers = 4
	out := make([]signedPass, n)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for s := range signers {
		wg.Go(func() {
			for i := s; i < n; i += signers {
				pass, err := in.iss.Issue(context.Background(), passAdmission(int64(i+1), at))
				if err != nil {
					if failed.Add(1) == 1 {
						t.Errorf("Issue: %v", err)
					}
					continue
				}
				out[i] = signedPass{pass: pass, at: at.Add(time.Second)}
			}
		})
	}
	wg.Wait()
	return out
}

// passAdmission is an admission of ticket at at, with a fresh token id
// and a window of 10 min.
func passAdmission(ticket int64, at time.Time) admissionpass.Admission {
	var id [16]byte
	_, _ = rand.Read(id[:])
	at = at.Truncate(time.Millisecond)
	return admissionpass.Admission{ProgramID: admission.ProgramID, TokenID: base64.RawURLEncoding.EncodeToString(id[:]),
		Ticket: ticket, AdmittedAt: at, ExpiresAt: at.Add(10 * time.Minute)}
}

// verifyAllWithJWX verifies every pass with jwx against the JWKS document
// doc, each at its instant, across all cores. It returns how many passes
// each kid signed, and reports every failure (the first few) and every
// jti seen twice.
func verifyAllWithJWX(t *testing.T, doc []byte, passes []signedPass) map[string]int {
	t.Helper()
	set, err := jwk.Parse(doc)
	if err != nil {
		t.Fatalf("jwx cannot parse the JWKS: %v\n%s", err, doc)
	}
	workers := runtime.GOMAXPROCS(0)
	kids := make([]map[string]int, workers)
	jtis := make([][]string, workers)
	var failed atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		kids[w] = map[string]int{}
		wg.Go(func() {
			for i := w; i < len(passes); i += workers {
				p := passes[i]
				tok, err := jwt.ParseString(p.pass, jwt.WithKeySet(set), jwt.WithValidate(true), jwt.WithIssuer(issuerURL),
					jwt.WithAudience(admission.ProgramID), jwt.WithClock(jwt.ClockFunc(func() time.Time { return p.at })))
				var msg *jws.Message
				if err == nil {
					msg, err = jws.Parse([]byte(p.pass))
				}
				if err != nil {
					if failed.Add(1) <= 3 {
						t.Errorf("jwx refuses pass %d: %v", i, err)
					}
					continue
				}
				kid, _ := msg.Signatures()[0].ProtectedHeaders().KeyID()
				jti, _ := tok.JwtID()
				kids[w][kid]++
				jtis[w] = append(jtis[w], jti)
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Errorf("jwx refused %d of %d passes", n, len(passes))
	}
	out := map[string]int{}
	for _, k := range kids {
		for kid, n := range k {
			out[kid] += n
		}
	}
	seen := make(map[string]bool, len(passes))
	for _, js := range jtis {
		for _, j := range js {
			if seen[j] {
				t.Errorf("jti %s on two passes", j)
			}
			seen[j] = true
		}
	}
	return out
}

// TestKeyringKMSCallsAcrossInstances: four instances' issuers over one
// store sign thousands of passes, concurrently, across a rotation, with
// keys KMS makes and opens (moto behind kmstest's proxy). The KMS calls
// are exactly the keys made plus, for each key, the instances that opened
// it: each instance makes or opens each key once, whatever its signature
// count. Every pass verifies with jwx.
func TestKeyringKMSCallsAcrossInstances(t *testing.T) {
	proxy := kmstest.NewProxy(t)
	client := kmstest.ClientFor(t, proxy.URL())
	keyID := kmstest.NewWrapKey(t, client)
	store := localkeys.NewKeyStore()
	slot := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC) // a slot's start at a rotation of 1 h
	clk := simclock.NewFake(slot)
	const n, perPhase = 4, 400
	ins := newKMSInstances(n, store, client, keyID, admissionpass.WithRotation(time.Hour), admissionpass.WithKeyringClock(clk))
	made0, opened0, total0 := kmsCalls(proxy)

	// 10 min into the slot (its key made on demand); 15 min before the
	// next (the lead: the next key is made and published a whole lead
	// before it signs); 1 min into the next (it signs). In each phase one
	// instance signs first, so that it makes the phase's new key (the race
	// to make one is TestKeyringFirstKeyOnce's), then all sign at once.
	var passes []signedPass
	for phase, at := range []time.Duration{10 * time.Minute, 45 * time.Minute, 61 * time.Minute} {
		setClock(clk, slot.Add(at))
		passes = append(passes, issueAt(t, ins[phase%n], 1, clk.Now())...)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, in := range ins {
			wg.Go(func() {
				ps := issueAt(t, in, perPhase, clk.Now())
				mu.Lock()
				passes = append(passes, ps...)
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	if t.Failed() {
		t.FailNow()
	}

	keys, err := store.PassKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 {
		t.Fatalf("%d keys stored, want the two slots'", len(keys))
	}
	made, opened, total := kmsCalls(proxy)
	made, opened, total = made-made0, opened-opened0, total-total0
	var wantOpened int64
	for _, k := range keys {
		slotMs := fmt.Sprint(k.SignFrom.UnixMilli())
		makers := 0
		for i, in := range ins {
			m, o := in.kms.made[slotMs], in.kms.opened[slotMs]
			if m+o != 1 {
				t.Errorf("instance %d made key %s %d times and opened it %d times, want once in all", i, k.KeyID, m, o)
			}
			makers += m
			wantOpened += int64(o)
		}
		if makers != 1 {
			t.Errorf("key %s made by %d instances, want 1", k.KeyID, makers)
		}
	}
	if made != int64(len(keys)) || opened != wantOpened || total != made+opened {
		t.Errorf("KMS calls: %d GenerateDataKeyPair, %d Decrypt, %d in all; want %d (the keys made), %d (the instances that opened them), their sum",
			made, opened, total, len(keys), wantOpened)
	}
	if wantOpened != int64(len(keys)*(n-1)) {
		t.Errorf("%d openings, want every key opened by each instance but its maker (%d)", wantOpened, len(keys)*(n-1))
	}
	t.Logf("%d passes on %d instances: %d GenerateDataKeyPair, %d Decrypt", len(passes), n, made, opened)

	doc, err := ins[0].iss.JWKS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	kids := verifyAllWithJWX(t, doc, passes)
	// Both slots signed before the second key did: 2 × (n × perPhase + 1);
	// the second, n × perPhase + 1.
	want := map[string]int{keys[0].KeyID: 2 * (n*perPhase + 1), keys[1].KeyID: n*perPhase + 1}
	if !mapsEqual(kids, want) {
		t.Errorf("passes by kid %v, want %v", kids, want)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

var (
	signRate      = flag.Float64("sign.rate", 1000, "TestKeyringSigningRate: signatures a second across the instances")
	signFor       = flag.Duration("sign.for", 0, "TestKeyringSigningRate: how long to sign at -sign.rate, on the real clock; 0: -sign.rate passes as fast as they go, on a clock fixed mid-slot")
	signInstances = flag.Int("sign.instances", 4, "TestKeyringSigningRate: keyrings standing for function instances, over one store")
	signOut       = flag.String("sign.out", "", "TestKeyringSigningRate: write the summary as JSON to this file")
)

// signSummary is what TestKeyringSigningRate measured.
type signSummary struct {
	Instances      int              `json:"instances"`
	TargetPerSec   float64          `json:"targetPerSecond"`
	Seconds        float64          `json:"seconds"`
	Signed         int              `json:"signed"`
	Failed         int64            `json:"failed"`
	Verified       int              `json:"verified"`
	Kids           map[string]int   `json:"kids"`
	AchievedPerSec float64          `json:"achievedPerSecond"`
	PerSecond      []int64          `json:"perSecond"`
	LateP50Ms      float64          `json:"lateP50Ms"`
	LateP99Ms      float64          `json:"lateP99Ms"`
	LateMaxMs      float64          `json:"lateMaxMs"`
	KMS            map[string]int64 `json:"kms"`
	PerInstance    []map[string]int `json:"perInstance"`
	CPUPerSignUs   float64          `json:"cpuPerSignatureUs"`
	Load1          string           `json:"load1"`
}

// TestKeyringSigningRate is the signing path of issue 22's measurement
// alone (docs/benchmarks.md): -sign.instances keyrings over one
// MemoryKeyStore, their keys made and opened by KMS (moto behind kmstest's
// proxy, which counts the calls), sign -sign.rate passes a second for
// -sign.for, paced to a schedule on the real clock; then jwx verifies
// every pass. By default (make test) -sign.rate passes are signed as fast
// as they go on a keyring clock fixed mid-slot, and the test checks the
// KMS calls and the passes, never a rate; the measurement:
//
//	go test ./internal/admissionpass -run TestKeyringSigningRate -v -timeout 30m -args -sign.rate 10000 -sign.for 60s -sign.instances 4
func TestKeyringSigningRate(t *testing.T) {
	if *signRate <= 0 || *signFor < 0 {
		t.Fatal("-sign.rate must be above 0 and -sign.for not below")
	}
	proxy := kmstest.NewProxy(t)
	client := kmstest.ClientFor(t, proxy.URL())
	keyID := kmstest.NewWrapKey(t, client)
	store := localkeys.NewKeyStore()
	paced := *signFor > 0
	var clk clock.Clock = clock.Real{}
	if !paced {
		clk = simclock.NewFake(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)) // mid-slot: one key signs
	}
	ins := newKMSInstances(*signInstances, store, client, keyID, admissionpass.WithKeyringClock(clk))
	if !paced {
		// One instance makes the key before all sign (the race to make it
		// is TestKeyringFirstKeyOnce's).
		if _, err := ins[0].iss.KeyID(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	before := map[string]int64{}
	ops := []string{"GenerateDataKeyPair", "Decrypt", "Encrypt", "Sign", "GetPublicKey", "CreateKey", "ListKeys"}
	for _, op := range ops {
		before[op] = proxy.Calls(op)
	}
	total0 := proxy.Total()

	total := int(*signRate)
	every := time.Duration(0)
	if paced {
		total, every = int(*signRate*signFor.Seconds()), time.Duration(float64(time.Second) / *signRate)
	}
	passes := make([]signedPass, total)
	late := make([]time.Duration, total)
	done := make([]time.Duration, total) // completion, from the start
	// A hang guard: the run stops at three times its length.
	ctx, cancel := context.WithTimeout(t.Context(), 3**signFor+time.Minute)
	defer cancel()
	var failed atomic.Int64
	var next atomic.Int64
	workers := 2 * len(ins)
	cpu0 := processCPU()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		in := ins[w%len(ins)]
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= total {
					return
				}
				due := start.Add(time.Duration(i) * every)
				if d := time.Until(due); d > 0 {
					time.Sleep(d) // the measurement's schedule (-sign.for), not a product delay
				}
				now := clk.Now()
				pass, err := in.iss.Issue(ctx, passAdmission(int64(i+1), now))
				if err != nil {
					if failed.Add(1) <= 3 {
						t.Errorf("Issue: %v", err)
					}
					continue
				}
				end := time.Now()
				passes[i] = signedPass{pass: pass, at: now.Add(time.Second)}
				late[i], done[i] = end.Sub(due), end.Sub(start)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	if err := ctx.Err(); err != nil {
		t.Fatalf("the signing did not end within its bound: %v", err)
	}

	s := signSummary{Instances: len(ins), TargetPerSec: *signRate, Seconds: elapsed.Seconds(), Signed: total - int(failed.Load()),
		Failed: failed.Load(), KMS: map[string]int64{}, Load1: loadAverage()}
	s.AchievedPerSec = float64(s.Signed) / elapsed.Seconds()
	s.CPUPerSignUs = float64(cpu.Microseconds()) / float64(max(1, s.Signed))
	s.PerSecond = make([]int64, int(elapsed/time.Second)+1)
	var lates []time.Duration
	for i := range total {
		if passes[i].pass == "" {
			continue
		}
		s.PerSecond[done[i]/time.Second]++
		lates = append(lates, late[i])
	}
	slices.Sort(lates)
	if n := len(lates); n > 0 {
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		s.LateP50Ms, s.LateP99Ms, s.LateMaxMs = ms(lates[n/2]), ms(lates[min(n-1, n*99/100)]), ms(lates[n-1])
	}
	var known int64
	for _, op := range ops {
		if d := proxy.Calls(op) - before[op]; d > 0 {
			s.KMS[op] = d
			known += d
		}
	}
	if other := proxy.Total() - total0 - known; other > 0 {
		s.KMS["other"] = other
	}
	for _, in := range ins {
		in.kms.mu.Lock()
		s.PerInstance = append(s.PerInstance, map[string]int{"made": sum(in.kms.made), "opened": sum(in.kms.opened)})
		in.kms.mu.Unlock()
	}
	signed := slices.DeleteFunc(passes, func(p signedPass) bool { return p.pass == "" })
	doc, err := ins[0].iss.JWKS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	verifyStart := time.Now()
	s.Kids = verifyAllWithJWX(t, doc, signed)
	for _, n := range s.Kids {
		s.Verified += n
	}
	t.Logf("jwx verified %d passes in %s on %d cores", s.Verified, time.Since(verifyStart).Round(time.Millisecond), runtime.GOMAXPROCS(0))
	js, _ := json.MarshalIndent(s, "", "  ")
	line, _ := json.Marshal(s)
	t.Logf("%s", line)
	if *signOut != "" {
		if err := os.WriteFile(*signOut, append(js, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// At most one KMS call per instance per rotation (24 h here): the first
	// key, made by one and opened by the others; a second key only when a
	// paced run crosses into the next slot's lead. Mid-slot, exactly one.
	for i, c := range s.PerInstance {
		if n := c["made"] + c["opened"]; n > 2 || !paced && n != 1 {
			t.Errorf("instance %d: %v KMS calls, want one a key", i, c)
		}
	}
	if s.Verified != s.Signed || s.Failed != 0 {
		t.Errorf("%d signed, %d failed, %d verified: want every pass signed and verified", s.Signed, s.Failed, s.Verified)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// processCPU is this process's CPU time so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAverage is the machine's load average over the last minute.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	var l1 string
	_, _ = fmt.Sscan(string(b), &l1)
	return l1
}
