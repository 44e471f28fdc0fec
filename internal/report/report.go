// Package report builds a program's report after (or during) its sale: who
// came, who got in and how long they waited, who gave up where, whether the
// estimates held, what it asked of the service. It is built by one pass over
// the program's people (Build), with the instances' minute tallies (Tally)
// for what no token records (docs/design.md, "The report after the sale").
package report

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"github.com/example/waitingroom/internal/api"
)

// Person is one place in a program's queue as its token recorded it; a
// moved token is not a person (the token it moved to is).
type Person struct {
	// Place is the person's place in the line (the ticket, or its place
	// in a shuffled pre-queue); TurnCame: the counter reached it and the
	// no-show time after passed; TurnAt, when known, is when it came.
	Place      int64
	TurnCame   bool
	TurnAt     time.Time
	IssuedAt   time.Time
	AdmittedAt time.Time // the first sighting of the admission; zero if none
	LeftAt     time.Time // a leave while waiting, or an admission's end
	RevokedAt  time.Time
	// EnterPosition and EnterEstimate are what the enter answered;
	// LeftPosition and LeftEstimate what a poll would have shown when the
	// person left while waiting (0: not recorded).
	EnterPosition int64
	EnterEstimate time.Duration
	LeftPosition  int64
	LeftEstimate  time.Duration
	Account       bool
}

// Program is what Build needs of the program.
type Program struct {
	ID, DisplayName string
	// Final: the program closed and everyone's turn came and went, so the
	// report no longer changes.
	Final bool
}

// The report's parts are the API's (package api holds what it answers).
type (
	Report      = api.Report
	Counts      = api.ReportPeople
	Waits       = api.ReportWaits
	Bucket      = api.ReportBucket
	Abandonment = api.ReportAbandonment
	Gave        = api.ReportGave
	Accuracy    = api.ReportAccuracy
	Estimate    = api.ReportEstimate
	Requests    = api.ReportRequests
	Row         = api.ReportRow
	Change      = api.ReportChange
)

// MaxRows bounds Report.Minutes.
const MaxRows = 1440

// PositionBuckets and EstimateBuckets are Abandonment's buckets: the
// polling tiers, and estimates in minutes.
var (
	PositionBuckets = []int64{100, 1_000, 10_000, 0}
	EstimateBuckets = []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 0}
)

// WaitBuckets are the bounds of Waits.Bins.
var WaitBuckets = []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 0}

// Build makes p's report at now from its people, the instances' minute
// tallies and its admin changes.
func Build(p Program, people []Person, minutes []Minute, changes []Change, now time.Time) Report {
	r := Report{ProgramID: p.ID, DisplayName: p.DisplayName, MadeAt: now.UTC(), Final: p.Final, Changes: append([]Change{}, changes...), Minutes: []Row{}}
	minutes = slices.Clone(minutes)
	slices.SortFunc(minutes, func(a, b Minute) int { return a.At.Compare(b.At) })
	turns := turnTimes(minutes)
	var waits, entryErr, halfErr []int64
	var entryEst, entryAct, halfEst, halfAct []int64
	var outs []event // arrivals (+1) and exits (−1), for the series
	for _, x := range people {
		c := &r.People
		c.Arrivals++
		if x.Account {
			c.Accounts++
		}
		outs = append(outs, event{x.IssuedAt, kindArrival})
		switch {
		case !x.AdmittedAt.IsZero():
			c.Admitted++
			if !x.LeftAt.IsZero() {
				c.Ended++
			}
			w := x.AdmittedAt.Sub(x.IssuedAt)
			waits = append(waits, w.Milliseconds())
			outs = append(outs, event{x.AdmittedAt, kindAdmitted})
			if x.EnterEstimate > 0 && w > 0 {
				entryEst, entryAct = append(entryEst, x.EnterEstimate.Milliseconds()), append(entryAct, w.Milliseconds())
				entryErr = append(entryErr, errPct(x.EnterEstimate, w))
			}
			if est, ok := halfway(x, minutes); ok && w > 0 {
				halfEst, halfAct = append(halfEst, est.Milliseconds()), append(halfAct, (w/2).Milliseconds())
				halfErr = append(halfErr, errPct(est, w/2))
			}
		case !x.LeftAt.IsZero():
			c.Left++
			outs = append(outs, event{x.LeftAt, kindLeft})
		case !x.RevokedAt.IsZero():
			c.Revoked++
			outs = append(outs, event{x.RevokedAt, kindGone})
		case x.TurnCame:
			c.NoShows++
			if at, ok := turnAt(turns, x.Place); ok {
				outs = append(outs, event{at, kindGone})
			} else if !x.TurnAt.IsZero() {
				outs = append(outs, event{x.TurnAt, kindGone})
			}
		default:
			c.Waiting++
		}
	}
	r.Waits = waitsOf(waits)
	r.Abandoned = abandonment(people)
	r.Estimates = Accuracy{AtEntry: estimateOf(entryEst, entryAct, entryErr), Halfway: estimateOf(halfEst, halfAct, halfErr)}
	r.Requests, r.People.ChallengesSolved, r.People.ChallengesFailed, r.People.BypassPasses = requestsOf(minutes, r.People.Arrivals)
	fillSeries(&r, outs, minutes)
	return r
}

// errPct is (est − actual) / actual in percent.
func errPct(est, actual time.Duration) int64 {
	return int64((float64(est) - float64(actual)) / float64(actual) * 100)
}

// percentile is the p-th percentile (0 < p ≤ 100) of sorted xs by the
// nearest rank; 0 for none.
func percentile(xs []int64, p float64) int64 {
	if len(xs) == 0 {
		return 0
	}
	i := int(float64(len(xs))*p/100+0.999999) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

func median(xs []int64) int64 { slices.Sort(xs); return percentile(xs, 50) }

func waitsOf(ws []int64) Waits {
	slices.Sort(ws)
	w := Waits{P50Ms: percentile(ws, 50), P90Ms: percentile(ws, 90), P99Ms: percentile(ws, 99)}
	var sum int64
	for _, x := range ws {
		sum += x
	}
	if len(ws) > 0 {
		w.MaxMs, w.MeanMs = ws[len(ws)-1], sum/int64(len(ws))
	}
	lo := 0
	for _, b := range WaitBuckets {
		hi := len(ws)
		if b > 0 {
			hi, _ = slices.BinarySearch(ws, b.Milliseconds()+1)
		}
		w.Bins = append(w.Bins, Bucket{Label: waitLabel(b), UpTo: b.Milliseconds(), Count: int64(hi - lo)})
		lo = hi
	}
	return w
}

func estimateOf(est, act, errs []int64) Estimate {
	e := Estimate{People: int64(len(errs))}
	if len(errs) == 0 {
		return e
	}
	e.MedianEstMs, e.MedianActualMs, e.MedianErrorPct = median(est), median(act), median(errs)
	abs := make([]int64, len(errs))
	for i, x := range errs {
		abs[i] = max(x, -x)
		if abs[i] <= 20 {
			e.Within20++
		}
	}
	slices.Sort(abs)
	e.P90AbsErrorPct = percentile(abs, 90)
	return e
}

// abandonment counts the left, by where they left, and the no-shows, by
// where they entered; a bucket is reached by those who entered in it or
// beyond it.
func abandonment(people []Person) Abandonment {
	var a Abandonment
	from := int64(1)
	for _, b := range PositionBuckets {
		a.ByPosition = append(a.ByPosition, Gave{Label: placesLabel(from, b), From: from, UpTo: b})
		from = b + 1
	}
	var fromD time.Duration
	for _, b := range EstimateBuckets {
		// From the last bound, exclusive (1 ms: 0 is not recorded).
		a.ByEstimate = append(a.ByEstimate, Gave{Label: estimateLabel(fromD, b), From: fromD.Milliseconds() + 1, UpTo: b.Milliseconds()})
		fromD = b
	}
	for _, x := range people {
		left := x.AdmittedAt.IsZero() && !x.LeftAt.IsZero()
		noShow := x.AdmittedAt.IsZero() && x.LeftAt.IsZero() && x.RevokedAt.IsZero() && x.TurnCame
		pos, est := x.EnterPosition, x.EnterEstimate.Milliseconds()
		if left {
			pos, est = x.LeftPosition, x.LeftEstimate.Milliseconds()
		}
		// Where the person came to at the nearest: the front once admitted
		// or their turn came, else where they left (or entered).
		lowPos, lowEst := pos, est
		if !x.AdmittedAt.IsZero() || x.TurnCame {
			lowPos, lowEst = 1, 1
		}
		count := func(gs []Gave, entered, at, low int64) {
			for i := range gs {
				g := &gs[i]
				if entered >= g.From && low > 0 && (g.UpTo == 0 || low <= g.UpTo) {
					g.Reached++
				}
				if in(at, g.From, g.UpTo) {
					g.Left += either(left, 1, 0)
					g.NoShows += either(noShow, 1, 0)
				}
			}
		}
		count(a.ByPosition, x.EnterPosition, pos, lowPos)
		count(a.ByEstimate, x.EnterEstimate.Milliseconds(), est, lowEst)
	}
	return a
}

func in(v, from, upTo int64) bool { return v >= from && (upTo == 0 || v <= upTo) }

// requestsOf sums the tallies: the requests, their peak second, and the
// tallies' counts of proofs and bypass passes.
func requestsOf(minutes []Minute, arrivals int64) (r Requests, solved, failed, bypass int64) {
	for _, m := range minutes {
		r.Total += m.Requests
		r.Polls += m.Polls
		solved, failed, bypass = solved+m.ProofsSolved, failed+m.ProofsFailed, bypass+m.BypassPasses
		for s, n := range m.PerSecond {
			if n > r.PeakPerSecond {
				r.PeakPerSecond, r.PeakAt = n, m.At.Add(time.Duration(s)*time.Second)
			}
		}
	}
	if arrivals > 0 {
		r.PerPerson = float64(r.Total) / float64(arrivals)
	}
	return r, solved, failed, bypass
}

type eventKind int8

const (
	kindArrival eventKind = iota
	kindAdmitted
	kindLeft
	kindGone // revoked or a no-show: out of the line
)

type event struct {
	at   time.Time
	kind eventKind
}

// fillSeries fills r's From, To, StepMinutes and Minutes from the people's events
// and the tallies.
func fillSeries(r *Report, evs []event, minutes []Minute) {
	if len(evs) == 0 && len(minutes) == 0 {
		return
	}
	lo, hi := time.Time{}, time.Time{}
	stretch := func(t time.Time) {
		if lo.IsZero() || t.Before(lo) {
			lo = t
		}
		if t.After(hi) {
			hi = t
		}
	}
	for _, e := range evs {
		stretch(e.at)
	}
	for _, m := range minutes {
		stretch(m.At)
	}
	lo, hi = lo.UTC().Truncate(time.Minute), hi.UTC().Truncate(time.Minute)
	span := int(hi.Sub(lo)/time.Minute) + 1
	step := max(1, (span+MaxRows-1)/MaxRows)
	rows := make([]Row, (span+step-1)/step)
	for i := range rows {
		rows[i].At = lo.Add(time.Duration(i*step) * time.Minute)
	}
	row := func(t time.Time) *Row { return &rows[int(t.UTC().Sub(lo)/time.Minute)/step] }
	slices.SortFunc(evs, func(a, b event) int { return a.at.Compare(b.at) })
	for _, e := range evs {
		x := row(e.at)
		switch e.kind {
		case kindArrival:
			x.Arrivals++
		case kindAdmitted:
			x.Admitted++
		case kindLeft:
			x.Left++
		}
	}
	for _, m := range minutes {
		x := row(m.At)
		x.Requests += m.Requests
		for _, n := range m.PerSecond {
			x.PeakPerSecond = max(x.PeakPerSecond, n)
		}
	}
	var waiting int64
	j := 0
	for i := range rows {
		end := rows[i].At.Add(time.Duration(step) * time.Minute)
		for ; j < len(evs) && evs[j].at.Before(end); j++ {
			waiting += either(evs[j].kind == kindArrival, 1, -1)
		}
		rows[i].Waiting = waiting
	}
	r.From, r.To, r.StepMinutes, r.Minutes = lo, hi, step, rows
}

func either(b bool, yes, no int64) int64 {
	if b {
		return yes
	}
	return no
}

// turns are the instants the tallies saw the counter reach: the minute's
// start and its mean counter, ascending in both.
type turns []Minute

func turnTimes(minutes []Minute) turns {
	var ts turns
	var hi int64
	for _, m := range minutes {
		if c := m.Counter(); c > hi {
			hi = c
			ts = append(ts, m)
		}
	}
	return ts
}

// turnAt is the minute in which the counter reached ticket, if a tally saw it.
func turnAt(ts turns, ticket int64) (time.Time, bool) {
	i, _ := slices.BinarySearchFunc(ts, ticket, func(m Minute, t int64) int { return cmp.Compare(m.Counter(), t) })
	if i == len(ts) {
		return time.Time{}, false
	}
	return ts[i].At, true
}

// halfway is the estimate x would have been shown halfway through their
// wait: their position then (by the mean counter the tallies saw in that
// minute) times the mean estimate a place the answers gave in it.
func halfway(x Person, minutes []Minute) (time.Duration, bool) {
	h := x.IssuedAt.Add(x.AdmittedAt.Sub(x.IssuedAt) / 2).UTC().Truncate(time.Minute)
	i, found := slices.BinarySearchFunc(minutes, h, func(m Minute, t time.Time) int { return m.At.Compare(t) })
	if !found {
		return 0, false
	}
	m := minutes[i]
	perPlace, ok := m.PerPlace()
	if !ok {
		return 0, false
	}
	pos := max(x.Place-m.Counter(), 1)
	return time.Duration(pos) * perPlace, true
}

// placesLabel names positions from to upTo (0: no bound).
func placesLabel(from, upTo int64) string {
	if upTo == 0 {
		return "over " + thousands(from-1)
	}
	return thousands(from) + "–" + thousands(upTo)
}

// estimateLabel names estimates from to upTo (0: no bound).
func estimateLabel(from, upTo time.Duration) string {
	switch {
	case upTo == 0:
		return "over " + minutes(from)
	case from == 0:
		return "under " + minutes(upTo)
	}
	return minutes(from) + "–" + minutes(upTo)
}

// waitLabel names the waits up to upTo (0: no bound).
func waitLabel(upTo time.Duration) string {
	if upTo == 0 {
		return "longer"
	}
	if upTo < time.Minute {
		return "≤ " + strconv.Itoa(int(upTo/time.Second)) + " s"
	}
	return "≤ " + minutes(upTo)
}

func minutes(d time.Duration) string {
	if d >= time.Hour && d%time.Hour == 0 {
		return strconv.Itoa(int(d/time.Hour)) + " h"
	}
	return strconv.Itoa(int(d/time.Minute)) + " min"
}

// thousands writes n with commas between thousands.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
