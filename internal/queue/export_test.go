package queue

import "time"

// MayReturn exposes mayReturn to the external tests.
func (p Program) MayReturn(from int64, now time.Time, hold time.Duration) bool {
	return p.mayReturn(from, now, hold)
}

// IdempotentTokenID exposes idempotentTokenID to the external tests.
var IdempotentTokenID = idempotentTokenID

// ProgramStates is how many programs s keeps state for: in its ticketer
// and in its program cache.
func (s *Service) ProgramStates() (tickets, cached int) {
	s.tickets.mu.Lock()
	tickets = len(s.tickets.programs)
	s.tickets.mu.Unlock()
	s.cache.mu.RLock()
	defer s.cache.mu.RUnlock()
	return tickets, len(s.cache.entries)
}
