package admissionpass

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/sync/semaphore"
	"golang.org/x/sync/singleflight"

	"github.com/example/waitingroom/internal/clock"
)

// Keyring defaults (docs/design.md, "Pass signing keys").
const (
	// DefaultRotation is how long a scheduled key signs.
	DefaultRotation = 24 * time.Hour
	// DefaultLead is how long before it signs a key is in the JWKS: over JWKSMaxAge plus the refresh.
	DefaultLead = 15 * time.Minute
	// DefaultRefresh is how often an instance reads the key set again.
	DefaultRefresh = time.Minute
	// DefaultRetain is how long a key stays in the JWKS once it stopped signing.
	DefaultRetain = 24*time.Hour + time.Minute
	// claimTimeout is how long a claim on a slot holds against other instances.
	claimTimeout = 30 * time.Second
)

// ErrKeysUnavailable is the error of a call made while the keys cannot be read, made or opened.
var ErrKeysUnavailable = errors.New("admissionpass: signing keys unavailable")

// Keyring is a KeySet whose keys come from a KeyStore on a schedule: slot n signs from
// n×rotation, made by the first instance that needs it; each instance opens each key once.
type Keyring struct {
	store                           KeyStore
	wrap                            KeyWrapper
	clock                           clock.Clock
	rotation, lead, refresh, retain time.Duration

	reads   singleflight.Group // the reads of the key set, one at a time
	reading atomic.Bool        // a read is under way

	mu     sync.Mutex
	keys   []StoredKey         // as last read, oldest SignFrom first
	readAt time.Time           // zero: never read
	opened map[string]*ringKey // by kid
	making map[int64]*making   // slots this instance made or is making, by SignFrom ms
}

// making is one instance's making of a slot's key: once, or again retryMaking after a failure.
type making struct {
	once     sync.Once
	failedAt time.Time // zero: made, or not yet failed
	claim    string    // the instance's claim on the slot, kept across tries
}

// retryMaking is how long after a failed making an instance tries again.
const retryMaking = 5 * time.Second

var _ KeySet = (*Keyring)(nil)

// KeyringOption configures a Keyring.
type KeyringOption func(*Keyring)

// WithRotation sets how long a scheduled key signs (at least an hour).
func WithRotation(d time.Duration) KeyringOption { return func(r *Keyring) { r.rotation = d } }

// WithKeyringClock replaces the real clock.
func WithKeyringClock(c clock.Clock) KeyringOption { return func(r *Keyring) { r.clock = c } }

// WithRetain sets how long a superseded key stays published.
func WithRetain(d time.Duration) KeyringOption { return func(r *Keyring) { r.retain = d } }

// NewKeyring returns the keyring kept in store, whose keys wrap makes and opens.
func NewKeyring(store KeyStore, wrap KeyWrapper, opts ...KeyringOption) *Keyring {
	r := &Keyring{store: store, wrap: wrap, clock: clock.Real{}, rotation: DefaultRotation, lead: DefaultLead,
		refresh: DefaultRefresh, retain: DefaultRetain, opened: map[string]*ringKey{}, making: map[int64]*making{}}
	for _, o := range opts {
		o(r)
	}
	r.lead = min(r.lead, r.rotation/4)
	return r
}

// Rotation is how long a scheduled key signs.
func (r *Keyring) Rotation() time.Duration { return r.rotation }

// SigningKey implements KeySet: the key that signs now, made first when none may.
func (r *Keyring) SigningKey(ctx context.Context) (Key, error) {
	signer, _, err := r.state(ctx, false)
	return signer, err
}

// PublishedKeys implements KeySet: the keys that sign now or will, and those that stopped
// less than the retention ago, each opened; never a revoked one.
func (r *Keyring) PublishedKeys(ctx context.Context) ([]Key, error) {
	_, published, err := r.state(ctx, true)
	if len(published) > 0 {
		return published, nil
	}
	return nil, err
}

// state reads the key set (on the refresh), makes the keys that are due, and returns the
// signer and, with publish, the published keys, each opened.
func (r *Keyring) state(ctx context.Context, publish bool) (Key, []Key, error) {
	now := r.clock.Now()
	keys, err := r.read(ctx, now)
	if err != nil {
		return nil, nil, err
	}
	_, signs := r.signer(keys, now, nil)
	if at, due := r.dueSlot(keys, now); due {
		keys = r.make(ctx, at, now, keys, !signs)
	}
	if next := r.slotOf(now).Add(r.rotation); !now.Before(next.Add(-r.lead)) && !hasSlot(keys, next) {
		keys = r.make(ctx, next, now, keys, false)
	}
	signer, published, _, err := r.openKeys(ctx, keys, now, publish)
	if err != nil {
		return nil, published, err
	}
	return signer, published, nil
}

// openKeys opens the key that signs at now and, with publish, the published keys: it
// returns the signer, the published keys that opened, and the kids of those that did not.
func (r *Keyring) openKeys(ctx context.Context, keys []StoredKey, now time.Time, publish bool) (*ringKey, []Key, map[string]bool, error) {
	var published []Key
	failed := map[string]bool{}
	var openErr error
	try := func(k StoredKey) *ringKey {
		rk := r.keyOf(k)
		if _, err := rk.open(ctx); err != nil {
			failed[k.KeyID], openErr = true, err
			return nil
		}
		return rk
	}
	if publish {
		for _, k := range r.usable(keys, now) {
			if rk := try(k); rk != nil {
				published = append(published, rk)
			}
		}
	}
	for {
		sk, ok := r.signer(keys, now, failed)
		if !ok {
			err := fmt.Errorf("%w: no key signs at %s", ErrKeysUnavailable, now.UTC().Format(time.RFC3339))
			if openErr != nil {
				err = fmt.Errorf("%w: %w", err, openErr)
			}
			return nil, published, failed, err
		}
		if rk := try(sk); rk != nil {
			return rk, published, failed, nil
		}
	}
}

// dueSlot is the slot whose key must be made at now, if any: the current slot when it has
// no key, or one just after the newest key that started when it is revoked.
func (r *Keyring) dueSlot(keys []StoredKey, now time.Time) (time.Time, bool) {
	slot := r.slotOf(now)
	var newest StoredKey // the newest key that started
	for _, k := range keys {
		if !k.SignFrom.After(now) {
			newest = k
		}
	}
	switch {
	case newest.KeyID != "" && !newest.Revoked.IsZero():
		at := newest.SignFrom.Add(time.Millisecond)
		if newest.Revoked.After(at) {
			at = newest.Revoked
		}
		return at.Truncate(time.Millisecond), !hasSlot(keys, at)
	case newest.KeyID == "" || newest.SignFrom.Before(slot):
		return slot, !hasSlot(keys, slot)
	}
	return time.Time{}, false
}

// signEnd is when k stops signing: the end of its slot and a lead.
func (r *Keyring) signEnd(k StoredKey) time.Time {
	return r.slotOf(k.SignFrom).Add(r.rotation + r.lead)
}

// usable is the keys of keys that are published at now: not revoked, not more than a
// rotation ahead, and until the retention after they stopped signing.
func (r *Keyring) usable(keys []StoredKey, now time.Time) []StoredKey {
	var out []StoredKey
	for i, k := range keys {
		if k.Revoked.IsZero() && !k.SignFrom.After(now.Add(r.rotation+r.lead)) && now.Before(r.stoppedAt(keys, i).Add(r.retain)) {
			out = append(out, k)
		}
	}
	return out
}

// stoppedAt is when keys[i] stops signing: its sign end, or earlier when
// the next key that is not revoked starts signing before it (a rotation).
func (r *Keyring) stoppedAt(keys []StoredKey, i int) time.Time {
	end := r.signEnd(keys[i])
	for _, o := range keys[i+1:] {
		if o.Revoked.IsZero() {
			start := o.SignFrom
			if lead := o.Created.Add(r.lead); lead.After(start) {
				start = lead
			}
			if start.Before(end) {
				return start
			}
			return end
		}
	}
	return end
}

// signer is the key of keys that signs at now, leaving out failed: the newest that may
// sign and was made a lead ago; else the newest that may sign.
func (r *Keyring) signer(keys []StoredKey, now time.Time, failed map[string]bool) (StoredKey, bool) {
	var may []StoredKey
	for _, k := range keys {
		switch {
		case k.SignFrom.After(now):
		case !k.Revoked.IsZero():
			may = may[:0] // nothing older signs after a revoke
		case now.Before(r.signEnd(k)) && !failed[k.KeyID]:
			may = append(may, k)
		}
	}
	for _, k := range slices.Backward(may) {
		if !now.Before(k.Created.Add(r.lead)) {
			return k, true
		}
	}
	if len(may) == 0 {
		return StoredKey{}, false
	}
	return may[len(may)-1], true
}

// KeyState is a key as an operator sees it.
type KeyState struct {
	StoredKey
	State string // next, signing, published, retired, revoked or unusable (as api.KeyState)
}

// Keys returns every stored key with its state at now, newest first, opening the keys as
// state does.
func (r *Keyring) Keys(ctx context.Context) ([]KeyState, error) {
	now := r.clock.Now()
	keys, err := r.readNow(ctx, now)
	if err != nil {
		return nil, err
	}
	usable := r.usable(keys, now)
	rk, opened, failed, err := r.openKeys(ctx, keys, now, true)
	if err != nil && len(opened) == 0 && len(failed) > 0 {
		return nil, err
	}
	var signing string
	if err == nil {
		signing = rk.stored.KeyID
	}
	out := make([]KeyState, 0, len(keys))
	for _, k := range slices.Backward(keys) {
		s := KeyState{StoredKey: k, State: "retired"}
		switch {
		case !k.Revoked.IsZero():
			s.State = "revoked"
		case failed[k.KeyID]:
			s.State = "unusable"
		case k.KeyID == signing:
			s.State = "signing"
		case k.SignFrom.After(now):
			s.State = "next" // published from a rotation and a lead before it signs
		case slices.ContainsFunc(usable, func(p StoredKey) bool { return p.KeyID == k.KeyID }):
			s.State = "published"
		}
		out = append(out, s)
	}
	return out, nil
}

// Rotate makes and returns a key that signs a lead from now, until the next slot; while an
// earlier rotation's key is pending, it returns that key instead.
func (r *Keyring) Rotate(ctx context.Context) (StoredKey, error) {
	now := r.clock.Now()
	at := now.Add(r.lead).Truncate(time.Millisecond)
	keys, err := r.readNow(ctx, now)
	if err != nil {
		return StoredKey{}, err
	}
	if k, ok := r.pendingRotation(ctx, keys, now); ok {
		return k, nil
	}
	keys = r.make(ctx, at, now, keys, true)
	if i := slices.IndexFunc(keys, func(k StoredKey) bool { return k.SignFrom.Equal(at) }); i >= 0 {
		return keys[i], nil
	}
	return StoredKey{}, fmt.Errorf("%w: the key of %s was not made", ErrKeysUnavailable, at.UTC().Format(time.RFC3339Nano))
}

// pendingRotation is the newest key that a rotation made and that is yet to sign at now:
// within a lead, off the slots' starts, not revoked, and it opens.
func (r *Keyring) pendingRotation(ctx context.Context, keys []StoredKey, now time.Time) (StoredKey, bool) {
	for _, k := range slices.Backward(keys) {
		if !k.SignFrom.After(now) || k.SignFrom.After(now.Add(r.lead)) || k.SignFrom.Equal(r.slotOf(k.SignFrom)) || !k.Revoked.IsZero() {
			continue
		}
		if _, err := r.keyOf(k).open(ctx); err == nil {
			return k, true
		}
	}
	return StoredKey{}, false
}

// Revoke revokes the key kid; when it was the signing key, it also returns the key that
// signs in its place from now.
func (r *Keyring) Revoke(ctx context.Context, kid string) (StoredKey, bool, error) {
	now := r.clock.Now()
	before, err := r.readNow(ctx, now)
	if err != nil {
		return StoredKey{}, false, err
	}
	was, _ := r.signer(before, now, nil)
	if _, err := r.store.RevokePassKey(ctx, kid, now); err != nil {
		return StoredKey{}, false, fmt.Errorf("admissionpass: revoke key %s: %w", kid, err)
	}
	r.mu.Lock()
	delete(r.opened, kid)
	r.readAt = now.Add(-r.refresh) // stale: read again on the next call
	r.mu.Unlock()
	if was.KeyID != kid {
		return StoredKey{}, false, nil
	}
	if _, err := r.readNow(ctx, now); err != nil {
		return StoredKey{}, false, err
	}
	signer, _, err := r.state(ctx, false)
	if err != nil {
		return StoredKey{}, false, err
	}
	return signer.(*ringKey).stored, true, nil
}

// slotOf is the start of the rotation slot that holds t.
func (r *Keyring) slotOf(t time.Time) time.Time {
	ms, rot := t.UnixMilli(), r.rotation.Milliseconds()
	return time.UnixMilli(ms - ms%rot).UTC()
}

// hasSlot reports whether keys hold a key (revoked or not) for slot at.
func hasSlot(keys []StoredKey, at time.Time) bool {
	return slices.ContainsFunc(keys, func(k StoredKey) bool { return k.SignFrom.Equal(at) })
}

// read returns the key set, read again when older than the refresh; while one call reads,
// or when the read fails, the set as it was, if any.
func (r *Keyring) read(ctx context.Context, now time.Time) ([]StoredKey, error) {
	r.mu.Lock()
	keys, current := r.keys, !r.readAt.IsZero() && (now.Sub(r.readAt) < r.refresh || r.reading.Load())
	r.mu.Unlock()
	if current {
		return keys, nil
	}
	keys, err := r.readNow(ctx, now)
	if err == nil {
		return keys, nil
	}
	r.mu.Lock() // a failed read is tried again retryMaking later
	defer r.mu.Unlock()
	if r.readAt.IsZero() {
		return nil, err
	}
	r.readAt = now.Add(retryMaking - r.refresh)
	return r.keys, nil
}

// readNow reads the key set from the store; concurrent calls share one read.
func (r *Keyring) readNow(ctx context.Context, now time.Time) ([]StoredKey, error) {
	keys, err, _ := r.reads.Do("", func() (any, error) {
		r.reading.Store(true)
		defer r.reading.Store(false)
		keys, err := r.store.PassKeys(ctx)
		if err != nil {
			return nil, fmt.Errorf("%w: read keys: %w", ErrKeysUnavailable, err)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.keys, r.readAt = keys, now
		return keys, nil
	})
	if err != nil {
		return nil, err
	}
	return keys.([]StoredKey), nil
}

// make makes the key of slot signFrom unless the store has one, and returns the key set
// after; with wait, it waits for the key another instance is making.
func (r *Keyring) make(ctx context.Context, signFrom, now time.Time, keys []StoredKey, wait bool) []StoredKey {
	slot := signFrom.UnixMilli()
	r.mu.Lock()
	m := r.making[slot]
	claim := newJTI()
	if m != nil && !m.failedAt.IsZero() && now.Sub(m.failedAt) >= retryMaking {
		claim, m = m.claim, nil
	}
	if m == nil {
		old := now.Add(-2 * r.rotation).UnixMilli() // kept: slots of the last two rotations
		maps.DeleteFunc(r.making, func(at int64, _ *making) bool { return at < old })
		m = &making{claim: claim}
		r.making[slot] = m
	}
	r.mu.Unlock()
	m.once.Do(func() {
		if err := r.makeOnce(ctx, signFrom, m.claim, now, wait); err != nil {
			r.mu.Lock()
			m.failedAt = now
			r.mu.Unlock()
		}
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if hasSlot(r.keys, signFrom) {
		return r.keys
	}
	return keys
}

// makeOnce claims slot signFrom with claim, makes its key and stores it, or awaits it.
func (r *Keyring) makeOnce(ctx context.Context, signFrom time.Time, claim string, now time.Time, wait bool) error {
	won, err := r.store.ClaimPassKey(ctx, signFrom, claim, now, now.Add(-claimTimeout))
	if err != nil {
		return fmt.Errorf("admissionpass: claim key slot: %w", err)
	}
	if !won {
		return r.awaitSlot(ctx, signFrom, now, wait)
	}
	priv, wrapped, err := r.wrap.NewKeyPair(ctx, encryptionContext(signFrom))
	if err != nil {
		return fmt.Errorf("admissionpass: make key: %w", err)
	}
	der, kid, err := publicHalf(&priv.PublicKey)
	if err != nil {
		return err
	}
	keep := r.signEnd(StoredKey{SignFrom: signFrom}).Add(r.retain + 24*time.Hour) // its slot, lead, retention and a day
	k := StoredKey{SignFrom: signFrom.UTC(), KeyID: kid, Public: der, Wrapped: wrapped,
		Created: now.UTC().Truncate(time.Millisecond), Expires: keep.UTC()}
	stored, err := r.store.PutPassKey(ctx, k, claim)
	if err != nil || !stored {
		_, rerr := r.readNow(ctx, now)
		return errors.Join(err, rerr, errors.New("admissionpass: the key was not stored"))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opened[k.KeyID] = r.newKey(k, priv)
	if !hasSlot(r.keys, signFrom) {
		r.keys = append(slices.Clone(r.keys), k)
		slices.SortFunc(r.keys, func(a, b StoredKey) int { return a.SignFrom.Compare(b.SignFrom) })
	}
	return nil
}

// awaitSlot reads the key set until it holds slot signFrom's key: for claimWait with wait, else once.
func (r *Keyring) awaitSlot(ctx context.Context, signFrom, now time.Time, wait bool) error {
	for deadline := r.clock.Now().Add(claimWait); ; {
		keys, err := r.readNow(ctx, now)
		switch {
		case err != nil:
			return err
		case hasSlot(keys, signFrom):
			return nil
		case !wait || r.clock.Now().After(deadline):
			return errors.New("admissionpass: another instance is making the key")
		}
		if err := r.clock.Sleep(ctx, claimPoll); err != nil {
			return err
		}
	}
}

// How long and how often awaitSlot reads the set.
const claimWait, claimPoll = 3 * time.Second, 100 * time.Millisecond

// publicHalf is pub in PKIX DER and its kid.
func publicHalf(pub *ecdsa.PublicKey) ([]byte, string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, "", fmt.Errorf("admissionpass: marshal public key: %w", err)
	}
	kid, err := thumbprint(pub)
	return der, kid, err
}

// thumbprint is the RFC 7638 thumbprint of pub, the kid of its JWK.
func thumbprint(pub *ecdsa.PublicKey) (string, error) {
	t, err := (&jose.JSONWebKey{Key: pub}).Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("admissionpass: key thumbprint: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(t), nil
}

// encryptionContext binds a wrapped key to its purpose and slot: moved, a blob does not open.
func encryptionContext(signFrom time.Time) map[string]string {
	return map[string]string{"purpose": EncryptionPurpose, "signFrom": strconv.FormatInt(signFrom.UnixMilli(), 10)}
}

// EncryptionPurpose is the "purpose" of the keys' encryption context, which IAM policies check.
const EncryptionPurpose = "admission-pass-signing"

// keyOf is the key of stored key k, one per kid, opened on first use.
func (r *Keyring) keyOf(k StoredKey) *ringKey {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rk := r.opened[k.KeyID]; rk != nil {
		return rk
	}
	rk := r.newKey(k, nil)
	r.opened[k.KeyID] = rk
	return rk
}

// ringKey is a key of a keyring, opened by the wrapper once.
type ringKey struct {
	ring   *Keyring
	stored StoredKey

	lock     *semaphore.Weighted // held while opening, and to use the fields below
	priv     *ecdsa.PrivateKey
	failedAt time.Time // the last failed open, retried retryMaking after
	err      error     // its error
}

func (r *Keyring) newKey(k StoredKey, priv *ecdsa.PrivateKey) *ringKey {
	return &ringKey{ring: r, stored: k, priv: priv, lock: semaphore.NewWeighted(1)}
}

// open returns the private key, unwrapped once (not again while the last failure is recent).
func (k *ringKey) open(ctx context.Context) (*ecdsa.PrivateKey, error) {
	if err := k.lock.Acquire(ctx, 1); err != nil {
		return nil, fmt.Errorf("%w: open key %s: %w", ErrKeysUnavailable, k.stored.KeyID, err)
	}
	defer k.lock.Release(1)
	switch {
	case k.priv != nil:
		return k.priv, nil
	case !k.failedAt.IsZero() && k.ring.clock.Now().Sub(k.failedAt) < retryMaking:
		return nil, k.err
	}
	priv, err := k.unwrap(ctx)
	if err != nil {
		k.failedAt, k.err = k.ring.clock.Now(), err
		return nil, err
	}
	k.priv = priv
	return priv, nil
}

// unwrap opens the stored key, refusing one whose stored public half or kid is not its own.
func (k *ringKey) unwrap(ctx context.Context) (*ecdsa.PrivateKey, error) {
	priv, err := k.ring.wrap.Unwrap(ctx, k.stored.Wrapped, encryptionContext(k.stored.SignFrom))
	if err != nil {
		return nil, fmt.Errorf("%w: open key %s: %w", ErrKeysUnavailable, k.stored.KeyID, err)
	}
	if der, kid, err := publicHalf(&priv.PublicKey); err != nil || kid != k.stored.KeyID || !bytes.Equal(der, k.stored.Public) {
		return nil, fmt.Errorf("%w: key %s: its stored public half or kid is not its own", ErrKeysUnavailable, k.stored.KeyID)
	}
	return priv, nil
}

func (k *ringKey) PublicKey(ctx context.Context) (*ecdsa.PublicKey, error) {
	priv, err := k.open(ctx)
	if err != nil {
		return nil, err
	}
	return &priv.PublicKey, nil
}

func (k *ringKey) PrivateKey(ctx context.Context) (*ecdsa.PrivateKey, error) { return k.open(ctx) }
