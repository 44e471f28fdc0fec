// Package faultinject is an http.RoundTripper between the AWS SDK and a
// DynamoDB API server in tests that makes the server misbehave as a real
// table does under stress: throttling, internal errors, slow answers and
// dropped connections. Rules choose the faults by operation, request body,
// call count or a seeded random draw, so a failing test fails the same way
// again. Use it as the SDK client's transport:
//
//	ft := faultinject.New(nil, 1)
//	client, _ := dynamostore.NewClientWithOptions(ctx, dynamostore.ClientOptions{Endpoint: url, Transport: ft})
//	ft.SetRules(faultinject.Rule{Op: "UpdateItem", Count: 1, Action: faultinject.ThroughputExceeded})
package faultinject

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
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

// Actions. The error answers are shaped as DynamoDB's, so the SDK
// classifies (and retries) them as it would the real ones.
const (
	// Pass forwards the request; with a Gate, its answer comes late.
	Pass Action = iota
	// ThroughputExceeded answers 400 ProvisionedThroughputExceededException
	// without forwarding the request.
	ThroughputExceeded
	// Throttling answers 400 ThrottlingException without forwarding.
	Throttling
	// InternalServerError answers 500 InternalServerError without
	// forwarding.
	InternalServerError
	// Drop fails the request with ErrConnectionReset without forwarding it.
	Drop
	// DropResponse forwards the request, then fails it with
	// ErrConnectionReset: the caller cannot know it was applied.
	DropResponse
	// Hold forwards the request once its Gate opens (not at all if its
	// context ends first).
	Hold
	// Timeout fails the request with ErrAttemptTimeout without forwarding
	// it: an attempt timeout, without the wait.
	Timeout
	// TimeoutAfterApply forwards the request, then fails it with
	// ErrAttemptTimeout.
	TimeoutAfterApply
)

// answers are the DynamoDB errors the actions that answer send.
var answers = map[Action]struct {
	status        int
	code, message string
}{
	ThroughputExceeded: {http.StatusBadRequest, "ProvisionedThroughputExceededException",
		"The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API."},
	Throttling:          {http.StatusBadRequest, "ThrottlingException", "Rate of requests exceeds the allowed throughput."},
	InternalServerError: {http.StatusInternalServerError, "InternalServerError", "Internal server error"},
}

// failures are the errors the actions that fail a request fail it with.
var failures = map[Action]error{Drop: ErrConnectionReset, DropResponse: ErrConnectionReset, Timeout: ErrAttemptTimeout, TimeoutAfterApply: ErrAttemptTimeout}

var actionNames = [...]string{"Pass", "ThroughputExceeded", "Throttling", "InternalServerError", "Drop", "DropResponse", "Hold", "Timeout", "TimeoutAfterApply"}

func (a Action) String() string {
	if a >= 0 && int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "Action(" + strconv.Itoa(int(a)) + ")"
}

// Rule selects requests and the fault to inject into them. A request is
// matched by Op and BodyContains; of the requests a rule matches, the first
// Skip pass, the next Count are faulted (every later one when Count is 0),
// each with Probability.
type Rule struct {
	Op           string // the operation, e.g. "UpdateItem"; "" matches all
	BodyContains string // if set, the request body must contain it
	Skip         int    // the first Skip matching requests pass
	Count        int    // how many matching requests (after Skip) are faulted; 0: all
	// Probability, if in (0, 1), faults an eligible request only with this
	// probability, drawn from the seeded generator; a request the draw
	// spares still counts toward Count.
	Probability float64
	// FirstOnly faults a request only the first time its body is seen: the
	// SDK's retries of it pass.
	FirstOnly bool
	Action    Action
	// Gate, if set, holds the request until the test releases it: after
	// the server answered for Pass, DropResponse and TimeoutAfterApply,
	// before forwarding for Hold, before answering for the others. If the
	// request's context ends first, RoundTrip returns its error at once.
	Gate *Gate
}

// Gate holds the requests of the Rules that name it until Release. A test
// waits with Wait until a number of requests are held, acts, then
// releases them. It is safe for concurrent use.
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

// pass holds a request until the gate, if any, opens or ctx ends, and
// returns ctx's error.
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
// net.Error whose Timeout() is true, as a client's timeout is.
var ErrAttemptTimeout error = attemptTimeout{}

type attemptTimeout struct{}

func (attemptTimeout) Error() string {
	return "faultinject: attempt timed out (Client.Timeout exceeded while awaiting headers)"
}
func (attemptTimeout) Timeout() bool   { return true }
func (attemptTimeout) Temporary() bool { return true }

// ErrConnectionReset is the error Drop and DropResponse fail a request
// with: what a real connection reset looks like to an http.Transport user,
// so the SDK retries it as it would the real one.
var ErrConnectionReset error = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}

// Transport is an http.RoundTripper that injects faults into the requests it
// forwards to Base. It is safe for concurrent use; the plan can be changed
// while requests are in flight.
type Transport struct {
	base http.RoundTripper

	mu        sync.Mutex
	rng       *rand.Rand
	rules     []Rule
	matched   []int             // per rule: requests matched since SetRules
	faulted   []int             // per rule: requests faulted since SetRules
	seen      []map[uint64]bool // per FirstOnly rule: the bodies it saw
	calls     map[string]int
	faults    map[string]int
	deadlines map[string][]time.Time
}

// New returns a Transport forwarding to base (http.DefaultTransport if nil)
// with an empty plan: every request passes. seed seeds the generator of
// Probability rules.
func New(base http.RoundTripper, seed uint64) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	return &Transport{
		base:      base,
		rng:       rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		calls:     make(map[string]int),
		faults:    make(map[string]int),
		deadlines: make(map[string][]time.Time),
	}
}

// SetRules replaces the plan and resets the counts; with no rules every
// request passes. The first rule that faults a request wins; every rule
// counts the requests it matches, faulted or not.
func (t *Transport) SetRules(rules ...Rule) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rules = append([]Rule(nil), rules...)
	t.matched = make([]int, len(rules))
	t.faulted = make([]int, len(rules))
	t.seen = make([]map[uint64]bool, len(rules))
	for i, r := range rules {
		if r.FirstOnly {
			t.seen[i] = make(map[uint64]bool)
		}
	}
	clear(t.calls)
	clear(t.faults)
	clear(t.deadlines)
}

// Deadlines returns the deadline of each request for op ("" for all) since
// the last SetRules, in the order they arrived; the zero time for a request
// without one. A test checks a client's time budget by value with it,
// rather than by how long its calls took.
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

// Calls returns how many requests for op ("" for all) the Transport has
// seen since the last SetRules, faulted or not.
func (t *Transport) Calls(op string) int { return t.count(t.calls, op) }

// Faults returns how many requests for op ("" for all) were faulted since
// the last SetRules.
func (t *Transport) Faults(op string) int { return t.count(t.faults, op) }

// RuleFaults returns how many requests each rule of the plan faulted since
// the last SetRules, in the plan's order.
func (t *Transport) RuleFaults() []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.faulted)
}

func (t *Transport) count(m map[string]int, op string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if op != "" {
		return m[op]
	}
	n := 0
	for _, c := range m {
		n += c
	}
	return n
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
			// Read the answer the caller will not see, so that its
			// connection goes back to the pool.
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
	t.calls[op]++
	t.deadlines[op] = append(t.deadlines[op], deadline)
	var chosen Rule
	faulted := false
	for i, r := range t.rules {
		if r.Op != "" && r.Op != op || r.BodyContains != "" && !bytes.Contains(body, []byte(r.BodyContains)) {
			continue
		}
		if r.FirstOnly {
			h := fnv.New64a()
			h.Write(body)
			sum := h.Sum64()
			if t.seen[i][sum] {
				continue
			}
			t.seen[i][sum] = true
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
