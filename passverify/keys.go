package passverify

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// maxJWKSSize bounds the JWKS document read.
const maxJWKSSize = 1 << 20

// key returns the key kid, fetching the JWKS when needed and allowed.
func (v *Verifier) key(ctx context.Context, kid string) (*ecdsa.PublicKey, error) {
	v.mu.Lock()
	key, known := v.keys[kid]
	current := known && (v.cfg.Now().Before(v.expires) || v.fetching)
	v.mu.Unlock()
	if current {
		return key, nil
	}
	if err := v.await(ctx); err != nil {
		return nil, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	key, known = v.keys[kid]
	switch {
	case known:
		return key, nil // stale, if the fetch failed: better than nothing while the JWKS is down
	case v.keys == nil:
		return nil, fmt.Errorf("%w: %w", ErrKeysUnavailable, v.lastErr)
	}
	return nil, fmt.Errorf("%w: kid %q", ErrUnknownKey, kid)
}

// await runs, or joins, the shared refresh of the JWKS, until ctx is done.
func (v *Verifier) await(ctx context.Context) error {
	if v.onWait != nil {
		v.onWait()
	}
	// The shared fetch outlives a lookup that leaves when ctx is done.
	fetched := v.fetches.DoChan("", func() (any, error) { v.refresh(ctx); return nil, nil })
	select {
	case <-fetched:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrKeysUnavailable, ctx.Err())
	}
}

// refresh fetches the JWKS into the cache, at most once per MinRefreshInterval.
func (v *Verifier) refresh(ctx context.Context) {
	v.mu.Lock()
	if !v.tried.IsZero() && v.cfg.Now().Sub(v.tried) < v.cfg.MinRefreshInterval {
		v.mu.Unlock()
		return
	}
	v.tried, v.fetching = v.cfg.Now(), true
	v.mu.Unlock()
	set, err := v.fetch(ctx)
	v.mu.Lock()
	defer v.mu.Unlock()
	if err == nil {
		v.keys, v.failOpen, v.expires = set.keys, set.failOpen, v.cfg.Now().Add(set.ttl)
	}
	v.lastErr, v.fetching = err, false
}

// jwks is what a fetched JWKS gives the cache.
type jwks struct {
	keys     map[string]*ecdsa.PublicKey // the usable keys
	failOpen time.Time                   // the program's break-glass end; zero: none
	ttl      time.Duration               // how long to keep them
}

// fetch reads the JWKS, to its own timeout.
func (v *Verifier) fetch(ctx context.Context) (jwks, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), v.cfg.FetchTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, v.cfg.JWKSURL, nil) // New parsed the URL
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := v.cfg.HTTPClient.Do(req)
	if err != nil {
		return jwks{}, fmt.Errorf("fetch JWKS: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return jwks{}, fmt.Errorf("fetch JWKS: %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSSize+1))
	if err != nil {
		return jwks{}, fmt.Errorf("read JWKS: %w", err)
	}
	if len(body) > maxJWKSSize {
		return jwks{}, errors.New("JWKS larger than 1 MiB")
	}
	var set struct {
		Keys     []json.RawMessage `json:"keys"`
		FailOpen json.RawMessage   `json:"failOpen"` // read apart: a bad one costs the break-glass, not the keys
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return jwks{}, fmt.Errorf("parse JWKS: %w", err)
	}
	// Keep the keys that can verify ES256, skip the others.
	keys := make(map[string]*ecdsa.PublicKey)
	for _, raw := range set.Keys {
		var k jose.JSONWebKey
		if k.UnmarshalJSON(raw) != nil {
			continue
		}
		pub, ok := k.Key.(*ecdsa.PublicKey)
		if ok && pub.Curve == elliptic.P256() && k.KeyID != "" &&
			(k.Use == "" || k.Use == "sig") && (k.Algorithm == "" || k.Algorithm == string(jose.ES256)) {
			keys[k.KeyID] = pub
		}
	}
	return jwks{keys: keys, failOpen: v.failOpenIn(set.FailOpen), ttl: v.ttl(resp.Header.Get("Cache-Control"))}, nil
}

// failOpenIn is the program's break-glass end in a JWKS's failOpen member,
// {"<programId>": "<RFC 3339>", ...}; zero without a valid one.
func (v *Verifier) failOpenIn(member json.RawMessage) time.Time {
	var ends map[string]string
	if len(member) == 0 || json.Unmarshal(member, &ends) != nil {
		return time.Time{}
	}
	end, err := time.Parse(time.RFC3339, ends[v.cfg.ProgramID])
	if err != nil {
		return time.Time{}
	}
	return end
}

// ttl is the Cache-Control max-age (RFC 9111 §5.2.2.1; a quoted value is
// tolerated), or DefaultCacheTTL without one, within the bounds.
func (v *Verifier) ttl(cacheControl string) time.Duration {
	ttl := DefaultCacheTTL
	for directive := range strings.SplitSeq(cacheControl, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(directive), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "max-age") {
			continue
		}
		if s, err := strconv.ParseUint(strings.Trim(strings.TrimSpace(value), `"`), 10, 64); err == nil {
			ttl = time.Duration(min(s, uint64(v.cfg.MaxCacheTTL/time.Second))) * time.Second
		}
		break
	}
	return min(max(ttl, v.cfg.MinCacheTTL), v.cfg.MaxCacheTTL)
}
