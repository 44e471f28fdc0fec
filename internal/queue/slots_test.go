package queue_test

import (
	"errors"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/simclock"
)

// followed is a service with a pass signer and a one-second program
// cache, program id made with set, and the tokens of n people who entered
// it; the fake clock drives it.
func followed(t *testing.T, id string, set api.ProgramSettings, n int) (*queue.Service, *simclock.Fake, []string) {
	t.Helper()
	svc, c := newService(t, queue.WithPassSigner(newSigner(t)), queue.WithProgramCache(time.Second))
	if _, _, err := svc.PutProgram(t.Context(), id, set); err != nil {
		t.Fatal(err)
	}
	return svc, c, enterN(t, svc, id, n)
}

// TestCapEndToEnd: a program capped at 3 admits 3; the site ending a
// session lets the next in a few seconds later; someone admitted who
// never fetches their answer is a no-show, reads EXPIRED with no pass,
// and frees their slot; the counters say so.
func TestCapEndToEnd(t *testing.T) {
	ctx := t.Context()
	svc, c, ids := followed(t, "capped", api.ProgramSettings{
		AdmissionRatePerSecond: new(api.Rate(10)), MaxActiveUsers: new(int64(3)), NoShowSeconds: new(int64(5)),
	}, 6)
	poll := func(i int) queue.View {
		t.Helper()
		v, err := svc.Poll(ctx, "capped", ids[i])
		if err != nil {
			t.Fatalf("poll %d: %v", i, err)
		}
		return v
	}
	c.Advance(time.Second)
	var pass string
	for i, want := range []queue.Status{queue.StatusAdmitted, queue.StatusAdmitted, queue.StatusAdmitted, queue.StatusWaiting, queue.StatusWaiting} {
		if v := poll(i); v.Status != want {
			t.Fatalf("token %d at +1s: %s, want %s", i, v.Status, want)
		} else if i == 0 {
			pass = v.AdmissionPass
		}
	}
	if err := svc.ReleaseSession(ctx, "capped", pass); err != nil {
		t.Fatal(err)
	}
	admitted := func() int64 {
		t.Helper()
		p, err := svc.Program(ctx, "capped")
		if err != nil {
			t.Fatal(err)
		}
		return p.Admitted
	}
	// The end is counted by the next fold and frees the slot a change
	// delay (2 s) later: place 4 is admitted within 3 s. Its holder never
	// comes to see; token 4's polls drive the folds.
	var freedAfter time.Duration
	for step := 1; step <= 40 && freedAfter == 0; step++ {
		c.Advance(100 * time.Millisecond)
		poll(4)
		if admitted() == 4 {
			freedAfter = time.Duration(step) * 100 * time.Millisecond
		}
	}
	if freedAfter == 0 || freedAfter > 3*time.Second {
		t.Fatalf("place 4 admitted %v after the end, want within 3 s", freedAfter)
	}
	// Place 4 is a no-show once 5 s (and the margin) have passed since a
	// fold saw it admitted: then token 4 (place 5) gets its slot.
	var noShowAfter time.Duration
	for step := 1; step <= 150 && noShowAfter == 0; step++ {
		c.Advance(100 * time.Millisecond)
		if poll(4).Status == queue.StatusAdmitted {
			noShowAfter = time.Duration(step) * 100 * time.Millisecond
		}
	}
	if noShowAfter < 5*time.Second || noShowAfter > 10*time.Second {
		t.Fatalf("token 4 admitted %v after place 4, want 5 to 10 s (a no-show after 5 s)", noShowAfter)
	}
	if v := poll(3); v.Status != queue.StatusExpired || v.AdmissionPass != "" {
		t.Errorf("the no-show: %s, pass %q; want EXPIRED without a pass", v.Status, v.AdmissionPass)
	}
	counters, err := svc.Program(ctx, "capped")
	if err != nil || !counters.Followed || counters.Ended != 1 || counters.NoShows != 1 || counters.Active != 3 {
		t.Fatalf("counters %+v, %v: want 1 ended, 1 no-show, 3 active", counters, err)
	}
}

// TestNoShowsGivenBack: without a cap, an admission wasted on a no-show
// is given to the next person in line, once.
func TestNoShowsGivenBack(t *testing.T) {
	ctx := t.Context()
	svc, c, ids := followed(t, "given", api.ProgramSettings{
		AdmissionRatePerSecond: new(api.Rate(2)), NoShowSeconds: new(int64(5)),
	}, 60)
	// Everyone polls every 100 ms but the holders of places 1 and 2.
	for range 200 {
		c.Advance(100 * time.Millisecond)
		for _, id := range ids[2:] {
			if _, err := svc.Poll(ctx, "given", id); err != nil {
				t.Fatal(err)
			}
		}
	}
	p, err := svc.Program(ctx, "given")
	if err != nil {
		t.Fatal(err)
	}
	// 20 s at 2/s is 40; the 2 no-shows come back as 2 more, each through
	// a change that restarts the counter from a whole number (a fraction
	// of a person may be lost each time, as with any admin change).
	if p.NoShows != 2 || p.Admitted < 41 || p.Admitted > 42 {
		t.Fatalf("no-shows %d, admitted %d; want 2 and 40 + 2 (give or take the fractions)", p.NoShows, p.Admitted)
	}
	for i, want := range []queue.Status{queue.StatusExpired, queue.StatusExpired, queue.StatusAdmitted} {
		if v, err := svc.Poll(ctx, "given", ids[i]); err != nil || v.Status != want {
			t.Errorf("token %d: %s, %v; want %s", i, v.Status, err, want)
		}
	}
}

// TestCapacityChangesOnceStarted: once anyone is admitted, a cap or
// no-show handling cannot start (those admitted were never followed), a
// cap can only be raised, noShowSeconds is fixed, and under either the
// window can only be raised (the passes out keep their end); before,
// anything goes.
func TestCapacityChangesOnceStarted(t *testing.T) {
	ctx := t.Context()
	svc, c := newService(t)
	put := func(id string, set api.ProgramSettings) error {
		_, _, err := svc.PutProgram(ctx, id, set)
		return err
	}
	for _, id := range []string{"plain", "capped", "shows"} {
		if err := put(id, api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(10))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := put("capped", api.ProgramSettings{MaxActiveUsers: new(int64(5))}); err != nil {
		t.Fatalf("a cap before admission: %v", err)
	}
	if err := put("shows", api.ProgramSettings{NoShowSeconds: new(int64(30))}); err != nil {
		t.Fatalf("no-shows before admission: %v", err)
	}
	for _, id := range []string{"plain", "capped", "shows"} {
		if _, _, err := svc.Enter(ctx, id, queue.Entry{}); err != nil {
			t.Fatal(err)
		}
	}
	c.Advance(time.Second)
	for _, tt := range []struct {
		name, id string
		set      api.ProgramSettings
		refused  bool
	}{
		{"cap after the start", "plain", api.ProgramSettings{MaxActiveUsers: new(int64(5))}, true},
		{"no-shows after the start", "plain", api.ProgramSettings{NoShowSeconds: new(int64(30))}, true},
		{"cap lowered", "capped", api.ProgramSettings{MaxActiveUsers: new(int64(4))}, true},
		{"cap removed", "capped", api.ProgramSettings{MaxActiveUsers: new(int64(0))}, true},
		{"cap raised", "capped", api.ProgramSettings{MaxActiveUsers: new(int64(9))}, false},
		{"no-shows on a capped program", "capped", api.ProgramSettings{NoShowSeconds: new(int64(30))}, true},
		{"no-shows lowered", "shows", api.ProgramSettings{NoShowSeconds: new(int64(5))}, true},
		{"no-shows raised", "shows", api.ProgramSettings{NoShowSeconds: new(int64(3600))}, true},
		{"no-shows removed", "shows", api.ProgramSettings{NoShowSeconds: new(int64(0))}, true},
		{"no-shows unchanged", "shows", api.ProgramSettings{NoShowSeconds: new(int64(30))}, false},
		{"window shortened under a cap", "capped", api.ProgramSettings{AdmissionWindowSeconds: new(int64(60))}, true},
		{"window shortened with no-shows", "shows", api.ProgramSettings{AdmissionWindowSeconds: new(int64(60))}, true},
		{"window raised under a cap", "capped", api.ProgramSettings{AdmissionWindowSeconds: new(int64(1200))}, false},
		{"window shortened, rate only", "plain", api.ProgramSettings{AdmissionWindowSeconds: new(int64(60))}, false},
		{"a cap where no-shows are followed", "shows", api.ProgramSettings{MaxActiveUsers: new(int64(5))}, true},
		{"plain rate", "plain", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(5))}, false},
	} {
		err := put(tt.id, tt.set)
		var qe *queue.Error
		refused := errors.As(err, &qe) && qe.Kind == queue.KindConflict && qe.Code == api.CodeInvalidSettings
		if refused != tt.refused || err != nil && !refused {
			t.Errorf("%s: %v, want refused %v", tt.name, err, tt.refused)
		}
	}
}

// TestPolledInTimeToShow: with no-show handling, a waiting person is told
// to come back by half their time to show after the soonest a change could
// admit them, whatever the policy says: the seed's tiers would have
// someone 1,500th in line, admitted in 1.5 s, come back in 15 s, a no-show.
func TestPolledInTimeToShow(t *testing.T) {
	ctx := t.Context()
	svc, _ := newService(t)
	if _, _, err := svc.PutProgram(ctx, "quick", api.ProgramSettings{
		AdmissionRatePerSecond: new(api.Rate(1000)), MaxActiveUsers: new(int64(5000)), NoShowSeconds: new(int64(5)),
	}); err != nil {
		t.Fatal(err)
	}
	var last queue.View
	for range 1500 {
		v, _, err := svc.Enter(ctx, "quick", queue.Entry{})
		if err != nil {
			t.Fatal(err)
		}
		last = v
	}
	if last.Status != queue.StatusWaiting || last.Position < 1000 {
		t.Fatalf("the last one: %s at %d, want WAITING beyond 1,000", last.Status, last.Position)
	}
	// No cache: a change could admit them at once; time to show 5 s.
	if max := 2500 * time.Millisecond; last.RetryAfter > max {
		t.Errorf("retry after %v, want at most %v", last.RetryAfter, max)
	}
}

// TestCapRaiseKeepsTimeToShow (from an attacker's review): an admin
// raises the cap while someone waits far back; they poll again exactly
// when told, and are admitted, not counted a no-show. The raise takes
// effect with the change delay, and every answer asks for the next poll
// within half the time to show of the soonest any change could admit.
func TestCapRaiseKeepsTimeToShow(t *testing.T) {
	ctx := t.Context()
	svc, c, ids := followed(t, "raise", api.ProgramSettings{
		AdmissionRatePerSecond: new(api.Rate(1000)), MaxActiveUsers: new(int64(2)), NoShowSeconds: new(int64(10)),
	}, 1200)
	c.Advance(time.Second)
	for i := range 2 {
		if v, err := svc.Poll(ctx, "raise", ids[i]); err != nil || v.Status != queue.StatusAdmitted {
			t.Fatalf("token %d: %v %v", i, v.Status, err)
		}
	}
	last := len(ids) - 1
	v, err := svc.Poll(ctx, "raise", ids[last])
	if err != nil {
		t.Fatal(err)
	}
	next := c.Now().Add(v.RetryAfter)
	c.Advance(100 * time.Millisecond)
	if _, _, err := svc.PutProgram(ctx, "raise", api.ProgramSettings{MaxActiveUsers: new(int64(100000))}); err != nil {
		t.Fatal(err)
	}
	// Others poll every 250 ms, driving the folds.
	for c.Now().Before(next) {
		c.Advance(250 * time.Millisecond)
		for _, id := range ids[2:40] {
			if _, err := svc.Poll(ctx, "raise", id); err != nil {
				t.Fatal(err)
			}
		}
	}
	if d := next.Sub(c.Now()); d > 0 {
		c.Advance(d)
	}
	v, err = svc.Poll(ctx, "raise", ids[last])
	if err != nil {
		t.Fatal(err)
	}
	if v.Status == queue.StatusExpired {
		t.Errorf("polled exactly as told, yet a no-show")
	}
}

// TestCapRaiseFreesThroughTheFold: a raised cap frees its slots as ends
// would: the next fold counts them, and they take effect a change delay
// later, at the admission rate, so every instance agrees and no answer out
// is surprised (the turnover bound, docs/design.md).
func TestCapRaiseFreesThroughTheFold(t *testing.T) {
	ctx := t.Context()
	svc, c := newService(t, queue.WithProgramCache(time.Second))
	if _, _, err := svc.PutProgram(ctx, "raised", api.ProgramSettings{
		AdmissionRatePerSecond: new(api.Rate(100)), MaxActiveUsers: new(int64(3)),
	}); err != nil {
		t.Fatal(err)
	}
	var last queue.View
	for range 20 {
		v, _, err := svc.Enter(ctx, "raised", queue.Entry{})
		if err != nil {
			t.Fatal(err)
		}
		last = v
	}
	c.Advance(time.Second)
	if _, _, err := svc.PutProgram(ctx, "raised", api.ProgramSettings{MaxActiveUsers: new(int64(10))}); err != nil {
		t.Fatal(err)
	}
	c.Advance(5 * time.Second)
	if p, err := svc.Program(ctx, "raised"); err != nil || p.Admitted != 3 {
		t.Fatalf("before any fold: admitted %d, %v; want 3", p.Admitted, err)
	}
	if _, err := svc.Poll(ctx, "raised", last.TokenID); err != nil { // folds
		t.Fatal(err)
	}
	delay := time.Second + admission.AdminWriteBudget
	for _, tt := range []struct {
		wait time.Duration // since the step before
		want int64
	}{{0, 3}, {delay - time.Millisecond, 3}, {time.Millisecond, 4}, {60 * time.Millisecond, 10}} {
		c.Advance(tt.wait)
		if p, err := svc.Program(ctx, "raised"); err != nil || p.Admitted != tt.want {
			t.Errorf("at +%v after the fold: admitted %d, %v; want %d", c.Now().Sub(t0.Add(6*time.Second)), p.Admitted, err, tt.want)
		}
	}
}

// TestSelfEndSessionKeepsTheCap (from an attacker's review): people who
// end their own session with their own pass, through the public route,
// free no slot before their window ends, so with a cap of 1 no more than
// one unexpired pass is ever handed out.
func TestSelfEndSessionKeepsTheCap(t *testing.T) {
	ctx := t.Context()
	svc, c, ids := followed(t, "cap1", api.ProgramSettings{
		AdmissionRatePerSecond: new(api.Rate(10)), MaxActiveUsers: new(int64(1)),
	}, 5)
	passes := map[int]queue.View{}
	c.Advance(time.Second)
	for round := 0; round < 60; round++ {
		for i, id := range ids {
			if _, ok := passes[i]; ok {
				continue
			}
			v, err := svc.Poll(ctx, "cap1", id)
			if err != nil {
				t.Fatal(err)
			}
			if v.Status == queue.StatusAdmitted {
				passes[i] = v
				// the person themselves calls DELETE .../session with the pass they just got
				if err := svc.EndSession(ctx, "cap1", v.AdmissionPass); err != nil {
					t.Fatal(err)
				}
			}
		}
		c.Advance(250 * time.Millisecond)
	}
	live := 0
	for _, v := range passes {
		if c.Now().Before(v.ExpiresAt) {
			live++
		}
	}
	if live > 1 {
		t.Errorf("cap 1 but %d unexpired passes handed out", live)
	}
}

// TestCeilingHoldsTheCounter: a capped program's counter stops at
// MaxActiveUsers plus the slots freed, whatever its rate.
func TestCeilingHoldsTheCounter(t *testing.T) {
	p := program(1000, 0, 10, false)
	p.MaxActiveUsers = 50
	p.Capacity = capacity.Capacity{Steps: []capacity.Step{{AtMs: pace.UnixMs(t0.Add(20 * time.Second)), Freed: 30, Rate: rate(10)}}}
	for _, tt := range []struct {
		at   time.Duration
		want int64
	}{
		{time.Second, 10},
		{5 * time.Second, 50},  // at the cap
		{19 * time.Second, 50}, // held
		{20 * time.Second, 51}, // the first slot freed at once
		{21 * time.Second, 61}, // then the rest at the rate
		{time.Minute, 80},      // all 30
		{time.Minute + time.Second, 80},
	} {
		if got := p.Serving(t0.Add(tt.at)); got != tt.want {
			t.Errorf("Serving(+%v) = %d, want %d", tt.at, got, tt.want)
		}
		if !p.Admits(tt.want, t0.Add(tt.at)) || p.Admits(tt.want+1, t0.Add(tt.at)) {
			t.Errorf("Admits at +%v disagrees with Serving %d", tt.at, tt.want)
		}
	}
	// An admin's manual admission does not pass the cap either.
	q := p.Rebased(t0.Add(10*time.Second), rate(10), false, 500, 0)
	if got := q.Serving(t0.Add(10 * time.Second)); got != 50 {
		t.Errorf("after admitting 500 more: Serving = %d, want the cap, 50", got)
	}
}

// TestSituationUnderTheCeiling: a place the ceiling holds back is told a
// wait from the ceiling's steps, then from the measured release rate.
func TestSituationUnderTheCeiling(t *testing.T) {
	p := program(1000, 0, 100, false)
	p.MaxActiveUsers = 50
	p.Capacity = capacity.Capacity{
		Steps:       []capacity.Step{{AtMs: pace.UnixMs(t0.Add(10 * time.Second)), Freed: 20, Rate: rate(100)}},
		ReleaseRate: rate(2),
	}
	now := t0.Add(5 * time.Second)
	for _, tt := range []struct {
		place    int64
		wantWait time.Duration
		wantRate float64
	}{
		{40, 0, 100}, // already in
		{60, 5*time.Second + 90*time.Millisecond, 2}, // the 10th freed slot: the first at 10 s, then one each 10 ms
		{70, 5*time.Second + 190*time.Millisecond, 2},
		{80, 5*time.Second + 190*time.Millisecond + 5*time.Second, 2}, // 10 past the steps at 2/s
	} {
		sit := p.Situation(tt.place, now, time.Second)
		if sit.Wait != tt.wantWait || sit.RatePerSecond != tt.wantRate {
			t.Errorf("place %d: wait %v at %v/s, want %v at %v/s", tt.place, sit.Wait, sit.RatePerSecond, tt.wantWait, tt.wantRate)
		}
		if sit.Earliest > sit.Wait && sit.Wait > 0 {
			t.Errorf("place %d: earliest %v after the wait %v", tt.place, sit.Earliest, sit.Wait)
		}
	}
}

// TestEarliestUnderTheCeiling: a place the ceiling holds back is told an
// earliest admission no sooner than the slots could free: steps not yet
// written take effect a notice from now at the soonest, and free at most
// the cap's worth of slots a round.
func TestEarliestUnderTheCeiling(t *testing.T) {
	p := program(1000, 0, 100, false)
	p.MaxActiveUsers = 50
	now := t0.Add(5 * time.Second) // the segments alone admit 500
	for _, tt := range []struct {
		place int64
		want  time.Duration
	}{
		{60, time.Second},      // one round: the notice
		{100, time.Second},     // the cap's worth in that round
		{101, 3 * time.Second}, // a second round: the notice and the write budget
		{170, 5 * time.Second}, // three rounds
	} {
		if sit := p.Situation(tt.place, now, time.Second); sit.Earliest != tt.want {
			t.Errorf("place %d: earliest %v, want %v", tt.place, sit.Earliest, tt.want)
		}
	}
}

// TestHeldEarliestUnderTheBound: under a turnover bound, a place the
// ceiling holds has no Earliest (the policies sleep on the estimate) and a
// HeldEarliest for its time to show: the steps written, a burst of
// BurstWindow's worth of the bound, then the bound; the answer polls by
// half the time to show after it, within AnswerLife.
func TestHeldEarliestUnderTheBound(t *testing.T) {
	p := program(1000, 0, 100, false)
	p.MaxActiveUsers, p.NoShowSeconds = 50, 10
	p.Capacity = capacity.Capacity{
		Steps:       []capacity.Step{{AtMs: pace.UnixMs(t0.Add(10 * time.Second)), Freed: 20, Rate: rate(100)}},
		ReleaseRate: rate(2), BoundRate: rate(4),
	}
	now := t0.Add(5 * time.Second)
	burst := int64(capacity.BurstWindow.Seconds()) * 4
	for _, tt := range []struct {
		place int64
		held  time.Duration
		poll  time.Duration
	}{
		{200, time.Duration(200-50-20-burst) * time.Second / 4, time.Duration(200-50-20-burst)*time.Second/4 + 5*time.Second},
		{1000, time.Duration(1000-50-20-burst) * time.Second / 4, capacity.AnswerLife},
	} {
		sit := p.Situation(tt.place, now, time.Second)
		if sit.Earliest != 0 || sit.HeldEarliest != tt.held || sit.Wait <= sit.HeldEarliest {
			t.Errorf("place %d: earliest %v, held %v, wait %v; want none, %v, and a longer wait", tt.place, sit.Earliest, sit.HeldEarliest, sit.Wait, tt.held)
		}
		if got := p.PollToShow(time.Second, sit.HeldEarliest); got != tt.poll {
			t.Errorf("place %d: poll to show within %v, want %v", tt.place, got, tt.poll)
		}
	}
	p.Capacity.BoundRate = 0 // no bound yet: the rounds, for policies and the time to show alike
	if sit := p.Situation(200, now, time.Second); sit.HeldEarliest != 0 || sit.Earliest == 0 || p.PollToShow(time.Second, sit.HeldEarliest) != 6*time.Second {
		t.Errorf("without a bound: %+v", sit)
	}
}

// TestCachedWhileHeld: a program the ceiling holds may be cached past its
// drain instant (every poll would read it otherwise, while the line waits
// on the cap); one it does not hold may not.
func TestCachedWhileHeld(t *testing.T) {
	p := program(100, 0, 100, false) // drained 1 s after t0
	loaded := t0.Add(2 * time.Second)
	if got := p.CacheableUntil(loaded, time.Second); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("uncapped: cacheable until %v, want the drain instant %v", got, t0.Add(time.Second))
	}
	p.MaxActiveUsers = 50
	if got := p.CacheableUntil(loaded, time.Second); !got.Equal(loaded.Add(time.Second)) {
		t.Errorf("held by the ceiling: cacheable until %v, want a TTL after the read, %v", got, loaded.Add(time.Second))
	}
	p.MaxActiveUsers = 500
	if got := p.CacheableUntil(loaded, time.Second); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("a cap that does not hold: cacheable until %v, want the drain instant", got)
	}
}

// foldRig is a capped program in a memstore, folded by hand.
type foldRig struct {
	t     *testing.T
	store *memstore.Store
	id    string
}

func newFoldRig(t *testing.T, p admission.Program) foldRig {
	s := memstore.New()
	if err := s.CreateProgram(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	return foldRig{t, s, p.ID}
}

func (r foldRig) program() admission.Program {
	p, err := r.store.GetProgram(r.t.Context(), r.id)
	if err != nil {
		r.t.Fatal(err)
	}
	return p
}

// fold folds the stored program at at, with a 2 s change delay.
func (r foldRig) fold(at time.Duration) capacity.Capacity {
	r.t.Helper()
	c, err := queue.Fold(r.t.Context(), r.store, r.program(), t0.Add(at), 2*time.Second)
	if err != nil {
		r.t.Fatalf("Fold at +%v: %v", at, err)
	}
	return c
}

func (r foldRig) sight(places ...int64) {
	r.t.Helper()
	for _, p := range places {
		if _, err := r.store.Sight(r.t.Context(), r.id, p); err != nil {
			r.t.Fatalf("Sight(%d): %v", p, err)
		}
	}
}

// end records place's end in the index the program's last fold left open.
func (r foldRig) end(place int64) {
	r.t.Helper()
	q := r.program().Capacity.EndsThrough + 1
	if _, err := r.store.EndPlace(r.t.Context(), r.id, place, q); err != nil {
		r.t.Fatal(err)
	}
	if err := r.store.AddEnd(r.t.Context(), r.id, q, int(place%capacity.EndShards), place); err != nil {
		r.t.Fatal(err)
	}
}

// TestFoldFreesSlots: ended sessions and no-shows raise the ceiling, each
// once, after the change delay; a no-show can no longer be sighted.
func TestFoldFreesSlots(t *testing.T) {
	p := program(100, 0, 100, false)
	p.ID, p.MaxActiveUsers, p.NoShowSeconds, p.AdmissionWindow = "capped", 10, 5, time.Minute
	r := newFoldRig(t, p)
	if got := r.program().Serving(t0.Add(time.Second)); got != 10 {
		t.Fatalf("Serving at +1s = %d, want the cap, 10", got)
	}
	r.fold(time.Second) // the first mark: 10 admitted
	r.sight(1, 2, 3, 4, 5, 6, 7)
	r.end(1)
	r.end(2)
	c := r.fold(2 * time.Second)
	if c.Ended != 2 || c.NoShows != 0 {
		t.Fatalf("after the ends: ended %d, no-shows %d; want 2, 0", c.Ended, c.NoShows)
	}
	// Twice the same fold (a request that read the program before): the
	// first wins, nothing is counted twice.
	stale := r.program()
	r.end(3)
	first, err := queue.Fold(t.Context(), r.store, stale, t0.Add(3*time.Second), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := queue.Fold(t.Context(), r.store, stale, t0.Add(3100*time.Millisecond), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := r.program().Capacity; got.Ended != 3 || got.FoldedAtMs != first.FoldedAtMs {
		t.Fatalf("after two folds from one read: ended %d, folded at %d; want 3, %d", got.Ended, got.FoldedAtMs, first.FoldedAtMs)
	}
	for _, tt := range []struct {
		at   time.Duration
		want int64
	}{
		{4999 * time.Millisecond, 12}, // the first 2 freed at +4 s (fold at +2 s, δ 2 s)
		{5010 * time.Millisecond, 13}, // the third from +5 s, at the rate
	} {
		if got := r.program().Serving(t0.Add(tt.at)); got != tt.want {
			t.Errorf("Serving at +%v = %d, want %d", tt.at, got, tt.want)
		}
	}
	// Places 8, 9, 10 never showed: 5 s after the +1 s mark (and the
	// margin) they are sealed, and counted once.
	c = r.fold(7100 * time.Millisecond)
	if c.NoShows != 3 || c.NoShowThrough != 10 {
		t.Fatalf("no-shows %d through %d, want 3 through 10", c.NoShows, c.NoShowThrough)
	}
	if _, err := r.store.Sight(t.Context(), r.id, 9); !errors.Is(err, capacity.ErrSealed) {
		t.Errorf("a no-show's late sighting: %v, want ErrSealed", err)
	}
	c = r.fold(8200 * time.Millisecond)
	if c.NoShows != 3 || c.Ended != 3 {
		t.Errorf("a later fold counted again: no-shows %d, ended %d", c.NoShows, c.Ended)
	}
	if got := r.program().Serving(t0.Add(10 * time.Second)); got != 16 {
		t.Errorf("Serving at +10s = %d, want 10 + 3 ended + 3 no-shows", got)
	}
}

// TestFoldExpiresWindows: a group whose windows are all over frees the
// slots of those who showed and did not end.
func TestFoldExpiresWindows(t *testing.T) {
	const maxActive = capacity.GroupSize + 10
	p := program(1000, 0, 1000, false)
	p.ID, p.MaxActiveUsers, p.NoShowSeconds, p.AdmissionWindow = "windows", maxActive, 5, time.Minute
	r := newFoldRig(t, p)
	r.fold(time.Second) // mark: cap admitted
	for place := int64(1); place <= capacity.GroupSize; place++ {
		if place%4 != 0 { // a quarter never shows
			r.sight(place)
		}
	}
	r.end(1)
	c := r.fold(7 * time.Second) // seals the first group, and the 10 of the next, unseen
	if c.NoShows != capacity.GroupSize/4+10 || c.Ended != 1 {
		t.Fatalf("no-shows %d, ended %d; want %d, 1", c.NoShows, c.Ended, capacity.GroupSize/4+10)
	}
	c = r.fold(7*time.Second + time.Minute) // the window is over, not the margin
	if c.Expired != 0 {
		t.Fatalf("expired %d before the margin", c.Expired)
	}
	c = r.fold(7*time.Second + 2*time.Minute + time.Millisecond)
	if want := int64(capacity.GroupSize*3/4 - 1); c.Expired != want || c.ExpiredThrough != maxActive {
		t.Fatalf("expired %d through place %d, want %d through %d", c.Expired, c.ExpiredThrough, want, maxActive)
	}
	if _, err := r.store.EndPlace(t.Context(), r.id, 2, c.EndsThrough+1); !errors.Is(err, capacity.ErrSealed) {
		t.Errorf("an end after the expiry: %v, want ErrSealed", err)
	}
	c = r.fold(7*time.Second + 3*time.Minute)
	if c.Expired != capacity.GroupSize*3/4-1 {
		t.Errorf("a later fold expired again: %d", c.Expired)
	}
}
