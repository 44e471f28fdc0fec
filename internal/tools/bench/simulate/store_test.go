package simulate

import (
	"testing"
	"time"

	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/queue"
)

// TestStoreChargesScheduledWrites: the admin path's scheduled writes
// (queue.ScheduleStore, which the embedded memstore provides) are writes of
// the program item, charged like UpdateProgram.
func TestStoreChargesScheduledWrites(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(clock.NewFake(Epoch), nil)
	var ss queue.ScheduleStore = s
	p := queue.Program{ID: programKey, CreatedAt: Epoch, Options: queue.Options{AdmissionWindow: queue.DefaultAdmissionWindow}}
	p = p.Rebased(Epoch, queue.OnePerSecond, false, 0, 0)
	if err := s.CreateProgram(ctx, p); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		var err error
		if p, err = s.IssueTicket(ctx, p.ID, Epoch); err != nil {
			t.Fatal(err)
		}
	}
	change := p.Rebased(Epoch, queue.OnePerSecond, true, 0, 10*time.Second)
	change.Changes = []string{"x"}
	before := s.programWrites[Epoch.Unix()]
	issued, err := ss.UpdateScheduled(ctx, change)
	if err != nil {
		t.Fatal(err)
	}
	if err := ss.MoveDrain(ctx, change, issued); err != nil {
		t.Fatal(err)
	}
	if got := s.programWrites[Epoch.Unix()] - before; got != 2 {
		t.Errorf("%d program writes charged for UpdateScheduled and MoveDrain, want 2", got)
	}
}
