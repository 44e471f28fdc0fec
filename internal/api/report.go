package api

import "time"

// ReportChange is an admin change, shown on the time axis.
type ReportChange struct {
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	Fields string    `json:"fields,omitempty"` // what it set, as JSON
}

// Report is a program's report, as the admin API answers it.
type Report struct {
	ProgramID   string    `json:"programId"`
	DisplayName string    `json:"displayName,omitempty"`
	MadeAt      time.Time `json:"madeAt"`
	// CreatedAt is the program's: a namesake made after a deletion has its own.
	CreatedAt time.Time `json:"createdAt"`
	// Final: made after the program closed and settled; it no longer changes.
	Final bool `json:"final"`
	// From and To bound the series: the first arrival's minute to the last event's.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`

	People    ReportPeople      `json:"people"`
	Waits     ReportWaits       `json:"waits"`
	Abandoned ReportAbandonment `json:"abandoned"`
	Estimates ReportAccuracy    `json:"estimates"`
	Requests  ReportRequests    `json:"requests"`
	// Minutes is the per-minute series (rows of StepMinutes minutes each,
	// so that a long sale keeps at most 1,440).
	StepMinutes int            `json:"stepMinutes"`
	Minutes     []ReportRow    `json:"minutes"`
	Changes     []ReportChange `json:"changes"`
	// ItemsRead is what the pass read: the store's items it scanned.
	ItemsRead int64 `json:"itemsRead"`
}

// ReportPeople are the program's people by what became of them. Arrivals =
// Admitted + Left + Revoked (unadmitted) + NoShows + Waiting.
type ReportPeople struct {
	Arrivals int64 `json:"arrivals"`
	Admitted int64 `json:"admitted"` // the admission was seen (a pass fetched)
	Ended    int64 `json:"ended"`    // of the admitted, sessions ended early
	Left     int64 `json:"left"`     // left while waiting
	Revoked  int64 `json:"revoked"`  // revoked by an admin before admission
	// NoShows were never seen at their turn: admissions that went unused.
	NoShows  int64 `json:"noShows"`
	Waiting  int64 `json:"waiting"`  // still waiting for their turn
	Accounts int64 `json:"accounts"` // places held by a site's account
	// Of the instances' tallies: enters that solved a proof of work, enters
	// refused for a missing or wrong one, and bypass passes issued.
	ChallengesSolved int64 `json:"challengesSolved"`
	ChallengesFailed int64 `json:"challengesFailed"`
	BypassPasses     int64 `json:"bypassPasses"`
}

// ReportWaits are the waits of the admitted, from entering to the admission's
// first sighting, in milliseconds.
type ReportWaits struct {
	P50Ms  int64          `json:"p50Ms"`
	P90Ms  int64          `json:"p90Ms"`
	P99Ms  int64          `json:"p99Ms"`
	MaxMs  int64          `json:"maxMs"`
	MeanMs int64          `json:"meanMs"`
	Bins   []ReportBucket `json:"bins"` // how many waited up to each bound
}

// ReportBucket is a count of people up to a bound (inclusive; 0: no bound).
type ReportBucket struct {
	Label string `json:"label"`
	UpTo  int64  `json:"upTo"`
	Count int64  `json:"count"`
}

// ReportAbandonment counts those who gave up, by where they stood.
type ReportAbandonment struct {
	// ByPosition: the position at leaving (Left) or at entering (NoShows:
	// their last poll is not recorded), and Reached, those who ever stood
	// in the bucket (entered at or beyond its start).
	ByPosition []ReportGave `json:"byPosition"`
	// ByEstimate: the same by the estimated wait shown.
	ByEstimate []ReportGave `json:"byEstimate"`
}

// ReportGave is one bucket of ReportAbandonment.
type ReportGave struct {
	Label   string `json:"label"`
	From    int64  `json:"from"` // positions, or estimates in ms
	UpTo    int64  `json:"upTo"` // 0: no bound
	Reached int64  `json:"reached"`
	Left    int64  `json:"left"`
	NoShows int64  `json:"noShows"`
}

// ReportAccuracy compares the estimates shown with the waits that followed.
type ReportAccuracy struct {
	AtEntry ReportEstimate `json:"atEntry"`
	Halfway ReportEstimate `json:"halfway"`
}

// ReportEstimate is how one kind of estimate fared over the admitted: the error
// is (estimate − actual) / actual; positive: the estimate was too long.
type ReportEstimate struct {
	People         int64 `json:"people"`
	MedianEstMs    int64 `json:"medianEstimateMs"`
	MedianActualMs int64 `json:"medianActualMs"`
	MedianErrorPct int64 `json:"medianErrorPct"`
	P90AbsErrorPct int64 `json:"p90AbsErrorPct"`
	Within20       int64 `json:"within20"` // people whose estimate was within ±20 %
}

// ReportRequests is what the people asked of the service, from the tallies.
type ReportRequests struct {
	Total         int64     `json:"total"`
	Polls         int64     `json:"polls"`
	PerPerson     float64   `json:"perPerson"`
	PeakPerSecond int64     `json:"peakPerSecond"`
	PeakAt        time.Time `json:"peakAt"`
}

// ReportRow is one row of the series.
type ReportRow struct {
	At       time.Time `json:"at"`
	Arrivals int64     `json:"arrivals"`
	Admitted int64     `json:"admitted"`
	Left     int64     `json:"left"`
	// Waiting is how many were waiting at the row's end.
	Waiting       int64 `json:"waiting"`
	Requests      int64 `json:"requests"`
	PeakPerSecond int64 `json:"peakPerSecond"`
}
