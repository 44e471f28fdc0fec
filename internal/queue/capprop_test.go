package queue_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/passverify"
)

// person is one simulated holder of a token in TestCapNeverExceeded.
type person struct {
	id       string
	showsUp  bool          // polls; else a no-show, who never comes back to see
	session  time.Duration // how long the site keeps them before it ends the session (0: to the window's end)
	ownLeave bool          // leaves by their own DELETE once admitted, not through the site
	pass     string
	from     time.Time // first seen ADMITTED
	until    time.Time // when their slot may be reused: the site's end, or the window's
	nextPoll time.Time
	done     bool
}

// pollIfDue polls pp's token in program "p" if its next poll is due at
// now, keeping the next one a WAITING answer asks for; false if not due.
func (pp *person) pollIfDue(t *testing.T, svc *queue.Service, now time.Time) (queue.View, bool) {
	t.Helper()
	if now.Before(pp.nextPoll) {
		return queue.View{}, false
	}
	v, err := svc.Poll(t.Context(), "p", pp.id)
	if err != nil {
		t.Fatal(err)
	}
	if v.Status == queue.StatusWaiting {
		pp.nextPoll = now.Add(v.RetryAfter)
	}
	return v, true
}

// TestCapNeverExceeded is a property test: with random caps, rates, crowds,
// no-shows, sessions ended by the site, people who leave on their own,
// bypass passes issued by an admin and the admin's random changes of the
// cap, the window, noShowSeconds and the rate (taken or refused), the
// people holding a live admission or a live bypass pass (to its exp plus
// the verifiers' leeway) never outnumber the cap, no no-show ever gets a
// pass, nobody who polls as told is counted one, and everyone is served
// or counted a no-show.
func TestCapNeverExceeded(t *testing.T) {
	for seed := range seeds(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 19))
			capacity := 1 + rng.Int64N(6)
			ctx := t.Context()
			svc, c := newService(t, queue.WithPassSigner(newSigner(t)), queue.WithProgramCache(time.Second))
			noShow, window := int64(5+rng.IntN(5)), int64(60)
			if seed%2 == 1 { // the admin changes settings: room to shorten both
				noShow, window = int64(30+rng.IntN(60)), int64(180+rng.IntN(120))
			}
			if _, _, err := svc.PutProgram(ctx, "p", api.ProgramSettings{
				AdmissionRatePerSecond: new(api.Rate(float64(1 + rng.IntN(20)))), MaxActiveUsers: new(capacity),
				NoShowSeconds: new(noShow), AdmissionWindowSeconds: new(window),
			}); err != nil {
				t.Fatal(err)
			}
			crowd := 10 + rng.IntN(30)
			if seed%4 == 0 {
				crowd = 150 + rng.IntN(100) // beyond the first tier: polls 5 s apart
			}
			people := make([]*person, crowd)
			for i := range people {
				v, _, err := svc.Enter(ctx, "p", queue.Entry{})
				if err != nil {
					t.Fatal(err)
				}
				// A no-show never comes back to see.
				people[i] = &person{id: v.TokenID, showsUp: rng.IntN(10) < 7, ownLeave: rng.IntN(10) == 0, nextPoll: c.Now()}
				people[i].done = !people[i].showsUp
				if rng.IntN(4) > 0 {
					people[i].session = time.Duration(1+rng.IntN(20)) * time.Second
				}
			}
			end := c.Now().Add(time.Hour)
			var bypass []time.Time // the ends of the live bypass passes
			issued, changes := 0, 0
			// change is one random admin change; a refusal must be 409 INVALID_SETTINGS.
			change := func() {
				var set api.ProgramSettings
				switch rng.IntN(4) {
				case 0:
					set.MaxActiveUsers = new(capacity - 1 + rng.Int64N(3)) // lowered (refused), kept or raised by one
				case 1:
					set.AdmissionWindowSeconds = new(int64(60 + rng.IntN(240)))
				case 2:
					set.NoShowSeconds = new([]int64{0, 5, 8, 60, 3600}[rng.IntN(5)])
				default:
					set.AdmissionRatePerSecond = new(api.Rate(float64(1 + rng.IntN(20))))
				}
				switch _, _, err := svc.PutProgram(ctx, "p", set); {
				case err == nil:
					changes++
					if set.MaxActiveUsers != nil {
						capacity = *set.MaxActiveUsers // taken: only ever a raise
					}
				case !hasCode(err, api.CodeInvalidSettings):
					t.Fatalf("admin change %+v: %v", set, err)
				}
			}
			for c.Now().Before(end) {
				c.Advance(100 * time.Millisecond)
				now := c.Now()
				active, pending := int64(0), 0
				live := bypass[:0]
				for _, until := range bypass {
					if now.Before(until) {
						live, active = append(live, until), active+1
					}
				}
				bypass = live
				if seed%2 == 1 && rng.IntN(30) == 0 { // about every 3 s
					change()
				}
				if issued == 0 && rng.IntN(2) == 0 || rng.IntN(20) == 0 { // at the start, then about every 2 s
					n := 1 + rng.Int64N(min(capacity, 1000))
					passes, err := svc.IssueBypass(ctx, "p", n, time.Duration(60+rng.IntN(60))*time.Second)
					switch {
					case hasCode(err, api.CodeNoRoom):
					case err != nil:
						t.Fatal(err)
					}
					for _, pass := range passes {
						exp := time.Unix(claimsOfPass(t, pass).Exp, 0)
						bypass, active = append(bypass, exp.Add(passverify.DefaultLeeway)), active+1
						issued++
					}
				}
				for _, pp := range people {
					if pp.done {
						if !pp.from.IsZero() && now.Before(pp.until) {
							active++
						}
						continue
					}
					pending++
					if !pp.from.IsZero() {
						if now.Before(pp.until) {
							active++
						}
						if now.Before(pp.from.Add(pp.session)) {
							continue
						}
						if !now.Before(pp.until) { // the window is over
							pp.done = true
							continue
						}
						if pp.ownLeave {
							if err := svc.Leave(ctx, "p", pp.id); err != nil {
								t.Fatal(err)
							}
						} else if err := svc.ReleaseSession(ctx, "p", pp.pass); err != nil {
							t.Fatal(err)
						} else {
							pp.until = now
						}
						pp.done = true
						continue
					}
					v, due := pp.pollIfDue(t, svc, now)
					if !due {
						continue
					}
					switch v.Status {
					case queue.StatusWaiting:
					case queue.StatusAdmitted:
						if !pp.showsUp {
							t.Fatalf("a no-show was admitted")
						}
						pp.pass, pp.from, pp.until = v.AdmissionPass, now, v.ExpiresAt
						if pp.session == 0 {
							pp.session = pp.until.Sub(now) // to the window's end
						}
						active++
					case queue.StatusExpired:
						if v.AdmissionPass != "" {
							t.Fatalf("an EXPIRED answer carries a pass")
						}
						if pp.from.IsZero() {
							t.Fatalf("at +%v: someone who polled as told was counted a no-show", now.Sub(t0))
						}
						pp.done = true
					default:
						t.Fatalf("status %s", v.Status)
					}
				}
				if active > capacity {
					t.Fatalf("at +%v: %d active, cap %d", now.Sub(t0), active, capacity)
				}
				if pending == 0 {
					break
				}
			}
			if cs, err := svc.Program(ctx, "p"); err == nil && testing.Verbose() {
				t.Logf("counters %+v, %d bypass passes, %d admin changes taken", cs, issued, changes)
			}
			for i, pp := range people {
				if !pp.done {
					t.Errorf("person %d never served nor counted a no-show", i)
				}
			}
		})
	}
}

// TestTurnoverBoundKeepsTimeToShow is a property test of the turnover
// bound (docs/design.md, "Polling under a cap"): a site keeps its
// sessions long, so the measured turnover is low and the people far back
// are told to sleep long, then ends every session at once, again and
// again, while an admin may raise the cap; whoever polls as told is never
// counted a no-show, the cap holds, and everyone is served.
func TestTurnoverBoundKeepsTimeToShow(t *testing.T) {
	for seed := range seeds(16) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 33))
			ctx := t.Context()
			svc, c := newService(t, queue.WithPassSigner(newSigner(t)), queue.WithProgramCache(time.Duration(seed%2)*time.Second),
				queue.WithPolicies(polling.Named(polling.DefaultTiers(), polling.DefaultETA(), polling.DefaultSteady())))
			// Large and small caps, fast and slow rates (a slow one binds
			// before the turnover does), the policies and the cache.
			capacity := []int64{2 + rng.Int64N(15), 10 + rng.Int64N(30)}[seed/2%2]
			rates := []api.Rate{0.34, 0.7, 1.66, 3.3, 50}
			if _, _, err := svc.PutProgram(ctx, "p", api.ProgramSettings{
				AdmissionRatePerSecond: new(rates[rng.IntN(len(rates))]), MaxActiveUsers: new(capacity), NoShowSeconds: new(int64(5 + 5*(seed%2))),
				PollingPolicy: new([]string{polling.NameETA, polling.NameSteady, polling.NameTiers}[seed%3]),
			}); err != nil {
				t.Fatal(err)
			}
			people := make([]*person, 300+rng.IntN(300))
			for i := range people {
				v, _, err := svc.Enter(ctx, "p", queue.Entry{})
				if err != nil {
					t.Fatal(err)
				}
				people[i] = &person{id: v.TokenID, showsUp: true, nextPoll: c.Now(), session: time.Duration(30+rng.IntN(60)) * time.Second}
			}
			longest, bursts, raises := time.Duration(0), 0, 0
			for end := c.Now().Add(3 * time.Hour); c.Now().Before(end); {
				c.Advance(100 * time.Millisecond)
				now := c.Now()
				burst := rng.IntN(200) == 0 // about every 20 s: the site ends every session
				if burst {
					bursts++
				}
				switch rng.IntN(600) { // about every minute each: the admin raises the cap, changes the rate, issues bypass passes
				case 0:
					capacity += 1 + rng.Int64N(20)
					if _, _, err := svc.PutProgram(ctx, "p", api.ProgramSettings{MaxActiveUsers: new(capacity)}); err != nil {
						t.Fatal(err)
					}
					raises++
				case 1:
					if _, _, err := svc.PutProgram(ctx, "p", api.ProgramSettings{AdmissionRatePerSecond: new(rates[rng.IntN(len(rates))])}); err != nil {
						t.Fatal(err)
					}
				case 2:
					if _, err := svc.IssueBypass(ctx, "p", 1+rng.Int64N(2), time.Duration(60+rng.IntN(30))*time.Second); err != nil && !hasCode(err, api.CodeNoRoom) {
						t.Fatal(err)
					}
				}
				active, pending := int64(0), 0
				for _, pp := range people {
					if pp.done {
						continue
					}
					pending++
					if !pp.from.IsZero() {
						if burst || !now.Before(pp.from.Add(pp.session)) {
							if err := svc.ReleaseSession(ctx, "p", pp.pass); err != nil {
								t.Fatal(err)
							}
							pp.done = true
							continue
						}
						active++
						continue
					}
					switch v, due := pp.pollIfDue(t, svc, now); {
					case !due:
					case v.Status == queue.StatusWaiting:
						longest = max(longest, v.RetryAfter)
					case v.Status == queue.StatusAdmitted:
						pp.pass, pp.from = v.AdmissionPass, now
						active++
					default:
						t.Fatalf("at +%v: polled as told, and read %s", now.Sub(t0), v.Status)
					}
				}
				if active > capacity {
					t.Fatalf("at +%v: %d active, cap %d", now.Sub(t0), active, capacity)
				}
				if pending == 0 {
					break
				}
			}
			for i, pp := range people {
				if !pp.done {
					t.Fatalf("person %d never served", i)
				}
			}
			// The scenario the bound is for: long sleeps (but under tiers,
			// by position), and bursts.
			if seed%3 != 2 && longest < 30*time.Second || bursts < 3 {
				t.Fatalf("longest sleep %v, %d bursts: the scenario did not happen", longest, bursts)
			}
			// The admin view shows what the folds measured.
			if cs, err := svc.Program(ctx, "p"); err != nil || cs.Turnover <= 0 || cs.Bound < min(cs.Turnover, cs.Rate) || cs.Spread < 0 {
				t.Errorf("turnover %v/s ± %v, bound %v/s (%v): want what the folds measured", cs.Turnover, cs.Spread, cs.Bound, err)
			}
			t.Logf("cap %d after %d raises, %d people, %d bursts, longest sleep %v, served by +%v", capacity, raises, len(people), bursts, longest, c.Now().Sub(t0))
		})
	}
}
