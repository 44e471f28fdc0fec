package bench

import (
	"bytes"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/tools/samtemplate"
)

// TestCost: every line of the bill, from the units a run used. KMS Before
// is a Sign per admission and a GetPublicKey per instance; After, a
// Decrypt per instance and a key pair per key period; instances are the
// peak rate times the billed duration.
func TestCost(t *testing.T) {
	p := DefaultPrices()
	logBytes := p.EMFBytes + p.LambdaLogBytes + p.AccessLogBytes
	for _, tc := range []struct {
		name   string
		prices func(*Prices)
		r      Result
		want   Cost
	}{
		{"a million, eta-like", nil,
			Result{Requests: 5_000_000, Enters: 1_000_000, Polls: 4_000_000, Admitted: 1_000_000, PeakRps: 1_000_000, DurationSeconds: 1000},
			Cost{
				Usage: Usage{Requests: 5_000_000, GBSeconds: 12_500, Instances: 10_000,
					RRU: 4_000_000*2 + 1_000_000, WRU: 1_000_000*3 + 1_000_000,
					KMSBefore: 1_000_000 + 10_000, KMSAfter: 10_000 + 1, KeyPeriods: 1, LogBytes: 5e6 * logBytes},
				APIGateway: 5, LambdaRequests: 1, LambdaDuration: 12_500 * 0.0000133334,
				DynamoReads: 9 * 0.125, DynamoWrites: 4 * 0.625, Logs: 5e6 * logBytes / 1e9 * 0.5,
				KMSBefore: 1_010_000 / 1e4 * 0.15, KMSAfter: (10_000*0.03 + 0.10) / 1e4,
			}},
		{"leaves, an idle peak, three key periods", nil,
			Result{Requests: 300, Enters: 100, Polls: 100, Leaves: 100, Admitted: 0, PeakRps: 0, DurationSeconds: 2*86400 + 1},
			Cost{
				Usage: Usage{Requests: 300, GBSeconds: 300 * 0.25 * 0.01, Instances: 1,
					RRU: 100*2 + 100, WRU: 100*3 + 100, KMSBefore: 1, KMSAfter: 3 + 3, KeyPeriods: 3, LogBytes: 300 * logBytes},
				APIGateway: 300e-6, LambdaRequests: 300 * 0.2e-6, LambdaDuration: 300 * 0.25 * 0.01 * 0.0000133334,
				DynamoReads: 300 * 0.125e-6, DynamoWrites: 400 * 0.625e-6, Logs: 300 * logBytes / 1e9 * 0.5,
				KMSBefore: 0.15 / 1e4, KMSAfter: (3*0.03 + 3*0.10) / 1e4,
			}},
		{"no rotation, no key-less enters", func(p *Prices) { p.KeyRotation, p.EnterRRU, p.EnterWRU, p.LambdaMsPerRequest = 0, 0, 2, 100 },
			Result{Requests: 20, Enters: 10, Polls: 10, Admitted: 10, PeakRps: 15, DurationSeconds: 5},
			Cost{
				Usage: Usage{Requests: 20, GBSeconds: 20 * 0.25 * 0.1, Instances: 2,
					RRU: 20, WRU: 10*2 + 10, KMSBefore: 10 + 2, KMSAfter: 2 + 1, KeyPeriods: 1, LogBytes: 20 * logBytes},
				APIGateway: 20e-6, LambdaRequests: 20 * 0.2e-6, LambdaDuration: 20 * 0.25 * 0.1 * 0.0000133334,
				DynamoReads: 20 * 0.125e-6, DynamoWrites: 30 * 0.625e-6, Logs: 20 * logBytes / 1e9 * 0.5,
				KMSBefore: 12 * 0.15 / 1e4, KMSAfter: (2*0.03 + 0.10) / 1e4,
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prices := DefaultPrices()
			if tc.prices != nil {
				tc.prices(&prices)
			}
			want := tc.want
			rest := want.APIGateway + want.LambdaRequests + want.LambdaDuration + want.DynamoReads + want.DynamoWrites + want.Logs
			want.TotalBefore, want.TotalAfter = rest+want.KMSBefore, rest+want.KMSAfter
			if diff := cmp.Diff(want, prices.Cost(tc.r), cmpopts.EquateApprox(1e-12, 1e-12)); diff != "" {
				t.Errorf("Cost (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCostRows: a priced result shows every line, both totals and the
// totals per million admitted.
func TestCostRows(t *testing.T) {
	r := Result{Policy: "eta", Users: 1000, Admitted: 1000, Requests: 5000, Enters: 1000, Polls: 4000, RpsSeries: []int64{1000, 1000, 1000, 1000, 1000}}
	r.Finish(100*time.Second, 3000)
	r.Price(DefaultPrices())
	cells := map[string][]string{}
	for _, line := range table([]Result{r}) {
		cells[line[0]] = line[1:]
	}
	c := r.Cost
	for label, want := range map[string]string{
		"DynamoDB read units":                       "9,000",
		"DynamoDB write units":                      "4,000",
		"Lambda instances (peak, Little's law)":     "10",
		"KMS requests, Before (Sign per admission)": "1,010",
		"KMS requests, After (key per rotation)":    "11",
		"log bytes (EMF, Lambda, access)":           "8.21 MB",
		"cost: total, Before":                       USD(c.TotalBefore),
		"cost: total, After":                        USD(c.TotalAfter),
		"per million admitted, Before":              USD(c.TotalBefore * 1000),
		"per million admitted, After":               USD(c.TotalAfter * 1000),
	} {
		if got := cells[label]; len(got) != 1 || got[0] != want {
			t.Errorf("%s: %q, want %q", label, got, want)
		}
	}
	if r.DynamoRRU != 9000 {
		t.Errorf("DynamoRRU %g, want 9,000", r.DynamoRRU)
	}
}

// TestCostDefaults: the defaults read from the code are what the code
// writes: the function's memory size, a WAITING poll's EMF line and the
// access log line of template.yaml's format.
func TestCostDefaults(t *testing.T) {
	p := DefaultPrices()
	tpl, err := samtemplate.Load("../../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fn, err := tpl.Function("QueueFunction")
	if err != nil {
		t.Fatal(err)
	}
	if float64(fn.MemorySize) != p.LambdaMemoryMB {
		t.Errorf("LambdaMemoryMB %g, template's QueueFunction MemorySize %d", p.LambdaMemoryMB, fn.MemorySize)
	}

	var emf bytes.Buffer
	metrics.NewEMF(&emf, metrics.DefaultNamespace).Observe(metrics.Request{Op: metrics.OpPoll, Method: "GET", Status: 200,
		ProgramID: "spring-sale-2026", TokenStatus: "WAITING", RetryAfter: 15300 * time.Millisecond, EstimatedWait: 4 * time.Minute,
		Waiting: 234_567, WaitingKnown: true, Duration: 6789 * time.Microsecond})
	if float64(emf.Len()) != p.EMFBytes {
		t.Errorf("EMFBytes %g, a WAITING poll's line has %d:\n%s", p.EMFBytes, emf.Len(), emf.String())
	}

	settings, _ := tpl.Properties("HttpApi")["AccessLogSettings"].(map[string]any)
	format, _ := settings["Format"].(string)
	// A poll from a desktop browser, answered 200.
	values := map[string]string{
		"$context.requestId":           "JZ3pnhUroAMEVbw=",
		"$context.requestTime":         "21/Jan/2026:10:15:30 +0000",
		"$context.requestTimeEpoch":    "1768990530123",
		"$context.identity.sourceIp":   "203.0.113.42",
		"$context.identity.userAgent":  "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
		"$context.httpMethod":          "GET",
		"$context.routeKey":            "ANY /api/v1/queues/programs/{programId}",
		"$context.path":                "/api/v1/queues/programs/spring-sale-2026",
		"$context.status":              "200",
		"$context.responseLength":      "412",
		"$context.responseLatency":     "12",
		"$context.integrationLatency":  "10",
		"$context.integrationStatus":   "200",
		"$context.identity.userArn":    "-",
		"$context.identity.accountId":  "-",
		"$context.error.messageString": `"-"`,
	}
	line := regexp.MustCompile(`\$context(\.[A-Za-z0-9]+)+`).ReplaceAllStringFunc(format, func(v string) string {
		s, ok := values[v]
		if !ok {
			t.Errorf("the access log format's %s has no sample value", v)
		}
		return s
	}) + "\n"
	if !json.Valid([]byte(line)) {
		t.Errorf("the sample access log line is not JSON:\n%s", line)
	}
	if float64(len(line)) != p.AccessLogBytes {
		t.Errorf("AccessLogBytes %g, the sample line has %d:\n%s", p.AccessLogBytes, len(line), line)
	}
}
