package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/simclock"
)

const claimKey = "claimed-key-0b6f4c1e-1d7a"

// errCrash is the fault of a claimant that stopped after its ticket.
var errCrash = errors.New("the claimant stopped")

// claimantStore is a memstore whose first FillToken does not happen: it
// fails (with ReleaseClaim too, as a claimant that stopped would not
// release), or, with hold set, waits until hold is closed and then fills.
type claimantStore struct {
	*memstore.Store
	fills   int
	held    chan struct{} // closed when the first fill is being held
	hold    chan struct{}
	crashed bool
}

func (s *claimantStore) FillToken(ctx context.Context, t queue.Token, claim string) (queue.Token, error) {
	s.fills++
	if s.fills > 1 {
		return s.Store.FillToken(ctx, t, claim)
	}
	if s.hold == nil {
		s.crashed = true
		return queue.Token{}, errCrash
	}
	close(s.held)
	<-s.hold
	return s.Store.FillToken(ctx, t, claim)
}

func (s *claimantStore) ReleaseClaim(ctx context.Context, id, claim string) error {
	if s.crashed {
		return errCrash
	}
	return s.Store.ReleaseClaim(ctx, id, claim)
}

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	var qe *queue.Error
	if !errors.As(err, &qe) || qe.Code != code {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
}

func issued(t *testing.T, svc *queue.Service, id string) int64 {
	t.Helper()
	c, err := svc.Program(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return c.Issued
}

// stoppedClaimant is a service on a fake clock at t0 whose program gala
// holds a claim on claimKey's token that a stopped enter left, with ticket
// 1 burnt.
func stoppedClaimant(t *testing.T) (*queue.Service, *simclock.Fake, *claimantStore) {
	t.Helper()
	c := simclock.NewFake(t0)
	store := &claimantStore{Store: memstore.New()}
	svc := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(c))
	mustPut(t, svc, "gala", 1, true)
	_, _, err := svc.Enter(context.Background(), "gala", queue.Entry{IdempotencyKey: claimKey})
	wantCode(t, "the enter that stops", err, api.CodeUnavailable)
	return svc, c, store
}

// TestEnterIdempotencyKeyDeadClaimant: an enter that claimed its key and
// took a ticket stops before storing it. Until ClaimTimeout the key's
// enters answer ENTER_IN_PROGRESS and its token is unknown to a poll; then
// one takes the claim over: the stopped enter's ticket is burnt, one, and
// every later enter answers the new token.
func TestEnterIdempotencyKeyDeadClaimant(t *testing.T) {
	ctx := context.Background()
	svc, c, _ := stoppedClaimant(t)
	id := queue.IdempotentTokenID("gala", claimKey)
	_, _, err := svc.Enter(ctx, "gala", queue.Entry{IdempotencyKey: claimKey})
	wantCode(t, "an enter while the claim holds", err, api.CodeEnterInProgress)
	_, err = svc.Poll(ctx, "gala", id)
	wantCode(t, "a poll of the claimed token", err, api.CodeTokenNotFound)
	wantCode(t, "a leave of the claimed token", svc.Leave(ctx, "gala", id), api.CodeTokenNotFound)
	if v, created, err := svc.Enter(ctx, "gala", queue.Entry{Token: id}); err != nil || !created || v.TokenID == id {
		t.Errorf("enter with the claimed token = %+v, created %v, %v; want a fresh token", v, created, err)
	}

	c.Advance(queue.ClaimTimeout)
	v, created, err := svc.Enter(ctx, "gala", queue.Entry{IdempotencyKey: claimKey})
	if err != nil || !created || v.TokenID != id || v.Ticket != 3 {
		t.Fatalf("enter after the claim timed out = %+v, created %v, %v; want token %s with ticket 3 (1 burnt, 2 the fresh token)", v, created, err, id)
	}
	again, created, err := svc.Enter(ctx, "gala", queue.Entry{IdempotencyKey: claimKey})
	if err != nil || created || again.TokenID != id || again.Ticket != 3 {
		t.Errorf("retry = %+v, created %v, %v; want the same token and ticket", again, created, err)
	}
	if n := issued(t, svc, "gala"); n != 3 {
		t.Errorf("issued %d, want 3", n)
	}
}

// TestEnterIdempotencyKeySlowClaimant: a claimant stalls between its ticket
// and its token past ClaimTimeout, another enter takes the claim over and
// stores its token; the stalled one then answers that token. One token is
// stored for the key, and one ticket is burnt.
func TestEnterIdempotencyKeySlowClaimant(t *testing.T) {
	ctx := context.Background()
	c := simclock.NewFake(t0)
	store := &claimantStore{Store: memstore.New(), held: make(chan struct{}), hold: make(chan struct{})}
	svc := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(c))
	mustPut(t, svc, "gala", 1, true)

	type result struct {
		v       queue.View
		created bool
		err     error
	}
	slow := make(chan result)
	go func() {
		v, created, err := svc.Enter(ctx, "gala", queue.Entry{IdempotencyKey: claimKey})
		slow <- result{v, created, err}
	}()
	<-store.held
	c.Advance(queue.ClaimTimeout + time.Millisecond)
	v, created, err := svc.Enter(ctx, "gala", queue.Entry{IdempotencyKey: claimKey})
	if err != nil || !created || v.Ticket != 2 {
		t.Fatalf("enter taking the claim over = %+v, created %v, %v; want ticket 2", v, created, err)
	}
	close(store.hold)
	r := <-slow
	if r.err != nil || r.created || r.v.TokenID != v.TokenID || r.v.Ticket != 2 {
		t.Errorf("the stalled enter = %+v, created %v, %v; want token %s, ticket 2, not created", r.v, r.created, r.err, v.TokenID)
	}
	if got, err := store.GetToken(ctx, v.TokenID); err != nil || got.Ticket != 2 || got.Claim != "" {
		t.Errorf("stored %+v, %v; want the token with ticket 2", got, err)
	}
	if n := issued(t, svc, "gala"); n != 2 {
		t.Errorf("issued %d, want 2", n)
	}
}

// TestEnterIdempotencyKeyReleased: an enter that takes no ticket (the
// program is closed) releases its claim: once the program reopens, the
// key's next enter gets a place at once, without waiting ClaimTimeout. An
// unknown program gets no claim at all.
func TestEnterIdempotencyKeyReleased(t *testing.T) {
	ctx := context.Background()
	svc, _ := newService(t)
	mustPut(t, svc, "gala", 1, true)
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{Closed: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	_, _, err := svc.Enter(ctx, "gala", queue.Entry{IdempotencyKey: claimKey})
	wantCode(t, "enter while closed", err, api.CodeProgramClosed)
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{Closed: ptr(false)}); err != nil {
		t.Fatal(err)
	}
	if v, created, err := svc.Enter(ctx, "gala", queue.Entry{IdempotencyKey: claimKey}); err != nil || !created || v.Ticket != 1 {
		t.Errorf("enter after reopening = %+v, created %v, %v; want ticket 1", v, created, err)
	}

	store := memstore.New()
	svc = queue.NewService(store, polling.DefaultTiers(), queue.WithClock(simclock.NewFake(t0)))
	_, _, err = svc.Enter(ctx, "nope", queue.Entry{IdempotencyKey: claimKey})
	wantCode(t, "enter to an unknown program", err, api.CodeProgramNotFound)
	if _, err := store.GetToken(ctx, queue.IdempotentTokenID("nope", claimKey)); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("an enter to an unknown program left an item: %v", err)
	}
}

// TestEnterIdempotencyKeyClaimExpires: a claim nobody fills carries a TTL
// (an hour), so the store removes it (here memstore's Sweep, as DynamoDB
// TTL does) and the key then enters anew.
func TestEnterIdempotencyKeyClaimExpires(t *testing.T) {
	ctx := context.Background()
	svc, c, store := stoppedClaimant(t)
	claim, err := store.GetToken(ctx, queue.IdempotentTokenID("gala", claimKey))
	if err != nil || claim.Claim == "" || claim.Ticket != 0 || claim.ExpiresAt.IsZero() || claim.ExpiresAt.After(t0.Add(time.Hour)) {
		t.Fatalf("stored %+v, %v; want a claim expiring within the hour", claim, err)
	}
	if n := store.Sweep(claim.ExpiresAt.Add(time.Second)); n != 1 {
		t.Fatalf("Sweep removed %d items, want the claim", n)
	}
	c.Advance(time.Hour + time.Second)
	if v, created, err := svc.Enter(ctx, "gala", queue.Entry{IdempotencyKey: claimKey}); err != nil || !created || v.Ticket != 2 {
		t.Errorf("enter after the claim expired = %+v, created %v, %v; want ticket 2", v, created, err)
	}
}
