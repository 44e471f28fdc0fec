package simulate

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/tools/bench"
)

// TestCapacitySideBySide: the same crowd through a capped program and a
// rate-only one. Under the cap nobody is active beyond it, the no-shows'
// slots come back, each freed slot is taken within a few seconds, and
// serving everyone takes about what the slots' turnover allows; the
// rate-only program goes past the cap and wastes every no-show's
// admission. Both meet the same no-shows and sessions.
func TestCapacitySideBySide(t *testing.T) {
	t.Parallel()
	const users, cap, rate = 400, 20, 20
	for _, tc := range []struct {
		name          string
		noShow        float64
		noShowSeconds int64
		session       bench.Range
	}{
		{"no-shows and sessions", 0.3, 5, bench.Range{Min: 2 * time.Second, Max: 6 * time.Second}},
		{"sessions only", 0, 0, bench.Range{Min: time.Second, Max: 3 * time.Second}},
		{"no-shows, sessions of one length", 0.5, 8, bench.Range{Min: 4 * time.Second, Max: 4 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := Config{
				Scenario: bench.Scenario{Users: users, Arrival: bench.Arrival{Over: 10 * time.Second}, Rates: bench.ConstantRate(rate)},
				Policy:   fixed(500 * time.Millisecond), Prices: bench.DefaultPrices(), Seed: 7, Instances: 4,
				Crowd: bench.Crowd{NoShow: tc.noShow, Session: tc.session},
			}
			capped := base
			capped.Crowd.MaxActive, capped.Crowd.NoShowSeconds = cap, tc.noShowSeconds
			rateOnly, err := Run(base)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Run(capped)
			if err != nil {
				t.Fatal(err)
			}
			rc, oc := *r.Capacity, *rateOnly.Capacity
			noShows := int64(math.Round(tc.noShow * users))

			// The same crowd: its no-shows all counted, everyone else
			// served, every session ended by the site.
			type crowd struct{ NoShows, Served, Ended int64 }
			want := crowd{noShows, users - noShows, users - noShows}
			for name, res := range map[string]bench.Result{"capped": r, "rate only": rateOnly} {
				got := crowd{res.Capacity.NoShows, int64(res.Admitted), res.Capacity.SessionsEnded}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s: crowd (-want +got):\n%s", name, diff)
				}
			}

			// Its capacity records' writes, counted by kind: a sighting for
			// each who showed, an end for each session the site ended, a
			// fold and a mark together; the rate-only program keeps none
			// (or only its no-show records).
			w := r.CapacityWrites
			if w["sighting"] != users-noShows || w["end"] != users-noShows || w["fold"] == 0 || w["fold"] != w["mark"] || r.SessionEnds != users-noShows {
				t.Errorf("capped: capacity writes %v, site ends %d; want %d sightings and ends, as many marks as folds", w, r.SessionEnds, users-noShows)
			}
			if tc.noShowSeconds == 0 && len(rateOnly.CapacityWrites) > 0 {
				t.Errorf("rate only, no no-show handling: capacity writes %v", rateOnly.CapacityWrites)
			}

			if rc.MostActive > cap || rc.MostActive < cap/2 {
				t.Errorf("capped: most active at once %d; want at most the cap %d, and near it", rc.MostActive, cap)
			}
			if oc.MostActive <= cap {
				t.Errorf("rate only: most active at once %d; want past %d (nothing holds it)", oc.MostActive, cap)
			}
			if oc.Wasted != noShows || oc.ServerNoShows != 0 || oc.SlotReuseMs != nil {
				t.Errorf("rate only: wasted %d, found %d, slot reuse %v; want every no-show (%d) wasted, none found, no slots", oc.Wasted, oc.ServerNoShows, oc.SlotReuseMs, noShows)
			}
			// The folds find the no-shows (and the tickets nobody holds)
			// and give their slots back; only those whose time to show was
			// not over at the end can be left, fewer than the cap.
			if rc.ServerNoShows > rc.NoShows+r.Gaps || rc.Wasted >= cap || (noShows > 0 && rc.ServerNoShows == 0) {
				t.Errorf("capped: %d no-shows found of %d (+%d gaps), %d wasted; want all but fewer than %d found", rc.ServerNoShows, rc.NoShows, r.Gaps, rc.Wasted, cap)
			}
			// A slot freed is counted by a fold (every 500 ms) and refilled
			// a change delay (2 s) later, give or take a poll (500 ms).
			if p := rc.SlotReuseMs; p == nil || p.Count == 0 || p.P50 <= 0 || p.P50 > 3500 || p.Max > 6000 {
				t.Errorf("capped: slot reuse %+v; want a median in (0, 3.5 s], at most 6 s", p)
			}
			// Turnover: every showing user holds a slot for its session and
			// a reuse delay, every no-show (and gap) for its time to show,
			// the fold's margin and a reuse delay; cap slots share it.
			mean := (tc.session.Min + tc.session.Max).Seconds() / 2
			noShowHold := float64(tc.noShowSeconds)
			if noShowHold == 0 {
				noShowHold = 600 // the window
			}
			slotSeconds := float64(users-noShows)*(mean+2.5) + float64(noShows+r.Gaps)*(noShowHold+1+2.5)
			expect := max(slotSeconds/cap, float64(users)/rate) * 1000
			if rc.ServedMs < expect/2 || rc.ServedMs > expect*1.5 {
				t.Errorf("capped: everyone who shows served in %.1f s; want about %.1f s (turnover), within -50%%/+50%%", rc.ServedMs/1000, expect/1000)
			}
			if rc.ServedMs < 2*oc.ServedMs {
				t.Errorf("capped: served in %.1f s, rate only in %.1f s; want the cap to take at least twice as long", rc.ServedMs/1000, oc.ServedMs/1000)
			}
			t.Logf("capped: served %.1f s (expected %.1f s), most active %d, found %d of %d (+%d gaps), reuse %+v; rate only: served %.1f s, most active %d",
				rc.ServedMs/1000, expect/1000, rc.MostActive, rc.ServerNoShows, rc.NoShows, r.Gaps, *rc.SlotReuseMs, oc.ServedMs/1000, oc.MostActive)
		})
	}
}

// TestCapacityCrowdBySeed: who is a no-show and how long each session
// lasts follow the seed alone.
func TestCapacityCrowdBySeed(t *testing.T) {
	t.Parallel()
	c := bench.Crowd{NoShow: 0.25, Session: bench.Range{Min: 5 * time.Second, Max: 20 * time.Second}}
	noShow, session := c.Draw(1000, 3)
	noShow2, session2 := c.Draw(1000, 3)
	if diff := cmp.Diff([]any{noShow, session}, []any{noShow2, session2}); diff != "" {
		t.Fatalf("two draws differ (-first +second):\n%s", diff)
	}
	n := 0
	for _, ns := range noShow {
		if ns {
			n++
		}
	}
	if n != 250 || len(session) != 1000 {
		t.Errorf("%d no-shows, %d sessions; want 250, 1000", n, len(session))
	}
	for i, d := range session {
		if d < 5*time.Second || d > 20*time.Second || d%time.Millisecond != 0 {
			t.Fatalf("session %d: %v; want 5 to 20 s in whole ms", i, d)
		}
	}
	if other, _ := c.Draw(1000, 4); cmp.Equal(noShow, other) {
		t.Error("another seed draws the same no-shows")
	}
}

// TestValidateCapacity: crowd settings the program refuses, or a run that could
// not end, are errors naming the flag.
func TestValidateCapacity(t *testing.T) {
	t.Parallel()
	sc := bench.Scenario{Users: 10, Rates: bench.ConstantRate(1)}
	s := bench.Range{Min: time.Second, Max: 2 * time.Second}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "": valid
	}{
		{"cap and sessions", Config{Scenario: sc, Crowd: bench.Crowd{MaxActive: 5, NoShowSeconds: 5, NoShow: 0.3, Session: s}}, ""},
		{"no-shows alone", Config{Scenario: sc, Crowd: bench.Crowd{NoShow: 0.3}}, ""},
		{"cap without sessions, a timeout", Config{Scenario: bench.Scenario{Users: 10, Rates: bench.ConstantRate(1), Timeout: time.Minute}, Crowd: bench.Crowd{MaxActive: 5}}, ""},
		{"negative cap", Config{Scenario: sc, Crowd: bench.Crowd{MaxActive: -1, Session: s}}, "-max-active"},
		{"no-show seconds too short", Config{Scenario: sc, Crowd: bench.Crowd{NoShowSeconds: 4}}, "-no-show-seconds"},
		{"no-show fraction 1", Config{Scenario: sc, Crowd: bench.Crowd{NoShow: 1}}, "-no-show "},
		{"no-show fraction NaN", Config{Scenario: sc, Crowd: bench.Crowd{NoShow: math.NaN()}}, "-no-show "},
		{"session max below min", Config{Scenario: sc, Crowd: bench.Crowd{Session: bench.Range{Min: 2 * time.Second, Max: time.Second}}}, "-session"},
		{"session of zero", Config{Scenario: sc, Crowd: bench.Crowd{MaxActive: 1}}, "-max-active without -session"},
		{"negative session", Config{Scenario: sc, Crowd: bench.Crowd{Session: bench.Range{Min: -time.Second, Max: time.Second}}}, "-session"},
		{"cap without sessions or timeout", Config{Scenario: sc, Crowd: bench.Crowd{MaxActive: 5}}, "-max-active without -session"},
	} {
		tc.cfg.Policy = etaDefault
		err := tc.cfg.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v; want one naming %q", tc.name, err, tc.want)
		}
	}
}
