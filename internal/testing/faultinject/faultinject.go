// Package faultinject is an http.RoundTripper for the AWS SDK's DynamoDB
// client in tests that injects the faults of a table under stress
// (throttling, internal errors, slow answers, dropped connections), chosen
// by Rules deterministically for a seed.
package faultinject

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/example/waitingroom/internal/testing/await"
	"github.com/example/waitingroom/internal/tools/dynamowire"
)

// Action is what a Rule does to a request it applies to.
type Action int

// Actions; their error answers are DynamoDB's, which the SDK retries as the real ones.
const (
	Pass                Action = iota // forwards the request; with a Gate, its answer comes late
	ThroughputExceeded                // answers 400 ProvisionedThroughputExceededException, not forwarding
	Throttling                        // answers 400 ThrottlingException, not forwarding
	InternalServerError               // answers 500 InternalServerError, not forwarding
	Drop                              // fails with ErrConnectionReset, not forwarding
	DropResponse                      // forwards, then fails with ErrConnectionReset
	Hold                              // forwards once its Gate opens (not if the context ends first)
	Timeout                           // fails with ErrAttemptTimeout, not forwarding
	TimeoutAfterApply                 // forwards, then fails with ErrAttemptTimeout
)

// answers are the errors of the actions that answer, failures of those that fail.
var answers = map[Action]struct {
	status        int
	code, message string
}{
	ThroughputExceeded: {http.StatusBadRequest, "ProvisionedThroughputExceededException",
		"The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API."},
	Throttling:          {http.StatusBadRequest, "ThrottlingException", "Rate of requests exceeds the allowed throughput."},
	InternalServerError: {http.StatusInternalServerError, "InternalServerError", "Internal server error"},
}

var failures = map[Action]error{Drop: ErrConnectionReset, DropResponse: ErrConnectionReset, Timeout: ErrAttemptTimeout, TimeoutAfterApply: ErrAttemptTimeout}

var actionNames = [...]string{"Pass", "ThroughputExceeded", "Throttling", "InternalServerError", "Drop", "DropResponse", "Hold", "Timeout", "TimeoutAfterApply"}

func (a Action) String() string {
	if a >= 0 && int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "Action(" + strconv.Itoa(int(a)) + ")"
}

// Rule selects requests by Op and BodyContains and injects Action into them.
type Rule struct {
	Op           string  // the operation, e.g. "UpdateItem"; "" matches all
	BodyContains string  // if set, the request body must contain it
	Skip, Count  int     // of the matches, the first Skip pass, the next Count (0: all) are faulted
	Probability  float64 // if in (0, 1), of a seeded draw; a request spared still counts
	FirstOnly    bool    // only the first time a body is seen: the SDK's retries pass
	Action       Action
	// Gate, if set, holds the request until released: after the answer for
	// Pass, DropResponse and TimeoutAfterApply, else before forwarding (Hold)
	// or answering. A request whose context ends returns its error at once.
	Gate *Gate
}

// Gate holds the requests of the Rules that name it until Release; it is
// safe for concurrent use.
type Gate struct {
	held    await.Counter
	open    chan struct{} // closed by Release
	release sync.Once
}

// NewGate returns a closed gate.
func NewGate() *Gate { return &Gate{open: make(chan struct{})} }

// Wait blocks until n requests have reached the gate in all, or ctx ends.
func (g *Gate) Wait(ctx context.Context, n int) error { return g.held.Wait(ctx, n) }

// Release lets every held request on, and every later one through.
func (g *Gate) Release() { g.release.Do(func() { close(g.open) }) }

// pass holds a request until the gate, if any, opens or ctx ends.
func (g *Gate) pass(ctx context.Context) error {
	if g != nil {
		g.held.Add()
		select {
		case <-g.open:
		case <-ctx.Done():
		}
	}
	return ctx.Err()
}

// ErrAttemptTimeout is the error of Timeout and TimeoutAfterApply: a
// net.Error whose Timeout() is true.
var ErrAttemptTimeout error = attemptTimeout{}

type attemptTimeout struct{}

func (attemptTimeout) Error() string {
	return "faultinject: attempt timed out (Client.Timeout exceeded while awaiting headers)"
}
func (attemptTimeout) Timeout() bool   { return true }
func (attemptTimeout) Temporary() bool { return true }

// ErrConnectionReset is the error of Drop and DropResponse, as a real
// connection reset looks to an http.Transport user.
var ErrConnectionReset error = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}

// Transport injects faults into the requests it forwards to its base; it is
// safe for concurrent use, the plan changing with requests in flight.
type Transport struct {
	base http.RoundTripper

	mu        sync.Mutex
	rng       *rand.Rand
	rules     []Rule
	matched   []int             // per rule: requests matched since SetRules
	faulted   []int             // per rule: requests faulted since SetRules
	seen      []map[string]bool // per FirstOnly rule: the bodies it saw
	faults    map[string]int
	deadlines map[string][]time.Time // per op: of each request, as Calls counts them
}

// New returns a Transport forwarding to base (http.DefaultTransport if nil)
// with no rules; seed seeds the draws of Probability.
func New(base http.RoundTripper, seed uint64) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	return &Transport{
		base:      base,
		rng:       rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		faults:    make(map[string]int),
		deadlines: make(map[string][]time.Time),
	}
}

// SetRules replaces the plan and resets the counts. The first rule that
// faults a request wins; every rule counts the requests it matches.
func (t *Transport) SetRules(rules ...Rule) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rules = append([]Rule(nil), rules...)
	t.matched = make([]int, len(rules))
	t.faulted = make([]int, len(rules))
	t.seen = make([]map[string]bool, len(rules))
	for i := range rules {
		t.seen[i] = make(map[string]bool)
	}
	clear(t.faults)
	clear(t.deadlines)
}

// Deadlines returns the deadline (or zero) of each request for op ("" for
// all) since the last SetRules, in order.
func (t *Transport) Deadlines(op string) []time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if op != "" {
		return slices.Clone(t.deadlines[op])
	}
	var all []time.Time
	for _, d := range t.deadlines {
		all = append(all, d...)
	}
	slices.SortFunc(all, func(a, b time.Time) int { return a.Compare(b) })
	return all
}

// Calls returns how many requests for op ("" for all) came since the last SetRules.
func (t *Transport) Calls(op string) int { return len(t.Deadlines(op)) }

// Faults returns how many requests for op ("" for all) were faulted since the last SetRules.
func (t *Transport) Faults(op string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if op != "" {
		return t.faults[op]
	}
	n := 0
	for _, c := range t.faults {
		n += c
	}
	return n
}

// RuleFaults returns how many requests each rule faulted since the last SetRules.
func (t *Transport) RuleFaults() []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.faulted)
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	op := dynamowire.Operation(req)
	req, body, err := dynamowire.ReadBody(req)
	if err != nil {
		return nil, err
	}
	deadline, _ := req.Context().Deadline()
	rule, faulted := t.choose(op, body, deadline)
	if !faulted {
		return t.base.RoundTrip(req)
	}
	ctx := req.Context()
	if a := rule.Action; a == Pass || a == DropResponse || a == TimeoutAfterApply {
		resp, err := t.base.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		if err := rule.Gate.pass(ctx); err != nil || a != Pass {
			// Drain the answer the caller will not see: its connection is reused.
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return nil, cmp.Or(err, failures[a])
		}
		return resp, nil
	}
	if err := rule.Gate.pass(ctx); err != nil {
		return nil, err
	}
	if rule.Action == Hold {
		return t.base.RoundTrip(req)
	}
	if a, ok := answers[rule.Action]; ok {
		return dynamowire.ErrorResponse(req, a.status, "FAULTINJECT", dynamowire.Error(a.code, a.message, nil)), nil
	}
	if err, ok := failures[rule.Action]; ok {
		return nil, err
	}
	return nil, fmt.Errorf("faultinject: unknown action %v", rule.Action)
}

// choose counts the request and returns the rule that faults it, if any.
func (t *Transport) choose(op string, body []byte, deadline time.Time) (Rule, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.deadlines[op] = append(t.deadlines[op], deadline)
	var chosen Rule
	faulted := false
	for i, r := range t.rules {
		if r.Op != "" && r.Op != op || r.BodyContains != "" && !bytes.Contains(body, []byte(r.BodyContains)) {
			continue
		}
		if r.FirstOnly {
			if t.seen[i][string(body)] {
				continue
			}
			t.seen[i][string(body)] = true
		}
		t.matched[i]++
		n := t.matched[i] - r.Skip // 1-based among the eligible
		if faulted || n < 1 || r.Count > 0 && n > r.Count {
			continue
		}
		if r.Probability > 0 && r.Probability < 1 && t.rng.Float64() >= r.Probability {
			continue
		}
		chosen, faulted = r, true
		t.faulted[i]++
	}
	if faulted {
		t.faults[op]++
	}
	return chosen, faulted
}
