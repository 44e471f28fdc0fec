package passverify

import "time"

// SetGuardClock makes g read the time from now.
func SetGuardClock(g *MemoryGuard, now func() time.Time) { g.now = now }

// OnFetchWait makes v call f each time a lookup starts to wait for the
// JWKS fetch another lookup runs.
func OnFetchWait(v *Verifier, f func()) { v.keys.OnWait = f }
