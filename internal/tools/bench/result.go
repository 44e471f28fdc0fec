package bench

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Result is what one policy did in one run or simulation. Its JSON form is
// the -json output contract: one object per policy.
type Result struct {
	// Policy is the polling policy: "fixed:3s", "server" (the client
	// honours retryAfterMs), "tiers", …
	Policy string `json:"policy"`
	// Mode is "run" (real HTTP) or "simulate" (virtual clock).
	Mode      string `json:"mode"`
	ProgramID string `json:"programId,omitempty"`
	Arrival   string `json:"arrival"`
	AdmitRate string `json:"admitRate"`
	// Abandon is the scenario's fraction of users who leave while waiting.
	Abandon float64 `json:"abandon,omitempty"`
	// CacheTTLMs is the program-cache TTL the simulator applied rate
	// changes with (simulate).
	CacheTTLMs int64  `json:"cacheTtlMs,omitempty"`
	Seed       uint64 `json:"seed,omitempty"`

	Users int `json:"users"`
	// Entered counts users whose enter succeeded.
	Entered int `json:"entered"`
	// Admitted counts users who saw ADMITTED before the run ended.
	Admitted int `json:"admitted"`
	// Left counts users who left the queue while waiting (Abandon).
	Left int `json:"left,omitempty"`
	// Requests counts the queue API requests sent by the virtual users:
	// enters (POST), polls (GET) and leaves (DELETE), each retry and
	// failure included. The bench's own admin requests are AdminRequests.
	Requests int64 `json:"requests"`
	Enters   int64 `json:"enters"`
	// Polls counts GET requests (the enter is not a poll).
	Polls int64 `json:"polls"`
	// Leaves counts DELETE requests (abandoning users).
	Leaves int64 `json:"leaves,omitempty"`
	// SessionEnds counts the site's session ends (DELETE …/session, run
	// with a cap).
	SessionEnds int64 `json:"sessionEnds,omitempty"`
	// PollsPerUser is Polls / Users: GETs only, the enter not counted.
	PollsPerUser float64 `json:"pollsPerUser"`
	// RequestsPerUser is Requests / Users: the polls plus the enter (plus
	// the leave of those who abandon).
	RequestsPerUser float64 `json:"requestsPerUser"`

	// DurationSeconds runs from the start to the last user's ADMITTED or
	// the timeout.
	DurationSeconds float64 `json:"durationSeconds"`
	// AvgRps is Requests / DurationSeconds.
	AvgRps float64 `json:"avgRps"`
	// PeakRps is the largest whole-second count in RpsSeries.
	PeakRps int64 `json:"peakRps"`
	// PeakPollRps is the largest whole-second count of polls alone: the
	// peak without a burst of enters.
	PeakPollRps int64 `json:"peakPollRps"`
	// RpsSeries counts the queue API requests sent in each second of the run.
	RpsSeries []int64 `json:"rpsSeries"`
	// PollSeries counts the polls sent in each second of the run.
	PollSeries []int64 `json:"pollSeries"`

	// Errors counts the failed requests among Requests: transport errors,
	// 5xx, 429 and the 4xx the bench did not expect.
	Errors int64 `json:"errors"`
	// AdminRequests counts the bench's own admin requests (run only): the
	// program's creation, the rate changes and the counter samples.
	AdminRequests int64 `json:"adminRequests,omitempty"`
	// AdminErrors counts the failed requests among AdminRequests.
	AdminErrors int64 `json:"adminErrors,omitempty"`
	// ByRoute counts every request, queue and admin, by "METHOD route
	// status", e.g. "GET poll 200": it sums to Requests + AdminRequests.
	ByRoute map[string]int64 `json:"byRoute"`
	// ErrorCodes counts the error answers of a run by their code, e.g.
	// "PASS_UNAVAILABLE" (run only; absent when every answer succeeded).
	ErrorCodes map[string]int64 `json:"errorCodes,omitempty"`

	// LatencyMs is the request latency of the queue API requests (run only).
	LatencyMs *Percentiles `json:"latencyMs,omitempty"`
	// NotifyDelayMs is, per admitted user, the time from the instant its
	// ticket was admitted to the instant it saw ADMITTED.
	NotifyDelayMs Percentiles `json:"notifyDelayMs"`

	// SeenSeries counts the users who first saw ADMITTED in each second
	// of a run, and SeenPerSecondPeak is its largest count: the passes
	// signed per second when the server signs them (run only).
	SeenSeries        []int64 `json:"seenSeries,omitempty"`
	SeenPerSecondPeak int64   `json:"seenPerSecondPeak,omitempty"`
	// Passes counts the users whose first ADMITTED answer carried an
	// admission pass (run only).
	Passes int64 `json:"passes,omitempty"`

	// EntersPerSecondPeak is the most enters answered with a new place in
	// one second.
	EntersPerSecondPeak int64 `json:"entersPerSecondPeak"`
	// ThrottledEnters counts enters the store's throttling refused: in a
	// simulation, enter attempts whose writes the partition model throttled
	// through every retry; in a run, enter requests answered 503 or 429.
	ThrottledEnters int64 `json:"throttledEnters"`
	// Challenges counts the challenge fetches of a run, for a program
	// with challengeBits; ChallengeSolves the proofs of work it solved and
	// ChallengeSolveMs the time they took in all (one core each).
	Challenges       int64   `json:"challenges,omitempty"`
	ChallengeSolves  int64   `json:"challengeSolves,omitempty"`
	ChallengeSolveMs float64 `json:"challengeSolveMs,omitempty"`
	// ProgramItemWritesPerSecondMax is the most writes the program item
	// took in one second: counted by the simulator, read from the server's
	// partition model in a run (absent when the server has none).
	ProgramItemWritesPerSecondMax *int64 `json:"programItemWritesPerSecondMax,omitempty"`
	// StoreThrottles counts every call the partition model refused (simulate).
	StoreThrottles int64 `json:"storeThrottles,omitempty"`
	// Instances is how many service instances the simulation ran.
	Instances int `json:"instances,omitempty"`
	// Prequeue is the size of a shuffled opening's pre-queue.
	Prequeue int64 `json:"prequeue,omitempty"`
	// Gaps counts the run's ticket numbers that no user holds.
	Gaps int64 `json:"gaps"`
	// DuplicateTickets counts tickets the run's users hold more than once
	// (each extra holder once).
	DuplicateTickets int64 `json:"duplicateTickets,omitempty"`
	// TicketsPastIssued counts users holding a number past the program's
	// last ticket: given back while held (simulate).
	TicketsPastIssued int64 `json:"ticketsPastIssued,omitempty"`
	// StatusRegressions counts users seen admitted whom another instance
	// then answered otherwise (simulate, with clock skew).
	StatusRegressions int64 `json:"statusRegressions,omitempty"`
	// MaxPositionRise is the most a waiting user's position went up from
	// one answer to the next (simulate).
	MaxPositionRise int64 `json:"maxPositionRise,omitempty"`
	// ClockSkewMs is the simulation's clock skew: each instance's clock is
	// off the true time by up to this much either way; ClockSpreadMs is
	// the drawn offsets' range, latest minus earliest.
	ClockSkewMs   float64 `json:"clockSkewMs,omitempty"`
	ClockSpreadMs float64 `json:"clockSpreadMs,omitempty"`
	// MaxInversionMs is the worst bend of arrival order: the longest time
	// by which someone entered before another and is behind them (pairs of
	// a shuffled pre-queue excluded, whose order is random by design).
	MaxInversionMs float64 `json:"maxInversionMs"`

	// Cost is the AWS price of the requests (simulate).
	Cost *Cost `json:"costUSD,omitempty"`
	// Capacity is what happened after the admissions of a program with a
	// Crowd: the cap, the no-shows and the sessions.
	Capacity *Capacity `json:"capacity,omitempty"`
}

// Capacity is what a run or a simulation measured of a program's
// admissions once made: its cap and no-show handling, its no-shows, and
// its users' sessions as they lived them. Fields marked (run) are measured
// over HTTP only, (simulate) by the simulator only.
type Capacity struct {
	// MaxActiveUsers and NoShowSeconds are the program's settings (0: none).
	MaxActiveUsers int64 `json:"maxActiveUsers,omitempty"`
	NoShowSeconds  int64 `json:"noShowSeconds,omitempty"`
	// Showed counts the users who saw ADMITTED (run); NoShows those who
	// never fetched their admission; NoShowsSeen the drawn no-shows who
	// saw ADMITTED anyway, counted among Showed (run).
	Showed      int64 `json:"showed,omitempty"`
	NoShows     int64 `json:"noShows"`
	NoShowsSeen int64 `json:"noShowsSeen,omitempty"`
	// ServerNoShows and ServerEnded are the no-shows and ended sessions
	// the service counted by the end (its folds, tickets nobody holds
	// included).
	ServerNoShows int64 `json:"serverNoShows"`
	ServerEnded   int64 `json:"serverEnded,omitempty"`
	// Wasted counts the no-shows' admissions not given back to the line
	// (a slot freed, or an admission owed) by the end of the run (simulate).
	Wasted int64 `json:"wasted"`
	// ServedMs is when the last user who showed saw ADMITTED: the time to
	// serve everyone (simulate).
	ServedMs float64 `json:"servedMs,omitempty"`
	// MostActive is the most users active at once as they see it: from
	// seeing ADMITTED to their session's or window's end; PeakActiveCounter
	// the largest "active" the admin counters showed (run).
	MostActive        int64 `json:"mostActive"`
	PeakActiveCounter int64 `json:"peakActiveCounter,omitempty"`
	// SessionsEnded counts the sessions the site ended; EndErrors, its
	// ends that failed; Expired the users who read EXPIRED while still
	// polling (run); MissingPasses the ADMITTED answers without a pass (run).
	SessionsEnded int64 `json:"sessionsEnded"`
	EndErrors     int64 `json:"endErrors,omitempty"`
	Expired       int64 `json:"expired,omitempty"`
	MissingPasses int64 `json:"missingPasses,omitempty"`
	// SlotReuseMs is, with a cap, the time from each slot's freeing to the
	// admission that took it: in a simulation the j-th slot freed is taken
	// by admission MaxActiveUsers + j; in a run, per session end while
	// people waited, the time to the admitted counter's next move
	// (sampled), and NotReused counts the ends after which it never moved.
	SlotReuseMs *Percentiles `json:"slotReuseMs,omitempty"`
	NotReused   int64        `json:"notReused,omitempty"`
	// MeanSessionMs is the showed users' mean time from ADMITTED to their
	// end; DurationMs runs from the start of admission to the last user
	// done; BoundMs is the least time the turnover allows (see
	// docs/benchmarks.md), and Ratio is DurationMs / BoundMs (run).
	MeanSessionMs float64 `json:"meanSessionMs,omitempty"`
	DurationMs    float64 `json:"durationMs,omitempty"`
	BoundMs       float64 `json:"boundMs,omitempty"`
	Ratio         float64 `json:"ratio,omitempty"`
}

// Percentiles summarise a sample exactly (sorted samples, nearest rank).
type Percentiles struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// Summarize sorts samples in place and returns their nearest-rank
// percentiles (the p-th percentile is the smallest sample with at least p%
// of the samples at or below it). An empty sample gives zeros.
func Summarize(samples []float64) Percentiles {
	if len(samples) == 0 {
		return Percentiles{}
	}
	slices.Sort(samples)
	rank := func(p float64) float64 {
		i := int(math.Ceil(p/100*float64(len(samples)))) - 1
		return samples[max(0, min(i, len(samples)-1))]
	}
	return Percentiles{Count: len(samples), P50: rank(50), P95: rank(95), P99: rank(99), Max: samples[len(samples)-1]}
}

// Ms converts d to float milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Finish fills the fields derived from the counters: the per-user ratios,
// average and peak rates. duration is the length of the run.
func (r *Result) Finish(duration time.Duration) {
	r.DurationSeconds = duration.Seconds()
	if r.Users > 0 {
		r.PollsPerUser = float64(r.Polls) / float64(r.Users)
		r.RequestsPerUser = float64(r.Requests) / float64(r.Users)
	}
	if r.DurationSeconds > 0 {
		r.AvgRps = float64(r.Requests) / r.DurationSeconds
	}
	r.PeakRps, r.PeakPollRps = SeriesPeak(r.RpsSeries), SeriesPeak(r.PollSeries)
}

// Entrant is one user's place, for MaxInversion: when it entered, its
// place in the admission order, and whether it belongs to a shuffled
// pre-queue.
type Entrant struct {
	EnteredMs int64
	Place     int64
	Prequeue  bool
}

// MaxInversion returns the longest time, in ms, by which an entrant entered
// before another yet has a later place (equal places do not count), leaving
// out a shuffled pre-queue's entrants. It sorts es.
func MaxInversion(es []Entrant) int64 {
	es = slices.DeleteFunc(es, func(e Entrant) bool { return e.Prequeue })
	slices.SortFunc(es, func(a, b Entrant) int {
		return cmp.Or(cmp.Compare(a.Place, b.Place), cmp.Compare(a.EnteredMs, b.EnteredMs))
	})
	var worst int64
	latest := int64(math.MinInt64) // the latest entry among strictly earlier places
	for i := 0; i < len(es); {
		j := i
		for j < len(es) && es[j].Place == es[i].Place {
			j++
		}
		for _, e := range es[i:j] {
			if latest != math.MinInt64 {
				worst = max(worst, latest-e.EnteredMs)
			}
		}
		for _, e := range es[i:j] {
			latest = max(latest, e.EnteredMs)
		}
		i = j
	}
	return worst
}

// SeriesPeak is the largest count of a per-second series.
func SeriesPeak(series []int64) int64 {
	var p int64
	for _, n := range series {
		p = max(p, n)
	}
	return p
}
