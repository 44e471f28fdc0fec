package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/polling"
)

// NamedPolicy is a polling policy with the name it was asked for by.
type NamedPolicy struct {
	Name   string
	Policy polling.Policy
}

// PolicyFactory builds a policy from the text after "NAME:" in a policy
// list ("" when there is none).
type PolicyFactory func(arg string) (polling.Policy, error)

// Policies maps a policy name, as the simulator's -policy spells it, to its
// factory. The server resolves its names with polling.Registry instead.
type Policies map[string]PolicyFactory

// DefaultPolicies returns the factories of "fixed:DUR" (polling.Fixed)
// and of every policy of reg by its name (no argument: their parameters
// have their own flags).
func DefaultPolicies(reg polling.Registry) Policies {
	ps := Policies{
		"fixed": func(arg string) (polling.Policy, error) {
			d, err := time.ParseDuration(arg)
			if err != nil || d < time.Millisecond {
				return nil, fmt.Errorf("fixed:%s: want a duration of at least 1ms (fixed:3s)", arg)
			}
			return polling.Fixed(d), nil
		},
	}
	for name, p := range reg {
		ps[name] = func(arg string) (polling.Policy, error) {
			if arg != "" {
				return nil, fmt.Errorf("%s takes no argument; set its parameters with -%s", name, name)
			}
			return p, nil
		}
	}
	return ps
}

// Names returns the known policy names, sorted.
func (ps Policies) Names() []string {
	names := make([]string, 0, len(ps))
	for n := range ps {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Parse reads a comma-separated policy list such as "fixed:3s,tiers".
func (ps Policies) Parse(list string) ([]NamedPolicy, error) {
	var out []NamedPolicy
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, arg, _ := strings.Cut(item, ":")
		f, ok := ps[name]
		if !ok {
			return nil, fmt.Errorf("policy %q: unknown, want one of %s", item, strings.Join(ps.Names(), ", "))
		}
		p, err := f(arg)
		if err != nil {
			return nil, fmt.Errorf("policy %q: %w", item, err)
		}
		out = append(out, NamedPolicy{Name: item, Policy: p})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("policy list %q is empty", list)
	}
	return out, nil
}
