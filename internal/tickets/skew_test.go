package tickets_test

import (
	"context"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tickets"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/simclock"
)

// reserveHook is the in-memory store with a hook run once, just before the
// next block reservation: another instance's turn in the middle of a refill.
type reserveHook struct {
	*memstore.Store
	before func()
}

func (h *reserveHook) IssueTickets(ctx context.Context, id string, now time.Time, n int64) (admission.Program, error) {
	if f := h.before; f != nil {
		h.before = nil
		f()
	}
	return h.Store.IssueTickets(ctx, id, now, n)
}

// TestClaimTakenOverBySkewedClock: an instance whose clock is 1.2 s ahead
// of another's takes over the other's claim on a shard the moment it is
// made (to it the claim is older than the claim timeout) and refills the
// shard in the middle of the other's refill. The first refiller's fill then
// fails: its enter keeps its block's first number, the rest is given back
// once nobody enters, and every ticket, before and after, is held once.
func TestClaimTakenOverBySkewedClock(t *testing.T) {
	ctx := t.Context()
	base := simclock.NewFake(t0)
	mem := memstore.New()
	slowStore := &reserveHook{Store: mem}
	skewed := func(st store, by time.Duration) *queue.Service {
		svc, _ := instance(st, simclock.Offset{Base: base, By: by}, nil, tickets.DefaultItemWriteUnits)
		return svc
	}
	slow, fast := skewed(slowStore, -600*time.Millisecond), skewed(mem, 600*time.Millisecond)
	if _, _, err := slow.PutProgram(ctx, "p", api.ProgramSettings{Paused: new(true)}); err != nil {
		t.Fatal(err)
	}
	if ok, err := mem.SetShards(ctx, "p", 0, 1); err != nil || !ok {
		t.Fatalf("SetShards: %v %v", ok, err)
	}
	holders := map[int64]string{}
	enter := func(svc *queue.Service) int64 {
		t.Helper()
		v, created, err := svc.Enter(ctx, "p", queue.Entry{})
		if err != nil || !created {
			t.Fatalf("enter: %v (created %v)", err, created)
		}
		if other, ok := holders[v.Ticket]; ok {
			t.Fatalf("ticket %d handed out twice: tokens %s and %s", v.Ticket, other, v.TokenID)
		}
		holders[v.Ticket] = v.TokenID
		return v.Ticket
	}
	// One ticket each from the program item: both now know of the shard.
	enter(slow)
	enter(fast)
	// The slow instance alone fills the shard for a while, at a pace.
	for range 20 {
		base.Advance(10 * time.Millisecond)
		enter(slow)
	}
	var fastTickets []int64
	slowStore.before = func() {
		for range 3 {
			fastTickets = append(fastTickets, enter(fast))
		}
	}
	var slowTicket int64
	for i := 0; slowStore.before != nil; i++ {
		if i == 100 {
			t.Fatal("the slow instance reserved no block in 100 enters")
		}
		base.Advance(10 * time.Millisecond)
		slowTicket = enter(slow)
	}
	sh := mem.Shard("p", 0)
	if last := fastTickets[len(fastTickets)-1]; last < sh.Start || last > sh.End || slowTicket <= sh.End {
		t.Fatalf("shard 0 holds %d..%d (fast took %v), slow took %d: want the fast instance's block in the shard, the slow one's above it", sh.Start, sh.End, fastTickets, slowTicket)
	}
	before, err := mem.GetProgram(ctx, "p")
	if err != nil || before.Issued <= slowTicket {
		t.Fatalf("issued %d (%v); want the slow instance's block beyond its number %d", before.Issued, err, slowTicket)
	}
	// Nobody enters for two seconds: the slow instance's next poll gives
	// back what its unfilled block held beyond its enter's number.
	base.Advance(2 * time.Second)
	if _, err := slow.Poll(ctx, "p", holders[slowTicket]); err != nil {
		t.Fatal(err)
	}
	after, err := mem.GetProgram(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if after.Issued != slowTicket {
		t.Fatalf("issued %d after the give-back (before %d); want %d, the slow instance's own number the last", after.Issued, before.Issued, slowTicket)
	}
	for range 10 {
		enter(fast)
		enter(slow)
	}
}
