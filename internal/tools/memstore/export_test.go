package memstore

import "github.com/example/waitingroom/internal/clock"

// NewWithClock is New with c, not the real clock, dating the capacity records' expiry.
func NewWithClock(c clock.Clock) *Store {
	s := New()
	s.clock = c
	return s
}
