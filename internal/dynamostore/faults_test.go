package dynamostore_test

// Store faults, end to end: the real handler over the DynamoDB store, talking
// to the test DynamoDB API server through internal/testing/faultinject. Each test
// checks what a client of the HTTP API sees when the table throttles, fails,
// answers slowly or drops connections, and that the queue's invariants hold
// through it: an enter that fails blocks nothing, no ticket is handed to two
// tokens, and no position ever goes backwards. Each has its own table and
// client and a server of its own, so they run in parallel. Nothing waits
// for time to pass: a timeout is injected as one (faultinject.Timeout),
// retries have no backoff, the services run on a fake clock the test
// moves, and a write the test must act beside is held at a gate.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/dynamotest"
	"github.com/example/waitingroom/internal/testing/faultinject"
	"github.com/example/waitingroom/internal/testing/fixtures"
	"github.com/example/waitingroom/internal/tickets"
	"github.com/example/waitingroom/internal/tools/simclock"
)

// hangBound is how long a request may take, whatever the store does: a
// hang guard, far above what any of these calls takes (they never wait
// for a timeout or a backoff), not a timing benchmark.
const hangBound = time.Minute

// t0 is the rigs' clock at their start.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// faultRig is one function instance (handler, service, store, SDK client)
// whose requests to the DynamoDB API server go through a fault injector,
// on a fake clock.
type faultRig struct {
	endpoint string // a server of the test's own (dynamotest.Lease)
	ft       *faultinject.Transport
	client   *dynamodb.Client
	table    string
	store    *dynamostore.Store // the service's
	clock    *simclock.Fake
	svc      *queue.Service
	h        httpapi.LambdaHandler
}

// patient is the rigs' client budget: the production retries without
// backoff, and attempts of a minute, so that on a busy machine no attempt
// times out unless a test makes it (faultinject.Timeout).
var patient = dynamostore.ClientOptions{AttemptTimeout: time.Minute, Backoff: dynamostore.NoBackoff}

// newFaultRig builds an instance on a fresh table with the patient client
// and no faults yet; opts come after the rig's clock and ticket shards.
func newFaultRig(t *testing.T, opts ...queue.Option) *faultRig {
	t.Helper()
	return newFaultRigWith(t, patient, opts...)
}

// newFaultRigWith is newFaultRig with the client budget co (its Endpoint
// and Transport are the rig's).
func newFaultRigWith(t *testing.T, co dynamostore.ClientOptions, opts ...queue.Option) *faultRig {
	t.Helper()
	base := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(base.CloseIdleConnections)
	ft := faultinject.New(base, 1)
	co.Endpoint, co.Transport = dynamotest.Lease(t), ft
	client, err := dynamostore.NewClientWithOptions(t.Context(), co)
	if err != nil {
		t.Fatalf("NewClientWithOptions: %v", err)
	}
	table := dynamotest.NewTable(t, client)
	// Cleanups run last first: the faults stop before the table is deleted.
	t.Cleanup(func() { ft.SetRules() })
	r := &faultRig{endpoint: co.Endpoint, ft: ft, client: client, table: table, store: dynamostore.New(client, table), clock: simclock.NewFake(t0)}
	r.svc = r.service(r.store, opts...)
	r.h = httpapi.Lambda(httpapi.New(r.svc, httpapi.IAMAuth(), httpapi.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))))
	return r
}

// service is an instance over store on the rig's clock, with ticket shards.
func (r *faultRig) service(store *dynamostore.Store, opts ...queue.Option) *queue.Service {
	return queue.NewService(store, polling.DefaultTiers(), append([]queue.Option{
		queue.WithClock(r.clock), queue.WithTickets(tickets.New(store, tickets.WithClock(r.clock))),
	}, opts...)...)
}

// program creates a program, without faults.
func (r *faultRig) program(t *testing.T, id string, rate float64, paused bool) {
	t.Helper()
	if _, _, err := r.svc.PutProgram(t.Context(), id, api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(rate)), Paused: &paused}); err != nil {
		t.Fatalf("PutProgram %s: %v", id, err)
	}
}

// newStoreRig is a rig with program id (1/s, paused) and the store under
// its service, for the tests of the store's own writes.
func newStoreRig(t *testing.T, id string) (*faultRig, *dynamostore.Store) {
	t.Helper()
	r := newFaultRig(t)
	r.program(t, id, 1, true)
	return r, r.store
}

// apiEvent loads events/<name>.json addressed to programID, carrying token
// in X-Queue-Token when it is not empty.
func apiEvent(t *testing.T, name, programID, token string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	req := fixtures.Event(t, name)
	readdress := func(p string) string { return strings.Replace(p, "/programs/demo", "/programs/"+programID, 1) }
	req.RawPath = readdress(req.RawPath)
	req.RequestContext.HTTP.Path = readdress(req.RequestContext.HTTP.Path)
	if req.PathParameters != nil {
		req.PathParameters["programId"] = programID
	}
	delete(req.Headers, "x-queue-token")
	if token != "" {
		req.Headers["x-queue-token"] = token
	}
	return req
}

// answer is a handler response with its decoded body.
type answer struct {
	events.APIGatewayV2HTTPResponse
	took time.Duration
	body map[string]any
}

func (a answer) str(key string) string { s, _ := a.body[key].(string); return s }

func (a answer) position() int64 { f, _ := a.body["position"].(float64); return int64(f) }

// call sends event name for programID through the handler within ctx.
func (r *faultRig) call(t *testing.T, ctx context.Context, name, programID, token string) answer {
	t.Helper()
	req := apiEvent(t, name, programID, token)
	start := time.Now()
	resp, err := r.h(ctx, req)
	a := answer{APIGatewayV2HTTPResponse: resp, took: time.Since(start)}
	if err != nil {
		t.Fatalf("%s: Handle returned an error: %v", name, err)
	}
	if resp.Body != "" {
		if err := json.Unmarshal([]byte(resp.Body), &a.body); err != nil {
			t.Fatalf("%s: body %q: %v", name, resp.Body, err)
		}
	}
	return a
}

// mustStatus fails t unless a has status want.
func mustStatus(t *testing.T, what string, a answer, want int) {
	t.Helper()
	if a.StatusCode != want {
		t.Fatalf("%s: status %d, want %d; body %s", what, a.StatusCode, want, a.Body)
	}
}

// checkUnavailable checks a store-fault answer: 503 with a Retry-After of
// whole seconds, the {"code","message"} body and nothing internal in it,
// answered before hangBound.
func checkUnavailable(t *testing.T, what string, a answer) {
	t.Helper()
	if a.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("%s: status %d, want 503; body %s", what, a.StatusCode, a.Body)
		return
	}
	if s, err := strconv.Atoi(a.Headers["Retry-After"]); err != nil || s < 1 {
		t.Errorf("%s: Retry-After %q, want whole seconds ≥ 1", what, a.Headers["Retry-After"])
	}
	if len(a.body) != 2 || a.str("message") == "" || (a.str("code") != api.CodeUnavailable && a.str("code") != api.CodeBusy) {
		t.Errorf("%s: body %s, want exactly {code: STORE_UNAVAILABLE or BUSY, message}", what, a.Body)
	}
	for _, secret := range []string{"dynamodb", "DynamoDB", "Exception", "127.0.0.1", "reset", "FAULTINJECT", "faultinject", "deadline", "context", "table", "timed out"} {
		if strings.Contains(a.Body, secret) {
			t.Errorf("%s: body leaks %q: %s", what, secret, a.Body)
		}
	}
	if a.took > hangBound {
		t.Errorf("%s: answered after %v: a hang", what, a.took)
	}
}

// enter enters programID's queue without faults and returns the token.
func (r *faultRig) enter(t *testing.T, programID string) answer {
	t.Helper()
	a := r.call(t, t.Context(), "enter", programID, "")
	mustStatus(t, "enter", a, http.StatusCreated)
	return a
}

// storedTicket is a token's place as stored.
type storedTicket struct {
	program string
	ticket  int64
}

// scanTokens reads every token item of the rig's table, with the faults
// off: tickets by token id.
func (r *faultRig) scanTokens(t *testing.T) map[string]storedTicket {
	t.Helper()
	r.ft.SetRules()
	return scanTokens(t, r.client, r.table)
}

// scanTokens reads every token item of table: tickets by token id.
func scanTokens(t *testing.T, client *dynamodb.Client, table string) map[string]storedTicket {
	t.Helper()
	tickets := map[string]storedTicket{}
	p := dynamodb.NewScanPaginator(client, &dynamodb.ScanInput{
		TableName:                 &table,
		FilterExpression:          aws.String("sk = :token"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":token": &types.AttributeValueMemberS{Value: "TOKEN"}},
		ConsistentRead:            aws.Bool(true),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		for _, item := range page.Items {
			id := item["tokenId"].(*types.AttributeValueMemberS).Value
			program := item["programId"].(*types.AttributeValueMemberS).Value
			n, err := strconv.ParseInt(item["ticket"].(*types.AttributeValueMemberN).Value, 10, 64)
			if err != nil {
				t.Fatalf("token %s: ticket: %v", id, err)
			}
			tickets[id] = storedTicket{program, n}
		}
	}
	return tickets
}

// checkTicketsUnique fails t if two tokens hold one ticket of a program.
func checkTicketsUnique(t *testing.T, tickets map[string]storedTicket) {
	t.Helper()
	holder := map[storedTicket]string{}
	for id, st := range tickets {
		if other, ok := holder[st]; ok {
			t.Errorf("ticket %d of %s handed to two tokens: %s and %s", st.ticket, st.program, other, id)
		}
		holder[st] = id
	}
}

// TestFaultsTransient: one failed attempt per operation (a throttle, a 500,
// a dropped connection) is absorbed by the SDK's retries; the client never
// sees it.
func TestFaultsTransient(t *testing.T) {
	t.Parallel()
	r := newFaultRig(t)
	for _, action := range []faultinject.Action{faultinject.ThroughputExceeded, faultinject.Throttling, faultinject.InternalServerError, faultinject.Drop} {
		t.Run(action.String(), func(t *testing.T) {
			id := "transient-" + strings.ToLower(action.String())
			r.program(t, id, 10, true)
			r.ft.SetRules(
				faultinject.Rule{Op: "UpdateItem", Count: 1, Action: action}, // the ticket
				faultinject.Rule{Op: "PutItem", Count: 1, Action: action},    // the token
				faultinject.Rule{Op: "GetItem", Count: 1, Action: action},    // the poll's token read
			)
			e := r.call(t, t.Context(), "enter", id, "")
			mustStatus(t, "enter", e, http.StatusCreated)
			if e.position() != 1 {
				t.Errorf("enter: position %d, want 1", e.position())
			}
			p := r.call(t, t.Context(), "poll-waiting", id, e.str("tokenId"))
			mustStatus(t, "poll", p, http.StatusOK)
			if p.position() != 1 {
				t.Errorf("poll: position %d, want 1", p.position())
			}
			mustStatus(t, "leave", r.call(t, t.Context(), "leave", id, e.str("tokenId")), http.StatusNoContent)
			if got := r.ft.Faults(""); got != 3 {
				t.Errorf("%d faults injected, want 3 (one per operation)", got)
			}
		})
	}
}

// TestFaultsStoreDown: while every call fails, every route answers 503 with
// Retry-After and a safe body, promptly, after the configured attempts; once
// the store is back the same token works.
func TestFaultsStoreDown(t *testing.T) {
	t.Parallel()
	for _, action := range []faultinject.Action{faultinject.ThroughputExceeded, faultinject.Throttling, faultinject.InternalServerError, faultinject.Drop} {
		t.Run(action.String(), func(t *testing.T) {
			r := newFaultRig(t) // a fresh client: a full retry quota
			r.program(t, "demo", 10, true)
			tok := r.enter(t, "demo").str("tokenId")
			r.ft.SetRules(faultinject.Rule{Action: action})
			a := r.call(t, t.Context(), "enter", "demo", "")
			checkUnavailable(t, "enter", a)
			if got, want := r.ft.Calls(""), dynamostore.DefaultMaxAttempts; got != want {
				t.Errorf("enter made %d attempts, want %d", got, want)
			}
			for _, name := range []string{"poll-waiting", "leave", "admin-get-program", "admin-put-program", "admin-admit"} {
				checkUnavailable(t, name, r.call(t, t.Context(), name, "demo", tok))
			}
			r.ft.SetRules()
			p := r.call(t, t.Context(), "poll-waiting", "demo", tok)
			mustStatus(t, "poll after the outage", p, http.StatusOK)
			if p.str("status") != "WAITING" {
				t.Errorf("after the outage: %s", p.Body)
			}
		})
	}
}

// TestFaultsUnknownProgramThrottled: an enter to a program that does not
// exist answers 404 from its program read (the line's maxWaiting check),
// before any ticket write: a throttled program item is never tried, and no
// ticket shard item is left behind (a claim would create one).
func TestFaultsUnknownProgramThrottled(t *testing.T) {
	t.Parallel()
	r := newFaultRig(t, queue.WithProgramCache(time.Second)) // ticket shards on
	r.ft.SetRules(faultinject.Rule{Op: "UpdateItem", BodyContains: `"PROGRAM#nobody`, Action: faultinject.ThroughputExceeded})
	for _, id := range []string{"nobody-1", "nobody-2"} {
		a := r.call(t, t.Context(), "enter", id, "")
		if a.StatusCode != http.StatusNotFound || a.str("code") != api.CodeProgramNotFound {
			t.Errorf("enter %s: status %d, body %s; want 404 %s", id, a.StatusCode, a.Body, api.CodeProgramNotFound)
		}
		for i := range 2 {
			b, err := r.store.GetShard(t.Context(), id, i)
			if err != nil {
				t.Fatal(err)
			}
			if b != (tickets.Shard{}) {
				t.Errorf("enter %s left shard %d: %+v; want no item", id, i, b)
			}
		}
	}
	if n := r.ft.Faults(""); n != 0 {
		t.Errorf("%d ticket writes were tried for a program that does not exist", n)
	}
}

// TestFaultsSlowStore: answers slower than anything the function can wait
// for end in a 503, never a hang or a 500, with the store's calls bounded
// by the invocation's deadline (less the reserve the handler needs to
// answer) or, without one, by the client's attempt timeout. Each attempt
// is applied and then times out at once (faultinject.TimeoutAfterApply);
// the bounds are read from the deadlines the attempts carried.
func TestFaultsSlowStore(t *testing.T) {
	t.Parallel()
	t.Run("InvocationDeadline", func(t *testing.T) {
		// The Lambda runtime puts the invocation's deadline on the
		// context. The patient client's attempts would last a minute: the
		// deadline, less the reserve, bounds them.
		r := newFaultRig(t)
		r.program(t, "demo", 10, true)
		r.ft.SetRules(faultinject.Rule{Op: "UpdateItem", Action: faultinject.TimeoutAfterApply}) // the ticket
		deadline := time.Now().Add(2 * time.Second)
		ctx, cancel := context.WithDeadline(t.Context(), deadline)
		defer cancel()
		before := time.Now()
		a := r.call(t, ctx, "enter", "demo", "")
		after := time.Now()
		checkUnavailable(t, "enter", a)
		// The reserve is a quarter of the time left when a call starts, at
		// most DefaultDeadlineReserve: between these two.
		least, most := min(dynamostore.DefaultDeadlineReserve, deadline.Sub(after)/4), min(dynamostore.DefaultDeadlineReserve, deadline.Sub(before)/4)
		deadlines := r.ft.Deadlines("")
		for _, d := range deadlines {
			if kept := deadline.Sub(d); d.IsZero() || kept < least || kept > most {
				t.Errorf("an attempt's deadline %v before the invocation's, want the reserve (%v to %v)", kept, least, most)
			}
		}
		if len(deadlines) == 0 {
			t.Error("no store call was made")
		}
		checkGapCounted(t, r)
	})
	t.Run("NoDeadline", func(t *testing.T) {
		r := newFaultRigWith(t, dynamostore.ClientOptions{Backoff: dynamostore.NoBackoff}) // production attempts
		r.program(t, "demo", 10, true)
		tok := r.enter(t, "demo").str("tokenId")
		r.ft.SetRules(faultinject.Rule{Action: faultinject.TimeoutAfterApply})
		before := time.Now()
		checkUnavailable(t, "poll", r.call(t, t.Context(), "poll-waiting", "demo", tok))
		after := time.Now()
		deadlines := r.ft.Deadlines("GetItem")
		if len(deadlines) != dynamostore.DefaultMaxAttempts {
			t.Errorf("%d attempts to read the token, want %d", len(deadlines), dynamostore.DefaultMaxAttempts)
		}
		for _, d := range deadlines {
			if d.IsZero() || d.Before(before.Add(dynamostore.DefaultAttemptTimeout)) || d.After(after.Add(dynamostore.DefaultAttemptTimeout)) {
				t.Errorf("an attempt's deadline is %v after the poll started, want the attempt timeout (%v)", d.Sub(before), dynamostore.DefaultAttemptTimeout)
			}
		}
	})
}

// checkGapCounted: after a spell of slow answers that were applied (enter's
// tickets), an enter without faults gets a position that counts every
// ticket issued, gaps included, and no ticket has two holders.
func checkGapCounted(t *testing.T, r *faultRig) {
	t.Helper()
	r.ft.SetRules()
	e := r.enter(t, "demo")
	c, err := r.svc.Program(t.Context(), "demo")
	if err != nil {
		t.Fatal(err)
	}
	if c.Issued < 2 || e.position() != c.Issued {
		t.Errorf("enter after the slow spell: position %d of %d issued, want every ticket issued counted, the slow one's gap included", e.position(), c.Issued)
	}
	checkTicketsUnique(t, r.scanTokens(t))
}

// TestFaultsEnterPutTokenFails: the ticket was taken but the token could
// not be stored. The client gets a 503; its retry gets a new ticket behind
// the lost one (a gap), which admission passes over like any other.
func TestFaultsEnterPutTokenFails(t *testing.T) {
	t.Parallel()
	r := newFaultRig(t)
	r.program(t, "demo", 10, true)
	r.ft.SetRules(faultinject.Rule{Op: "PutItem", Action: faultinject.InternalServerError})
	checkUnavailable(t, "enter", r.call(t, t.Context(), "enter", "demo", ""))
	if got, want := r.ft.Calls("UpdateItem"), 1; got != want {
		t.Errorf("%d ticket writes, want %d", got, want)
	}
	if got, want := r.ft.Calls("PutItem"), dynamostore.DefaultMaxAttempts; got != want {
		t.Errorf("%d token writes, want %d", got, want)
	}
	r.ft.SetRules()

	e := r.enter(t, "demo")
	tok := e.str("tokenId")
	if e.position() != 2 {
		t.Errorf("retry: position %d, want 2 (behind the gap)", e.position())
	}
	tickets := r.scanTokens(t)
	if len(tickets) != 1 || tickets[tok].ticket != 2 {
		t.Errorf("stored tokens %v, want only %s with ticket 2", tickets, tok)
	}
	// Admission passes over the gap: one slot, then the token.
	ctx := t.Context()
	if _, err := r.svc.Admit(ctx, "demo", 1); err != nil {
		t.Fatal(err)
	}
	if p := r.call(t, ctx, "poll-waiting", "demo", tok); p.str("status") != "WAITING" || p.position() != 1 {
		t.Errorf("after admitting the gap: %s", p.Body)
	}
	if _, err := r.svc.Admit(ctx, "demo", 1); err != nil {
		t.Fatal(err)
	}
	if p := r.call(t, ctx, "poll-waiting", "demo", tok); p.str("status") != "ADMITTED" {
		t.Errorf("after admitting the token: %s", p.Body)
	}
}

// TestFaultsLostResponses: a write the server applied but whose answer never
// arrived (a dropped connection, or an answer past the attempt timeout) is
// retried by the SDK. A retried ticket is a gap; a retried token write finds
// its own token; a retried mark finds its own mark. Nobody gets an error
// for a write that in fact happened, and no ticket has two holders.
func TestFaultsLostResponses(t *testing.T) {
	t.Parallel()
	r := newFaultRig(t)
	ctx := t.Context()
	lost := faultinject.Rule{Count: 1, Action: faultinject.DropResponse}
	slow := faultinject.Rule{Count: 1, Action: faultinject.TimeoutAfterApply}
	with := func(r faultinject.Rule, op, body string) faultinject.Rule {
		r.Op, r.BodyContains = op, body
		return r
	}

	t.Run("IssueTicket", func(t *testing.T) {
		r.program(t, "ticket", 10, true)
		r.ft.SetRules(with(lost, "UpdateItem", `"issued"`)) // the ticket: no other write names it during an enter
		e := r.call(t, ctx, "enter", "ticket", "")
		mustStatus(t, "enter", e, http.StatusCreated)
		if e.position() != 2 {
			t.Errorf("position %d, want 2: the first ticket was taken by the lost attempt, a gap", e.position())
		}
	})
	// A ticket write slower than an ordinary attempt (a stalled store) is
	// waited for, not retried: a retry would be applied too once the store
	// wakes up, and leave a gap for every attempt. Its one attempt may last
	// IssueAttemptTimeout, where others last the client's attempt timeout;
	// one that times out even so is not repeated (the enter answers 503,
	// the ticket a gap).
	t.Run("IssueTicketSlow", func(t *testing.T) {
		r := newFaultRigWith(t, dynamostore.ClientOptions{Backoff: dynamostore.NoBackoff}) // production attempts
		r.program(t, "ticketslow", 10, true)
		r.ft.SetRules()
		before := time.Now()
		mustStatus(t, "enter", r.call(t, ctx, "enter", "ticketslow", ""), http.StatusCreated)
		after := time.Now()
		within := func(op string, d time.Duration) {
			t.Helper()
			got := r.ft.Deadlines(op)
			if len(got) != 1 || got[0].Before(before.Add(d)) || got[0].After(after.Add(d)) {
				t.Errorf("%s: attempt deadlines %v after the enter began, want one of %v", op, got, d)
			}
		}
		within("UpdateItem", dynamostore.IssueAttemptTimeout) // the ticket
		within("PutItem", dynamostore.DefaultAttemptTimeout)  // the token
		r.ft.SetRules(with(slow, "UpdateItem", `"issued"`))
		checkUnavailable(t, "enter", r.call(t, ctx, "enter", "ticketslow", ""))
		if n := r.ft.Calls("UpdateItem"); n != 1 {
			t.Errorf("%d ticket writes, want 1: a ticket write that timed out is not repeated", n)
		}
		e := r.enter(t, "ticketslow")
		if e.position() != 3 {
			t.Errorf("position %d, want 3: behind the first enter and the slow ticket's gap", e.position())
		}
	})
	for name, rule := range map[string]faultinject.Rule{"PutTokenDropped": lost, "PutTokenSlow": slow} {
		t.Run(name, func(t *testing.T) {
			id := strings.ToLower(name)
			r.program(t, id, 10, true)
			r.ft.SetRules(with(rule, "PutItem", ""))
			e := r.call(t, ctx, "enter", id, "")
			mustStatus(t, "enter", e, http.StatusCreated)
			if got := r.ft.Calls("PutItem"); got != 2 {
				t.Errorf("%d token writes, want 2 (the lost one and its retry)", got)
			}
			p := r.call(t, ctx, "poll-waiting", id, e.str("tokenId"))
			mustStatus(t, "poll", p, http.StatusOK)
			if p.position() != 1 || e.position() != 1 {
				t.Errorf("positions %d then %d, want 1 and 1", e.position(), p.position())
			}
		})
	}
	t.Run("MarkLeft", func(t *testing.T) {
		r.program(t, "leave", 10, true)
		tok := r.enter(t, "leave").str("tokenId")
		r.ft.SetRules(with(lost, "UpdateItem", ""))
		mustStatus(t, "leave", r.call(t, ctx, "leave", "leave", tok), http.StatusNoContent)
		if p := r.call(t, ctx, "poll-waiting", "leave", tok); p.str("status") != "LEFT" {
			t.Errorf("after leaving: %s", p.Body)
		}
	})
	t.Run("MarkAdmitted", func(t *testing.T) {
		r.program(t, "admit", 10, true)
		tok := r.enter(t, "admit").str("tokenId")
		if _, err := r.svc.Admit(ctx, "admit", 1); err != nil {
			t.Fatal(err)
		}
		r.ft.SetRules(with(lost, "UpdateItem", ""))
		p := r.call(t, ctx, "poll-waiting", "admit", tok)
		mustStatus(t, "poll", p, http.StatusOK)
		again := r.call(t, ctx, "poll-waiting", "admit", tok)
		if p.str("status") != "ADMITTED" || again.str("admittedAt") != p.str("admittedAt") {
			t.Errorf("admitted: %s then %s", p.Body, again.Body)
		}
	})
	t.Run("Admit", func(t *testing.T) {
		r.program(t, "manual", 10, true)
		for range 3 {
			r.enter(t, "manual")
		}
		r.ft.SetRules(with(lost, "UpdateItem", ""))
		c, err := r.svc.Admit(ctx, "manual", 1)
		if err != nil {
			t.Fatal(err)
		}
		r.ft.SetRules()
		fresh, err := r.svc.Program(ctx, "manual")
		if err != nil {
			t.Fatal(err)
		}
		if c.Admitted != 1 || fresh.Admitted != 1 {
			t.Errorf("an admission whose answer was lost was applied twice: asked 1, answered %d, stored %d", c.Admitted, fresh.Admitted)
		}
	})
	checkTicketsUnique(t, r.scanTokens(t))
}

// TestFaultsPositionsNeverGoBack: people poll an advancing queue through a
// store that throttles, fails, drops connections and loses answers at
// random (seeded: the run is the same every time). Every answer is a 2xx
// or a 503, and no token's position ever increases. Twelve rounds of polls,
// 250 ms of the service's clock apart, admit a person a round; a fifth of
// the people leave in the third.
func TestFaultsPositionsNeverGoBack(t *testing.T) {
	t.Parallel()
	r := newFaultRig(t, queue.WithProgramCache(time.Second), queue.WithRand(rand.New(rand.NewPCG(1, 2))))
	r.program(t, "demo", 4, false)
	ctx := t.Context()
	var tokens []string
	for range 12 {
		for try := 0; ; try++ {
			if try == 10 {
				t.Fatal("enter failed 10 times in a row")
			}
			a := r.call(t, ctx, "enter", "demo", "")
			if a.StatusCode == http.StatusCreated {
				tokens = append(tokens, a.str("tokenId"))
				break
			}
			checkUnavailable(t, "enter", a)
		}
		if len(tokens) == 1 {
			// Faults from the second enter on.
			const p = 0.04
			r.ft.SetRules(
				faultinject.Rule{Probability: p, Action: faultinject.ThroughputExceeded},
				faultinject.Rule{Probability: p, Action: faultinject.Throttling},
				faultinject.Rule{Probability: p, Action: faultinject.InternalServerError},
				faultinject.Rule{Probability: p, Action: faultinject.Drop},
				faultinject.Rule{Probability: p, Action: faultinject.DropResponse},
			)
		}
	}
	type seen struct {
		status string
		pos    int64
	}
	last := map[string]seen{}
	unavailable, left := 0, 0
	for round := range 12 {
		r.clock.Advance(250 * time.Millisecond)
		for i, tok := range tokens {
			name := "poll-waiting"
			if round == 2 && i%5 == 4 {
				name = "leave"
			}
			a := r.call(t, ctx, name, "demo", tok)
			switch a.StatusCode {
			case http.StatusOK, http.StatusNoContent:
			case http.StatusConflict: // leave after admission
				continue
			default:
				checkUnavailable(t, name, a)
				unavailable++
				continue
			}
			if name == "leave" {
				last[tok] = seen{status: "LEFT"}
				left++
				continue
			}
			cur := seen{a.str("status"), a.position()}
			prev, ok := last[tok]
			switch {
			case !ok:
			case prev.status == "WAITING" && cur.status == "WAITING":
				if cur.pos > prev.pos {
					t.Errorf("token %d: position went back from %d to %d", i, prev.pos, cur.pos)
				}
			case prev.status != cur.status && !(prev.status == "WAITING" && (cur.status == "ADMITTED" || cur.status == "LEFT")):
				t.Errorf("token %d: status went from %s to %s", i, prev.status, cur.status)
			}
			last[tok] = cur
		}
	}
	t.Logf("%d faults injected in %d calls; %d answers were 503", r.ft.Faults(""), r.ft.Calls(""), unavailable)
	if r.ft.Faults("") == 0 {
		t.Error("no fault injected")
	}
	admitted := 0
	for _, s := range last {
		if s.status == "ADMITTED" {
			admitted++
		}
	}
	if admitted == 0 || left == 0 {
		t.Errorf("%d admitted and %d left: the run did not move the queue", admitted, left)
	}
	checkTicketsUnique(t, r.scanTokens(t))
}

// instance returns another function instance on the rig's table and clock,
// with its own patient client and no faults.
func (r *faultRig) instance(t *testing.T, opts ...queue.Option) *queue.Service {
	t.Helper()
	co := patient
	co.Endpoint = r.endpoint
	client, err := dynamostore.NewClientWithOptions(t.Context(), co)
	if err != nil {
		t.Fatal(err)
	}
	return r.service(dynamostore.New(client, r.table), opts...)
}

// TestFaultsSlowAdminWrite: an admin change is stored only when its
// UpdateItem lands, and an instance that reads the program just before
// caches the old one for a TTL from then. The change is scheduled a TTL
// plus the admin write budget after it is made, so it takes effect after
// every such read has expired: a person whose polls land on the stale
// instance and on fresh ones never sees their position go back. The write
// is held at a gate while the other instance reads, and lands 900 ms of
// the clock later, within the budget; the polls then step through the
// change's taking effect 100 ms apart.
func TestFaultsSlowAdminWrite(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	admin := newFaultRig(t, queue.WithProgramCache(ttl)) // the admin function, with a slow write
	admin.program(t, "gala", 10, true)
	var tok string
	for range 10 {
		tok = admin.enter(t, "gala").str("tokenId") // ticket 10, position 10
	}
	ctx := t.Context()
	b := admin.instance(t, queue.WithProgramCache(ttl))
	gate := faultinject.NewGate()
	admin.ft.SetRules(faultinject.Rule{Op: "UpdateItem", Action: faultinject.Hold, Gate: gate})

	done := make(chan error, 1)
	var counters admission.Counters
	go func() {
		var err error
		counters, err = admin.svc.Admit(ctx, "gala", 5)
		done <- err
	}()
	if err := gate.Wait(ctx, 1); err != nil { // the write is held on its way
		t.Fatal(err)
	}
	var seen []int64 // positions in the order the person saw them, from either instance
	poll := func(s *queue.Service) {
		t.Helper()
		v, err := s.Poll(ctx, "gala", tok)
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, v.Position)
	}
	poll(b) // B reads the program while the write is on its way
	admin.clock.Advance(900 * time.Millisecond)
	gate.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	fresh := admin.instance(t) // no cache: always the stored program
	for !admin.clock.Now().After(counters.EffectiveAt.Add(300 * time.Millisecond)) {
		admin.clock.Advance(100 * time.Millisecond)
		poll(b)
		poll(fresh)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] > seen[i-1] {
			t.Fatalf("position went back: %v", seen)
		}
	}
	if last := seen[len(seen)-1]; last != 5 {
		t.Errorf("after the admission took effect: position %d, want 5 (%v)", last, seen)
	}
}

// TestFaultsShardAnswersLost: every write of the ticket shards (claim,
// fill, take, trim, shard count, give back) is applied and its answer
// lost on its first attempt; the SDK's retry is answered. Two instances
// sharing a clock, driven one call at a time, go through each write: a
// crowd on a puts the program on shards (shard count, claim, fill, take);
// once its blocks are stale, a few enter on b, who refills the shards,
// then on a, who takes from b's blocks; once those are stale, a crowd on
// a alone refills them all; a quiet spell of polls makes both trim their
// blocks and a give back the numbers at the top that nobody took. Each kind of
// write is checked to have lost an answer after the step that makes it,
// and after each step no ticket is held twice, nor above the program's
// last ticket (a number given back while someone holds it would be handed
// out again).
func TestFaultsShardAnswersLost(t *testing.T) {
	t.Parallel()
	r := newFaultRig(t)
	r.program(t, "lost", 1, true)
	var returned atomic.Int64
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	svcs := make([]*queue.Service, 2)
	for i := range svcs {
		// Each instance its own client through the faults, without the
		// retry quota: a retry that fails its condition is not refunded,
		// and every shard write costs one here.
		client := dynamodb.New(r.client.Options(), func(o *dynamodb.Options) {
			o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
				so.MaxAttempts, so.Backoff, so.RateLimiter = dynamostore.DefaultMaxAttempts, dynamostore.NoBackoff, ratelimit.None
			})
		})
		store := givingBack{dynamostore.New(client, r.table, dynamostore.WithLogger(quiet)), &returned}
		rng := rand.New(rand.NewPCG(7, uint64(i)))
		svcs[i] = queue.NewService(store, polling.DefaultTiers(), queue.WithProgramCache(time.Second), queue.WithLogger(quiet),
			queue.WithClock(r.clock), queue.WithRand(rng),
			queue.WithTickets(tickets.New(store, tickets.WithItemWriteLimit(20), tickets.WithLogger(quiet), tickets.WithClock(r.clock), tickets.WithRand(rng))))
	}
	a, b := svcs[0], svcs[1]
	kinds := []struct{ name, body string }{
		{"claim", `"programId"`}, // only a claim names it
		{"fill", `"claimMs"`},    // a claim names it too: its rule comes first
		{"take", `"takes"`},      // a fill too
		{"trim", `"start"`},      // a fill too
		{"set shards", `"shards"`},
		{"give back", `"returnId"`},
	}
	rules := make([]faultinject.Rule, len(kinds))
	for i, k := range kinds {
		rules[i] = faultinject.Rule{Op: "UpdateItem", BodyContains: k.body, FirstOnly: true, Action: faultinject.DropResponse}
	}
	r.ft.SetRules(rules...)
	lost := make([]int, len(kinds)) // lost answers per kind, before the last SetRules
	lostNow := func() []int {
		got := r.ft.RuleFaults()
		for i := range got {
			got[i] += lost[i]
		}
		return got
	}
	// faulted fails t unless each named kind has lost an answer.
	faulted := func(step string, names ...string) {
		t.Helper()
		got := lostNow()
		for i, k := range kinds {
			if slices.Contains(names, k.name) && got[i] == 0 {
				t.Errorf("after %s: no %s lost its answer (lost answers per write: %v)", step, k.name, got)
			}
		}
	}

	var tokens []string
	// enter has n people enter through svc, one every gap of the clock.
	enter := func(svc *queue.Service, n int, gap time.Duration) {
		t.Helper()
		for range n {
			r.clock.Advance(gap)
			v, _, err := svc.Enter(t.Context(), "lost", queue.Entry{})
			if err != nil {
				t.Fatalf("enter at +%v: %v", r.clock.Now().Sub(t0), err)
			}
			tokens = append(tokens, v.TokenID)
		}
	}
	// check fails t if a ticket is held twice or above the last ticket.
	check := func(step string) {
		t.Helper()
		lost = lostNow()
		r.ft.SetRules()
		defer r.ft.SetRules(rules...)
		stored := scanTokens(t, r.client, r.table)
		checkTicketsUnique(t, stored)
		p, err := r.svc.Program(t.Context(), "lost")
		if err != nil {
			t.Fatal(err)
		}
		for id, st := range stored {
			if st.ticket > p.Issued {
				t.Errorf("after %s: token %s holds ticket %d, above the program's last ticket %d: given back while held", step, id, st.ticket, p.Issued)
			}
		}
		if len(stored) != len(tokens) {
			t.Errorf("after %s: %d tokens stored, %d answered", step, len(stored), len(tokens))
		}
		t.Logf("after %s: %d tokens, %d tickets issued, %d given back; lost answers per write %v", step, len(tokens), p.Issued, returned.Load(), lost)
		if t.Failed() {
			t.FailNow()
		}
	}

	// A crowd of 60 at 50 a second on a: the program goes on shards.
	enter(a, 60, 20*time.Millisecond)
	faulted("the crowd", "set shards", "claim", "fill", "take")
	check("the crowd")
	// Once a's blocks are stale, b refills the shards; a takes from
	// b's blocks.
	r.clock.Advance(tickets.BlockLifetime)
	enter(b, 10, 20*time.Millisecond)
	enter(a, 10, 20*time.Millisecond)
	check("the refills")
	// Once those are stale, a crowd on a alone: a refills every shard, so
	// the blocks at the top are its own, to give back.
	r.clock.Advance(tickets.BlockLifetime)
	enter(a, 30, 20*time.Millisecond)
	check("a's refills")
	// Quiet: polls make the instances trim their stale blocks and give
	// back what nobody took.
	first := len(tokens) - 50
	for round := range 30 {
		r.clock.Advance(100 * time.Millisecond)
		for i, tok := range tokens[first:] {
			if _, err := svcs[(i+round)%len(svcs)].Poll(t.Context(), "lost", tok); err != nil {
				t.Fatalf("poll: %v", err)
			}
		}
	}
	faulted("the quiet spell", "trim", "give back")
	check("the quiet spell")
	if returned.Load() == 0 {
		t.Error("no number was given back")
	}
}

// loseFirst makes the rig lose the answer of the first op request whose
// body contains body (the write is applied; the SDK retries it).
func (r *faultRig) loseFirst(op, body string) {
	r.ft.SetRules(faultinject.Rule{Op: op, BodyContains: body, FirstOnly: true, Action: faultinject.DropResponse})
}

// checkLost fails t unless exactly one answer of op was lost, and clears
// the rules.
func (r *faultRig) checkLost(t *testing.T, op, what string) {
	t.Helper()
	if got := r.ft.Faults(op); got != 1 {
		t.Fatalf("%s: %d answers lost, want 1", what, got)
	}
	r.ft.SetRules()
}

// TestShardWritesAnswerLost: each write of the ticket shards applied with
// its first answer lost answers, on the SDK's retry, what it did: the
// same numbers for a take (not the next ones, leaving a gap), the
// numbers retired for a trim, true for a fill, a shard count and a give
// back.
func TestShardWritesAnswerLost(t *testing.T) {
	t.Parallel()
	r, s := newStoreRig(t, "once")
	ctx := t.Context()
	now := t0
	fresh := now.Add(-tickets.BlockLifetime)
	lose := func(body string) { r.loseFirst("UpdateItem", body) }
	checkLost := func(what string) {
		t.Helper()
		r.checkLost(t, "UpdateItem", what)
	}
	p, err := s.IssueTickets(ctx, "once", now, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.ClaimShard(ctx, "once", 0, "c", now, fresh, now.Add(-time.Second)); err != nil || !ok {
		t.Fatalf("ClaimShard: %v %v", ok, err)
	}
	lose(`"claimMs"`)
	ok, err := s.FillShard(ctx, "once", 0, "c", now, tickets.Shard{Start: 1, Next: 1, End: 10, ReservedAt: now})
	checkLost("fill")
	if err != nil || !ok {
		t.Fatalf("FillShard: %v %v, want true (applied)", ok, err)
	}
	lose(`"takes"`)
	run, ok, err := s.TakeShardTickets(ctx, "once", 0, fresh, 3)
	checkLost("take")
	if err != nil || !ok || run.First != 1 || run.Last != 3 || run.After != 4 {
		t.Fatalf("TakeShardTickets: %+v %v %v, want 1..3, next 4 (the numbers the lost answer carried)", run, ok, err)
	}
	lose(`"start"`)
	trimmed, ok, err := s.TrimShard(ctx, "once", 0, 1, now, tickets.Run{})
	checkLost("trim")
	if err != nil || !ok || trimmed.First != 4 || trimmed.Last != 10 {
		t.Fatalf("TrimShard: %+v %v %v, want 4..10 retired", trimmed, ok, err)
	}
	lose(`"returnId"`)
	ok, err = s.ReturnTickets(ctx, p, 4)
	checkLost("give back")
	if err != nil || !ok {
		t.Fatalf("ReturnTickets: %v %v, want true (applied)", ok, err)
	}
	lose(`"shards"`)
	ok, err = s.SetShards(ctx, "once", 0, 4)
	checkLost("set shards")
	if err != nil || !ok {
		t.Fatalf("SetShards: %v %v, want true (applied)", ok, err)
	}
	if q, err := s.GetProgram(ctx, "once"); err != nil || q.Issued != 3 || q.Shards != 4 {
		t.Fatalf("program after: %+v %v, want 3 issued, 4 shards", q, err)
	}
}

// TestShardTakeRetriedAfterRefill is the regression test of a ticket handed
// to two tokens: a take that used up its block lost its answer, and before
// the SDK's retry another instance refilled the shard. The retry must not
// answer the old take's first number with a last number from the new
// block, whose first numbers are the refiller's.
func TestShardTakeRetriedAfterRefill(t *testing.T) {
	t.Parallel()
	r, s := newStoreRig(t, "refill")
	client, err := dynamostore.NewClient(t.Context(), r.endpoint)
	if err != nil {
		t.Fatal(err)
	}
	other := dynamostore.New(client, r.table) // another instance, no faults
	ctx := t.Context()
	now := t0
	fresh := now.Add(-tickets.BlockLifetime)
	if _, err := s.IssueTickets(ctx, "refill", now, 3); err != nil {
		t.Fatal(err)
	}
	fill := func(s *dynamostore.Store, b tickets.Shard) {
		t.Helper()
		claim := queue.NewTokenID()
		if _, ok, err := s.ClaimShard(ctx, "refill", 0, claim, now, fresh, now.Add(-time.Second)); err != nil || !ok {
			t.Fatalf("ClaimShard: %v %v", ok, err)
		}
		if ok, err := s.FillShard(ctx, "refill", 0, claim, now, b); err != nil || !ok {
			t.Fatalf("FillShard: %v %v", ok, err)
		}
	}
	fill(s, tickets.Shard{Start: 1, Next: 2, End: 3, ReservedAt: now}) // 1 is the filler's
	// The take of 3 gets 2..3 and uses the block up; its answer is held at
	// a gate, then lost, while the other instance refills the shard.
	gate := faultinject.NewGate()
	r.ft.SetRules(faultinject.Rule{Op: "UpdateItem", BodyContains: `"takes"`, FirstOnly: true, Action: faultinject.DropResponse, Gate: gate})
	type take struct {
		run tickets.Run
		ok  bool
		err error
	}
	taken := make(chan take, 1)
	go func() {
		run, ok, err := s.TakeShardTickets(ctx, "refill", 0, fresh, 3)
		taken <- take{run, ok, err}
	}()
	if err := gate.Wait(ctx, 1); err != nil { // the take is applied, its answer held
		t.Fatal(err)
	}
	if sh, err := other.GetShard(ctx, "refill", 0); err != nil || sh.Next != 5 {
		t.Fatalf("shard while the take's answer is held: %+v %v, want next 5", sh, err)
	}
	q, err := other.IssueTickets(ctx, "refill", now, 4) // 4..7
	if err != nil || q.Issued != 7 {
		t.Fatalf("IssueTickets: %+v %v, want 4..7", q, err)
	}
	fill(other, tickets.Shard{Start: 4, Next: 5, End: 7, ReservedAt: now}) // 4 is the refiller's
	gate.Release()                                                         // the answer is lost; the SDK retries the take
	got := <-taken
	r.checkLost(t, "UpdateItem", "take")
	if got.err != nil {
		t.Fatalf("TakeShardTickets: %v", got.err)
	}
	// The numbers the lost answer carried (2..3), a fresh take from the
	// new block (5..7), or none: never 4, nor a run across the blocks.
	want := []tickets.Run{{}, {First: 2, Last: 3, Block: 1}, {First: 5, Last: 7, Block: 4}}
	run := tickets.Run{First: got.run.First, Last: got.run.Last, Block: got.run.Block}
	if !got.ok {
		run = tickets.Run{}
	}
	if !slices.Contains(want, run) {
		t.Fatalf("the retried take answered %d..%d of the block at %d (ok %v), want one of %+v: ticket 4 is the refiller's", run.First, run.Last, run.Block, got.ok, want)
	}
}

// TestCapacityWritesAnswerLost: each write of the capacity records applied
// with its first answer lost answers, on the SDK's retry, as if it had
// been made once; a fold's retry answers ErrConflict (its caller reads
// again) with the fold stored.
func TestCapacityWritesAnswerLost(t *testing.T) {
	t.Parallel()
	r, s := newStoreRig(t, "cap")
	ctx := t.Context()
	at := time.UnixMilli(1_772_366_400_000).UTC()
	r.loseFirst("UpdateItem", `"sighted"`)
	g, err := s.Sight(ctx, "cap", 5)
	r.checkLost(t, "UpdateItem", "sight")
	if err != nil || !slices.Equal(g.Sighted, []int64{5}) {
		t.Fatalf("Sight: %+v %v, want 5 sighted", g, err)
	}
	r.loseFirst("UpdateItem", `"sealedThrough"`)
	g, err = s.SealSightings(ctx, "cap", 0, 9, at)
	r.checkLost(t, "UpdateItem", "seal sightings")
	if sealedAt, _ := g.SealedAt(9); err != nil || g.SealedThrough != 9 || len(g.Seals) != 1 || !sealedAt.Equal(at) || !slices.Equal(g.Sighted, []int64{5}) {
		t.Fatalf("SealSightings: %+v %v, want 5 sighted, sealed through 9 at %v, once", g, err, at)
	}
	r.loseFirst("UpdateItem", `"end_7"`)
	g, err = s.EndPlace(ctx, "cap", 7, 3)
	r.checkLost(t, "UpdateItem", "end place")
	if err != nil || g.Ended[7] != 3 {
		t.Fatalf("EndPlace: %+v %v, want 7 ended in 3", g, err)
	}
	r.loseFirst("UpdateItem", `"end_7"`)
	g, err = s.MoveEnd(ctx, "cap", 7, 3, 4)
	r.checkLost(t, "UpdateItem", "move end")
	if err != nil || g.Ended[7] != 4 {
		t.Fatalf("MoveEnd: %+v %v, want 7 ended in 4", g, err)
	}
	r.loseFirst("UpdateItem", `"expiredThrough"`)
	g, err = s.ExpireGroup(ctx, "cap", 0, 6)
	r.checkLost(t, "UpdateItem", "expire group")
	if err != nil || g.ExpiredThrough != 6 {
		t.Fatalf("ExpireGroup: %+v %v, want expired through 6", g, err)
	}
	r.loseFirst("UpdateItem", `"places"`)
	err = s.AddEnd(ctx, "cap", 4, 0, 7)
	r.checkLost(t, "UpdateItem", "add end")
	if err != nil {
		t.Fatalf("AddEnd: %v", err)
	}
	r.loseFirst("UpdateItem", `"sealed"`)
	places, err := s.SealEnds(ctx, "cap", 4, 0)
	r.checkLost(t, "UpdateItem", "seal ends")
	if err != nil || !slices.Equal(places, []int64{7}) {
		t.Fatalf("SealEnds: %v %v, want [7]", places, err)
	}
	r.loseFirst("PutItem", `"counter"`)
	m := capacity.Mark{AtMs: at.UnixMilli(), Counter: 12, NoShowThrough: 9}
	err = s.PutMark(ctx, "cap", m)
	r.checkLost(t, "PutItem", "put mark")
	if got, err2 := s.MarkBefore(ctx, "cap", m.AtMs); err != nil || err2 != nil || got != m {
		t.Fatalf("PutMark: %v; MarkBefore: %+v %v, want %+v", err, got, err2, m)
	}
	r.loseFirst("UpdateItem", `"capacity"`)
	next := capacity.Capacity{Level: 1, Steps: []capacity.Step{{AtMs: m.AtMs, Freed: 3}}, FoldedAtMs: m.AtMs, NoShowThrough: 9}
	err = s.ApplyFold(ctx, "cap", 0, next)
	r.checkLost(t, "UpdateItem", "apply fold")
	if err != nil && !errors.Is(err, queue.ErrConflict) {
		t.Fatalf("ApplyFold: %v, want nil or ErrConflict", err)
	}
	if p, err := s.GetProgram(ctx, "cap"); err != nil || p.Capacity.FoldedAtMs != m.AtMs || len(p.Capacity.Steps) != 1 {
		t.Fatalf("capacity after the fold: %+v %v, want %+v", p.Capacity, err, next)
	}
}
