package passverify_test

import (
	"errors"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/testing/passtest"
	"github.com/example/waitingroom/passverify"
)

func TestMemoryGuard(t *testing.T) {
	passtest.ReplayGuardContract(t, func(*testing.T) passverify.ReplayGuard { return passverify.NewMemoryGuard(0) })
}

// TestMemoryGuardBounds: passes are forgotten when they expire; a full
// guard refuses rather than forgets an unexpired one.
func TestMemoryGuardBounds(t *testing.T) {
	clock := passtest.NewClock(time.Date(2026, 5, 19, 10, 0, 0, 0, time.UTC))
	g := passverify.NewMemoryGuard(2)
	passverify.SetGuardClock(g, clock.Now)
	use := func(jti string, until time.Duration) (bool, error) {
		return g.FirstUse(t.Context(), jti, clock.Now().Add(until))
	}
	steps := []struct {
		name    string
		advance time.Duration
		jti     string
		until   time.Duration
		want    bool
		wantErr error
	}{
		{"a", 0, "a", time.Minute, true, nil},
		{"b", 0, "b", 2 * time.Minute, true, nil},
		{"a again", 0, "a", time.Minute, false, nil},
		{"c while full", 0, "c", time.Minute, false, passverify.ErrGuardFull},
		{"a again while full", 0, "a", time.Minute, false, nil},
		{"c once a expired", time.Minute, "c", time.Minute, true, nil},
		{"a after it expired", 0, "a", time.Minute, false, passverify.ErrGuardFull},
		{"b still held", 0, "b", time.Minute, false, nil},
		{"a once b expired", time.Minute, "a", time.Minute, true, nil},
	}
	for _, s := range steps {
		clock.Advance(s.advance)
		got, err := use(s.jti, s.until)
		if got != s.want || !errors.Is(err, s.wantErr) || (s.wantErr == nil && err != nil) {
			t.Errorf("%s: FirstUse = %v, %v; want %v, %v", s.name, got, err, s.want, s.wantErr)
		}
	}
}
