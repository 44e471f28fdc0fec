package admissionpass

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Keyring defaults (docs/design.md, "Pass signing keys").
const (
	// DefaultRotation is how long a scheduled key signs.
	DefaultRotation = 24 * time.Hour
	// DefaultLead is how long before it signs a scheduled key is in the
	// JWKS: more than JWKSMaxAge plus the refresh, so that sites that
	// cache the JWKS hold it before its first pass.
	DefaultLead = 15 * time.Minute
	// DefaultRefresh is how often an instance reads the key set again.
	DefaultRefresh = time.Minute
	// DefaultRetain is how long a key stays in the JWKS once superseded:
	// the longest pass (a 24 h bypass pass or admission window) and a
	// margin for clocks.
	DefaultRetain = 25 * time.Hour
	// claimTimeout is how long a claim on a slot holds before another
	// instance may take it over.
	claimTimeout = 30 * time.Second
)

// ErrKeysUnavailable is the error of a signing or JWKS call made while the
// key set cannot be read or the signing key cannot be made or opened.
var ErrKeysUnavailable = errors.New("admissionpass: signing keys unavailable")

// Keyring is a KeySet whose keys come from a KeyStore on a schedule: slot n
// of the rotation signs from n×rotation, made by the first instance that
// needs it, published lead before. Each instance opens each key once.
type Keyring struct {
	store                           KeyStore
	wrap                            KeyWrapper
	now                             func() time.Time
	rotation, lead, refresh, retain time.Duration

	mu      sync.Mutex
	keys    []StoredKey         // as last read, oldest SignFrom first
	readAt  time.Time           // zero: never read
	opened  map[string]*ringKey // by kid
	reading chan struct{}       // closed when the read out is back
	making  map[int64]*making   // slots this instance made or is making, by SignFrom ms
}

// making is one instance's making of a slot's key: done once, or again
// after a failure once retryMaking has passed.
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
func WithKeyringClock(now func() time.Time) KeyringOption { return func(r *Keyring) { r.now = now } }

// WithRetain sets how long a superseded key stays published.
func WithRetain(d time.Duration) KeyringOption { return func(r *Keyring) { r.retain = d } }

// NewKeyring returns the keyring kept in store, whose keys wrap makes and
// opens. It calls nothing yet.
func NewKeyring(store KeyStore, wrap KeyWrapper, opts ...KeyringOption) *Keyring {
	r := &Keyring{store: store, wrap: wrap, now: time.Now, rotation: DefaultRotation, lead: DefaultLead,
		refresh: DefaultRefresh, retain: DefaultRetain, opened: map[string]*ringKey{}, making: map[int64]*making{}}
	for _, o := range opts {
		o(r)
	}
	r.lead = min(r.lead, r.rotation/4)
	return r
}

// Rotation is how long a scheduled key signs.
func (r *Keyring) Rotation() time.Duration { return r.rotation }

// SigningKey implements KeySet: the newest key that signs at now, made
// first when there is none; it also makes the next slot's key once it is
// due. ErrKeysUnavailable (wrapped) when neither can be read nor made.
func (r *Keyring) SigningKey(ctx context.Context) (Key, error) {
	now := r.now()
	keys, err := r.read(ctx, now)
	if err != nil {
		return nil, err
	}
	if next := r.slotOf(now).Add(r.rotation); !now.Before(next.Add(-r.lead)) && !hasSlot(keys, next) {
		keys = r.make(ctx, next, now, keys)
	}
	k, ok := signingAt(keys, now)
	if !ok {
		keys = r.make(ctx, r.slotOf(now), now, keys)
		if k, ok = signingAt(keys, now); !ok {
			return nil, fmt.Errorf("%w: no key signs at %s", ErrKeysUnavailable, now.UTC().Format(time.RFC3339))
		}
	}
	return r.keyOf(k), nil
}

// PublishedKeys implements KeySet: the keys that sign now or later, and
// those superseded less than the retention ago; never a revoked key. It
// makes the keys SigningKey would, so a new stack's JWKS is never empty.
func (r *Keyring) PublishedKeys(ctx context.Context) ([]Key, error) {
	if _, err := r.SigningKey(ctx); err != nil {
		return nil, err
	}
	now := r.now()
	keys, err := r.read(ctx, now)
	if err != nil {
		return nil, err
	}
	var out []Key
	for _, k := range r.published(keys, now) {
		out = append(out, r.keyOf(k))
	}
	return out, nil
}

// KeyState is a key as an operator sees it.
type KeyState struct {
	StoredKey
	// State is "next" (published, signs later), "signing", "published"
	// (superseded, still in the JWKS), "retired" or "revoked".
	State string
}

// Keys returns every stored key with its state at now, newest first.
func (r *Keyring) Keys(ctx context.Context) ([]KeyState, error) {
	now := r.now()
	keys, err := r.readNow(ctx, now)
	if err != nil {
		return nil, err
	}
	signing, _ := signingAt(keys, now)
	pub := r.published(keys, now)
	out := make([]KeyState, 0, len(keys))
	for _, k := range slices.Backward(keys) {
		s := KeyState{StoredKey: k, State: "retired"}
		switch {
		case !k.Revoked.IsZero():
			s.State = "revoked"
		case k.KeyID == signing.KeyID:
			s.State = "signing"
		case k.SignFrom.After(now):
			s.State = "next"
		case slices.ContainsFunc(pub, func(p StoredKey) bool { return p.KeyID == k.KeyID }):
			s.State = "published"
		}
		out = append(out, s)
	}
	return out, nil
}

// Rotate makes a key that signs from the lead from now, superseding the
// scheduled one until the next slot, and returns it.
func (r *Keyring) Rotate(ctx context.Context) (StoredKey, error) {
	now := r.now()
	return r.makeAt(ctx, now.Add(r.lead).Truncate(time.Millisecond), now)
}

// Revoke revokes the key kid, which leaves the JWKS and signs no more on
// any instance after its next read. When it was the key that signs, a new
// key signs from now (sites then fetch the JWKS anew): it is returned.
func (r *Keyring) Revoke(ctx context.Context, kid string) (StoredKey, bool, error) {
	now := r.now()
	keys, err := r.readNow(ctx, now)
	if err != nil {
		return StoredKey{}, false, err
	}
	signing, _ := signingAt(keys, now)
	if _, err := r.store.RevokePassKey(ctx, kid, now); err != nil {
		return StoredKey{}, false, fmt.Errorf("admissionpass: revoke key %s: %w", kid, err)
	}
	r.mu.Lock()
	delete(r.opened, kid)
	r.readAt = now.Add(-r.refresh) // stale: read again on the next call
	r.mu.Unlock()
	if signing.KeyID != kid {
		return StoredKey{}, false, nil
	}
	k, err := r.makeAt(ctx, now.Truncate(time.Millisecond), now)
	return k, err == nil, err
}

// makeAt makes the key of slot signFrom and returns it, or the key another
// instance made there.
func (r *Keyring) makeAt(ctx context.Context, signFrom, now time.Time) (StoredKey, error) {
	keys, err := r.readNow(ctx, now)
	if err != nil {
		return StoredKey{}, err
	}
	keys = r.make(ctx, signFrom, now, keys)
	for _, k := range keys {
		if k.SignFrom.Equal(signFrom) {
			return k, nil
		}
	}
	return StoredKey{}, fmt.Errorf("%w: the key of %s was not made", ErrKeysUnavailable, signFrom.UTC().Format(time.RFC3339Nano))
}

// slotOf is the start of the rotation slot that holds t.
func (r *Keyring) slotOf(t time.Time) time.Time {
	ms, rot := t.UnixMilli(), r.rotation.Milliseconds()
	return time.UnixMilli(ms - ms%rot).UTC()
}

// published is the keys of keys in the JWKS at now.
func (r *Keyring) published(keys []StoredKey, now time.Time) []StoredKey {
	var out []StoredKey
	live := liveKeys(keys, now)
	for i, k := range live {
		// Superseded when the next live key started signing.
		if i+1 < len(live) && !live[i+1].SignFrom.After(now) && now.Sub(live[i+1].SignFrom) >= r.retain {
			continue
		}
		out = append(out, k)
	}
	return out
}

// liveKeys is keys without the revoked and the expired, in order.
func liveKeys(keys []StoredKey, now time.Time) []StoredKey {
	return slices.DeleteFunc(slices.Clone(keys), func(k StoredKey) bool {
		return !k.Revoked.IsZero() || (!k.Expires.IsZero() && !now.Before(k.Expires))
	})
}

// signingAt is the newest live key of keys that signs at now.
func signingAt(keys []StoredKey, now time.Time) (StoredKey, bool) {
	live := liveKeys(keys, now)
	for _, k := range slices.Backward(live) {
		if !k.SignFrom.After(now) {
			return k, true
		}
	}
	return StoredKey{}, false
}

// hasSlot reports whether keys hold a key (revoked or not) for slot at.
func hasSlot(keys []StoredKey, at time.Time) bool {
	return slices.ContainsFunc(keys, func(k StoredKey) bool { return k.SignFrom.Equal(at) })
}

// read returns the key set, read again when it is older than the refresh;
// while one call reads, or when the read fails, the others use the set as
// it was, if there is one.
func (r *Keyring) read(ctx context.Context, now time.Time) ([]StoredKey, error) {
	r.mu.Lock()
	if !r.readAt.IsZero() && now.Sub(r.readAt) < r.refresh {
		keys := r.keys
		r.mu.Unlock()
		return keys, nil
	}
	if r.reading != nil && !r.readAt.IsZero() {
		keys := r.keys
		r.mu.Unlock()
		return keys, nil
	}
	r.mu.Unlock()
	keys, err := r.readNow(ctx, now)
	if err == nil {
		return keys, nil
	}
	// A failed read keeps the set as it was, if any, and is tried again
	// retryMaking later: a store fault never stops the signing.
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.readAt.IsZero() {
		return nil, err
	}
	r.readAt = now.Add(retryMaking - r.refresh)
	return r.keys, nil
}

// readNow reads the key set from the store; concurrent calls share one read.
func (r *Keyring) readNow(ctx context.Context, now time.Time) ([]StoredKey, error) {
	r.mu.Lock()
	if wait := r.reading; wait != nil {
		r.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrKeysUnavailable, ctx.Err())
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.readAt.IsZero() {
			return nil, fmt.Errorf("%w: the key set could not be read", ErrKeysUnavailable)
		}
		return r.keys, nil
	}
	done := make(chan struct{})
	r.reading = done
	r.mu.Unlock()
	keys, err := r.store.PassKeys(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reading = nil
	close(done)
	if err != nil {
		return nil, fmt.Errorf("%w: read keys: %w", ErrKeysUnavailable, err)
	}
	r.keys, r.readAt = keys, now
	return keys, nil
}

// make makes the key of slot signFrom unless the store has one, and
// returns the key set after: with the new key when this instance or
// another made it, as it was when the making failed.
func (r *Keyring) make(ctx context.Context, signFrom, now time.Time, keys []StoredKey) []StoredKey {
	slot := signFrom.UnixMilli()
	r.mu.Lock()
	m := r.making[slot]
	claim := newJTI()
	if m != nil && !m.failedAt.IsZero() && now.Sub(m.failedAt) >= retryMaking {
		claim, m = m.claim, nil
	}
	if m == nil {
		for at := range r.making { // bounded: slots of the last two rotations
			if at < now.Add(-2*r.rotation).UnixMilli() {
				delete(r.making, at)
			}
		}
		m = &making{claim: claim}
		r.making[slot] = m
	}
	r.mu.Unlock()
	m.once.Do(func() {
		if err := r.makeOnce(ctx, signFrom, m.claim, now); err != nil {
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

// makeOnce claims slot signFrom with claim, makes its key and stores it;
// when another instance holds the slot, it waits for its key (awaitSlot).
func (r *Keyring) makeOnce(ctx context.Context, signFrom time.Time, claim string, now time.Time) error {
	won, err := r.store.ClaimPassKey(ctx, signFrom, claim, now, now.Add(-claimTimeout))
	if err != nil {
		return fmt.Errorf("admissionpass: claim key slot: %w", err)
	}
	if !won {
		return r.awaitSlot(ctx, signFrom, now)
	}
	priv, wrapped, err := r.wrap.NewKeyPair(ctx, encryptionContext(signFrom))
	if err != nil {
		return fmt.Errorf("admissionpass: make key: %w", err)
	}
	k, err := storedKey(priv, wrapped, signFrom, now, r.retain+2*r.rotation)
	if err != nil {
		return err
	}
	stored, err := r.store.PutPassKey(ctx, k, claim)
	if err != nil || !stored {
		_, rerr := r.readNow(ctx, now)
		return errors.Join(err, rerr, errors.New("admissionpass: the key was not stored"))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opened[k.KeyID] = &ringKey{ring: r, stored: k, pub: &priv.PublicKey, priv: priv}
	if !hasSlot(r.keys, signFrom) {
		r.keys = append(slices.Clone(r.keys), k)
		slices.SortFunc(r.keys, func(a, b StoredKey) int { return a.SignFrom.Compare(b.SignFrom) })
	}
	return nil
}

// awaitSlot reads the key set until it holds slot signFrom's key, made by
// the instance that holds the claim, for claimWait at most when no key
// signs at now (else once: the signing key serves meanwhile).
func (r *Keyring) awaitSlot(ctx context.Context, signFrom, now time.Time) error {
	_, signs := signingAt(r.snapshot(), now)
	for deadline := time.Now().Add(claimWait); ; {
		keys, err := r.readNow(ctx, now)
		switch {
		case err != nil:
			return err
		case hasSlot(keys, signFrom):
			return nil
		case signs || time.Now().After(deadline):
			return errors.New("admissionpass: another instance is making the key")
		}
		select {
		case <-time.After(claimPoll):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// How long and how often an instance without a signing key reads the set
// while another makes the key.
const claimWait, claimPoll = 3 * time.Second, 100 * time.Millisecond

// snapshot is the key set as last read.
func (r *Keyring) snapshot() []StoredKey {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keys
}

// storedKey is priv as a keyring stores it.
func storedKey(priv *ecdsa.PrivateKey, wrapped []byte, signFrom, now time.Time, keep time.Duration) (StoredKey, error) {
	der, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		return StoredKey{}, fmt.Errorf("admissionpass: marshal public key: %w", err)
	}
	kid, err := thumbprint(&priv.PublicKey)
	if err != nil {
		return StoredKey{}, err
	}
	return StoredKey{SignFrom: signFrom.UTC(), KeyID: kid, Public: der, Wrapped: wrapped,
		Created: now.UTC().Truncate(time.Millisecond), Expires: signFrom.Add(keep).UTC()}, nil
}

// thumbprint is the RFC 7638 thumbprint of pub, the kid of its JWK.
func thumbprint(pub *ecdsa.PublicKey) (string, error) {
	t, err := (&jose.JSONWebKey{Key: pub}).Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("admissionpass: key thumbprint: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(t), nil
}

// encryptionContext binds a wrapped key to its purpose and slot, so that a
// blob moved to another slot does not open.
func encryptionContext(signFrom time.Time) map[string]string {
	return map[string]string{"purpose": EncryptionPurpose, "signFrom": strconv.FormatInt(signFrom.UnixMilli(), 10)}
}

// EncryptionPurpose is the "purpose" of every signing key's encryption
// context: the IAM policies condition kms:Decrypt and
// kms:GenerateDataKeyPair on it.
const EncryptionPurpose = "admission-pass-signing"

// keyOf is the Key of stored key k, one per kid, opened on its first
// signature.
func (r *Keyring) keyOf(k StoredKey) Key {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rk := r.opened[k.KeyID]; rk != nil {
		return rk
	}
	rk := &ringKey{ring: r, stored: k}
	r.opened[k.KeyID] = rk
	return rk
}

// ringKey is a key of a keyring: its public half from the store, its
// private half opened by the wrapper on the first signature.
type ringKey struct {
	ring   *Keyring
	stored StoredKey

	mu   sync.Mutex
	pub  *ecdsa.PublicKey
	priv *ecdsa.PrivateKey
}

func (k *ringKey) PublicKey(context.Context) (*ecdsa.PublicKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.pub != nil {
		return k.pub, nil
	}
	parsed, err := x509.ParsePKIXPublicKey(k.stored.Public)
	if err != nil {
		return nil, fmt.Errorf("admissionpass: key %s: parse public key: %w", k.stored.KeyID, err)
	}
	pub, ok := parsed.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		return nil, fmt.Errorf("admissionpass: key %s: public key is %T, want a P-256 key", k.stored.KeyID, parsed)
	}
	k.pub = pub
	return pub, nil
}

func (k *ringKey) SignASN1(ctx context.Context, message []byte) ([]byte, error) {
	k.mu.Lock()
	priv := k.priv
	if priv == nil {
		var err error
		priv, err = k.ring.wrap.Unwrap(ctx, k.stored.Wrapped, encryptionContext(k.stored.SignFrom))
		if err != nil {
			k.mu.Unlock()
			return nil, fmt.Errorf("%w: open key %s: %w", ErrKeysUnavailable, k.stored.KeyID, err)
		}
		if kid, err := thumbprint(&priv.PublicKey); err != nil || kid != k.stored.KeyID {
			k.mu.Unlock()
			return nil, fmt.Errorf("%w: key %s opened to another key", ErrKeysUnavailable, k.stored.KeyID)
		}
		k.priv, k.pub = priv, &priv.PublicKey
	}
	k.mu.Unlock()
	digest := sha256.Sum256(message)
	return ecdsa.SignASN1(rand.Reader, priv, digest[:])
}
