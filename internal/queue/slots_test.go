package queue_test

import (
	"errors"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/queue"
)

// TestCapEndToEnd: a program capped at 3 admits 3; the site ending a
// session lets the next in a few seconds later; someone admitted who
// never fetches their answer is a no-show, reads EXPIRED with no pass,
// and frees their slot; the counters say so.
func TestCapEndToEnd(t *testing.T) {
	ctx := t.Context()
	svc, c := newService(t, queue.WithPassSigner(newSigner(t)), queue.WithProgramCache(time.Second))
	if _, _, err := svc.PutProgram(ctx, "capped", api.ProgramSettings{
		AdmissionRatePerSecond: new(api.Rate(10)), MaxActiveUsers: new(int64(3)), NoShowSeconds: new(int64(5)),
	}); err != nil {
		t.Fatal(err)
	}
	ids := enterN(t, svc, "capped", 6)
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
	svc, c := newService(t, queue.WithPassSigner(newSigner(t)), queue.WithProgramCache(time.Second))
	if _, _, err := svc.PutProgram(ctx, "given", api.ProgramSettings{
		AdmissionRatePerSecond: new(api.Rate(2)), NoShowSeconds: new(int64(5)),
	}); err != nil {
		t.Fatal(err)
	}
	ids := enterN(t, svc, "given", 60)
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
// no-show handling cannot start (those admitted were never followed) and
// a cap can only be raised; before, anything goes.
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
		{"no-shows on a capped program", "capped", api.ProgramSettings{NoShowSeconds: new(int64(30))}, false},
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
	svc, c := newService(t, queue.WithPassSigner(newSigner(t)), queue.WithProgramCache(time.Second))
	if _, _, err := svc.PutProgram(ctx, "raise", api.ProgramSettings{
		AdmissionRatePerSecond: new(api.Rate(1000)), MaxActiveUsers: new(int64(2)), NoShowSeconds: new(int64(10)),
	}); err != nil {
		t.Fatal(err)
	}
	ids := enterN(t, svc, "raise", 1200)
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

// TestCapRaiseTakesEffectWithTheChange: a raised cap lets more in a change
// delay after it is made, as a raised rate does, so every instance agrees.
func TestCapRaiseTakesEffectWithTheChange(t *testing.T) {
	ctx := t.Context()
	svc, c := newService(t, queue.WithProgramCache(time.Second))
	if _, _, err := svc.PutProgram(ctx, "raised", api.ProgramSettings{
		AdmissionRatePerSecond: new(api.Rate(100)), MaxActiveUsers: new(int64(3)),
	}); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if _, _, err := svc.Enter(ctx, "raised", queue.Entry{}); err != nil {
			t.Fatal(err)
		}
	}
	c.Advance(time.Second)
	if _, _, err := svc.PutProgram(ctx, "raised", api.ProgramSettings{MaxActiveUsers: new(int64(10))}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		wait time.Duration // since the step before
		want int64
	}{{0, 3}, {1999 * time.Millisecond, 3}, {time.Millisecond, 10}} {
		c.Advance(tt.wait)
		if p, err := svc.Program(ctx, "raised"); err != nil || p.Admitted != tt.want {
			t.Errorf("at +%v after the raise: admitted %d, %v; want %d", c.Now().Sub(t0.Add(time.Second)), p.Admitted, err, tt.want)
		}
	}
}

// TestSelfEndSessionKeepsTheCap (from an attacker's review): people who
// end their own session with their own pass, through the public route,
// free no slot before their window ends, so with a cap of 1 no more than
// one unexpired pass is ever handed out.
func TestSelfEndSessionKeepsTheCap(t *testing.T) {
	ctx := t.Context()
	svc, c := newService(t, queue.WithPassSigner(newSigner(t)), queue.WithProgramCache(time.Second))
	if _, _, err := svc.PutProgram(ctx, "cap1", api.ProgramSettings{
		AdmissionRatePerSecond: new(api.Rate(10)), MaxActiveUsers: new(int64(1)),
	}); err != nil {
		t.Fatal(err)
	}
	ids := enterN(t, svc, "cap1", 5)
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
