package polling

import (
	"math/rand/v2"
	"time"
)

// Push timing: a subscribed person is woken by the sender at their turn, so
// they poll only as a fallback (docs/design.md, "Your turn by push").
const (
	// PushSlack is how long after the earliest admission a subscribed person
	// polls when no push came: the sender's minute, with margin.
	PushSlack = time.Minute
	// PushFallback bounds a subscribed person's sleep, so that a push lost
	// by the push service costs a wait of at most this long.
	PushFallback = 10 * time.Minute
)

// Pushed is the retry delay of a subscribed person told told by the policy:
// the earliest admission plus PushSlack, within [told, PushFallback], or
// PushFallback while paused or without an estimate. A fallback is spread
// over its last quarter (rng: nil for math/rand/v2's), so that a crowd
// that entered at once does not poll at once.
func Pushed(s Situation, told time.Duration, rng *rand.Rand) time.Duration {
	earliest := max(s.Earliest, s.HeldEarliest)
	d := PushFallback
	if !s.Paused && earliest > 0 {
		d = min(earliest+PushSlack, PushFallback)
	}
	if d == PushFallback {
		d -= uniform(PushFallback/4, rng)
	}
	return max(told, d)
}
