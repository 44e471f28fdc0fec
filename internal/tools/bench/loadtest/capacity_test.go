package loadtest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tools/bench"
	"github.com/google/go-cmp/cmp"
)

// newSigner signs passes with a fresh local key, as cmd/local does.
func newSigner(t *testing.T) queue.PassSigner {
	t.Helper()
	key, err := admissionpass.GenerateLocalKey()
	if err != nil {
		t.Fatal(err)
	}
	iss, err := admissionpass.NewIssuer("http://127.0.0.1", key)
	if err != nil {
		t.Fatal(err)
	}
	return app.Signer(iss)
}

// TestRunCapacity plays issue 19's crowd on a small cap: every user either
// comes (and the site ends their session) or stops polling before their
// admission; never more than the cap active at once, by the users' count
// or the server's; every freed slot reused while people wait; and the
// counters agree with the crowd.
func TestRunCapacity(t *testing.T) {
	t.Parallel()
	vc := newVClock()
	srv := newServer(t, serverOptions{capacity: true, tickets: withTicket, clock: vc})
	capy := &Capacity{MaxActive: 6, NoShowSeconds: 5, NoShow: 0.3, SessionMin: time.Second, SessionMax: 2 * time.Second}
	sc := bench.Scenario{Users: 20, Arrival: bench.Arrival{Over: 2 * time.Second}, Rates: bench.ConstantRate(10), Timeout: virtualTimeout}
	// The users and the counter sampling (every 100 ms) play on a clock
	// that moves only when all of them wait.
	track := newDriver(vc, sc.Users, 1)
	r, err := Run(hangGuard(t), Config{BaseURL: srv.URL, AdminToken: secret, ProgramID: "capped", Scenario: sc, Seed: 5, Capacity: capy, Clock: vc, trackUser: track})
	if err != nil {
		t.Fatal(err)
	}
	k := r.CapacityRun
	if k == nil {
		t.Fatal("no capacity result")
	}
	t.Logf("capacity %+v; routes %v", *k, r.ByRoute)
	if r.Errors != 0 || r.AdminErrors != 0 || r.Entered != sc.Users {
		t.Fatalf("errors %d, admin errors %d, entered %d/%d; routes %v", r.Errors, r.AdminErrors, r.Entered, sc.Users, r.ByRoute)
	}
	// Every user served: came and ended their session, or never came.
	if k.Showed+k.NoShows != sc.Users || k.SessionsEnded != k.Showed || k.NoShows != 6-k.NoShowsSeen || k.Expired != 0 || k.MissingPasses != 0 || k.EndErrors != 0 {
		t.Errorf("showed %d, no-shows %d (seen anyway %d), ended %d, expired %d, missing passes %d, end errors %d; want %d in all, 6 no-shows, every session ended",
			k.Showed, k.NoShows, k.NoShowsSeen, k.SessionsEnded, k.Expired, k.MissingPasses, k.EndErrors, sc.Users)
	}
	if k.PeakActiveUsers > capy.MaxActive || k.PeakActiveCounter > capy.MaxActive {
		t.Errorf("peak active: users' view %d, counter %d; the cap is %d", k.PeakActiveUsers, k.PeakActiveCounter, capy.MaxActive)
	}
	if k.PeakActiveUsers < 2 {
		t.Errorf("peak active %d: the cap was never approached", k.PeakActiveUsers)
	}
	// A slot freed is refilled a fold and a change delay (2 s) later, on
	// the run's clock.
	if k.NotReused != 0 || k.ReuseMs.Count == 0 || k.ReuseMs.Max > 10_000 {
		t.Errorf("reuse %+v, not reused %d; want every slot reused within 10 s", k.ReuseMs, k.NotReused)
	}
	if k.ServerEnded > int64(k.SessionsEnded) || k.ServerNoShows > int64(k.NoShows) {
		t.Errorf("the server counted %d ended sessions and %d no-shows, the users %d and %d", k.ServerEnded, k.ServerNoShows, k.SessionsEnded, k.NoShows)
	}
	if k.Ratio < 1 || k.BoundMs <= 0 {
		t.Errorf("duration %.0f ms against the bound %.0f ms: ratio %.2f, want ≥ 1", k.DurationMs, k.BoundMs, k.Ratio)
	}
	checkTotals(t, r)
}

// TestRunAtAdmission: in the admission mode each user of a burst polls
// once its ticket is due, not while the queue is paused, so that its polls
// are first sightings; every first ADMITTED answer's pass reaches OnPass,
// once a user, and the seen series counts them.
func TestRunAtAdmission(t *testing.T) {
	t.Parallel()
	vc := newVClock()
	after, admitting := onRateApplied(nil)
	// The clock moves once the rate is applied and every user has asked
	// for its first wait (so that each asked from the start of admission).
	var mu0 sync.Mutex
	asked := 0
	allAsked := make(chan struct{})
	polling := vc.after(admitting)
	vc.onSleep = func(ctx context.Context, w vwait) error {
		if w.d <= 0 {
			return nil
		}
		mu0.Lock()
		if asked++; asked == 200 {
			close(allAsked)
		}
		mu0.Unlock()
		select {
		case <-allAsked:
		case <-ctx.Done():
			return ctx.Err()
		}
		return polling(ctx, w)
	}
	srv := newServer(t, serverOptions{tickets: withTicket, capacity: true, clock: vc, after: after})
	sc := bench.Scenario{Users: 200, Rates: bench.ConstantRate(400), Timeout: virtualTimeout}
	var mu sync.Mutex
	passes := map[string]int{}
	r, err := Run(hangGuard(t), Config{BaseURL: srv.URL, AdminToken: secret, ProgramID: "due", Scenario: sc, Clock: vc,
		Poll: Poll{AtAdmission: true}, CacheTTL: 2 * time.Second, OnPass: func(p string) {
			mu.Lock()
			defer mu.Unlock()
			passes[p]++
		}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors != 0 || r.Admitted != sc.Users || r.Passes != int64(sc.Users) || len(passes) != sc.Users {
		t.Fatalf("errors %d, admitted %d, passes %d (%d distinct to OnPass); want 0, %d, %d, %d; routes %v",
			r.Errors, r.Admitted, r.Passes, len(passes), sc.Users, sc.Users, sc.Users, r.ByRoute)
	}
	var seen int64
	for _, n := range r.SeenSeries {
		seen += n
	}
	if seen != int64(sc.Users) || r.SeenPerSecondPeak < 1 || r.ErrorCodes != nil {
		t.Errorf("seen series %v (peak %d), error codes %v; want the %d admitted, no error", r.SeenSeries, r.SeenPerSecondPeak, r.ErrorCodes, sc.Users)
	}
	// One poll each, when it is due: its ticket's predicted admission plus
	// DueMargin, from the start of admission; nobody polls the paused
	// queue on the tiers' schedule.
	if r.Polls != int64(sc.Users) {
		t.Errorf("%d polls for %d users, want one each", r.Polls, sc.Users)
	}
	plan := bench.AdmissionTimes(sc, 2*time.Second, true)
	var want, got []time.Duration
	for k := 1; k <= sc.Users; k++ {
		want = append(want, plan[k]+DueMargin)
	}
	for _, ds := range vc.byUser() {
		got = append(got, ds...)
	}
	slices.Sort(want)
	slices.Sort(got)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("the users' waits (-want +got):\n%s", d)
	}
	checkTotals(t, r)
}
