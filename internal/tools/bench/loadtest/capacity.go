package loadtest

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/tools/bench"
)

// endSession plays the site's side of u's admission ans: it ends the session after u's session length.
func (r *runner) endSession(ctx context.Context, u *user, ans api.Token) {
	if !ans.ExpiresAt.IsZero() {
		u.windowEnd = ans.ExpiresAt.Sub(r.start)
	}
	if u.missingPass = ans.AdmissionPass == ""; u.missingPass || !r.sleep(ctx, u.session) {
		return
	}
	err := r.retrying(ctx, func() error {
		u.endSent = r.since()
		return r.client.ReleaseSession(ctx, r.cfg.ProgramID, ans.AdmissionPass)
	})
	u.ended, u.endFailed, u.endRecv = err == nil, err != nil && ctx.Err() == nil, r.since()
}

// unmeasuredTail is how long before the last sample an end must be for its slot's reuse to be judged.
const unmeasuredTail = 5 * time.Second

// capacity measures a capped run from its users and the samples; end is the run's end.
func (r *runner) capacity(users []user, end time.Duration) *bench.Capacity {
	c, samples := r.cfg.Crowd, r.samples
	res := &bench.Capacity{MaxActiveUsers: c.MaxActive, NoShowSeconds: c.NoShowSeconds}
	for _, s := range samples {
		res.PeakActiveCounter = max(res.PeakActiveCounter, s.active)
	}
	if n := len(samples); n > 0 {
		res.ServerEnded, res.ServerNoShows = samples[n-1].ended, samples[n-1].noShows
	}
	type event struct {
		at    time.Duration
		delta int64
	}
	var events []event
	var reuse []float64
	var sessions time.Duration
	start := time.Duration(r.admitStart.Load() - 1)
	last := start
	for _, u := range users {
		switch {
		case u.silent:
			res.NoShows++
		case u.expired:
			res.Expired++
		}
		if u.endFailed {
			res.EndErrors++
		}
		if u.missingPass {
			res.MissingPasses++
		}
		if !u.admitted {
			continue
		}
		res.Showed++
		if u.noShow {
			res.NoShowsSeen++
		}
		done := end
		if u.windowEnd > 0 {
			done = min(end, u.windowEnd)
		}
		if u.ended {
			res.SessionsEnded++
			done = u.endRecv
			sessions += u.endSent - u.seenAt
			if d, ok := reuseAfter(samples, u.endRecv); ok {
				reuse = append(reuse, bench.Ms(d))
			} else if d < 0 && samples[len(samples)-1].at-u.endRecv >= unmeasuredTail {
				res.NotReused++
			}
		}
		last = max(last, done)
		events = append(events, event{u.seenAt, 1}, event{done, -1})
	}
	slices.SortFunc(events, func(a, b event) int { // ends first
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.delta, b.delta))
	})
	var active int64
	for _, e := range events {
		active += e.delta
		res.MostActive = max(res.MostActive, active)
	}
	res.SlotReuseMs = new(bench.Summarize(reuse))
	if res.SessionsEnded > 0 {
		res.MeanSessionMs = bench.Ms(sessions) / float64(res.SessionsEnded)
	}
	res.DurationMs = bench.Ms(last - start)
	// The turnover bound is the least time admitting them can take: N / rate, or the slot time they hold
	// shared by the cap's slots.
	bound := (sessions + time.Duration(res.NoShows*c.NoShowSeconds)*time.Second) / time.Duration(c.MaxActive)
	if rate := maxRate(r.cfg.Scenario.Rates); rate > 0 {
		bound = max(bound, time.Duration(float64(res.Showed+res.NoShows)/rate*float64(time.Second)))
	}
	if res.BoundMs = bench.Ms(bound); res.BoundMs > 0 {
		res.Ratio = res.DurationMs / res.BoundMs
	}
	return res
}

// maxRate is the fastest rate of a schedule.
func maxRate(rates bench.Schedule) float64 {
	return slices.MaxFunc(rates, func(a, b bench.RateChange) int { return cmp.Compare(a.Rate, b.Rate) }).Rate
}

// reuseAfter is how long after end the admitted counter next moved: ok is false when nobody waited then,
// or, with a negative duration, when it never moved again.
func reuseAfter(samples []sample, end time.Duration) (time.Duration, bool) {
	i, _ := slices.BinarySearchFunc(samples, end, func(s sample, t time.Duration) int { return int(s.at - t) })
	if i == 0 {
		return 0, false
	}
	base := samples[i-1]
	if base.issued <= base.admitted {
		return 0, false
	}
	for _, s := range samples[i:] {
		if s.admitted > base.admitted {
			return s.at - end, true
		}
	}
	return -1, false
}
