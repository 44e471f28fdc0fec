package bench

import (
	"fmt"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/polling"
)

// NamedPolicy is a polling policy with the name it was asked for by.
type NamedPolicy struct {
	Name   string
	Policy polling.Policy
}

// ParsePolicies reads a comma-separated policy list such as
// "fixed:3s,tiers": fixed:DURATION (polling.Fixed) or the name of a policy
// of reg, without an argument.
func ParsePolicies(list string, reg polling.Registry) ([]NamedPolicy, error) {
	var out []NamedPolicy
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		p, err := parsePolicy(item, reg)
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

// parsePolicy reads one item of a policy list.
func parsePolicy(item string, reg polling.Registry) (polling.Policy, error) {
	name, arg, _ := strings.Cut(item, ":")
	if name == "fixed" {
		d, err := time.ParseDuration(arg)
		if err != nil || d < time.Millisecond {
			return nil, fmt.Errorf("want fixed:DURATION of at least 1ms (fixed:3s)")
		}
		return polling.Fixed(d), nil
	}
	p, ok := reg[name]
	switch {
	case !ok:
		return nil, fmt.Errorf("unknown, want fixed:DURATION or one of %s", strings.Join(reg.Names(), ", "))
	case arg != "":
		return nil, fmt.Errorf("%s takes no argument; set its parameters with -%s", name, name)
	}
	return p, nil
}
