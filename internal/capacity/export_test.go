package capacity

import "time"

// Pruned exposes pruned.
var Pruned = pruned

// Folded exposes folded.
func (c Capacity) Folded(p Program, now time.Time, delay time.Duration, ended, noShows, expired int64) Capacity {
	return c.folded(p, now, delay, ended, noShows, expired)
}
