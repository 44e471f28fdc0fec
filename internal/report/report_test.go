package report_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/report"
)

var t0 = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// people: five arrive in the first minute; 1 and 2 admitted after 2 and 4
// min (2 ended), 3 left at position 2 shown 3 min, 4 a no-show, 5 waits.
func people() []report.Person {
	return []report.Person{
		{Place: 1, TurnCame: true, IssuedAt: at(0), AdmittedAt: at(2 * time.Minute), EnterPosition: 1, EnterEstimate: 2 * time.Minute},
		{Place: 2, TurnCame: true, IssuedAt: at(10 * time.Second), AdmittedAt: at(4*time.Minute + 10*time.Second), LeftAt: at(5 * time.Minute),
			EnterPosition: 2, EnterEstimate: 2 * time.Minute, Account: true},
		{Place: 3, IssuedAt: at(20 * time.Second), LeftAt: at(3*time.Minute + 30*time.Second), EnterPosition: 3, EnterEstimate: 6 * time.Minute,
			LeftPosition: 2, LeftEstimate: 3 * time.Minute},
		{Place: 4, TurnCame: true, IssuedAt: at(30 * time.Second), EnterPosition: 4, EnterEstimate: 8 * time.Minute},
		{Place: 5, IssuedAt: at(40 * time.Second), EnterPosition: 150, EnterEstimate: 20 * time.Minute},
		{Place: 6, IssuedAt: at(50 * time.Second), RevokedAt: at(time.Minute), EnterPosition: 6, EnterEstimate: 12 * time.Minute},
	}
}

// tallies: minute 2 saw the counter at 1 (place 2 halfway, at 2:05, stood
// 1 away, at 40 s a place); minute 4 the counter at 4, so place 4's turn.
func tallies() []report.Minute {
	m2 := report.Minute{At: at(2 * time.Minute), Requests: 10, Polls: 8, Answers: 2, Positions: 3, EstimatesMs: 120_000, Counters: 2}
	m2.PerSecond[5] = 7
	m4 := report.Minute{At: at(4 * time.Minute), Requests: 4, Polls: 4, Answers: 1, Positions: 1, EstimatesMs: 1_000, Counters: 4, ProofsSolved: 2, ProofsFailed: 1, BypassPasses: 3}
	m4.PerSecond[0] = 4
	return []report.Minute{m4, m2} // in no order
}

func TestBuild(t *testing.T) {
	changes := []report.Change{{At: at(time.Minute), Actor: "alice", Action: "update", Fields: `{"paused":true}`}}
	r := report.Build(report.Program{ID: "gala", DisplayName: "Gala"}, people(), tallies(), changes, at(10*time.Minute))

	if diff := cmp.Diff(report.Counts{Arrivals: 6, Admitted: 2, Ended: 1, Left: 1, Revoked: 1, NoShows: 1, Waiting: 1, Accounts: 1,
		ChallengesSolved: 2, ChallengesFailed: 1, BypassPasses: 3}, r.People); diff != "" {
		t.Errorf("people (-want +got):\n%s", diff)
	}
	if r.Waits.P50Ms != 120_000 || r.Waits.MaxMs != 240_000 || r.Waits.MeanMs != 180_000 {
		t.Errorf("waits %+v, want p50 2 min, max 4 min, mean 3 min", r.Waits)
	}
	var binned int64
	for _, b := range r.Waits.Bins {
		binned += b.Count
	}
	if binned != 2 {
		t.Errorf("wait bins hold %d, want the 2 admitted", binned)
	}
	// Place 3 left at position 2 (shown 3 min); place 4, a no-show, entered
	// at position 4 (shown 8 min). Five stood in the first 100 (place 5,
	// entered at 150 and waiting, has not), place 5 alone beyond it.
	wantPos := []report.Gave{
		{Label: "1–100", From: 1, UpTo: 100, Reached: 5, Left: 1, NoShows: 1},
		{Label: "101–1,000", From: 101, UpTo: 1000, Reached: 1},
		{Label: "1,001–10,000", From: 1001, UpTo: 10000},
		{Label: "over 10,000", From: 10001},
	}
	if diff := cmp.Diff(wantPos, r.Abandoned.ByPosition); diff != "" {
		t.Errorf("by position (-want +got):\n%s", diff)
	}
	byEst := map[string][2]int64{}
	for _, g := range r.Abandoned.ByEstimate {
		byEst[g.Label] = [2]int64{g.Left, g.NoShows}
	}
	if diff := cmp.Diff(map[string][2]int64{"under 1 min": {}, "1 min–5 min": {1, 0}, "5 min–15 min": {0, 1}, "15 min–30 min": {}, "30 min–1 h": {}, "over 1 h": {}}, byEst); diff != "" {
		t.Errorf("by estimate, left and no-shows (-want +got):\n%s", diff)
	}
	// At entry: 2 min for 2 min (0 %), 2 min for 4 min (−50 %). Halfway
	// through place 2's wait (2:10, minute 2): 1 place at 40 s, for 2 min
	// to go; place 1's halfway minute (1) has no tally.
	if diff := cmp.Diff(report.Accuracy{
		AtEntry: report.Estimate{People: 2, MedianEstMs: 120_000, MedianActualMs: 120_000, MedianErrorPct: -50, P90AbsErrorPct: 50, Within20: 1},
		Halfway: report.Estimate{People: 1, MedianEstMs: 40_000, MedianActualMs: 120_000, MedianErrorPct: -66, P90AbsErrorPct: 66},
	}, r.Estimates); diff != "" {
		t.Errorf("estimates (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(report.Requests{Total: 14, Polls: 12, PerPerson: 14.0 / 6, PeakPerSecond: 7, PeakAt: at(2*time.Minute + 5*time.Second)}, r.Requests); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	// Minute by minute: 6 arrive in minute 0; 6 (revoked) leaves in 1; 1
	// admitted in 2; 3 leaves in 3; 2 admitted and 4's turn in 4.
	wantWaiting := []int64{6, 5, 4, 3, 1}
	var gotWaiting []int64
	for _, row := range r.Minutes {
		gotWaiting = append(gotWaiting, row.Waiting)
	}
	if diff := cmp.Diff(wantWaiting, gotWaiting); diff != "" || r.StepMinutes != 1 || !r.From.Equal(t0) || !r.To.Equal(at(4*time.Minute)) {
		t.Errorf("series from %v to %v by %d, waiting (-want +got):\n%s", r.From, r.To, r.StepMinutes, diff)
	}
	if r.Minutes[0].Arrivals != 6 || r.Minutes[2].Admitted != 1 || r.Minutes[3].Left != 1 || r.Minutes[2].Requests != 10 || r.Minutes[2].PeakPerSecond != 7 {
		t.Errorf("rows %+v", r.Minutes)
	}
}

// TestBuildLongSale: a sale of three days keeps at most MaxRows rows,
// every arrival in one.
func TestBuildLongSale(t *testing.T) {
	var ps []report.Person
	for i := range 3 * 24 * 60 {
		ps = append(ps, report.Person{Place: int64(i + 1), IssuedAt: at(time.Duration(i) * time.Minute)})
	}
	r := report.Build(report.Program{ID: "long"}, ps, nil, nil, at(100*time.Hour))
	var arrivals int64
	for _, row := range r.Minutes {
		arrivals += row.Arrivals
	}
	if len(r.Minutes) > report.MaxRows || r.StepMinutes != 3 || arrivals != int64(len(ps)) {
		t.Errorf("%d rows of %d min, %d arrivals; want at most %d rows of 3 min, %d arrivals", len(r.Minutes), r.StepMinutes, arrivals, report.MaxRows, len(ps))
	}
}

// sink records the tallies written; fail makes the next n writes fail.
type sink struct {
	mu      sync.Mutex
	fail    int
	writes  []string // flush ids, in order
	minutes map[string]report.Minute
	wrote   chan struct{}
}

func newSink() *sink {
	return &sink{minutes: map[string]report.Minute{}, wrote: make(chan struct{}, 100)}
}

func (s *sink) AddMinute(_ context.Context, program, flush string, m report.Minute) error {
	s.mu.Lock()
	defer func() { s.mu.Unlock(); s.wrote <- struct{}{} }()
	s.writes = append(s.writes, flush)
	if s.fail > 0 {
		s.fail--
		return errors.New("store down")
	}
	k := program + "@" + m.At.Format("15:04")
	got := s.minutes[k]
	got.At = m.At
	got.Add(m)
	s.minutes[k] = got
	return nil
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestTally(t *testing.T) {
	s, c := newSink(), &fakeClock{t: at(5 * time.Second)}
	tally := report.NewTally(s, c.now, quiet, "i1")
	waiting := func(op metrics.Op, ticket, pos int64, est time.Duration) metrics.Request {
		return metrics.Request{Op: op, Status: 200, ProgramID: "gala", TokenStatus: string(api.StatusWaiting), Ticket: ticket, Position: pos, EstimatedWait: est}
	}
	tally.Observe(waiting(metrics.OpEnter, 10, 10, 50*time.Second))
	tally.Observe(waiting(metrics.OpPoll, 4, 2, 10*time.Second))
	tally.Observe(metrics.Request{Op: metrics.OpEnter, Status: 201, ProgramID: "gala", Proof: true})
	tally.Observe(metrics.Request{Op: metrics.OpEnter, Status: 403, Code: api.CodeChallengeFailed, ProgramID: "other"})
	tally.Observe(metrics.Request{Op: metrics.OpEnter, Status: 404, Code: "PROGRAM_NOT_FOUND", ProgramID: "nope"})
	tally.Observe(metrics.Request{Op: metrics.OpAdmin, Status: 201, ProgramID: "gala", BypassPasses: 3}) // the passes, not the request
	tally.Observe(metrics.Request{Op: metrics.OpAdmin, Status: 200, ProgramID: "admin-only"})            // not the crowd's
	tally.Observe(metrics.Request{Op: metrics.OpPage, Status: 200, ProgramID: "gala"})
	if len(s.writes) != 0 {
		t.Fatalf("wrote %v within the minute", s.writes)
	}
	// The minute is over: the next request starts a flush, which fails
	// once, and is retried with the same flush id a minute later.
	s.mu.Lock()
	s.fail = 2
	s.mu.Unlock()
	c.set(at(70 * time.Second))
	tally.Observe(metrics.Request{Op: metrics.OpPoll, Status: 200, ProgramID: "gala"})
	<-s.wrote
	<-s.wrote
	c.set(at(130 * time.Second))
	tally.Observe(metrics.Request{Op: metrics.OpPoll, Status: 200, ProgramID: "gala"})
	<-s.wrote
	<-s.wrote
	<-s.wrote // minute 1 too
	if err := tally.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	want := report.Minute{At: t0, Requests: 3, Polls: 1, ProofsSolved: 1, BypassPasses: 3, Answers: 2, Positions: 12, EstimatesMs: 60_000, Counters: 2}
	want.PerSecond[5] = 3
	if diff := cmp.Diff(want, s.minutes["gala@10:00"]); diff != "" {
		t.Errorf("gala's first minute (-want +got):\n%s", diff)
	}
	if got := s.minutes["other@10:00"]; got.ProofsFailed != 1 || got.Requests != 1 {
		t.Errorf("other's minute %+v, want a proof refused", got)
	}
	for _, k := range []string{"nope@10:00", "admin-only@10:00"} {
		if _, ok := s.minutes[k]; ok {
			t.Errorf("%s was tallied: a program not found, or only the operator's", k)
		}
	}
	if got := s.minutes["gala@10:01"].Requests + s.minutes["gala@10:02"].Requests; got != 2 {
		t.Errorf("later minutes hold %d requests, want 2", got)
	}
	retried := map[string]int{}
	for _, id := range s.writes {
		retried[id]++
	}
	if len(retried) != 4 {
		t.Errorf("flush ids %v: want the two failed writes retried under their ids, then two more", s.writes)
	}
}

// TestTallyBounded: one instance tallies at most MaxPrograms programs a minute.
func TestTallyBounded(t *testing.T) {
	s, c := newSink(), &fakeClock{t: t0}
	tally := report.NewTally(s, c.now, quiet, "i1")
	for i := range report.MaxPrograms + 10 {
		tally.Observe(metrics.Request{Op: metrics.OpPoll, Status: 200, ProgramID: "p" + time.Duration(i).String()})
	}
	if err := tally.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(s.minutes) != report.MaxPrograms {
		t.Errorf("%d programs written, want %d", len(s.minutes), report.MaxPrograms)
	}
}
