package bench

import (
	"errors"
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
		name, arg, _ := strings.Cut(item, ":")
		p, ok := reg[name]
		var err error
		switch d, derr := time.ParseDuration(arg); {
		case item == "":
			continue
		case name == "fixed" && (derr != nil || d < time.Millisecond):
			err = errors.New("want fixed:DURATION of at least 1ms (fixed:3s)")
		case name == "fixed":
			p = polling.Fixed(d)
		case !ok:
			err = fmt.Errorf("unknown, want fixed:DURATION or one of %s", strings.Join(reg.Names(), ", "))
		case arg != "":
			err = fmt.Errorf("%s takes no argument; set its parameters with -%s", name, name)
		}
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
