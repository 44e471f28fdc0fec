package queue

// IdempotentTokenID exposes idempotentTokenID to the external tests.
var IdempotentTokenID = idempotentTokenID

// CachedPrograms is how many programs s keeps in its program cache.
func (s *Service) CachedPrograms() int {
	s.cache.mu.RLock()
	defer s.cache.mu.RUnlock()
	return len(s.cache.entries)
}
