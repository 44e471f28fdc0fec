// Package emfspec checks log lines against the CloudWatch Embedded Metric
// Format specification, telling a line CloudWatch turns into metrics from one
// it drops: https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html
package emfspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Limits of the specification, the stricter of its versions.
const (
	MaxMetricsPerDirective = 100
	MaxDimensionsPerSet    = 9
	MaxValuesPerMetric     = 100
	MaxNameLength          = 255
	MaxDimensionValue      = 1024
	MaxDocumentBytes       = 256 << 10
)

// Units are the valid CloudWatch units.
var Units = []string{
	"Seconds", "Microseconds", "Milliseconds", "Bytes", "Kilobytes", "Megabytes", "Gigabytes", "Terabytes",
	"Bits", "Kilobits", "Megabits", "Gigabits", "Terabits", "Percent", "Count",
	"Bytes/Second", "Kilobytes/Second", "Megabytes/Second", "Gigabytes/Second", "Terabytes/Second",
	"Bits/Second", "Kilobits/Second", "Megabits/Second", "Gigabits/Second", "Terabits/Second",
	"Count/Second", "None",
}

// Metric is one metric a document publishes; Dimensions map names to values.
type Metric struct {
	Namespace  string
	Name       string
	Unit       string
	Dimensions map[string]string
	Values     []float64
}

// Document is a valid EMF document.
type Document struct {
	Timestamp int64          // Unix milliseconds
	Metrics   []Metric       // one per metric and dimension set
	Root      map[string]any // the root members
}

// IsEMF reports whether line is a JSON object with an "_aws" member, valid or not.
func IsEMF(line []byte) bool {
	var probe struct {
		AWS json.RawMessage `json:"_aws"`
	}
	return json.Unmarshal(line, &probe) == nil && probe.AWS != nil
}

// Parse checks line (one log event, without its newline) against the
// specification and returns what it publishes, or every violation found.
func Parse(line []byte) (Document, error) {
	if len(line) > MaxDocumentBytes {
		return Document{}, fmt.Errorf("document is %d bytes, over %d", len(line), MaxDocumentBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var root map[string]any
	if err := dec.Decode(&root); err != nil {
		return Document{}, fmt.Errorf("not a JSON object: %w", err)
	}
	if dec.More() {
		return Document{}, errors.New("data after the JSON object")
	}
	aws, ok := root["_aws"].(map[string]any)
	if !ok {
		return Document{}, errors.New(`no "_aws" object at the root`)
	}
	p := parser{root: root}
	doc := Document{Root: root}
	if ts, ok := aws["Timestamp"].(json.Number); !ok {
		p.bad("_aws.Timestamp is missing or not a number (%T)", aws["Timestamp"])
	} else if n, err := ts.Int64(); err != nil || n < 0 {
		p.bad("_aws.Timestamp %v is not a non-negative integer of milliseconds", ts)
	} else {
		doc.Timestamp = n
	}
	directives, ok := aws["CloudWatchMetrics"].([]any)
	if !ok {
		p.bad("_aws.CloudWatchMetrics is missing or not an array")
	}
	for i, raw := range directives {
		doc.Metrics = append(doc.Metrics, p.directive(fmt.Sprintf("CloudWatchMetrics[%d]", i), raw)...)
	}
	if err := errors.Join(p.errs...); err != nil {
		return Document{}, err
	}
	return doc, nil
}

// parser collects the violations of a document with root members root.
type parser struct {
	root map[string]any
	errs []error
}

func (p *parser) bad(format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf(format, args...))
}

// directive checks the metric directive raw at where and returns its metrics.
func (p *parser) directive(where string, raw any) []Metric {
	dir, ok := raw.(map[string]any)
	if !ok {
		p.bad("%s is not an object", where)
		return nil
	}
	ns, ok := dir["Namespace"].(string)
	if !ok || strings.TrimSpace(ns) == "" || len(ns) > MaxNameLength {
		p.bad("%s.Namespace %v: want a non-empty string of at most %d characters", where, dir["Namespace"], MaxNameLength)
	} else if strings.HasPrefix(ns, "AWS/") {
		p.bad("%s.Namespace %q: AWS/ is reserved", where, ns)
	}
	dimSets := p.dimensionSets(where, dir["Dimensions"])
	defs, ok := dir["Metrics"].([]any)
	if !ok {
		p.bad("%s.Metrics is missing or not an array", where)
	}
	if len(defs) > MaxMetricsPerDirective {
		p.bad("%s.Metrics has %d definitions, over %d", where, len(defs), MaxMetricsPerDirective)
	}
	var metrics []Metric
	for k, rawDef := range defs {
		def, ok := rawDef.(map[string]any)
		if !ok {
			p.bad("%s.Metrics[%d] is not an object", where, k)
			continue
		}
		name, ok := def["Name"].(string)
		if !ok || name == "" || len(name) > MaxNameLength {
			p.bad("%s.Metrics[%d].Name %v: want a non-empty string", where, k, def["Name"])
			continue
		}
		unit := "None"
		if u, present := def["Unit"]; present {
			s, ok := u.(string)
			if !ok || !slices.Contains(Units, s) {
				p.bad("%s: metric %q: unit %v is not a CloudWatch unit", where, name, u)
			}
			unit = s
		}
		if sr, present := def["StorageResolution"]; present {
			if n, ok := sr.(json.Number); !ok || (n.String() != "1" && n.String() != "60") {
				p.bad("%s: metric %q: StorageResolution %v: want 1 or 60", where, name, sr)
			}
		}
		values, err := metricValues(p.root[name])
		if err != nil {
			p.bad("%s: metric %q: %v", where, name, err)
			continue
		}
		for _, dims := range dimSets {
			metrics = append(metrics, Metric{Namespace: ns, Name: name, Unit: unit, Dimensions: dims, Values: values})
		}
	}
	return metrics
}

// dimensionSets checks a directive's Dimensions and returns them, names to values.
func (p *parser) dimensionSets(where string, raw any) []map[string]string {
	sets, ok := raw.([]any)
	if !ok || len(sets) == 0 {
		p.bad("%s.Dimensions: want an array of at least one dimension set", where)
	}
	var dimSets []map[string]string
	for j, rawSet := range sets {
		set, ok := rawSet.([]any)
		if !ok {
			p.bad("%s.Dimensions[%d] is not an array", where, j)
			continue
		}
		if len(set) > MaxDimensionsPerSet {
			p.bad("%s.Dimensions[%d] has %d keys, over %d", where, j, len(set), MaxDimensionsPerSet)
		}
		dims := map[string]string{}
		for _, rawKey := range set {
			key, ok := rawKey.(string)
			if !ok || key == "" || len(key) > MaxNameLength {
				p.bad("%s.Dimensions[%d]: key %v is not a non-empty string", where, j, rawKey)
				continue
			}
			val, ok := p.root[key].(string)
			switch {
			case !ok:
				p.bad("%s: dimension %q: the root member is missing or not a string (%T)", where, key, p.root[key])
			case strings.TrimSpace(val) == "" || len(val) > MaxDimensionValue || !printableASCII(val):
				p.bad("%s: dimension %q = %q: want 1 to %d ASCII characters, not all spaces", where, key, val, MaxDimensionValue)
			}
			dims[key] = val
		}
		dimSets = append(dimSets, dims)
	}
	return dimSets
}

// metricValues reads a metric's root member: a number or an array of numbers.
func metricValues(v any) ([]float64, error) {
	xs, isArray := v.([]any)
	switch {
	case v == nil:
		return nil, errors.New("no root member holds its value")
	case !isArray:
		xs = []any{v}
	case len(xs) == 0 || len(xs) > MaxValuesPerMetric:
		return nil, fmt.Errorf("%d values: want 1 to %d", len(xs), MaxValuesPerMetric)
	}
	out := make([]float64, len(xs))
	for i, x := range xs {
		n, ok := x.(json.Number)
		if !ok {
			return nil, fmt.Errorf("value %v (%T) is not a number", x, x)
		}
		f, err := n.Float64()
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("value %v is not a finite number", n)
		}
		out[i] = f
	}
	return out, nil
}

// printableASCII reports whether s is all printable ASCII characters.
func printableASCII(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r > 0x7e })
}
