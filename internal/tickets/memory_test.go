package tickets_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/queuetest"
	"github.com/example/waitingroom/internal/tickets"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/simclock"
)

// TestUnknownProgramsLeaveNoState: enters to program ids that do not exist
// leave no state behind in the ticket shards, and the state of a program
// that exists is dropped once it has been idle past its use (the program
// cache: queue.TestUnknownProgramsLeaveNoState).
func TestUnknownProgramsLeaveNoState(t *testing.T) {
	clk := simclock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	svc, shards := instance(memstore.New(), clk, nil, tickets.DefaultItemWriteUnits)
	queuetest.CheckIdleProgramsDropped(t, svc, clk, shards.Programs, "state in the ticket shards")
}

// TestUnknownProgramsMemory: the memory in use after collection stays flat
// over two batches of 10,000 enters to distinct unknown program ids (it
// grew by about 500 bytes an id when the ticket shards kept state for them).
func TestUnknownProgramsMemory(t *testing.T) {
	svc, _ := instance(memstore.New(), simclock.NewFake(t0), nil, tickets.DefaultItemWriteUnits)
	inUse := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	const batch = 10_000
	queuetest.EnterUnknown(t, svc, 0, batch) // warm up
	base := inUse()
	queuetest.EnterUnknown(t, svc, batch, batch)
	first := inUse()
	queuetest.EnterUnknown(t, svc, 2*batch, batch)
	second := inUse()
	t.Logf("heap in use: %d bytes, then %d after a batch of %d unknown ids, %d after another", base, first, batch, second)
	runtime.KeepAlive(svc)
	// 100 bytes an id is a fifth of what the leak cost; the heap's own
	// noise (a few pages) stays well under it.
	const bound = 100 * batch
	if first > base+bound || second > base+bound {
		t.Errorf("heap in use grew from %d to %d then %d bytes over two batches of %d enters to unknown ids; want flat (within %d)", base, first, second, batch, bound)
	}
}

// throttledStore is the in-memory store whose program item refuses every
// single ticket as throttled (blocks of tickets still go through), and
// whose program reads fail with readErr when it is set.
type throttledStore struct {
	*memstore.Store
	readErr error
}

func (s throttledStore) IssueTicket(context.Context, string, time.Time) (admission.Program, error) {
	return admission.Program{}, fmt.Errorf("program item: %w", queue.ErrThrottled)
}

func (s throttledStore) GetProgram(ctx context.Context, id string) (admission.Program, error) {
	if s.readErr != nil {
		return admission.Program{}, s.readErr
	}
	return s.Store.GetProgram(ctx, id)
}

// TestUnknownProgramsThrottled: an enter whose single ticket is throttled
// takes its ticket from a ticket shard only for a program that exists; to
// an unknown id it answers not found (or unavailable, when the program
// cannot be read either) and leaves no shard item behind.
func TestUnknownProgramsThrottled(t *testing.T) {
	readFails := fmt.Errorf("program read: %w", queue.ErrThrottled)
	for _, tc := range []struct {
		name     string
		program  string // the program entered; "gala" exists
		readErr  error
		want     queue.Kind // KindInternal: the enter succeeds
		wantItem bool       // a shard item of the program is left
	}{
		{name: "unknown", program: "nobody", want: queue.KindNotFound},
		{name: "unknown, read fails", program: "nobody", readErr: readFails, want: queue.KindUnavailable},
		{name: "exists", program: "gala", want: queue.KindInternal, wantItem: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			clk := simclock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			mem := memstore.New()
			rate := 5.0
			admin := queue.NewService(mem, polling.DefaultTiers(), queue.WithClock(clk))
			if _, _, err := admin.PutProgram(ctx, "gala", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(rate))}); err != nil {
				t.Fatal(err)
			}
			svc, _ := instance(throttledStore{Store: mem, readErr: tc.readErr}, clk, nil, tickets.DefaultItemWriteUnits)
			for range 3 {
				_, created, err := svc.Enter(ctx, tc.program, queue.Entry{})
				if tc.want == queue.KindInternal && (err != nil || !created) {
					t.Fatalf("enter: created %v, %v; want a new place", created, err)
				}
				if tc.want != queue.KindInternal && queue.ErrorKind(err) != tc.want {
					t.Fatalf("enter: %v; want kind %d", err, tc.want)
				}
				clk.Advance(time.Second) // past the block's life: the next enter claims again
			}
			var items []int
			for i := range tickets.MaxShards {
				if mem.Shard(tc.program, i) != (tickets.Shard{}) {
					items = append(items, i)
				}
			}
			if got := len(items) > 0; got != tc.wantItem {
				t.Errorf("shard items of %q left: %v; want some: %v", tc.program, items, tc.wantItem)
			}
		})
	}
}
