package storetest

import (
	"cmp"
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/report"
)

// flushed is one AddMinute: a flush id and its minute.
type flushed struct {
	flush string
	m     report.Minute
}

// tally is a minute at t0+at with every counter set from n.
func tally(at time.Duration, n int64) report.Minute {
	m := report.Minute{At: t0.Add(at), Requests: 10 * n, Polls: 7 * n, ProofsSolved: n, ProofsFailed: 2 * n, BypassPasses: 3 * n,
		Answers: 5 * n, Positions: 500 * n, EstimatesMs: 60_000 * n, Counters: 1_000 * n}
	m.PerSecond[0], m.PerSecond[17], m.PerSecond[59] = n, 4*n, 5*n
	return m
}

// sum is the minutes added up, at the first one's At.
func sum(ms ...report.Minute) report.Minute {
	out := report.Minute{At: ms[0].At}
	for _, m := range ms {
		out.Add(m)
	}
	return out
}

// testReports: a minute sums its flushes, each once; Minutes reads a
// program's minutes ascending; a kept report reads back as put, replaced
// by the next; EachToken finds every token of a program and only those.
func testReports(t *testing.T, s queue.Store) {
	rs := s.(queue.ReportStore)
	t.Run("AddMinute", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			flushes []flushed
			want    []report.Minute
		}{
			{"one flush", []flushed{{"a#1", tally(0, 1)}}, []report.Minute{tally(0, 1)}},
			{"two flushes sum", []flushed{{"a#1", tally(0, 1)}, {"b#1", tally(0, 3)}}, []report.Minute{sum(tally(0, 1), tally(0, 3))}},
			{"the same flush twice adds once", []flushed{{"a#1", tally(0, 2)}, {"a#1", tally(0, 2)}}, []report.Minute{tally(0, 2)}},
			{"a flush retried after another", []flushed{{"a#1", tally(0, 1)}, {"b#1", tally(0, 2)}, {"a#1", tally(0, 1)}},
				[]report.Minute{sum(tally(0, 1), tally(0, 2))}},
			{"zero counters", []flushed{{"a#1", report.Minute{At: t0}}}, []report.Minute{{At: t0}}},
			{"zero counters, then some", []flushed{{"a#1", report.Minute{At: t0}}, {"b#1", tally(0, 4)}}, []report.Minute{tally(0, 4)}},
			{"flushes of two minutes", []flushed{{"a#1", tally(time.Minute, 1)}, {"a#2", tally(0, 2)}},
				[]report.Minute{tally(0, 2), tally(time.Minute, 1)}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				program := "add-" + queue.NewTokenID()
				for _, f := range tc.flushes {
					checkErr(t, "AddMinute "+f.flush, rs.AddMinute(t.Context(), program, f.flush, f.m), nil)
				}
				checkCall(t, "Minutes", answer(rs.Minutes(t.Context(), program)), tc.want)
			})
		}
	})

	t.Run("Minutes", func(t *testing.T) {
		ctx := t.Context()
		ats := []time.Duration{2 * time.Minute, 0, 3 * 24 * time.Hour, time.Minute, 59 * time.Minute}
		for i, at := range ats {
			checkErr(t, "AddMinute", rs.AddMinute(ctx, "rep-a", "f", tally(at, int64(i+1))), nil)
			checkErr(t, "AddMinute of another program", rs.AddMinute(ctx, "rep-b", "f", tally(at+time.Minute, 9)), nil)
		}
		checkErr(t, "PutReport beside the minutes", rs.PutReport(ctx, report.Report{ProgramID: "rep-a", MadeAt: t0}), nil)
		var want []report.Minute
		for i, at := range ats {
			want = append(want, tally(at, int64(i+1)))
		}
		slices.SortFunc(want, func(a, b report.Minute) int { return a.At.Compare(b.At) })
		checkCall(t, "Minutes", answer(rs.Minutes(ctx, "rep-a")), want)
		checkCall(t, "Minutes of a program without", answer(rs.Minutes(ctx, "rep-none")), nil)
	})

	t.Run("Report", func(t *testing.T) {
		ctx := t.Context()
		checkErr(t, "GetReport before", errOf(rs.GetReport(ctx, "kept")), queue.ErrNotFound)
		first := keptReport("kept", t0.Add(time.Hour), false)
		checkErr(t, "PutReport", rs.PutReport(ctx, first), nil)
		checkCall(t, "GetReport", answer(rs.GetReport(ctx, "kept")), first)
		second := keptReport("kept", t0.Add(2*time.Hour), true)
		second.Minutes, second.Changes = second.Minutes[:1], nil
		checkErr(t, "PutReport again", rs.PutReport(ctx, second), nil)
		checkCall(t, "GetReport of the replaced", answer(rs.GetReport(ctx, "kept")), second)
		checkErr(t, "GetReport of another program", errOf(rs.GetReport(ctx, "kept-not")), queue.ErrNotFound)
	})

	t.Run("EachToken", func(t *testing.T) {
		ctx := t.Context()
		of := func(program string, tok queue.Token) queue.Token { tok.ProgramID = program; return tok }
		mine := []queue.Token{
			of("each", placed(waiting(1), 1, 2*time.Second)),
			of("each", leftAt(placed(left(waiting(2)), 2, 4*time.Second), 1, ms(1_500))),
			of("each", admitted(placed(waiting(3), 3, 6*time.Second))),
			of("each", revoked(waiting(4))),
		}
		others := []queue.Token{of("each-not", placed(waiting(1), 1, time.Second)), of("eac", waiting(2)), waiting(3)}
		putTokens(t, s, append(slices.Clone(mine), others...)...)
		claim := claimOf(queue.NewTokenID(), "claim-each", t0)
		claim.ProgramID = "each"
		checkCall(t, "ClaimToken", answer(s.ClaimToken(ctx, claim, t0)), claim)
		fillClaim := claimOf(queue.NewTokenID(), "claim-filled", t0)
		fillClaim.ProgramID = "each"
		checkCall(t, "ClaimToken to fill", answer(s.ClaimToken(ctx, fillClaim, t0)), fillClaim)
		fill := of("each", placed(filled(fillClaim.ID, 5), 4, 8*time.Second))
		checkCall(t, "FillToken", answer(s.FillToken(ctx, fill, fillClaim.Claim)), fill)
		mine = append(mine, claim, fill)

		var got []queue.Token
		var busy, overlaps atomic.Int32
		read, err := rs.EachToken(ctx, "each", func(tok queue.Token) {
			if busy.Add(1) > 1 {
				overlaps.Add(1)
			}
			got = append(got, tok)
			busy.Add(-1)
		})
		checkErr(t, "EachToken", err, nil)
		byID := func(a, b queue.Token) int { return cmp.Compare(a.ID, b.ID) }
		slices.SortFunc(got, byID)
		slices.SortFunc(mine, byID)
		check(t, "EachToken's tokens", got, mine)
		if n := overlaps.Load(); n > 0 {
			t.Errorf("EachToken called each concurrently %d times", n)
		}
		if read < int64(len(mine)+len(others)) {
			t.Errorf("EachToken read %d items, want at least the %d tokens stored", read, len(mine)+len(others))
		}
		read, err = rs.EachToken(ctx, "each-none", func(tok queue.Token) { t.Errorf("EachToken of no tokens: called with %+v", tok) })
		if err != nil || read < int64(len(mine)) {
			t.Errorf("EachToken of no tokens: read %d, %v; want every item read, nil", read, err)
		}
		done, cancel := context.WithCancel(ctx)
		cancel()
		checkErr(t, "EachToken with a done context", errOf(rs.EachToken(done, "each", func(queue.Token) {})), context.Canceled)
	})

	t.Run("MarkLeft", func(t *testing.T) {
		ctx := t.Context()
		tok := placed(waiting(7), 70, 3*time.Minute)
		putTokens(t, s, tok)
		want := leftAt(left(tok), 12, 30*time.Second+ms(250))
		checkCall(t, "MarkLeft", answer(s.MarkLeft(ctx, want)), want)
		checkStoredToken(t, s, want)
		again := leftAt(later(left(tok)), 3, time.Second)
		checkCall(t, "MarkLeft again, later", answer(s.MarkLeft(ctx, again)), want)
		checkStoredToken(t, s, want)
	})
}

// placed is t with what its enter answered.
func placed(t queue.Token, position int64, estimate time.Duration) queue.Token {
	t.EnterPosition, t.EnterEstimate = position, estimate
	return t
}

// leftAt is t with where it stood when it left.
func leftAt(t queue.Token, position int64, estimate time.Duration) queue.Token {
	t.LeftPosition, t.LeftEstimate = position, estimate
	return t
}

// keptReport is a report of program with every part set.
func keptReport(program string, madeAt time.Time, final bool) report.Report {
	from := t0.Add(-time.Hour)
	return report.Report{
		ProgramID: program, DisplayName: "The sale « ✓ »", MadeAt: madeAt, Final: final, From: from, To: from.Add(2 * time.Minute),
		People: report.Counts{Arrivals: 120, Admitted: 90, Ended: 4, Left: 20, Revoked: 1, NoShows: 5, Waiting: 4, Accounts: 7,
			ChallengesSolved: 110, ChallengesFailed: 3, BypassPasses: 2},
		Waits: report.Waits{P50Ms: 60_000, P90Ms: 300_000, P99Ms: 600_000, MaxMs: 720_123, MeanMs: 95_432,
			Bins: []report.Bucket{{Label: "≤ 30 s", UpTo: 30_000, Count: 10}, {Label: "longer", Count: 80}}},
		Abandoned: report.Abandonment{
			ByPosition: []report.Gave{{Label: "1–100", From: 1, UpTo: 100, Reached: 120, Left: 3, NoShows: 1}, {Label: "over 100", From: 101, Reached: 20, Left: 17, NoShows: 4}},
			ByEstimate: []report.Gave{{Label: "under 1 min", UpTo: 60_000, Reached: 120, Left: 2}},
		},
		Estimates: report.Accuracy{
			AtEntry: report.Estimate{People: 90, MedianEstMs: 70_000, MedianActualMs: 60_000, MedianErrorPct: 16, P90AbsErrorPct: 45, Within20: 50},
			Halfway: report.Estimate{People: 80, MedianEstMs: 30_000, MedianActualMs: 31_000, MedianErrorPct: -3, P90AbsErrorPct: 20, Within20: 72},
		},
		Requests:    report.Requests{Total: 5_000, Polls: 4_700, PerPerson: 41.666666666666664, PeakPerSecond: 37, PeakAt: from.Add(61 * time.Second)},
		StepMinutes: 1,
		Minutes: []report.Row{
			{At: from, Arrivals: 100, Requests: 2_000, PeakPerSecond: 30, Waiting: 100},
			{At: from.Add(time.Minute), Arrivals: 20, Admitted: 60, Left: 15, Waiting: 45, Requests: 2_500, PeakPerSecond: 37},
			{At: from.Add(2 * time.Minute), Admitted: 30, Left: 5, Waiting: 4, Requests: 500, PeakPerSecond: 9},
		},
		Changes: []report.Change{
			{At: from.Add(-time.Minute), Actor: "admin@shop", Action: "create", Fields: `{"admissionRatePerSecond":2}`},
			{At: from.Add(90 * time.Second), Actor: "admin@shop", Action: "update"},
		},
		ItemsRead: 12_345,
	}
}
