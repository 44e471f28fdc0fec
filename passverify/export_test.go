package passverify

import "time"

// SetGuardClock makes g read the time from now.
func SetGuardClock(g *MemoryGuard, now func() time.Time) { g.now = now }
