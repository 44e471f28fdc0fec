package loadtest

import (
	"cmp"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/example/waitingroom/internal/tools/bench"
	"github.com/example/waitingroom/internal/tools/client"
)

// tickets fills res's gaps (issued is -1 if unknown), duplicates and inversion.
func (r *runner) tickets(users []user, issued int64, res *bench.Result) {
	held := map[int64]bool{}
	var es []bench.Entrant
	var prequeue, tickets int64
	for _, u := range users {
		prequeue = max(prequeue, u.prequeue)
	}
	for _, u := range users {
		if u.ticket <= 0 {
			continue
		}
		held[u.ticket] = true
		tickets++
		if !u.issuedAt.IsZero() {
			es = append(es, bench.Entrant{EnteredMs: u.issuedAt.UnixMilli(), Place: u.ticket, Prequeue: u.ticket <= prequeue})
		}
	}
	res.DuplicateTickets = tickets - int64(len(held))
	res.MaxInversionMs = float64(bench.MaxInversion(es))
	if issued >= 0 {
		res.Gaps = max(0, issued-r.baseIssued-int64(len(held)))
	}
}

// result is the run's measurements of its requests and users.
func (r *runner) result(users []user, end time.Duration) bench.Result {
	res := r.cfg.Scenario.Result(r.cfg.Poll.String(), "run", r.cfg.Seed)
	res.ProgramID, res.ByRoute = r.cfg.ProgramID, map[string]int64{}
	if r.cfg.Existing {
		res.AdmitRate = "by the operator"
	}
	seconds := int((end + time.Second - 1) / time.Second) // the last one may be partial
	r.countRequests(&res, seconds)
	res.ChallengeSolves, res.ChallengeSolveMs = r.solves.Load(), bench.Ms(time.Duration(r.solveNs.Load()))
	res.SeenSeries = make([]int64, seconds)
	var delays, waits []float64
	for _, u := range users {
		if u.entered {
			res.Entered++
		}
		if u.left {
			res.Left++
		}
		if !u.admitted {
			continue
		}
		res.Admitted++
		tally(res.SeenSeries, u.seenAt)
		// The server answered WAITING to a request sent at lastWaiting, and
		// ADMITTED by seenAt: the admission lies in between.
		at := min(max(admittedAt(r.samples, u.ticket), u.lastWaiting), u.seenAt)
		delays = append(delays, bench.Ms(u.seenAt-at))
		waits = append(waits, bench.Ms(u.seenAt-u.enterSent))
	}
	res.NotifyDelayMs = bench.Summarize(delays)
	res.WaitMs = new(bench.Summarize(waits))
	res.SeenPerSecondPeak = bench.SeriesPeak(res.SeenSeries)
	res.Passes = r.passes.Load()
	res.Finish(end)
	return res
}

// tally counts an event at offset at in its second of series (or the last).
func tally(series []int64, at time.Duration) {
	if s := min(int(at/time.Second), len(series)-1); s >= 0 {
		series[s]++
	}
}

// countRequests fills res's request counts, by route and by second, and their latency.
func (r *runner) countRequests(res *bench.Result, seconds int) {
	res.RpsSeries = make([]int64, seconds)
	res.PollSeries = make([]int64, seconds)
	enters := make([]int64, seconds)
	var lat []float64
	for _, rec := range r.records {
		status := "error"
		if rec.Status != 0 {
			status = strconv.Itoa(rec.Status)
		}
		res.ByRoute[string(rec.Op)+" "+status]++
		if ae := (*client.Error)(nil); errors.As(rec.Err, &ae) && ae.Code != "" {
			if res.ErrorCodes == nil {
				res.ErrorCodes = map[string]int64{}
			}
			res.ErrorCodes[ae.Code]++
		}
		// A DELETE answered 409 (admitted before it left) is not a failure.
		failed := rec.Err != nil && !(rec.Op == client.OpLeave && rec.Status == http.StatusConflict)
		if rec.Op.Admin() {
			res.AdminRequests++
			if failed {
				res.AdminErrors++
			}
			continue
		}
		res.Requests++
		if failed {
			res.Errors++
		}
		switch rec.Op {
		case client.OpEnter:
			res.Enters++
			if rec.Status == http.StatusServiceUnavailable || rec.Status == http.StatusTooManyRequests {
				res.ThrottledEnters++
			}
			if rec.Status == http.StatusCreated {
				tally(enters, rec.at+rec.Latency)
			}
		case client.OpPoll:
			res.Polls++
			tally(res.PollSeries, rec.at)
		case client.OpLeave:
			res.Leaves++
		case client.OpEndSession, client.OpReleaseSession:
			res.SessionEnds++
		case client.OpChallenge:
			res.Challenges++
		}
		tally(res.RpsSeries, rec.at)
		if rec.Status != 0 {
			lat = append(lat, bench.Ms(rec.Latency))
		}
	}
	res.LatencyMs = new(bench.Summarize(lat))
	res.EntersPerSecondPeak = bench.SeriesPeak(enters)
}

// admittedAt interpolates when the counter passed ticket from the samples; -1 when they say nothing.
func admittedAt(samples []sample, ticket int64) time.Duration {
	// i is the first sample with admitted ≥ ticket.
	i, _ := slices.BinarySearchFunc(samples, ticket, func(s sample, k int64) int { return cmp.Compare(s.admitted, k) })
	var a, b sample
	switch {
	case i == 0:
		return -1
	case i == len(samples):
		if len(samples) < 2 {
			return -1
		}
		a, b = samples[len(samples)-2], samples[len(samples)-1]
		if b.admitted == a.admitted {
			return b.at
		}
	default:
		a, b = samples[i-1], samples[i]
	}
	f := (float64(ticket-a.admitted) - 0.5) / float64(b.admitted-a.admitted)
	return a.at + time.Duration(f*float64(b.at-a.at))
}
