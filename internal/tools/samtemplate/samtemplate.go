// Package samtemplate reads the parts of the AWS SAM template (template.yaml) that the code must agree
// with: the functions with Globals applied, their HTTP API routes, environment, policies and build
// metadata. Short forms (!Ref, !GetAtt, ...) read as their long forms.
package samtemplate

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// DefaultRoute is the route key of an HTTP API's catch-all route, which an HttpApi event without Path and Method creates.
const DefaultRoute = "$default"

// Template is a SAM template, as much of it as this project reads.
type Template struct {
	Parameters map[string]Parameter `json:"Parameters"`
	Globals    struct {
		Function Function `json:"Function"`
	} `json:"Globals"`
	Resources  map[string]Resource `json:"Resources"`
	Outputs    map[string]any      `json:"Outputs"`
	Conditions map[string]any      `json:"Conditions"` // as written; Condition evaluates them
}

// Parameter is a template parameter.
type Parameter struct {
	Type           string `json:"Type"`
	Default        any    `json:"Default"`
	AllowedValues  []any  `json:"AllowedValues"`
	AllowedPattern string `json:"AllowedPattern"`
	MinValue       any    `json:"MinValue"` // with MaxValue, bounds a Number parameter (nil: unbounded)
	MaxValue       any    `json:"MaxValue"`
}

// Resource is a template resource; Properties stay raw until a typed accessor (Function) reads them.
type Resource struct {
	Type                string          `json:"Type"`
	Condition           string          `json:"Condition"`
	Metadata            map[string]any  `json:"Metadata"`
	DeletionPolicy      string          `json:"DeletionPolicy"`
	UpdateReplacePolicy string          `json:"UpdateReplacePolicy"`
	Properties          json.RawMessage `json:"Properties"`
}

// Function is the properties of an AWS::Serverless::Function (or of Globals.Function).
type Function struct {
	Runtime       string   `json:"Runtime"`
	Handler       string   `json:"Handler"`
	Architectures []string `json:"Architectures"`
	Timeout       int      `json:"Timeout"`
	MemorySize    int      `json:"MemorySize"`
	CodeURI       any      `json:"CodeUri"`
	Environment   struct {
		Variables map[string]any `json:"Variables"`
	} `json:"Environment"`
	Policies      []any             `json:"Policies"` // managed policy names, SAM policy templates or documents, as written
	Events        map[string]Event  `json:"Events"`
	LoggingConfig map[string]string `json:"LoggingConfig"`
}

// Event is a function's event source; the Properties are those of an HttpApi event.
type Event struct {
	Type       string `json:"Type"`
	Properties struct {
		APIID  any    `json:"ApiId"`
		Path   string `json:"Path"`
		Method string `json:"Method"`
		Auth   struct {
			Authorizer string `json:"Authorizer"`
		} `json:"Auth"`
	} `json:"Properties"`
}

// RouteKey is the HTTP API route key an HttpApi event creates, as in a request's routeKey: "ANY /path",
// or $default for an event without Path and Method.
func (e Event) RouteKey() string {
	p := e.Properties
	if p.Path == "" && p.Method == "" {
		return DefaultRoute
	}
	return strings.ToUpper(p.Method) + " " + p.Path
}

// Load reads and parses the template at path.
func Load(path string) (*Template, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Parse parses a template from YAML (or JSON, a subset).
func Parse(src []byte) (*Template, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, err
	}
	if err := expand(&doc); err != nil {
		return nil, err
	}
	var tree any
	if err := doc.Decode(&tree); err != nil {
		return nil, err
	}
	// Through JSON into the typed structs: encoding/json does the field matching.
	var t Template
	b, err := json.Marshal(tree)
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// FunctionIDs returns the logical ids of the template's AWS::Serverless::Function resources, sorted.
func (t *Template) FunctionIDs() []string { return t.IDsOfType("AWS::Serverless::Function") }

// Function returns the properties of function id with Globals.Function applied as SAM applies them:
// the function's own value wins, and environment variables are merged.
func (t *Template) Function(id string) (Function, error) {
	r, ok := t.Resources[id]
	if !ok || r.Type != "AWS::Serverless::Function" {
		return Function{}, fmt.Errorf("no AWS::Serverless::Function %q in the template", id)
	}
	// The function's properties decode over a copy of Globals': the ones it sets replace them, its variables join them.
	g := t.Globals.Function
	f := g
	f.Architectures, f.Events, f.Policies = slices.Clone(g.Architectures), nil, nil // SAM's Globals have no Events
	f.Environment.Variables = maps.Clone(g.Environment.Variables)
	if err := json.Unmarshal(r.Properties, &f); err != nil {
		return Function{}, fmt.Errorf("%s: %w", id, err)
	}
	f.Policies = append(slices.Clone(g.Policies), f.Policies...)
	return f, nil
}

// Properties returns resource id's properties as generic values (nil if there is no such resource).
func (t *Template) Properties(id string) map[string]any {
	var props map[string]any
	_ = json.Unmarshal(t.Resources[id].Properties, &props) // fails, leaving nil, without such a resource
	return props
}

// MainPackage returns the directory of function id's main package: QueueFunction's is functions/queue.
func MainPackage(id string) string {
	return "functions/" + strings.ToLower(strings.TrimSuffix(id, "Function"))
}

// TableRefs maps the logical id of each DynamoDB table in the template to name, for Env.
func (t *Template) TableRefs(name string) map[string]string {
	return t.RefsOfType("AWS::DynamoDB::Table", name)
}

// RefsOfType maps the logical id of each resource of type typ to name, for Env.
func (t *Template) RefsOfType(typ, name string) map[string]string {
	refs := map[string]string{}
	for id, r := range t.Resources {
		if r.Type == typ {
			refs[id] = name
		}
	}
	return refs
}

// IDsOfType returns the logical ids of the resources of type typ, sorted.
func (t *Template) IDsOfType(typ string) []string {
	return slices.Sorted(maps.Keys(t.RefsOfType(typ, "")))
}

// Routes maps each HTTP API route key of the template to the logical id of the function it invokes.
func (t *Template) Routes() (map[string]string, error) {
	routes := map[string]string{}
	for _, id := range t.FunctionIDs() {
		f, err := t.Function(id)
		if err != nil {
			return nil, err
		}
		for _, e := range f.Events {
			if e.Type != "HttpApi" {
				continue
			}
			key := e.RouteKey()
			if other, dup := routes[key]; dup {
				return nil, fmt.Errorf("route %q goes to both %s and %s", key, other, id)
			}
			routes[key] = id
		}
	}
	return routes, nil
}

// Env returns function id's environment with every value resolved to a string: a literal, a !Ref to
// a parameter (its default) or to a resource (as refs gives it), an !If at the parameters' defaults,
// a !Sub of such !Refs. Anything else is an error.
func (t *Template) Env(id string, refs map[string]string) (map[string]string, error) {
	f, err := t.Function(id)
	if err != nil {
		return nil, err
	}
	env := make(map[string]string, len(f.Environment.Variables))
	for k, v := range f.Environment.Variables {
		s, err := t.resolve(v, refs)
		if err != nil {
			return nil, fmt.Errorf("%s: environment variable %s: %w", id, k, err)
		}
		env[k] = s
	}
	return env, nil
}

func (t *Template) resolve(v any, refs map[string]string) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case float64, bool:
		return fmt.Sprint(v), nil
	case map[string]any:
		if args, ok := v["Fn::If"].([]any); ok && len(v) == 1 && len(args) == 3 {
			name, _ := args[0].(string)
			holds, err := t.Condition(name, nil)
			if err != nil {
				return "", err
			}
			if holds {
				return t.resolve(args[1], refs)
			}
			return t.resolve(args[2], refs)
		}
		if sub, ok := v["Fn::Sub"].(string); ok && len(v) == 1 {
			return t.sub(sub, refs)
		}
		if name, ok := v["Ref"].(string); ok && len(v) == 1 {
			if p, ok := t.Parameters[name]; ok {
				if p.Default == nil {
					return "", fmt.Errorf("parameter %s has no default", name)
				}
				return t.resolve(p.Default, refs)
			}
			if s, ok := refs[name]; ok {
				return s, nil
			}
			return "", fmt.Errorf("nothing given for !Ref %s", name)
		}
	}
	return "", fmt.Errorf("cannot resolve %v", v)
}

var subVar = regexp.MustCompile(`\$\{([^}]*)\}`)

// sub resolves a one-argument !Sub: ${Name} as !Ref Name, ${!Text} as the literal ${Text};
// ${Resource.Attribute} is an error.
func (t *Template) sub(s string, refs map[string]string) (string, error) {
	var errs []error
	out := subVar.ReplaceAllStringFunc(s, func(m string) string {
		name := m[2 : len(m)-1]
		if lit, ok := strings.CutPrefix(name, "!"); ok {
			return "${" + lit + "}"
		}
		if strings.Contains(name, ".") {
			errs = append(errs, fmt.Errorf("!Sub %q: cannot resolve ${%s}", s, name))
			return m
		}
		v, err := t.resolve(map[string]any{"Ref": name}, refs)
		if err != nil {
			errs = append(errs, fmt.Errorf("!Sub %q: %w", s, err))
		}
		return v
	})
	return out, errors.Join(errs...)
}

// intrinsics are the short-form tags that take the "Fn::" prefix in their long form.
var intrinsics = []string{"Base64", "Cidr", "FindInMap", "GetAtt", "GetAZs", "ImportValue", "Join", "Select",
	"Split", "Sub", "Transform", "And", "Equals", "If", "Not", "Or", "ToJsonString", "Length"}

// expand rewrites n's short-form intrinsic functions (!Ref x) into their long form ({Ref: x}) in place,
// and makes every mapping key a string, so that n decodes into the JSON-shaped value CloudFormation reads.
func expand(n *yaml.Node) error {
	for i, c := range n.Content {
		if n.Kind == yaml.MappingNode && i%2 == 0 {
			if c.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: mapping key is not a scalar", c.Line)
			}
			c.Tag = "!!str"
		} else if err := expand(c); err != nil {
			return err
		}
	}
	name, ok := strings.CutPrefix(n.Tag, "!")
	if !ok || strings.HasPrefix(name, "!") {
		return nil
	}
	inner := *n
	inner.Tag = ""
	if n.Kind == yaml.ScalarNode {
		inner.Tag = "!!str" // !Ref 1 names "1", it is not a number
	}
	switch {
	case name == "Ref" || name == "Condition":
	case name == "GetAtt" && n.Kind == yaml.ScalarNode:
		res, attr, found := strings.Cut(n.Value, ".")
		if !found {
			return fmt.Errorf("line %d: !GetAtt %q: want Resource.Attribute", n.Line, n.Value)
		}
		inner = yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{str(res), str(attr)}}
		name = "Fn::GetAtt"
	case slices.Contains(intrinsics, name):
		name = "Fn::" + name
	default:
		return fmt.Errorf("line %d: unknown tag !%s", n.Line, name)
	}
	*n = yaml.Node{Kind: yaml.MappingNode, Line: n.Line, Content: []*yaml.Node{str(name), &inner}}
	return nil
}

func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

// RouteFor returns the route key and function that API Gateway would choose for a request with method
// and path, ranking the matching routes as it does (matchPath, then the method's own before ANY); else $default.
func (t *Template) RouteFor(method, path string) (key, function string, err error) {
	routes, err := t.Routes()
	if err != nil {
		return "", "", err
	}
	var best string
	var bestRank []int
	for k := range routes {
		m, p, ok := strings.Cut(k, " ")
		if !ok || m != "ANY" && m != strings.ToUpper(method) {
			continue
		}
		rank, ok := matchPath(p, path)
		if !ok {
			continue
		}
		if m != "ANY" {
			rank = append(rank, 1)
		} else {
			rank = append(rank, 0)
		}
		if best == "" || slices.Compare(rank, bestRank) > 0 {
			best, bestRank = k, rank
		}
	}
	if best == "" {
		if _, ok := routes[DefaultRoute]; !ok {
			return "", "", fmt.Errorf("no route of the template matches %s %s, and it has no %s route", method, path, DefaultRoute)
		}
		best = DefaultRoute
	}
	return best, routes[best], nil
}

// matchPath matches a request path against a route's path and ranks the match: first 1 without a greedy
// variable, then per route segment 2 for a literal, 1 for a variable, 0 for a greedy one.
func matchPath(route, path string) ([]int, bool) {
	rs := strings.Split(strings.Trim(route, "/"), "/")
	ps := strings.Split(strings.Trim(path, "/"), "/")
	rank := []int{1}
	for i, r := range rs {
		switch {
		case strings.HasPrefix(r, "{") && strings.HasSuffix(r, "+}"):
			if i >= len(ps) || ps[i] == "" {
				return nil, false
			}
			rank[0] = 0
			return append(rank, 0), true
		case i >= len(ps):
			return nil, false
		case strings.HasPrefix(r, "{") && strings.HasSuffix(r, "}"):
			if ps[i] == "" {
				return nil, false
			}
			rank = append(rank, 1)
		case r == ps[i]:
			rank = append(rank, 2)
		default:
			return nil, false
		}
	}
	return rank, len(rs) == len(ps)
}

// Condition evaluates the template's condition name as CloudFormation would with the parameter values params (else their defaults).
func (t *Template) Condition(name string, params map[string]string) (bool, error) {
	return t.evalBool(map[string]any{"Condition": name}, params, nil)
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
			c, ok := t.Conditions[name]
			switch {
			case slices.Contains(seen, name):
				return false, fmt.Errorf("condition %s refers to itself", name)
			case !ok:
				return false, fmt.Errorf("no condition %q in the template", name)
			}
			b, err := t.evalBool(c, params, append(seen, name))
			if err != nil {
				return false, fmt.Errorf("condition %s: %w", name, err)
			}
			return b, nil
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

// evalString resolves a literal or a !Ref to a parameter, params before the parameter's default.
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

// ResourcesWith returns the resources that a stack deployed with the parameter values params has:
// those without a Condition, and those whose Condition holds.
func (t *Template) ResourcesWith(params map[string]string) (map[string]Resource, error) {
	return deployed(t, "resource", t.Resources, params, func(r Resource) string { return r.Condition })
}

// OutputsWith returns the names of the outputs that a stack deployed with the parameter values params has, sorted.
func (t *Template) OutputsWith(params map[string]string) ([]string, error) {
	outputs, err := deployed(t, "output", t.Outputs, params, func(o any) string {
		m, _ := o.(map[string]any)
		c, _ := m["Condition"].(string)
		return c
	})
	return slices.Sorted(maps.Keys(outputs)), err
}

// deployed returns m's items whose condition (cond gives it; "" for none) holds with params.
func deployed[V any](t *Template, kind string, m map[string]V, params map[string]string, cond func(V) string) (map[string]V, error) {
	out := map[string]V{}
	for _, name := range slices.Sorted(maps.Keys(m)) { // in order, for the same error each time
		if c := cond(m[name]); c != "" {
			holds, err := t.Condition(c, params)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", kind, name, err)
			}
			if !holds {
				continue
			}
		}
		out[name] = m[name]
	}
	return out, nil
}
