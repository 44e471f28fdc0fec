package capacity

import "time"

// Pruned exposes pruned.
var Pruned = pruned

// Folded exposes folded.
func (c Capacity) Folded(p Program, now time.Time, delay time.Duration, ended, noShows, expired int64) Capacity {
	return c.folded(p, now, delay, ended, noShows, expired)
}

// NoShowBefore exposes noShowBefore.
func (c Capacity) NoShowBefore(now time.Time, noShowAfter time.Duration) int64 {
	return c.noShowBefore(now, noShowAfter)
}
