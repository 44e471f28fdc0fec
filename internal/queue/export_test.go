package queue

import "time"

// MayReturn exposes mayReturn to the external tests.
func (p Program) MayReturn(from int64, now time.Time, hold time.Duration) bool {
	return p.mayReturn(from, now, hold)
}

// IdempotentTokenID exposes idempotentTokenID to the external tests.
var IdempotentTokenID = idempotentTokenID
