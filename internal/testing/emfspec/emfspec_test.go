package emfspec_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/testing/emfspec"
)

func TestParseValid(t *testing.T) {
	// The specification's own example, plus an array value and a second
	// dimension set.
	line := `{"_aws":{"Timestamp":1574109732004,"CloudWatchMetrics":[{"Namespace":"lambda-function-metrics","Dimensions":[["functionVersion"],[]],"Metrics":[{"Name":"time","Unit":"Milliseconds"},{"Name":"sizes"}]}]},"functionVersion":"$LATEST","time":100,"sizes":[1,2.5],"requestId":"989ffbf8"}`
	doc, err := emfspec.Parse([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := []emfspec.Metric{
		{Namespace: "lambda-function-metrics", Name: "time", Unit: "Milliseconds", Dimensions: map[string]string{"functionVersion": "$LATEST"}, Values: []float64{100}},
		{Namespace: "lambda-function-metrics", Name: "time", Unit: "Milliseconds", Dimensions: map[string]string{}, Values: []float64{100}},
		{Namespace: "lambda-function-metrics", Name: "sizes", Unit: "None", Dimensions: map[string]string{"functionVersion": "$LATEST"}, Values: []float64{1, 2.5}},
		{Namespace: "lambda-function-metrics", Name: "sizes", Unit: "None", Dimensions: map[string]string{}, Values: []float64{1, 2.5}},
	}
	if diff := cmp.Diff(want, doc.Metrics); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
	if doc.Timestamp != 1574109732004 {
		t.Errorf("Timestamp = %d", doc.Timestamp)
	}
}

func TestParseRejects(t *testing.T) {
	metrics100 := strings.Repeat(`{"Name":"m"},`, 100) + `{"Name":"m"}`
	for _, tc := range []struct{ name, line, want string }{
		{"NotJSON", `{"_aws":`, "not a JSON object"},
		{"Trailing", `{"_aws":{}} x`, "data after"},
		{"NoAWS", `{"m":1}`, `no "_aws"`},
		{"NoTimestamp", `{"_aws":{"CloudWatchMetrics":[]}}`, "Timestamp is missing"},
		{"StringTimestamp", `{"_aws":{"Timestamp":"1","CloudWatchMetrics":[]}}`, "Timestamp is missing or not a number"},
		{"NoDirectives", `{"_aws":{"Timestamp":1}}`, "CloudWatchMetrics is missing"},
		{"NoNamespace", `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Dimensions":[[]],"Metrics":[]}]}}`, "Namespace"},
		{"AWSNamespace", `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"AWS/Lambda","Dimensions":[[]],"Metrics":[]}]}}`, "reserved"},
		{"NoDimensions", `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Metrics":[]}]}}`, "Dimensions"},
		{"MissingDimensionValue", `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[["d"]],"Metrics":[]}]}}`, `dimension "d"`},
		{"NumericDimensionValue", `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[["d"]],"Metrics":[]}]},"d":3}`, `dimension "d"`},
		{"EmptyDimensionValue", `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[["d"]],"Metrics":[]}]},"d":""}`, `dimension "d"`},
		{"TenDimensions", `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[["a","a","a","a","a","a","a","a","a","a"]],"Metrics":[]}]},"a":"x"}`, "over 9"},
		{"MissingValue", `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[[]],"Metrics":[{"Name":"m"}]}]}}`, "no root member"},
		{"StringValue", `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[[]],"Metrics":[{"Name":"m"}]}]},"m":"1"}`, "not a number"},
		{"EmptyArray", `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[[]],"Metrics":[{"Name":"m"}]}]},"m":[]}`, "0 values"},
		{"BadUnit", `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[[]],"Metrics":[{"Name":"m","Unit":"Millis"}]}]},"m":1}`, "not a CloudWatch unit"},
		{"BadResolution", `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[[]],"Metrics":[{"Name":"m","StorageResolution":5}]}]},"m":1}`, "StorageResolution"},
		{"TooManyMetrics", `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[[]],"Metrics":[` + metrics100 + `]}]},"m":1}`, "101 definitions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := emfspec.Parse([]byte(tc.line))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse(%s) = %v, want an error with %q", tc.line, err, tc.want)
			}
		})
	}
}

func TestIsEMF(t *testing.T) {
	for line, want := range map[string]bool{
		`{"_aws":{}}`: true,
		`{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"x"}`: false,
		`START RequestId: 1`: false,
	} {
		if got := emfspec.IsEMF([]byte(line)); got != want {
			t.Errorf("IsEMF(%s) = %v, want %v", line, got, want)
		}
	}
}
