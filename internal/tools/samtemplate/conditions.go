package samtemplate

import (
	"fmt"
	"maps"
	"slices"
)

// Condition evaluates the template's condition name as CloudFormation
// would with the parameter values params (else their defaults).
func (t *Template) Condition(name string, params map[string]string) (bool, error) {
	return t.condition(name, params, nil)
}

func (t *Template) condition(name string, params map[string]string, seen []string) (bool, error) {
	if slices.Contains(seen, name) {
		return false, fmt.Errorf("condition %s refers to itself", name)
	}
	c, ok := t.Conditions[name]
	if !ok {
		return false, fmt.Errorf("no condition %q in the template", name)
	}
	v, err := t.evalBool(c, params, append(seen, name))
	if err != nil {
		return false, fmt.Errorf("condition %s: %w", name, err)
	}
	return v, nil
}

func (t *Template) evalBool(v any, params map[string]string, seen []string) (bool, error) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return false, fmt.Errorf("cannot evaluate %v as a condition", v)
	}
	for fn, arg := range m {
		args, _ := arg.([]any)
		switch fn {
		case "Condition":
			name, _ := arg.(string)
			return t.condition(name, params, seen)
		case "Fn::Equals":
			if len(args) != 2 {
				return false, fmt.Errorf("Fn::Equals takes 2 values, got %v", arg)
			}
			a, err := t.evalString(args[0], params)
			if err != nil {
				return false, err
			}
			b, err := t.evalString(args[1], params)
			return a == b, err
		case "Fn::Not":
			if len(args) != 1 {
				return false, fmt.Errorf("Fn::Not takes 1 condition, got %v", arg)
			}
			b, err := t.evalBool(args[0], params, seen)
			return !b, err
		case "Fn::And", "Fn::Or":
			want := fn == "Fn::Or" // the value that decides
			for _, a := range args {
				b, err := t.evalBool(a, params, seen)
				if err != nil || b == want {
					return b, err
				}
			}
			return !want, nil
		}
	}
	return false, fmt.Errorf("cannot evaluate %v as a condition", v)
}

// evalString resolves a literal or a !Ref to a parameter, params before
// the parameter's default.
func (t *Template) evalString(v any, params map[string]string) (string, error) {
	if m, ok := v.(map[string]any); ok && len(m) == 1 {
		if name, ok := m["Ref"].(string); ok {
			if s, ok := params[name]; ok {
				return s, nil
			}
			if _, ok := t.Parameters[name]; !ok {
				return "", fmt.Errorf("!Ref %s: no such parameter", name)
			}
		}
	}
	return t.resolve(v, nil)
}

// ResourcesWith returns the resources that a stack deployed with the
// parameter values params has: those without a Condition, and those whose
// Condition holds.
func (t *Template) ResourcesWith(params map[string]string) (map[string]Resource, error) {
	out := map[string]Resource{}
	for _, id := range slices.Sorted(maps.Keys(t.Resources)) {
		r := t.Resources[id]
		if r.Condition != "" {
			ok, err := t.Condition(r.Condition, params)
			if err != nil {
				return nil, fmt.Errorf("resource %s: %w", id, err)
			}
			if !ok {
				continue
			}
		}
		out[id] = r
	}
	return out, nil
}

// OutputsWith returns the names of the outputs that a stack deployed with
// the parameter values params has, sorted.
func (t *Template) OutputsWith(params map[string]string) ([]string, error) {
	var names []string
	for _, name := range slices.Sorted(maps.Keys(t.Outputs)) {
		o, _ := t.Outputs[name].(map[string]any)
		if c, ok := o["Condition"].(string); ok {
			holds, err := t.Condition(c, params)
			if err != nil {
				return nil, fmt.Errorf("output %s: %w", name, err)
			}
			if !holds {
				continue
			}
		}
		names = append(names, name)
	}
	return names, nil
}
