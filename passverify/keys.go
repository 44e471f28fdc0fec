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
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/sync/singleflight"
)

// maxJWKSSize bounds the JWKS document read.
const maxJWKSSize = 1 << 20

// keyCache holds the JWKS's usable keys and fetches the JWKS when it has
// none, when its copy is past max-age, or for an unknown kid, at most once
// per MinRefreshInterval; concurrent lookups share one fetch. A stale known
// key answers at once while a fetch is under way, and when none may start.
type keyCache struct {
	cfg     *Config
	fetches singleflight.Group

	mu       sync.Mutex
	keys     map[string]*ecdsa.PublicKey // nil until a fetch succeeds
	expires  time.Time                   // when keys need a refresh
	tried    time.Time                   // the last fetch's start
	lastErr  error                       // the last fetch's error
	fetching bool                        // a fetch is under way

	onWait func() // tests: called as a lookup turns to the shared fetch
}

// get returns the key kid, fetching the JWKS when needed and allowed.
func (c *keyCache) get(ctx context.Context, kid string) (*ecdsa.PublicKey, error) {
	c.mu.Lock()
	key, known := c.keys[kid]
	current := known && (c.cfg.Now().Before(c.expires) || c.fetching)
	c.mu.Unlock()
	if current {
		return key, nil
	}
	if c.onWait != nil {
		c.onWait()
	}
	// The fetch runs in a goroutine of its own, to its own timeout: a
	// lookup may leave it when ctx is done, the others still wait for it.
	fetched := c.fetches.DoChan("", func() (any, error) { c.refresh(ctx); return nil, nil })
	select {
	case <-fetched:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrKeysUnavailable, ctx.Err())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	key, known = c.keys[kid]
	switch {
	case known:
		return key, nil // stale, if the fetch failed: better than nothing while the JWKS is down
	case c.keys == nil:
		return nil, fmt.Errorf("%w: %w", ErrKeysUnavailable, c.lastErr)
	}
	return nil, fmt.Errorf("%w: kid %q", ErrUnknownKey, kid)
}

// refresh fetches the JWKS into the cache unless the last fetch started
// less than MinRefreshInterval ago.
func (c *keyCache) refresh(ctx context.Context) {
	c.mu.Lock()
	if !c.tried.IsZero() && c.cfg.Now().Sub(c.tried) < c.cfg.MinRefreshInterval {
		c.mu.Unlock()
		return
	}
	c.tried, c.fetching = c.cfg.Now(), true
	c.mu.Unlock()
	keys, ttl, err := c.fetch(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		c.keys, c.expires = keys, c.cfg.Now().Add(ttl)
	}
	c.lastErr, c.fetching = err, false
}

// fetch reads the JWKS and how long to keep it. It runs to its own
// timeout even if ctx is cancelled, since other lookups wait for it.
func (c *keyCache) fetch(ctx context.Context) (map[string]*ecdsa.PublicKey, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.FetchTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.JWKSURL, nil) // New parsed the URL
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("fetch JWKS: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("fetch JWKS: %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSSize+1))
	if err != nil {
		return nil, 0, fmt.Errorf("read JWKS: %w", err)
	}
	if len(body) > maxJWKSSize {
		return nil, 0, errors.New("JWKS larger than 1 MiB")
	}
	keys, err := parseJWKS(body)
	if err != nil {
		return nil, 0, err
	}
	return keys, c.ttl(resp.Header.Get("Cache-Control")), nil
}

// ttl is the Cache-Control max-age (RFC 9111 §5.2.2.1; a quoted value is
// tolerated), or DefaultCacheTTL without one, within the bounds.
func (c *keyCache) ttl(cacheControl string) time.Duration {
	ttl := DefaultCacheTTL
	for directive := range strings.SplitSeq(cacheControl, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(directive), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "max-age") {
			continue
		}
		if s, err := strconv.ParseUint(strings.Trim(strings.TrimSpace(value), `"`), 10, 64); err == nil {
			ttl = time.Duration(min(s, uint64(c.cfg.MaxCacheTTL/time.Second))) * time.Second
		}
		break
	}
	return min(max(ttl, c.cfg.MinCacheTTL), c.cfg.MaxCacheTTL)
}

// parseJWKS returns the keys of a JWKS that can verify ES256: public EC
// P-256 keys with a kid, for signing, with alg ES256 or none. Other keys
// are skipped.
func parseJWKS(doc []byte) (map[string]*ecdsa.PublicKey, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(doc, &set); err != nil {
		return nil, fmt.Errorf("parse JWKS: %w", err)
	}
	keys := make(map[string]*ecdsa.PublicKey)
	for _, raw := range set.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			continue // a key of a kind this package does not use
		}
		pub, ok := k.Key.(*ecdsa.PublicKey)
		if !ok || pub.Curve != elliptic.P256() || k.KeyID == "" ||
			(k.Use != "" && k.Use != "sig") || (k.Algorithm != "" && k.Algorithm != string(jose.ES256)) {
			continue
		}
		keys[k.KeyID] = pub
	}
	return keys, nil
}
