package bench

import "strconv"

// CapacityRun is what a run on a capped program measured (issue 19):
// the crowd's no-shows and sessions, the most people active at once, how
// fast freed slots were reused, and the run's length against the bound
// its turnover sets.
type CapacityRun struct {
	// MaxActiveUsers, NoShowSeconds: the program's settings; NoShow, the
	// fraction of users drawn to never fetch their admission; sessions
	// last SessionMinMs to SessionMaxMs.
	MaxActiveUsers int64   `json:"maxActiveUsers"`
	NoShowSeconds  int64   `json:"noShowSeconds,omitempty"`
	NoShow         float64 `json:"noShow"`
	SessionMinMs   float64 `json:"sessionMinMs"`
	SessionMaxMs   float64 `json:"sessionMaxMs"`

	// Showed counts users who saw ADMITTED; NoShows those who stopped
	// polling before their admission; NoShowsSeen the drawn no-shows who
	// saw ADMITTED anyway (they count among Showed).
	Showed      int `json:"showed"`
	NoShows     int `json:"noShows"`
	NoShowsSeen int `json:"noShowsSeen,omitempty"`
	// SessionsEnded counts the sessions ended with the pass (204);
	// EndErrors the ends that failed; Expired the users who read EXPIRED
	// while still polling (counted a no-show although they came).
	SessionsEnded int `json:"sessionsEnded"`
	EndErrors     int `json:"endErrors,omitempty"`
	Expired       int `json:"expired,omitempty"`
	// MissingPasses counts ADMITTED answers without a pass.
	MissingPasses int `json:"missingPasses,omitempty"`

	// PeakActiveUsers is the most users active at once by their own
	// account: from seeing ADMITTED to the answer of their session's end
	// (or their window's end, or the run's).
	PeakActiveUsers int64 `json:"peakActiveUsers"`
	// PeakActiveCounter is the largest "active" the admin counters showed.
	PeakActiveCounter int64 `json:"peakActiveCounter"`
	// ServerEnded and ServerNoShows are the admin counters at the end.
	ServerEnded   int64 `json:"serverEnded"`
	ServerNoShows int64 `json:"serverNoShows"`

	// ReuseMs is, per session end while people waited, the time from the
	// end's answer to the admitted counter's next move (sampled);
	// NotReused counts the ends after which it never moved.
	ReuseMs   Percentiles `json:"reuseMs"`
	NotReused int         `json:"notReused,omitempty"`

	// MeanSessionMs is the showed users' mean time from ADMITTED to their
	// end; DurationMs runs from the start of admission to the last user
	// done; BoundMs is the least time the turnover allows (see
	// docs/benchmarks.md), and Ratio is DurationMs / BoundMs.
	MeanSessionMs float64 `json:"meanSessionMs"`
	DurationMs    float64 `json:"durationMs"`
	BoundMs       float64 `json:"boundMs"`
	Ratio         float64 `json:"ratio"`
}

// capacityRunRows are the table rows of a capped run.
func capacityRunRows() []row {
	c := func(f func(*CapacityRun) float64) func(Result) (float64, bool) {
		return func(r Result) (float64, bool) {
			if r.CapacityRun == nil {
				return 0, false
			}
			return f(r.CapacityRun), true
		}
	}
	ratio := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	return []row{
		{"cap (maxActiveUsers)", c(func(k *CapacityRun) float64 { return float64(k.MaxActiveUsers) }), formatInteger, false},
		{"showed (saw ADMITTED)", c(func(k *CapacityRun) float64 { return float64(k.Showed) }), formatInteger, false},
		{"no-shows (stopped polling)", c(func(k *CapacityRun) float64 { return float64(k.NoShows) }), formatInteger, false},
		{"sessions ended (204)", c(func(k *CapacityRun) float64 { return float64(k.SessionsEnded) }), formatInteger, false},
		{"read EXPIRED while polling", c(func(k *CapacityRun) float64 { return float64(k.Expired) }), formatInteger, false},
		{"peak active, users' view", c(func(k *CapacityRun) float64 { return float64(k.PeakActiveUsers) }), formatInteger, false},
		{"peak active, admin counter", c(func(k *CapacityRun) float64 { return float64(k.PeakActiveCounter) }), formatInteger, false},
		{"ended, admin counter", c(func(k *CapacityRun) float64 { return float64(k.ServerEnded) }), formatInteger, false},
		{"no-shows, admin counter", c(func(k *CapacityRun) float64 { return float64(k.ServerNoShows) }), formatInteger, false},
		{"slot reuse p50", c(func(k *CapacityRun) float64 { return k.ReuseMs.P50 }), formatSeconds, false},
		{"slot reuse p99", c(func(k *CapacityRun) float64 { return k.ReuseMs.P99 }), formatSeconds, false},
		{"slot reuse max", c(func(k *CapacityRun) float64 { return k.ReuseMs.Max }), formatSeconds, false},
		{"ends not followed by a move", c(func(k *CapacityRun) float64 { return float64(k.NotReused) }), formatInteger, false},
		{"mean session", c(func(k *CapacityRun) float64 { return k.MeanSessionMs }), formatSeconds, false},
		{"duration (admission start to last done)", c(func(k *CapacityRun) float64 { return k.DurationMs }), formatSeconds, false},
		{"turnover bound", c(func(k *CapacityRun) float64 { return k.BoundMs }), formatSeconds, false},
		{"duration / bound", c(func(k *CapacityRun) float64 { return k.Ratio }), ratio, false},
	}
}
