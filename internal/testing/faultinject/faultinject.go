// Package faultinject is an http.RoundTripper that stands between the AWS
// SDK and a DynamoDB API server in tests and makes the server misbehave the
// way a real table does under stress: throttling, internal errors, slow
// answers and dropped connections. A plan of Rules chooses the faults by
// operation (the X-Amz-Target header: "DynamoDB_20120810.UpdateItem" is
// "UpdateItem"), by the request body, by call count or at random with a
// seeded generator, so that a failing test fails the same way again.
//
// Use it as the SDK client's transport:
//
//	ft := faultinject.New(nil, 1)
//	client, _ := dynamostore.NewClientWithOptions(ctx, dynamostore.ClientOptions{Endpoint: url, Transport: ft})
//	ft.SetRules(faultinject.Rule{Op: "UpdateItem", Count: 1, Action: faultinject.ThroughputExceeded})
package faultinject

import (
	"bytes"
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

// Actions. The error answers are shaped as DynamoDB's (JSON 1.0, __type and
// message, X-Amz-Crc32), so the SDK classifies them as it would the real
// ones: the two throttling errors and the 500 are retried.
const (
	// Pass forwards the request unchanged; with a Gate it is a slow
	// answer: the server applies the request, the answer comes late.
	Pass Action = iota
	// ThroughputExceeded answers 400 ProvisionedThroughputExceededException
	// without forwarding the request.
	ThroughputExceeded
	// Throttling answers 400 ThrottlingException without forwarding.
	Throttling
	// InternalServerError answers 500 InternalServerError without
	// forwarding.
	InternalServerError
	// Drop fails the request with a connection reset before it reaches the
	// server: nothing is applied.
	Drop
	// DropResponse forwards the request, lets the server apply it, then
	// fails it with a connection reset: the caller cannot know it
	// succeeded.
	DropResponse
	// Hold holds the request at its Gate before forwarding it: it
	// reaches the server late, and is applied then (unless the
	// request's context ends first: then it is not forwarded at all).
	Hold
	// Timeout fails the request at once, without forwarding it, with an
	// error whose Timeout() is true: what an attempt that outlived the
	// client's attempt timeout looks like to the SDK, without the wait.
	Timeout
	// TimeoutAfterApply forwards the request, lets the server apply it,
	// then fails it as Timeout does: an answer later than the attempt
	// timeout.
	TimeoutAfterApply
)

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
	// Op is the operation name, e.g. "UpdateItem"; "" matches every
	// operation.
	Op string
	// BodyContains, if set, matches only requests whose JSON body contains
	// it, e.g. `"issued"` for the UpdateItems that name the ticket counter.
	BodyContains string
	// Skip lets the first Skip matching requests through untouched.
	Skip int
	// Count is how many matching requests (after Skip) are faulted; 0 means
	// all of them.
	Count int
	// Probability, if in (0, 1), faults an eligible request only with
	// this probability, drawn from the Transport's seeded generator;
	// 0 means always. A request the draw spares still counts toward Count.
	Probability float64
	// FirstOnly faults a request only the first time its body is seen: the
	// SDK's retries of it (the same body) pass. With DropResponse: the
	// write is applied, its answer lost, and the retry answered.
	FirstOnly bool
	// Action is the fault.
	Action Action
	// Gate, if set, holds the request until the test releases the gate:
	// after the server answered for Pass, DropResponse and
	// TimeoutAfterApply, before forwarding for Hold, before answering for
	// the others. A scenario's next step happens while the request is
	// held, at a point the test chooses rather than in a time window. If
	// the request's context ends first (the SDK's per-attempt timeout, the
	// caller's deadline), RoundTrip returns the context's error at once,
	// as a real transport does.
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

// pass holds a request until the gate opens or ctx ends.
func (g *Gate) pass(ctx context.Context) error {
	g.held.Add()
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
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
	switch rule.Action {
	case Pass, DropResponse, TimeoutAfterApply:
		resp, err := t.base.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		if err := hold(ctx, rule); err != nil {
			discard(resp)
			return nil, err
		}
		switch rule.Action {
		case DropResponse:
			discard(resp)
			return nil, ErrConnectionReset
		case TimeoutAfterApply:
			discard(resp)
			return nil, ErrAttemptTimeout
		}
		return resp, nil
	}
	if err := hold(ctx, rule); err != nil {
		return nil, err
	}
	switch rule.Action {
	case Hold:
		return t.base.RoundTrip(req)
	case Timeout:
		return nil, ErrAttemptTimeout
	case ThroughputExceeded:
		return errorResponse(req, http.StatusBadRequest, "ProvisionedThroughputExceededException",
			"The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API."), nil
	case Throttling:
		return errorResponse(req, http.StatusBadRequest, "ThrottlingException", "Rate of requests exceeds the allowed throughput."), nil
	case InternalServerError:
		return errorResponse(req, http.StatusInternalServerError, "InternalServerError", "Internal server error"), nil
	case Drop:
		return nil, ErrConnectionReset
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

// hold holds a faulted request at r's Gate, if any, until it opens; it
// returns ctx's error if ctx ends first.
func hold(ctx context.Context, r Rule) error {
	if r.Gate != nil {
		if err := r.Gate.pass(ctx); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// discard reads and closes a response the caller will not see, so that its
// connection goes back to the pool.
func discard(resp *http.Response) {
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// errorResponse is a DynamoDB error answer.
func errorResponse(req *http.Request, status int, code, message string) *http.Response {
	return dynamowire.ErrorResponse(req, status, "FAULTINJECT", dynamowire.Error(code, message, nil))
}
