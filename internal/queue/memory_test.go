package queue_test

import (
	"testing"
	"time"

	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/queuetest"
)

// TestUnknownProgramsLeaveNoState: enters to program ids that do not exist
// leave nothing in the program cache, and a program that exists is
// dropped from it once it has been idle past its use (the ticket shards'
// state: tickets.TestUnknownProgramsLeaveNoState).
func TestUnknownProgramsLeaveNoState(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	svc := queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(clk), queue.WithProgramCache(time.Second))
	queuetest.CheckIdleProgramsDropped(t, svc, clk, svc.CachedPrograms, "an entry in the program cache")
}
