package enqueue

// MaxSites is how many JWKS URLs a Verifier keeps keys of.
const MaxSites = maxSites

// Sites returns how many JWKS URLs v keeps keys of.
func Sites(v *Verifier) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.caches)
}
