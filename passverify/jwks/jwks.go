// Package jwks keeps a JSON Web Key Set fetched over HTTP, with the care a
// verifier of tokens needs: bounded caching, few fetches, a stale key while
// the set is down. passverify and internal/enqueue share it.
package jwks

import (
	"context"
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

// MaxSize bounds the JWKS document read.
const MaxSize = 1 << 20

// ErrUnknownKey means the JWKS at hand has no usable key of the kid.
var ErrUnknownKey = errors.New("jwks: unknown kid")

// Config configures a Cache; every field but Extra is required.
type Config struct {
	URL            string                       // the JWKS, already checked to be an absolute http(s) URL
	Client         *http.Client                 // fetches it
	FetchTimeout   time.Duration                // bounds one fetch
	DefaultTTL     time.Duration                // how long a set without a Cache-Control max-age is kept
	MinTTL, MaxTTL time.Duration                // bound the max-age
	MinRefresh     time.Duration                // the least time between two fetches for an unknown kid or after a failure
	Now            func() time.Time             // the clock
	Usable         func(k jose.JSONWebKey) bool // which keys to keep (those with a kid only)
	Extra          func(doc []byte) any         // optional: what else to keep of a fetched document
}

// Cache holds the usable keys of one JWKS. It fetches the set when it has
// none, when its copy is past max-age, or for an unknown kid, at most once per
// MinRefresh; concurrent lookups share one fetch. A stale known key answers
// while a fetch is under way or none may start. It is safe for concurrent use.
type Cache struct {
	cfg     Config
	fetches singleflight.Group
	// OnWait, if set before first use, is called as a lookup turns to the shared fetch (tests).
	OnWait func()

	mu       sync.Mutex
	keys     map[string]jose.JSONWebKey // nil until a fetch succeeds
	extra    any                        // Config.Extra of the document of keys
	expires  time.Time                  // when keys need a refresh
	tried    time.Time                  // the last fetch's start
	lastErr  error                      // the last fetch's error
	fetching bool                       // a fetch is under way
}

// New returns a Cache for cfg; it fetches nothing until the first lookup.
func New(cfg Config) *Cache { return &Cache{cfg: cfg} }

// Key returns the usable key kid, fetching the JWKS when needed and allowed.
// Its error is ErrUnknownKey when the set at hand lacks kid; any other error
// says why no set is at hand (the fetch's failure, or ctx's).
func (c *Cache) Key(ctx context.Context, kid string) (jose.JSONWebKey, error) {
	c.mu.Lock()
	key, known := c.keys[kid]
	current := known && (c.cfg.Now().Before(c.expires) || c.fetching)
	c.mu.Unlock()
	if current {
		return key, nil
	}
	if err := c.await(ctx); err != nil {
		return jose.JSONWebKey{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	key, known = c.keys[kid]
	switch {
	case known:
		return key, nil // stale, if the fetch failed: better than nothing while the JWKS is down
	case c.keys == nil:
		return jose.JSONWebKey{}, c.lastErr
	}
	return jose.JSONWebKey{}, fmt.Errorf("%w %q", ErrUnknownKey, kid)
}

// Extra returns what Config.Extra kept of the last document fetched,
// refreshing it first when past its max-age unless a fetch is under way
// (it never waits for one); nil with none fetched.
func (c *Cache) Extra(ctx context.Context) any {
	c.mu.Lock()
	current := c.fetching || c.keys != nil && c.cfg.Now().Before(c.expires)
	c.mu.Unlock()
	if !current {
		_ = c.await(ctx) // a failed fetch leaves the last copy, if any
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.extra
}

// await runs, or joins, the shared refresh of the JWKS, until ctx is done.
func (c *Cache) await(ctx context.Context) error {
	if c.OnWait != nil {
		c.OnWait()
	}
	// The shared fetch outlives a lookup that leaves when ctx is done.
	fetched := c.fetches.DoChan("", func() (any, error) { c.refresh(ctx); return nil, nil })
	select {
	case <-fetched:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// refresh fetches the JWKS into the cache, at most once per MinRefresh.
func (c *Cache) refresh(ctx context.Context) {
	c.mu.Lock()
	if !c.tried.IsZero() && c.cfg.Now().Sub(c.tried) < c.cfg.MinRefresh {
		c.mu.Unlock()
		return
	}
	c.tried, c.fetching = c.cfg.Now(), true
	c.mu.Unlock()
	keys, extra, ttl, err := c.fetch(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		c.keys, c.extra, c.expires = keys, extra, c.cfg.Now().Add(ttl)
	}
	c.lastErr, c.fetching = err, false
}

// fetch reads the JWKS, to its own timeout, and returns its usable keys,
// the Extra of it and how long to keep them.
func (c *Cache) fetch(ctx context.Context) (map[string]jose.JSONWebKey, any, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.FetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.URL, nil)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("fetch JWKS: %w", err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := c.cfg.Client.Do(req)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("fetch JWKS: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, 0, fmt.Errorf("fetch JWKS: %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxSize+1))
	if err != nil {
		return nil, nil, 0, fmt.Errorf("read JWKS: %w", err)
	}
	if len(body) > MaxSize {
		return nil, nil, 0, errors.New("JWKS larger than 1 MiB")
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, nil, 0, fmt.Errorf("parse JWKS: %w", err)
	}
	keys := make(map[string]jose.JSONWebKey)
	for _, raw := range set.Keys { // an entry that is not a usable key is skipped, not fatal
		var k jose.JSONWebKey
		if k.UnmarshalJSON(raw) == nil && k.KeyID != "" && k.IsPublic() && c.cfg.Usable(k) {
			keys[k.KeyID] = k
		}
	}
	var extra any
	if c.cfg.Extra != nil {
		extra = c.cfg.Extra(body)
	}
	return keys, extra, c.ttl(resp.Header.Get("Cache-Control")), nil
}

// ttl is the Cache-Control max-age (RFC 9111 §5.2.2.1; a quoted value is
// tolerated), or DefaultTTL without one, within the bounds.
func (c *Cache) ttl(cacheControl string) time.Duration {
	ttl := c.cfg.DefaultTTL
	for directive := range strings.SplitSeq(cacheControl, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(directive), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "max-age") {
			continue
		}
		if s, err := strconv.ParseUint(strings.Trim(strings.TrimSpace(value), `"`), 10, 64); err == nil {
			ttl = time.Duration(min(s, uint64(c.cfg.MaxTTL/time.Second))) * time.Second
		}
		break
	}
	return min(max(ttl, c.cfg.MinTTL), c.cfg.MaxTTL)
}
