// Package metrics records one Request per answered HTTP request through an
// Observer: EMF log lines on Lambda, Prometheus metrics locally (package
// prom). Defs is the one table of metric names both sinks and template.yaml
// follow.
package metrics

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/example/waitingroom/internal/api"
)

// DefaultNamespace is the CloudWatch namespace when none is configured.
const DefaultNamespace = "WaitingRoom"

// ValidNamespace checks a CloudWatch namespace: 1 to 255 of letters,
// digits and . - _ / # : and space, not starting with the reserved "AWS/".
func ValidNamespace(ns string) error {
	if ns == "" || len(ns) > 255 || strings.TrimSpace(ns) != ns {
		return errors.New("a namespace is 1 to 255 characters, without leading or trailing spaces")
	}
	if strings.HasPrefix(ns, "AWS/") {
		return errors.New(`namespaces starting with "AWS/" are reserved`)
	}
	for _, c := range ns {
		if !(c < unicode.MaxASCII && (unicode.IsLetter(c) || unicode.IsDigit(c) || strings.ContainsRune(".-_/#: ", c))) {
			return fmt.Errorf("%q: a namespace holds letters, digits and . - _ / # : and space only", ns)
		}
	}
	return nil
}

// Op is what a request asked for; the middleware sets it from the route.
type Op string

// Operations.
const (
	OpEnter Op = "enter"
	OpPoll  Op = "poll"
	OpLeave Op = "leave"
	// OpAdmin is any admin route: program settings, counters, admissions.
	OpAdmin Op = "admin"
	// OpOther is a request that matched no route, or one for the JWKS.
	OpOther Op = "other"
	// OpPage is the waiting-room page: the HTML, its assets and its
	// no-JavaScript form.
	OpPage Op = "page"
)

// Request is one answered request, as the middleware saw it. Fields that do
// not apply are zero.
type Request struct {
	Op Op
	// Method is the request's method as sent; the Method dimension is
	// MethodLabel of it, from a closed set.
	Method string
	// Status is the HTTP status answered.
	Status int
	// Code is the error code of a 4xx or 5xx answer ("PROGRAM_CLOSED").
	Code     string
	Duration time.Duration
	// ProgramID is the program of the request's path; it becomes a
	// dimension only on 2xx answers, where the program is known to exist.
	ProgramID string
	// TokenStatus is the status of the token answered ("WAITING", …).
	TokenStatus string
	// Admitted reports that this answer is the first sighting of the
	// token's admission (the one that wrote admittedAt).
	Admitted bool
	// RetryAfter and EstimatedWait are those of a WAITING answer.
	RetryAfter    time.Duration
	EstimatedWait time.Duration
	// Waiting is the program's queue length (issued − admitted) as the
	// answer saw it, recorded when WaitingKnown; an enter's position is
	// exactly that length.
	Waiting      int64
	WaitingKnown bool
	// BypassPasses is how many bypass passes the answer issued.
	BypassPasses int64
}

// Observer records requests. Implementations are safe for concurrent use.
type Observer interface {
	Observe(Request)
}

// Discard is an Observer that records nothing.
var Discard Observer = discard{}

type discard struct{}

func (discard) Observe(Request) {}

// Kind is how a metric aggregates.
type Kind int

// Kinds of metric.
const (
	// Counter counts events: each observation adds one.
	Counter Kind = iota
	// Distribution records a value per observation (percentiles,
	// averages): a Prometheus histogram.
	Distribution
	// Level records the current value of a quantity: a Prometheus gauge,
	// a CloudWatch value read as Maximum or Average.
	Level
)

// Unit is a CloudWatch unit.
type Unit string

// Units this package uses.
const (
	Count        Unit = "Count"
	Milliseconds Unit = "Milliseconds"
)

// Dimension names: CloudWatch dimensions, and Prometheus labels in their
// snake_case form (LabelName).
const (
	DimProgramID = "ProgramId"
	DimStatus    = "Status"
	DimCode      = "Code"
	DimOperation = "Operation"
	DimMethod    = "Method"
	DimHTTP      = "HttpStatus"
)

// Def is one metric: its CloudWatch name, unit and dimensions, its
// Prometheus name, and when a request records it and with what value.
type Def struct {
	// Name is the CloudWatch metric name; "" for a Prometheus-only metric.
	Name string
	Unit Unit
	Kind Kind
	// Dimensions name the CloudWatch dimensions (and Prometheus labels).
	Dimensions []string
	// Prom is the Prometheus name; Milliseconds are exported as seconds.
	Prom string
	Help string
	// Buckets are the Prometheus histogram bounds of a Distribution, in
	// the exported unit (seconds for Milliseconds).
	Buckets []float64
	// value is the metric's value for r, and whether r records it.
	value func(r Request) (float64, bool)
}

// Defs is the table of every metric. template.yaml's dashboard and alarms
// name metrics from it (template_test.go checks).
var Defs = []Def{
	{Name: "", Unit: Count, Kind: Counter, Dimensions: []string{DimOperation, DimMethod, DimHTTP},
		Prom: "waitingroom_requests_total", Help: "Requests answered, by operation, method and HTTP status (on AWS: API Gateway's Count).",
		value: func(Request) (float64, bool) { return 1, true }},
	{Name: "Latency", Unit: Milliseconds, Kind: Distribution, Dimensions: []string{DimOperation},
		Prom: "waitingroom_request_duration_seconds", Help: "Time the handler took to answer, by operation.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		value:   func(r Request) (float64, bool) { return float64(r.Duration.Microseconds()) / 1000, true }},
	{Name: "Enters", Unit: Count, Kind: Counter, Dimensions: []string{DimProgramID},
		Prom: "waitingroom_enters_total", Help: "New tokens issued (201 answers to an enter), by program.",
		value: func(r Request) (float64, bool) { return 1, r.Op == OpEnter && r.Status == 201 }},
	{Name: "Polls", Unit: Count, Kind: Counter, Dimensions: []string{DimStatus},
		Prom: "waitingroom_polls_total", Help: "Successful polls, by the status of the token answered.",
		value: func(r Request) (float64, bool) { return 1, r.Op == OpPoll && r.Status == 200 && r.TokenStatus != "" }},
	{Name: "Admissions", Unit: Count, Kind: Counter, Dimensions: []string{DimProgramID},
		Prom: "waitingroom_admissions_total", Help: "Admissions seen for the first time (the answer that wrote admittedAt), by program.",
		value: func(r Request) (float64, bool) { return 1, r.Admitted && success(r) }},
	{Name: "BypassPasses", Unit: Count, Kind: Counter, Dimensions: []string{DimProgramID},
		Prom: "waitingroom_bypass_passes_total", Help: "Bypass passes issued by the admin API, by program.",
		value: func(r Request) (float64, bool) { return float64(r.BypassPasses), r.BypassPasses > 0 && success(r) }},
	{Name: "Leaves", Unit: Count, Kind: Counter, Dimensions: []string{DimProgramID},
		Prom: "waitingroom_leaves_total", Help: "Tokens that left the queue (204 answers to a leave), by program.",
		value: func(r Request) (float64, bool) { return 1, r.Op == OpLeave && r.Status == 204 }},
	{Name: "Rejected", Unit: Count, Kind: Counter, Dimensions: []string{DimCode},
		Prom: "waitingroom_rejected_total", Help: "4xx answers, by error code.",
		value: func(r Request) (float64, bool) { return 1, r.Status >= 400 && r.Status < 500 }},
	{Name: "StoreUnavailable", Unit: Count, Kind: Counter,
		Prom: "waitingroom_store_unavailable_total", Help: "503 answers of a store or KMS that failed or was contended (STORE_UNAVAILABLE, BUSY, PASS_UNAVAILABLE, KEYS_UNAVAILABLE); not ENTER_IN_PROGRESS, which waits for another enter.",
		value: func(r Request) (float64, bool) { return 1, r.Status == 503 && r.Code != api.CodeEnterInProgress }},
	{Name: "RetryAfterMs", Unit: Milliseconds, Kind: Distribution,
		Prom: "waitingroom_retry_after_seconds", Help: "Delay to the next poll told to WAITING tokens.",
		Buckets: []float64{.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600},
		value:   func(r Request) (float64, bool) { return float64(r.RetryAfter.Milliseconds()), r.RetryAfter > 0 }},
	{Name: "EstimatedWaitMs", Unit: Milliseconds, Kind: Distribution, Dimensions: []string{DimProgramID},
		Prom: "waitingroom_estimated_wait_seconds", Help: "Estimated wait told to WAITING tokens, by program.",
		Buckets: []float64{5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400},
		value: func(r Request) (float64, bool) {
			return float64(r.EstimatedWait.Milliseconds()), r.EstimatedWait > 0 && success(r)
		}},
	{Name: "Waiting", Unit: Count, Kind: Level, Dimensions: []string{DimProgramID},
		Prom: "waitingroom_waiting", Help: "Queue length (issued − admitted) as the latest answer saw it, by program.",
		value: func(r Request) (float64, bool) { return float64(r.Waiting), r.WaitingKnown && success(r) }},
}

// success reports a 2xx answer: only then is the program known to exist,
// so only then may it name a dimension (anyone can send any program id).
func success(r Request) bool { return r.Status >= 200 && r.Status < 300 && r.ProgramID != "" }

// Value is d's value for r, and whether r records d at all.
func (d Def) Value(r Request) (float64, bool) { return d.value(r) }

// CloudWatch reports whether d is published to CloudWatch (has a Name).
func (d Def) CloudWatch() bool { return d.Name != "" }

// DimensionValue is the value of dimension dim for r; "" means none (the
// metric is then not recorded).
func DimensionValue(dim string, r Request) string {
	switch dim {
	case DimProgramID:
		return r.ProgramID
	case DimStatus:
		return r.TokenStatus
	case DimCode:
		if r.Code == "" {
			return "UNKNOWN"
		}
		return r.Code
	case DimOperation:
		if r.Op == "" {
			return string(OpOther)
		}
		return string(r.Op)
	case DimMethod:
		return MethodLabel(r.Method)
	case DimHTTP:
		return strconv.Itoa(r.Status)
	}
	return ""
}

// MethodOther is the Method dimension of a request whose method is none of
// RFC 9110's and RFC 5789's (any token is a valid method).
const MethodOther = "OTHER"

// MethodLabel is the Method dimension of method: the method itself when it
// is a standard one, else MethodOther, so that clients cannot make series.
func MethodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return method
	}
	return MethodOther
}
