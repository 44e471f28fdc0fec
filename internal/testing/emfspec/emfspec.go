// Package emfspec checks log lines against the CloudWatch Embedded Metric
// Format specification, so that tests of the metrics package and of the
// functions' real logs (under the emulator) can tell a line CloudWatch
// would turn into metrics from one it would drop.
//
// Specification: https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html
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

// Metric is one metric a document publishes: its namespace, name, unit,
// dimensions (name to value) and values.
type Metric struct {
	Namespace  string
	Name       string
	Unit       string
	Dimensions map[string]string
	Values     []float64
}

// Document is a valid EMF document: its timestamp (Unix milliseconds),
// the metrics it publishes (one per metric and dimension set), and its
// root members.
type Document struct {
	Timestamp int64
	Metrics   []Metric
	Root      map[string]any
}

// IsEMF reports whether line looks like an EMF document (a JSON object
// with an "_aws" member), valid or not.
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
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	aws, ok := root["_aws"].(map[string]any)
	if !ok {
		return Document{}, errors.New(`no "_aws" object at the root`)
	}
	var doc Document
	doc.Root = root
	switch ts := aws["Timestamp"].(type) {
	case json.Number:
		n, err := ts.Int64()
		if err != nil || n < 0 {
			bad("_aws.Timestamp %v is not a non-negative integer of milliseconds", ts)
		}
		doc.Timestamp = n
	default:
		bad("_aws.Timestamp is missing or not a number (%T)", aws["Timestamp"])
	}
	directives, ok := aws["CloudWatchMetrics"].([]any)
	if !ok {
		bad("_aws.CloudWatchMetrics is missing or not an array")
	}
	for i, raw := range directives {
		where := fmt.Sprintf("CloudWatchMetrics[%d]", i)
		dir, ok := raw.(map[string]any)
		if !ok {
			bad("%s is not an object", where)
			continue
		}
		ns, ok := dir["Namespace"].(string)
		if !ok || strings.TrimSpace(ns) == "" || len(ns) > MaxNameLength {
			bad("%s.Namespace %v: want a non-empty string of at most %d characters", where, dir["Namespace"], MaxNameLength)
		} else if strings.HasPrefix(ns, "AWS/") {
			bad("%s.Namespace %q: AWS/ is reserved", where, ns)
		}
		sets, ok := dir["Dimensions"].([]any)
		if !ok || len(sets) == 0 {
			bad("%s.Dimensions: want an array of at least one dimension set", where)
		}
		var dimSets []map[string]string
		for j, rawSet := range sets {
			set, ok := rawSet.([]any)
			if !ok {
				bad("%s.Dimensions[%d] is not an array", where, j)
				continue
			}
			if len(set) > MaxDimensionsPerSet {
				bad("%s.Dimensions[%d] has %d keys, over %d", where, j, len(set), MaxDimensionsPerSet)
			}
			dims := map[string]string{}
			for _, rawKey := range set {
				key, ok := rawKey.(string)
				if !ok || key == "" || len(key) > MaxNameLength {
					bad("%s.Dimensions[%d]: key %v is not a non-empty string", where, j, rawKey)
					continue
				}
				val, ok := root[key].(string)
				switch {
				case !ok:
					bad("%s: dimension %q: the root member is missing or not a string (%T)", where, key, root[key])
				case strings.TrimSpace(val) == "" || len(val) > MaxDimensionValue || !ascii(val):
					bad("%s: dimension %q = %q: want 1 to %d ASCII characters, not all spaces", where, key, val, MaxDimensionValue)
				}
				dims[key] = val
			}
			dimSets = append(dimSets, dims)
		}
		defs, ok := dir["Metrics"].([]any)
		if !ok {
			bad("%s.Metrics is missing or not an array", where)
		}
		if len(defs) > MaxMetricsPerDirective {
			bad("%s.Metrics has %d definitions, over %d", where, len(defs), MaxMetricsPerDirective)
		}
		for k, rawDef := range defs {
			def, ok := rawDef.(map[string]any)
			if !ok {
				bad("%s.Metrics[%d] is not an object", where, k)
				continue
			}
			name, ok := def["Name"].(string)
			if !ok || name == "" || len(name) > MaxNameLength {
				bad("%s.Metrics[%d].Name %v: want a non-empty string", where, k, def["Name"])
				continue
			}
			unit := "None"
			if u, present := def["Unit"]; present {
				s, ok := u.(string)
				if !ok || !validUnit(s) {
					bad("%s: metric %q: unit %v is not a CloudWatch unit", where, name, u)
				}
				unit = s
			}
			if sr, present := def["StorageResolution"]; present {
				if n, ok := sr.(json.Number); !ok || (n.String() != "1" && n.String() != "60") {
					bad("%s: metric %q: StorageResolution %v: want 1 or 60", where, name, sr)
				}
			}
			values, err := metricValues(root[name])
			if err != nil {
				bad("%s: metric %q: %v", where, name, err)
				continue
			}
			for _, dims := range dimSets {
				doc.Metrics = append(doc.Metrics, Metric{Namespace: ns, Name: name, Unit: unit, Dimensions: dims, Values: values})
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Document{}, err
	}
	return doc, nil
}

// metricValues reads a metric's root member: a number or an array of at
// most MaxValuesPerMetric numbers.
func metricValues(v any) ([]float64, error) {
	num := func(x any) (float64, error) {
		n, ok := x.(json.Number)
		if !ok {
			return 0, fmt.Errorf("value %v (%T) is not a number", x, x)
		}
		f, err := n.Float64()
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return 0, fmt.Errorf("value %v is not a finite number", n)
		}
		return f, nil
	}
	switch v := v.(type) {
	case nil:
		return nil, errors.New("no root member holds its value")
	case []any:
		if len(v) == 0 || len(v) > MaxValuesPerMetric {
			return nil, fmt.Errorf("%d values: want 1 to %d", len(v), MaxValuesPerMetric)
		}
		out := make([]float64, len(v))
		for i, x := range v {
			f, err := num(x)
			if err != nil {
				return nil, err
			}
			out[i] = f
		}
		return out, nil
	default:
		f, err := num(v)
		if err != nil {
			return nil, err
		}
		return []float64{f}, nil
	}
}

func validUnit(u string) bool { return slices.Contains(Units, u) }

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
