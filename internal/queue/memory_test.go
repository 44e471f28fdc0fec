package queue_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
)

// enterUnknown enters n distinct program ids that do not exist, from
// first on: each must answer PROGRAM_NOT_FOUND.
func enterUnknown(t *testing.T, svc *queue.Service, first, n int) {
	t.Helper()
	for i := first; i < first+n; i++ {
		_, _, err := svc.Enter(t.Context(), fmt.Sprintf("nobody-%d", i), queue.Entry{})
		if queue.ErrorKind(err) != queue.KindNotFound {
			t.Fatalf("enter to an unknown program: %v, want not found", err)
		}
	}
}

// TestUnknownProgramsLeaveNoState: enters to program ids that do not exist
// leave nothing in the program cache, and a program that exists is
// dropped from it once it has been idle past its use (the ticket shards'
// state: tickets.TestUnknownProgramsLeaveNoState).
func TestUnknownProgramsLeaveNoState(t *testing.T) {
	ctx := t.Context()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	svc := queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(clk), queue.WithProgramCache(time.Second))
	enterUnknown(t, svc, 0, 10_000)
	if cached := svc.CachedPrograms(); cached != 0 {
		t.Fatalf("after 10,000 enters to unknown programs: %d programs in the cache; want none", cached)
	}

	rate := 5.0
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(rate))}); err != nil {
		t.Fatal(err)
	}
	v, _, err := svc.Enter(ctx, "gala", queue.Entry{})
	if err != nil {
		t.Fatal(err)
	}
	if cached := svc.CachedPrograms(); cached != 1 {
		t.Fatalf("after an enter to a program: %d programs in the cache; want 1", cached)
	}
	// Idle for long: the next request, to another program, drops it.
	clk.Advance(10 * time.Minute)
	enterUnknown(t, svc, 10_000, 1)
	if _, err := svc.Poll(ctx, "gala", v.TokenID); err != nil {
		t.Fatal(err)
	}
	rate2 := 6.0
	if _, _, err := svc.PutProgram(ctx, "other", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(rate2))}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Minute)
	if _, _, err := svc.Enter(ctx, "other", queue.Entry{}); err != nil {
		t.Fatal(err)
	}
	if cached := svc.CachedPrograms(); cached != 1 {
		t.Errorf("after gala was idle 10 minutes: %d programs in the cache; want only other's", cached)
	}
}
