package loadtest

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/example/waitingroom/internal/tools/bench"
	"github.com/example/waitingroom/internal/tools/client"
)

// tickets fills the ticket fields of res: the gaps (from the program's
// issued counter, -1 if unknown), the duplicates and the inversion.
func (r *runner) tickets(users []user, issued int64, res *bench.Result) {
	held := map[int64]int{}
	var es []bench.Entrant
	var prequeue int64
	for _, u := range users {
		prequeue = max(prequeue, u.prequeue)
	}
	for _, u := range users {
		if u.ticket <= 0 {
			continue
		}
		held[u.ticket]++
		if u.issuedAtMs > 0 {
			es = append(es, bench.Entrant{EnteredMs: u.issuedAtMs, Place: u.ticket, Prequeue: u.ticket <= prequeue})
		}
	}
	for _, n := range held {
		res.DuplicateTickets += int64(n - 1)
	}
	res.MaxInversionMs = float64(bench.MaxInversion(es))
	if issued >= 0 {
		res.Gaps = max(0, issued-r.baseIssued-int64(len(held)))
	}
}

// result is the run's measurements: the requests counted by route and
// second, their latency, and each admitted user's notification delay.
func (r *runner) result(users []user, end time.Duration) bench.Result {
	res := r.cfg.Scenario.Result(r.cfg.Poll.String(), "run", r.cfg.Seed)
	res.ProgramID, res.ByRoute = r.cfg.ProgramID, map[string]int64{}
	if r.cfg.Existing {
		res.AdmitRate = "by the operator"
	}
	seconds := int((end + time.Second - 1) / time.Second) // the last one may be partial
	r.countRequests(&res, seconds)
	res.ChallengeSolves, res.ChallengeSolveMs = r.solves.Load(), bench.Ms(time.Duration(r.solveNs.Load()))
	r.countUsers(&res, users)
	res.SeenSeries, res.SeenPerSecondPeak = seenSeries(users, seconds)
	res.Passes = r.passes.Load()
	res.Finish(end)
	return res
}

// countRequests fills res's request counts, by route and by second (of
// seconds), and their latency.
func (r *runner) countRequests(res *bench.Result, seconds int) {
	res.RpsSeries = make([]int64, seconds)
	res.PollSeries = make([]int64, seconds)
	enters := make([]int64, seconds)
	var lat []float64
	for _, rec := range r.records {
		key := string(rec.op) + " "
		if rec.status == 0 {
			key += "error"
		} else {
			key += strconv.Itoa(rec.status)
		}
		res.ByRoute[key]++
		if rec.code != "" {
			if res.ErrorCodes == nil {
				res.ErrorCodes = map[string]int64{}
			}
			res.ErrorCodes[rec.code]++
		}
		if rec.op.Admin() {
			res.AdminRequests++
			if rec.failed {
				res.AdminErrors++
			}
			continue
		}
		res.Requests++
		if rec.failed {
			res.Errors++
		}
		switch rec.op {
		case client.OpEnter:
			res.Enters++
			if rec.status == http.StatusServiceUnavailable || rec.status == http.StatusTooManyRequests {
				res.ThrottledEnters++
			}
			if rec.status == http.StatusCreated {
				if s := min(int((rec.at+rec.latency)/time.Second), seconds-1); s >= 0 {
					enters[s]++
				}
			}
		case client.OpPoll:
			res.Polls++
		case client.OpLeave:
			res.Leaves++
		case client.OpEndSession, client.OpReleaseSession:
			res.SessionEnds++
		case client.OpChallenge:
			res.Challenges++
		}
		if s := min(int(rec.at/time.Second), seconds-1); s >= 0 {
			res.RpsSeries[s]++
			if rec.op == client.OpPoll {
				res.PollSeries[s]++
			}
		}
		if rec.status != 0 {
			lat = append(lat, bench.Ms(rec.latency))
		}
	}
	l := bench.Summarize(lat)
	res.LatencyMs = &l
	res.EntersPerSecondPeak = bench.SeriesPeak(enters)
}

// countUsers fills res's user counts and the admitted users' notification
// delays.
func (r *runner) countUsers(res *bench.Result, users []user) {
	var delays []float64
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
		at := admittedAt(r.samples, u.ticket)
		// The server answered WAITING to a request sent at lastWaiting, and
		// ADMITTED by seenAt: the admission lies in between.
		at = min(max(at, u.lastWaiting), u.seenAt)
		delays = append(delays, bench.Ms(u.seenAt-at))
	}
	res.NotifyDelayMs = bench.Summarize(delays)
}

// admittedAt estimates when the counter passed ticket, interpolating
// between the samples around it; -1 when the samples say nothing.
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

// seenSeries returns the count of users who first saw ADMITTED in each
// second of the run, and its peak.
func seenSeries(users []user, seconds int) ([]int64, int64) {
	series := make([]int64, seconds)
	for _, u := range users {
		if u.admitted {
			if s := min(int(u.seenAt/time.Second), seconds-1); s >= 0 {
				series[s]++
			}
		}
	}
	return series, bench.SeriesPeak(series)
}
