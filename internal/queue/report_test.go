package queue_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/report"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/simclock"
)

// unkeptStore fails every PutReport.
type unkeptStore struct{ *memstore.Store }

func (unkeptStore) PutReport(context.Context, report.Report) error { return errors.New("store down") }

// TestReportSettles: a person whose turn came counts as waiting until the
// no-show time passed; the report is final once the program is closed and
// settled, answered as kept from then on, made again while the program is
// reopened (the final one still kept), and final again once it settles.
func TestReportSettles(t *testing.T) {
	ctx := t.Context()
	store := memstore.New()
	c := simclock.NewFake(t0)
	svc := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(c))
	mustPut(t, svc, "gala", 1, true)
	var tokens []string
	for range 3 {
		v, _, err := svc.Enter(ctx, "gala", queue.Entry{})
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, v.TokenID)
	}
	if err := svc.Leave(ctx, "gala", tokens[1]); err != nil {
		t.Fatal(err)
	}
	mustPut(t, svc, "gala", 1, false)
	c.Advance(10 * time.Second) // every turn came; the first looks, the third never does
	if v, err := svc.Poll(ctx, "gala", tokens[0]); err != nil || v.Status != queue.StatusAdmitted {
		t.Fatalf("poll: %+v, %v", v, err)
	}
	people := func(want api.ReportPeople, final bool) report.Report {
		t.Helper()
		r, err := svc.Report(ctx, "gala")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, r.People); diff != "" || r.Final != final {
			t.Errorf("at %v: final %v, want %v; people (-want +got):\n%s", c.Now().Sub(t0), r.Final, final, diff)
		}
		return r
	}
	people(api.ReportPeople{Arrivals: 3, Admitted: 1, Left: 1, Waiting: 1}, false)
	c.Advance(admission.DefaultAdmissionWindow)
	people(api.ReportPeople{Arrivals: 3, Admitted: 1, Left: 1, NoShows: 1}, false) // open: not final
	closed := func(b bool) {
		t.Helper()
		if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{Closed: new(b)}); err != nil {
			t.Fatal(err)
		}
	}
	// The close moves the pace's anchor: the last turn is known to have
	// come by then, and settles a no-show time and a minute after it.
	closed(true)
	settled := api.ReportPeople{Arrivals: 3, Admitted: 1, Left: 1, NoShows: 1}
	people(settled, false)
	c.Advance(admission.DefaultAdmissionWindow + time.Minute)
	final := people(settled, true)
	c.Advance(time.Minute)
	if again := people(settled, true); !again.MadeAt.Equal(final.MadeAt) {
		t.Errorf("the final report was made again at %v", again.MadeAt)
	}

	closed(false)
	c.Advance(time.Minute)
	if r := people(settled, false); r.MadeAt.Equal(final.MadeAt) {
		t.Error("a reopened program answered its final report")
	}
	if kept, err := store.GetReport(ctx, "gala"); err != nil || !kept.Final || !kept.MadeAt.Equal(final.MadeAt) {
		t.Errorf("kept %+v, %v; want the final report, still kept", kept.People, err)
	}
	closed(true)
	c.Advance(admission.DefaultAdmissionWindow + time.Minute)
	if r := people(settled, true); r.MadeAt.Equal(final.MadeAt) {
		t.Error("settled again: want a new final report")
	}
}

// TestReportLate: a pass made more than a day after the program's last
// event may miss tokens their TTL took: it is not final and does not
// replace the kept report, which is answered; a report the store cannot
// keep is answered all the same.
func TestReportLate(t *testing.T) {
	ctx := t.Context()
	store := memstore.New()
	c := simclock.NewFake(t0)
	svc := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(c))
	mustPut(t, svc, "gala", 1, true)
	v, _, err := svc.Enter(ctx, "gala", queue.Entry{})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Leave(ctx, "gala", v.TokenID); err != nil {
		t.Fatal(err)
	}
	early, err := svc.Report(ctx, "gala")
	if err != nil || early.Final || early.People.Left != 1 {
		t.Fatalf("early report: %+v, %v", early.People, err)
	}
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{Closed: new(true)}); err != nil {
		t.Fatal(err)
	}
	c.Advance(25 * time.Hour)
	late, err := svc.Report(ctx, "gala")
	if err != nil || late.Final || !late.MadeAt.Equal(early.MadeAt) {
		t.Errorf("late: made at %v (final %v), %v; want the kept report of %v", late.MadeAt, late.Final, err, early.MadeAt)
	}

	unkept := queue.NewService(unkeptStore{memstore.New()}, polling.DefaultTiers(), queue.WithClock(c), queue.WithLogger(slog.New(slog.DiscardHandler)))
	mustPut(t, unkept, "gala", 1, true)
	if _, _, err := unkept.Enter(ctx, "gala", queue.Entry{}); err != nil {
		t.Fatal(err)
	}
	if r, err := unkept.Report(ctx, "gala"); err != nil || r.People.Waiting != 1 {
		t.Errorf("a report the store cannot keep: %+v, %v; want it answered", r.People, err)
	}
}

// TestSettleReports: a scheduled run makes the final report of a closed
// program once settled, and only once; an open program, one not settled
// yet and one settled more than a day ago get none.
func TestSettleReports(t *testing.T) {
	ctx := t.Context()
	store := memstore.New()
	c := simclock.NewFake(t0)
	svc := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(c))
	start := func(id string, closed bool) {
		t.Helper()
		mustPut(t, svc, id, 10, false)
		if _, _, err := svc.Enter(ctx, id, queue.Entry{}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := svc.PutProgram(ctx, id, api.ProgramSettings{Closed: new(closed)}); err != nil {
			t.Fatal(err)
		}
	}
	settle := func(want int) {
		t.Helper()
		if made, err := svc.SettleReports(ctx); err != nil || made != want {
			t.Errorf("at %v: made %d, %v; want %d", c.Now().Sub(t0), made, err, want)
		}
	}
	start("old", true)
	c.Advance(25*time.Hour + admission.DefaultAdmissionWindow)
	start("gala", true)
	start("open", false)
	settle(0) // gala not settled: its no-show time runs; old too late
	c.Advance(admission.DefaultAdmissionWindow + 2*time.Minute)
	settle(1) // gala
	settle(0) // made already
	if r, err := store.GetReport(ctx, "gala"); err != nil || !r.Final || r.People.NoShows != 1 {
		t.Errorf("gala's report %+v, %v; want final, its one no-show", r.People, err)
	}
	for _, id := range []string{"open", "old"} {
		if _, err := store.GetReport(ctx, id); !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("%s's report: %v, want none", id, err)
		}
	}
}
