package tickets

// Programs is how many programs s keeps state for.
func (s *Shards) Programs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.programs)
}
