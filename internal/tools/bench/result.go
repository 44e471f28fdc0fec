package bench

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Result is what one policy did in one run or simulation; its JSON form,
// one object per policy, is the -json output contract. (run) marks fields
// only a load test measures, (simulate) those only the simulator does.
type Result struct {
	Policy     string  `json:"policy"` // "fixed:3s", "server", "tiers", …
	Mode       string  `json:"mode"`   // "run" (real HTTP) or "simulate"
	ProgramID  string  `json:"programId,omitempty"`
	Arrival    string  `json:"arrival"`
	AdmitRate  string  `json:"admitRate"`
	Abandon    float64 `json:"abandon,omitempty"`
	CacheTTLMs int64   `json:"cacheTtlMs,omitempty"` // delay of rate changes (simulate)
	Seed       uint64  `json:"seed,omitempty"`

	// Entered counts successful enters, Admitted the users who saw
	// ADMITTED, Left those who left while waiting. Requests counts the
	// users' queue API requests, retries and failures included: Enters,
	// Polls, Leaves and, in a run, the site's SessionEnds (with a cap; a
	// simulation counts them apart: its Requests are the people's own).
	Users           int     `json:"users"`
	Entered         int     `json:"entered"`
	Admitted        int     `json:"admitted"`
	Left            int     `json:"left,omitempty"`
	Requests        int64   `json:"requests"`
	Enters          int64   `json:"enters"`
	Polls           int64   `json:"polls"`
	Leaves          int64   `json:"leaves,omitempty"`
	SessionEnds     int64   `json:"sessionEnds,omitempty"`
	PollsPerUser    float64 `json:"pollsPerUser"`
	RequestsPerUser float64 `json:"requestsPerUser"`

	// CapacityWrites counts the capacity records' writes by kind (simulate).
	CapacityWrites map[string]int64 `json:"capacityWrites,omitempty"`

	// DurationSeconds runs from the start to the last user's ADMITTED or the
	// timeout; the series count the requests and the polls of each second.
	DurationSeconds float64 `json:"durationSeconds"`
	AvgRps          float64 `json:"avgRps"`
	PeakRps         int64   `json:"peakRps"`
	PeakPollRps     int64   `json:"peakPollRps"`
	RpsSeries       []int64 `json:"rpsSeries"`
	PollSeries      []int64 `json:"pollSeries"`

	// Errors counts the failed requests among Requests: transport errors,
	// 5xx, 429 and the 4xx the bench did not expect. ByRoute counts every
	// request, the bench's own admin requests (run) included, by "METHOD
	// route status" ("GET poll 200"); ErrorCodes the error answers by code.
	Errors        int64            `json:"errors"`
	AdminRequests int64            `json:"adminRequests,omitempty"`
	AdminErrors   int64            `json:"adminErrors,omitempty"`
	ByRoute       map[string]int64 `json:"byRoute"`
	ErrorCodes    map[string]int64 `json:"errorCodes,omitempty"`

	// LatencyMs is the queue API requests' latency (run); NotifyDelayMs runs,
	// per admitted user, from its ticket's admission to its seeing ADMITTED.
	// WaitMs runs, per admitted user, from just before it sent its
	// successful enter to its receiving its first ADMITTED answer, on the
	// run's clock (run): the wait a program's report shows from the tokens.
	LatencyMs     *Percentiles `json:"latencyMs,omitempty"`
	NotifyDelayMs Percentiles  `json:"notifyDelayMs"`
	WaitMs        *Percentiles `json:"waitMs,omitempty"`

	// SeenSeries counts the users who first saw ADMITTED in each second;
	// Passes the first ADMITTED answers that carried a pass (run).
	SeenSeries        []int64 `json:"seenSeries,omitempty"`
	SeenPerSecondPeak int64   `json:"seenPerSecondPeak,omitempty"`
	Passes            int64   `json:"passes,omitempty"`

	// EntersPerSecondPeak is the most enters given a new place in a second;
	// ThrottledEnters the enters the store's throttling refused (503 or 429
	// in a run, through every retry in a simulation).
	EntersPerSecondPeak int64   `json:"entersPerSecondPeak"`
	ThrottledEnters     int64   `json:"throttledEnters"`
	Challenges          int64   `json:"challenges,omitempty"`       // challenge fetches (run)
	ChallengeSolves     int64   `json:"challengeSolves,omitempty"`  // proofs of work solved
	ChallengeSolveMs    float64 `json:"challengeSolveMs,omitempty"` // their total time
	// ProgramItemWritesPerSecondMax is nil when a run's server has no
	// partition model; StoreThrottles counts the calls the model refused.
	ProgramItemWritesPerSecondMax *int64 `json:"programItemWritesPerSecondMax,omitempty"`
	StoreThrottles                int64  `json:"storeThrottles,omitempty"`
	Instances                     int    `json:"instances,omitempty"` // service instances (simulate)
	Prequeue                      int64  `json:"prequeue,omitempty"`  // a shuffled opening's pre-queue
	// Gaps counts the ticket numbers no user holds. The rest are the
	// simulated service's checks: extra holders of a ticket, holders of a
	// number past the last issued, users seen admitted whom another
	// instance then answered otherwise, the most a waiting user's position
	// rose between two answers, and the instances' clock skew bound and
	// drawn offsets' range.
	Gaps              int64   `json:"gaps"`
	DuplicateTickets  int64   `json:"duplicateTickets,omitempty"`
	TicketsPastIssued int64   `json:"ticketsPastIssued,omitempty"`
	StatusRegressions int64   `json:"statusRegressions,omitempty"`
	MaxPositionRise   int64   `json:"maxPositionRise,omitempty"`
	ClockSkewMs       float64 `json:"clockSkewMs,omitempty"`
	ClockSpreadMs     float64 `json:"clockSpreadMs,omitempty"`
	MaxInversionMs    float64 `json:"maxInversionMs"` // MaxInversion of the entries and places

	// Web Push (simulate, the program model): PushShare is the share of
	// people subscribed (nil: push not modelled), PushLatencyMs the push
	// service's assumed delivery time. Subscribed counts the subscribed
	// people; PushesReady the "get ready" pushes sent (no request follows),
	// PushesTurn the "it's your turn" pushes (each followed by a poll,
	// counted in Polls); SenderMinutes the minutes of the run in which at
	// least one subscribed person waited, each a minute of the sender's
	// Lambda. Requests, RequestsPerUser and NotifyDelayMs count everyone,
	// the subscribed included.
	PushShare     *float64 `json:"pushShare,omitempty"`
	PushLatencyMs float64  `json:"pushLatencyMs,omitempty"`
	Subscribed    int      `json:"subscribed,omitempty"`
	PushesReady   int64    `json:"pushesReady,omitempty"`
	PushesTurn    int64    `json:"pushesTurn,omitempty"`
	SenderMinutes int64    `json:"senderMinutes,omitempty"`

	Cost     *Cost     `json:"costUSD,omitempty"`  // the AWS price of the requests (simulate)
	Capacity *Capacity `json:"capacity,omitempty"` // with a Crowd
}

// Capacity is what happened to a program's admissions once made: its cap
// and no-show settings (0: none), its no-shows and its users' sessions.
// (run) and (simulate) mark fields as in Result.
type Capacity struct {
	MaxActiveUsers int64 `json:"maxActiveUsers,omitempty"`
	NoShowSeconds  int64 `json:"noShowSeconds,omitempty"`
	// Showed counts the users who saw ADMITTED (run), NoShows those who
	// never fetched their admission, NoShowsSeen the drawn no-shows among
	// Showed (run); ServerNoShows and ServerEnded are the service's counts.
	Showed        int64 `json:"showed,omitempty"`
	NoShows       int64 `json:"noShows"`
	NoShowsSeen   int64 `json:"noShowsSeen,omitempty"`
	ServerNoShows int64 `json:"serverNoShows"`
	ServerEnded   int64 `json:"serverEnded,omitempty"`
	// Wasted counts the no-shows' admissions not given back by the end and
	// ServedMs is when the last user who showed saw ADMITTED (simulate).
	Wasted   int64   `json:"wasted"`
	ServedMs float64 `json:"servedMs,omitempty"`
	// MostActive is the most users active at once as they see it,
	// PeakActiveCounter the largest "active" admin counter (run).
	MostActive        int64 `json:"mostActive"`
	PeakActiveCounter int64 `json:"peakActiveCounter,omitempty"`
	// SessionsEnded counts the sessions the site ended and EndErrors its
	// failed ends; Expired the users who read EXPIRED while polling and
	// MissingPasses the ADMITTED answers without a pass (run).
	SessionsEnded int64 `json:"sessionsEnded"`
	EndErrors     int64 `json:"endErrors,omitempty"`
	Expired       int64 `json:"expired,omitempty"`
	MissingPasses int64 `json:"missingPasses,omitempty"`
	// SlotReuseMs runs from a slot's freeing to the admission that took it;
	// NotReused counts the ends after which the admitted counter never
	// moved. MeanSessionMs runs from ADMITTED to the session's end,
	// DurationMs from the start of admission to the last user done; BoundMs
	// is the least time the turnover allows (all run).
	SlotReuseMs   *Percentiles `json:"slotReuseMs,omitempty"`
	NotReused     int64        `json:"notReused,omitempty"`
	MeanSessionMs float64      `json:"meanSessionMs,omitempty"`
	DurationMs    float64      `json:"durationMs,omitempty"`
	BoundMs       float64      `json:"boundMs,omitempty"`
	Ratio         float64      `json:"ratio,omitempty"` // DurationMs / BoundMs
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
	for i, e := range es {
		if i > 0 && e.Place != es[i-1].Place {
			latest = max(latest, es[i-1].EnteredMs) // the last entry of the place before
		}
		if latest != math.MinInt64 {
			worst = max(worst, latest-e.EnteredMs)
		}
	}
	return worst
}

// SeriesPeak is the largest count of a per-second series.
func SeriesPeak(series []int64) int64 { return slices.Max(append([]int64{0}, series...)) }
