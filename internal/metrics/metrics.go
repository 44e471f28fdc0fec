// Package metrics records one Request per answered HTTP request through an
// Observer: EMF log lines on Lambda, Prometheus metrics locally (package
// prom). Defs is the one table of metric names both sinks and template.yaml
// follow.
package metrics

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/api"
)

// DefaultNamespace is the CloudWatch namespace when none is configured.
const DefaultNamespace = "WaitingRoom"

// ValidNamespace checks a CloudWatch namespace: 1 to 255 of letters, digits and . - _ / # :
// and space, not starting with the reserved "AWS/".
func ValidNamespace(ns string) error {
	if ns == "" || len(ns) > 255 || strings.TrimSpace(ns) != ns {
		return errors.New("a namespace is 1 to 255 characters, without leading or trailing spaces")
	}
	if strings.HasPrefix(ns, "AWS/") {
		return errors.New(`namespaces starting with "AWS/" are reserved`)
	}
	if !namespaceChars.MatchString(ns) {
		return fmt.Errorf("%q: a namespace holds letters, digits and . - _ / # : and space only", ns)
	}
	return nil
}

var namespaceChars = regexp.MustCompile(`^[A-Za-z0-9._/#: -]*$`)

// Op is what a request asked for; the middleware sets it from the route.
type Op string

// Operations.
const (
	OpEnter   Op = "enter"
	OpPoll    Op = "poll"
	OpLeave   Op = "leave"
	OpAdmin   Op = "admin"   // any admin route
	OpOther   Op = "other"   // no route, the JWKS, a challenge
	OpPage    Op = "page"    // the waiting-room page, its assets and its form
	OpHandoff Op = "handoff" // a handoff code made or redeemed
)

// Request is one answered request, as the middleware saw it; fields that do not apply are zero.
type Request struct {
	Op          Op
	Method      string // as sent; the Method dimension is MethodLabel of it
	Status      int    // the HTTP status answered
	Code        string // the error code of a 4xx or 5xx answer
	Duration    time.Duration
	ProgramID   string // the program of the request's path: a dimension only on 2xx answers
	TokenStatus string // the status of the token answered ("WAITING", …)
	Admitted    bool   // the answer is the first sighting of the token's admission
	// RetryAfter and EstimatedWait are those of a WAITING answer.
	RetryAfter, EstimatedWait time.Duration
	Waiting                   int64 // the program's queue length as the answer saw it, when WaitingKnown
	WaitingKnown              bool
	BypassPasses              int64 // how many bypass passes the answer issued
	Account                   bool  // a new place is an account's (an enter with an enqueue token)
	// Ticket (a shuffled pre-queue's place) and Position are those of a
	// WAITING answer, for the report's tally.
	Ticket, Position int64
	Proof            bool // the enter came with a proof of work
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
	Counter      Kind = iota // counts events: a Prometheus counter
	Distribution             // a value per observation: a Prometheus histogram
	Level                    // the current value of a quantity: a Prometheus gauge
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

// Def is one metric: its CloudWatch and Prometheus names, and when a request records it.
type Def struct {
	Name       string // the CloudWatch name; "" for a Prometheus-only metric
	Unit       Unit
	Kind       Kind
	Dimensions []string // CloudWatch dimensions, and Prometheus labels
	Prom       string   // the Prometheus name; Milliseconds are exported as seconds
	Help       string
	Buckets    []float64 // the Prometheus histogram bounds of a Distribution, in the exported unit
	// Value is d's value for a request, and whether the request records d at all.
	Value func(r Request) (float64, bool)
}

// Defs is the table of every metric; template.yaml's dashboard and alarms name metrics from it.
var Defs = []Def{
	{Unit: Count, Kind: Counter, Dimensions: []string{DimOperation, DimMethod, DimHTTP},
		Prom: "waitingroom_requests_total", Help: "Requests answered, by operation, method and HTTP status (on AWS: API Gateway's Count).",
		Value: func(Request) (float64, bool) { return 1, true }},
	{Name: "Latency", Unit: Milliseconds, Kind: Distribution, Dimensions: []string{DimOperation},
		Prom: "waitingroom_request_duration_seconds", Help: "Time the handler took to answer, by operation.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		Value:   func(r Request) (float64, bool) { return float64(r.Duration.Microseconds()) / 1000, true }},
	{Name: "Enters", Unit: Count, Kind: Counter, Dimensions: []string{DimProgramID},
		Prom: "waitingroom_enters_total", Help: "New tokens issued (201 answers to an enter), by program.",
		Value: func(r Request) (float64, bool) { return 1, r.Op == OpEnter && r.Status == 201 }},
	{Name: "AccountPlaces", Unit: Count, Kind: Counter, Dimensions: []string{DimProgramID},
		Prom: "waitingroom_account_places_total", Help: "New places of accounts (201 answers to an enter with an enqueue token), by program.",
		Value: func(r Request) (float64, bool) { return 1, r.Op == OpEnter && r.Status == 201 && r.Account }},
	{Name: "Handoffs", Unit: Count, Kind: Counter, Dimensions: []string{DimProgramID},
		Prom: "waitingroom_handoffs_total", Help: "Places moved to another device (201 answers to a redeem), by program.",
		Value: func(r Request) (float64, bool) { return 1, r.Op == OpHandoff && r.Status == 201 && r.TokenStatus != "" }},
	{Name: "Polls", Unit: Count, Kind: Counter, Dimensions: []string{DimStatus},
		Prom: "waitingroom_polls_total", Help: "Successful polls, by the status of the token answered.",
		Value: func(r Request) (float64, bool) { return 1, r.Op == OpPoll && r.Status == 200 && r.TokenStatus != "" }},
	{Name: "Admissions", Unit: Count, Kind: Counter, Dimensions: []string{DimProgramID},
		Prom: "waitingroom_admissions_total", Help: "Admissions seen for the first time (the answer that wrote admittedAt), by program.",
		Value: func(r Request) (float64, bool) { return 1, r.Admitted && success(r) }},
	{Name: "BypassPasses", Unit: Count, Kind: Counter, Dimensions: []string{DimProgramID},
		Prom: "waitingroom_bypass_passes_total", Help: "Bypass passes issued by the admin API, by program.",
		Value: func(r Request) (float64, bool) { return float64(r.BypassPasses), r.BypassPasses > 0 && success(r) }},
	{Name: "Leaves", Unit: Count, Kind: Counter, Dimensions: []string{DimProgramID},
		Prom: "waitingroom_leaves_total", Help: "Tokens that left the queue (204 answers to a leave), by program.",
		Value: func(r Request) (float64, bool) { return 1, r.Op == OpLeave && r.Status == 204 }},
	{Name: "Rejected", Unit: Count, Kind: Counter, Dimensions: []string{DimCode},
		Prom: "waitingroom_rejected_total", Help: "4xx answers, by error code.",
		Value: func(r Request) (float64, bool) { return 1, r.Status >= 400 && r.Status < 500 }},
	{Name: "StoreUnavailable", Unit: Count, Kind: Counter,
		Prom: "waitingroom_store_unavailable_total", Help: "503 answers of a store or KMS that failed or was contended (STORE_UNAVAILABLE, BUSY, PASS_UNAVAILABLE, KEYS_UNAVAILABLE); not ENTER_IN_PROGRESS, which waits for another enter.",
		Value: func(r Request) (float64, bool) { return 1, r.Status == 503 && r.Code != api.CodeEnterInProgress }},
	{Name: "RetryAfterMs", Unit: Milliseconds, Kind: Distribution,
		Prom: "waitingroom_retry_after_seconds", Help: "Delay to the next poll told to WAITING tokens.",
		Buckets: []float64{.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600},
		Value:   func(r Request) (float64, bool) { return float64(r.RetryAfter.Milliseconds()), r.RetryAfter > 0 }},
	{Name: "EstimatedWaitMs", Unit: Milliseconds, Kind: Distribution, Dimensions: []string{DimProgramID},
		Prom: "waitingroom_estimated_wait_seconds", Help: "Estimated wait told to WAITING tokens, by program.",
		Buckets: []float64{5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400},
		Value: func(r Request) (float64, bool) {
			return float64(r.EstimatedWait.Milliseconds()), r.EstimatedWait > 0 && success(r)
		}},
	{Name: "Waiting", Unit: Count, Kind: Level, Dimensions: []string{DimProgramID},
		Prom: "waitingroom_waiting", Help: "Queue length (issued − admitted) as the latest answer saw it, by program.",
		Value: func(r Request) (float64, bool) { return float64(r.Waiting), r.WaitingKnown && success(r) }},
}

// success reports a 2xx answer: only then may the program, known to exist, be a dimension.
func success(r Request) bool { return r.Status >= 200 && r.Status < 300 && r.ProgramID != "" }

// CloudWatch reports whether d is published to CloudWatch (has a Name).
func (d Def) CloudWatch() bool { return d.Name != "" }

// DimensionValue is the value of dimension dim for r; "" (none) leaves the metric unrecorded.
func DimensionValue(dim string, r Request) string {
	switch dim {
	case DimProgramID:
		return r.ProgramID
	case DimStatus:
		return r.TokenStatus
	case DimCode:
		return cmp.Or(r.Code, "UNKNOWN")
	case DimOperation:
		return string(cmp.Or(r.Op, OpOther))
	case DimMethod:
		return MethodLabel(r.Method)
	case DimHTTP:
		return strconv.Itoa(r.Status)
	}
	return ""
}

// MethodOther is the Method dimension of a method that is not standard.
const MethodOther = "OTHER"

// MethodLabel is the Method dimension of method: a standard method itself, else MethodOther.
func MethodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return method
	}
	return MethodOther
}

// Tee is an Observer passing each Request to every one of obs.
func Tee(obs ...Observer) Observer { return tee(obs) }

type tee []Observer

func (t tee) Observe(r Request) {
	for _, o := range t {
		o.Observe(r)
	}
}
