package bench

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Result is what one policy did in one run or simulation. Its JSON form is
// the -json output contract: one object per policy. Fields marked (run)
// are measured over HTTP only, (simulate) by the simulator only.
type Result struct {
	// Policy is the polling policy: "fixed:3s", "server", "tiers", …
	Policy string `json:"policy"`
	// Mode is "run" (real HTTP) or "simulate" (virtual clock).
	Mode      string `json:"mode"`
	ProgramID string `json:"programId,omitempty"`
	Arrival   string `json:"arrival"`
	AdmitRate string `json:"admitRate"`
	// Abandon is the scenario's fraction of users who leave while waiting.
	Abandon float64 `json:"abandon,omitempty"`
	// CacheTTLMs is the delay of rate changes (simulate).
	CacheTTLMs int64  `json:"cacheTtlMs,omitempty"`
	Seed       uint64 `json:"seed,omitempty"`

	Users int `json:"users"`
	// Entered counts successful enters, Admitted the users who saw
	// ADMITTED, Left those who left while waiting.
	Entered  int `json:"entered"`
	Admitted int `json:"admitted"`
	Left     int `json:"left,omitempty"`
	// Requests counts the virtual users' queue API requests, retries and
	// failures included; Enters, Polls, Leaves and SessionEnds count its
	// POSTs, GETs, DELETEs and the site's session ends (run, with a cap).
	Requests    int64 `json:"requests"`
	Enters      int64 `json:"enters"`
	Polls       int64 `json:"polls"`
	Leaves      int64 `json:"leaves,omitempty"`
	SessionEnds int64 `json:"sessionEnds,omitempty"`
	// PollsPerUser is Polls / Users; RequestsPerUser is Requests / Users.
	PollsPerUser    float64 `json:"pollsPerUser"`
	RequestsPerUser float64 `json:"requestsPerUser"`

	// DurationSeconds runs from the start to the last user's ADMITTED or
	// the timeout; AvgRps is Requests / DurationSeconds.
	DurationSeconds float64 `json:"durationSeconds"`
	AvgRps          float64 `json:"avgRps"`
	// PeakRps and PeakPollRps are the peaks of RpsSeries and PollSeries,
	// the requests and the polls counted in each second of the run.
	PeakRps     int64   `json:"peakRps"`
	PeakPollRps int64   `json:"peakPollRps"`
	RpsSeries   []int64 `json:"rpsSeries"`
	PollSeries  []int64 `json:"pollSeries"`

	// Errors counts the failed requests among Requests: transport errors,
	// 5xx, 429 and the 4xx the bench did not expect.
	Errors int64 `json:"errors"`
	// AdminRequests counts the bench's own admin requests and AdminErrors
	// the failed ones (run).
	AdminRequests int64 `json:"adminRequests,omitempty"`
	AdminErrors   int64 `json:"adminErrors,omitempty"`
	// ByRoute counts every request by "METHOD route status", e.g.
	// "GET poll 200": it sums to Requests + AdminRequests.
	ByRoute map[string]int64 `json:"byRoute"`
	// ErrorCodes counts the error answers by code, e.g. "PASS_UNAVAILABLE"
	// (run).
	ErrorCodes map[string]int64 `json:"errorCodes,omitempty"`

	// LatencyMs is the latency of the queue API requests (run).
	LatencyMs *Percentiles `json:"latencyMs,omitempty"`
	// NotifyDelayMs is, per admitted user, the time from its ticket's
	// admission to its seeing ADMITTED.
	NotifyDelayMs Percentiles `json:"notifyDelayMs"`

	// SeenSeries counts the users who first saw ADMITTED in each second,
	// SeenPerSecondPeak is its peak, and Passes counts the first ADMITTED
	// answers that carried a pass (run).
	SeenSeries        []int64 `json:"seenSeries,omitempty"`
	SeenPerSecondPeak int64   `json:"seenPerSecondPeak,omitempty"`
	Passes            int64   `json:"passes,omitempty"`

	// EntersPerSecondPeak is the most enters answered with a new place in
	// one second.
	EntersPerSecondPeak int64 `json:"entersPerSecondPeak"`
	// ThrottledEnters counts enters the store's throttling refused: answered
	// 503 or 429 in a run, throttled through every retry in a simulation.
	ThrottledEnters int64 `json:"throttledEnters"`
	// Challenges counts the challenge fetches of a run, ChallengeSolves the
	// proofs of work solved and ChallengeSolveMs their total time.
	Challenges       int64   `json:"challenges,omitempty"`
	ChallengeSolves  int64   `json:"challengeSolves,omitempty"`
	ChallengeSolveMs float64 `json:"challengeSolveMs,omitempty"`
	// ProgramItemWritesPerSecondMax is the most writes the program item
	// took in one second (absent when a run's server has no partition model).
	ProgramItemWritesPerSecondMax *int64 `json:"programItemWritesPerSecondMax,omitempty"`
	// StoreThrottles counts every call the partition model refused (simulate).
	StoreThrottles int64 `json:"storeThrottles,omitempty"`
	// Instances is how many service instances the simulation ran.
	Instances int `json:"instances,omitempty"`
	// Prequeue is the size of a shuffled opening's pre-queue.
	Prequeue int64 `json:"prequeue,omitempty"`
	// Gaps counts the run's ticket numbers that no user holds;
	// DuplicateTickets the extra holders of a ticket held more than once;
	// TicketsPastIssued the holders of a number past the last one issued
	// (simulate).
	Gaps              int64 `json:"gaps"`
	DuplicateTickets  int64 `json:"duplicateTickets,omitempty"`
	TicketsPastIssued int64 `json:"ticketsPastIssued,omitempty"`
	// StatusRegressions counts users seen admitted whom another instance
	// then answered otherwise, and MaxPositionRise the most a waiting
	// user's position went up between two answers (simulate).
	StatusRegressions int64 `json:"statusRegressions,omitempty"`
	MaxPositionRise   int64 `json:"maxPositionRise,omitempty"`
	// ClockSkewMs bounds each instance's clock offset either way;
	// ClockSpreadMs is the drawn offsets' range (simulate).
	ClockSkewMs   float64 `json:"clockSkewMs,omitempty"`
	ClockSpreadMs float64 `json:"clockSpreadMs,omitempty"`
	// MaxInversionMs is the longest time by which someone entered before
	// another and is behind them (MaxInversion).
	MaxInversionMs float64 `json:"maxInversionMs"`

	// Cost is the AWS price of the requests (simulate).
	Cost *Cost `json:"costUSD,omitempty"`
	// Capacity is what happened after the admissions of a program with a
	// Crowd.
	Capacity *Capacity `json:"capacity,omitempty"`
}

// Capacity is what a run or a simulation measured of a program's
// admissions once made: its cap and no-show settings, its no-shows and its
// users' sessions. Fields marked (run) are measured over HTTP only,
// (simulate) by the simulator only.
type Capacity struct {
	// MaxActiveUsers and NoShowSeconds are the program's settings (0: none).
	MaxActiveUsers int64 `json:"maxActiveUsers,omitempty"`
	NoShowSeconds  int64 `json:"noShowSeconds,omitempty"`
	// Showed counts the users who saw ADMITTED (run); NoShows those who
	// never fetched their admission; NoShowsSeen the drawn no-shows among
	// Showed (run).
	Showed      int64 `json:"showed,omitempty"`
	NoShows     int64 `json:"noShows"`
	NoShowsSeen int64 `json:"noShowsSeen,omitempty"`
	// ServerNoShows and ServerEnded are the no-shows and ended sessions
	// the service counted by the end.
	ServerNoShows int64 `json:"serverNoShows"`
	ServerEnded   int64 `json:"serverEnded,omitempty"`
	// Wasted counts the no-shows' admissions not given back to the line by
	// the end (simulate).
	Wasted int64 `json:"wasted"`
	// ServedMs is when the last user who showed saw ADMITTED (simulate).
	ServedMs float64 `json:"servedMs,omitempty"`
	// MostActive is the most users active at once as they see it;
	// PeakActiveCounter the largest "active" admin counter (run).
	MostActive        int64 `json:"mostActive"`
	PeakActiveCounter int64 `json:"peakActiveCounter,omitempty"`
	// SessionsEnded counts the sessions the site ended, EndErrors its
	// failed ends, Expired the users who read EXPIRED while polling (run),
	// MissingPasses the ADMITTED answers without a pass (run).
	SessionsEnded int64 `json:"sessionsEnded"`
	EndErrors     int64 `json:"endErrors,omitempty"`
	Expired       int64 `json:"expired,omitempty"`
	MissingPasses int64 `json:"missingPasses,omitempty"`
	// SlotReuseMs is, with a cap, the time from a slot's freeing to the
	// admission that took it; NotReused counts the ends of a run after
	// which the admitted counter never moved (run).
	SlotReuseMs *Percentiles `json:"slotReuseMs,omitempty"`
	NotReused   int64        `json:"notReused,omitempty"`
	// MeanSessionMs is the mean time from ADMITTED to the session's end,
	// DurationMs the time from the start of admission to the last user
	// done, BoundMs the least time the turnover allows, and Ratio
	// DurationMs / BoundMs (run).
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
		// es[i] entered first of its place and es[j-1] last.
		if latest != math.MinInt64 {
			worst = max(worst, latest-es[i].EnteredMs)
		}
		latest = max(latest, es[j-1].EnteredMs)
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
