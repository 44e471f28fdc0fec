package jwks

import (
	"testing"
	"time"
)

// TestTTL: a JWKS is kept for its max-age within the bounds, else the default.
func TestTTL(t *testing.T) {
	c := New(Config{DefaultTTL: 5 * time.Minute, MinTTL: time.Minute, MaxTTL: 24 * time.Hour})
	for cacheControl, want := range map[string]time.Duration{
		"public, max-age=120": 2 * time.Minute,
		`max-age="90"`:        90 * time.Second,
		"MAX-AGE = 600":       10 * time.Minute,
		"max-age=1":           time.Minute,
		"max-age=99999999999": 24 * time.Hour,
		"":                    5 * time.Minute,
		"no-cache":            5 * time.Minute,
		"max-age=soon":        5 * time.Minute,
	} {
		if got := c.ttl(cacheControl); got != want {
			t.Errorf("Cache-Control %q: %v, want %v", cacheControl, got, want)
		}
	}
}
