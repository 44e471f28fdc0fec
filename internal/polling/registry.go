package polling

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Names of the policies a deployment offers (POLL_POLICY, a program's
// pollingPolicy).
const (
	NameTiers  = "tiers"
	NameETA    = "eta"
	NameSteady = "steady"
	// DefaultName is the policy of programs that choose none, unless
	// POLL_POLICY says otherwise.
	DefaultName = NameTiers
)

// Registry is the set of policies a deployment offers, by name.
type Registry map[string]Policy

// Named returns the registry of a deployment: "tiers", "eta" and
// "steady", with tiers as eta's fallback and eta as steady's.
func Named(tiers Tiers, eta ETA, steady Steady) Registry {
	eta.Fallback = tiers
	steady.Fallback = eta
	return Registry{NameTiers: tiers, NameETA: eta, NameSteady: steady}
}

// Names returns the registry's names, sorted.
func (r Registry) Names() []string { return slices.Sorted(maps.Keys(r)) }

// Lookup returns the policy called name (DefaultName for ""), or an error
// listing the names it knows.
func (r Registry) Lookup(name string) (Policy, error) {
	if name == "" {
		name = DefaultName
	}
	if p, ok := r[name]; ok {
		return p, nil
	}
	return nil, fmt.Errorf("%q is not one of %s", name, strings.Join(r.Names(), ", "))
}
