package queue_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
)

// opening is a program opening 10 s after t0 at 10 a second, seen through
// two instances with a program cache, as the service runs on Lambda.
type opening struct {
	clock   *clock.Fake
	a, b    *queue.Service
	opensAt time.Time
	waiting []queue.View
}

func newOpening(t *testing.T, shuffle bool) *opening {
	t.Helper()
	o := &opening{clock: clock.NewFake(t0), opensAt: t0.Add(10 * time.Second)}
	store := memstore.New()
	eta := polling.DefaultETA()
	o.a = queue.NewService(store, eta, queue.WithClock(o.clock), queue.WithProgramCache(time.Second))
	o.b = queue.NewService(store, eta, queue.WithClock(o.clock), queue.WithProgramCache(time.Second))
	rate := 10.0
	if _, _, err := o.a.PutProgram(t.Context(), "sale", queue.Settings{AdmissionRatePerSecond: &rate, OpensAt: &o.opensAt, ShuffleAtOpen: &shuffle}); err != nil {
		t.Fatal(err)
	}
	return o
}

// enter makes n people enter, alternately on each instance, 10 ms apart
// (below the rate of ticket shards: tickets in arrival order, no gaps).
func (o *opening) enter(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		o.clock.Advance(10 * time.Millisecond)
		svc := o.a
		if i%2 == 1 {
			svc = o.b
		}
		v, _, err := svc.Enter(t.Context(), "sale", queue.Entry{})
		if err != nil {
			t.Fatal(err)
		}
		o.waiting = append(o.waiting, v)
	}
}

// TestOpeningInOrder: before its opening a program takes entries and
// admits nobody; its answers say when it opens and estimate the wait from
// then; at the opening admission starts at the rate, in arrival order.
func TestOpeningInOrder(t *testing.T) {
	o := newOpening(t, false)
	o.enter(t, 50)
	last := o.waiting[49]
	want := o.opensAt.Sub(o.clock.Now()) + 5*time.Second // 50 at 10 a second
	if last.Position != 50 || last.EstimatedWait != want || !last.OpensAt.Equal(o.opensAt) || last.Shuffle != nil ||
		last.StatusLine != "Opens at 2026-05-19T10:00:10Z. Admission starts then, in order of arrival." {
		t.Fatalf("answer before the opening: %+v; want position 50, wait %v, opensAt, the status line", last, want)
	}
	if _, err := o.a.Admit(t.Context(), "sale", 5); codeOf(err) != queue.CodeNotOpen {
		t.Errorf("a manual admission that would act before the opening: %v, want NOT_OPEN", err)
	}
	setClock(o.clock, o.opensAt.Add(-time.Millisecond))
	if v, _ := o.b.Poll(t.Context(), "sale", o.waiting[0].TokenID); v.Status != queue.StatusWaiting || v.Position != 1 {
		t.Fatalf("just before the opening: %+v; want the first still waiting", v)
	}
	setClock(o.clock, o.opensAt.Add(time.Second))
	for i, w := range o.waiting[:12] {
		v, _ := o.a.Poll(t.Context(), "sale", w.TokenID)
		if wantAdmitted := i < 10; (v.Status == queue.StatusAdmitted) != wantAdmitted || v.Status == queue.StatusWaiting && (!v.OpensAt.IsZero() || v.StatusLine != "") {
			t.Errorf("ticket %d a second after the opening: %+v", i+1, v)
		}
	}
}

// TestOpeningShuffled: with shuffleAtOpen, the answers before the opening
// carry the commitment and no position nor estimate, and come back in the
// seconds after the opening; at the opening every pre-queue ticket gets
// the place its draw gives, which anyone can check from the revealed seed;
// who entered after the opening queues behind them all, in order.
func TestOpeningShuffled(t *testing.T) {
	o := newOpening(t, true)
	o.enter(t, 200) // 2 s
	first := o.waiting[0]
	if first.Shuffle == nil || first.Shuffle.Commitment == "" || first.Shuffle.Seed != "" || first.Position != 0 || first.EstimatedWait != 0 ||
		!first.OpensAt.Equal(o.opensAt) || first.StatusLine == "" {
		t.Fatalf("answer before a shuffled opening: %+v", first)
	}
	if d := first.RetryAfter; d < 10*time.Second-20*time.Millisecond || d > 10*time.Second+6*time.Second {
		t.Errorf("retry after %v: want it a little after the opening, 10 s ahead", d)
	}
	commitment := first.Shuffle.Commitment
	setClock(o.clock, o.opensAt.Add(time.Millisecond))
	o.enter(t, 20) // after the opening: behind the pre-queue, in order
	setClock(o.clock, o.opensAt.Add(2*time.Second))
	places := map[int64]int{}
	var seed string
	for i, w := range o.waiting {
		svc := o.a
		if i%3 == 0 {
			svc = o.b
		}
		v, err := svc.Poll(t.Context(), "sale", w.TokenID)
		if err != nil {
			t.Fatal(err)
		}
		if i >= 200 {
			if v.Shuffle == nil || v.Shuffle.Place != 0 || v.Ticket != int64(i+1) || v.Position != int64(i+1)-20 || v.StatusLine != "" {
				t.Errorf("entered after the opening, ticket %d: %+v; want position %d (behind the 200)", i+1, v, i+1-20)
			}
			continue
		}
		if v.Status == queue.StatusWaiting {
			sh := v.Shuffle
			if sh == nil || sh.Commitment != commitment || sh.Prequeue != 200 || sh.Place < 21 || v.Position != sh.Place-20 {
				t.Fatalf("pre-queue answer 2 s after the opening at 10 a second: %+v, %+v", v, sh)
			}
			b, _ := hex.DecodeString(sh.Seed)
			if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != commitment {
				t.Fatalf("the revealed seed %s does not match the commitment %s", sh.Seed, commitment)
			}
			if want := queue.PlaceOf(queue.Draw(sh.Seed, "sale", w.TokenID), 200); sh.Place != want {
				t.Fatalf("token %d: place %d, its draw gives %d", i, sh.Place, want)
			}
			seed = sh.Seed
		}
	}
	for i, w := range o.waiting[:200] { // admitted or not as the revealed seed says
		place := queue.PlaceOf(queue.Draw(seed, "sale", w.TokenID), 200)
		places[place]++
		if v, _ := o.a.Poll(t.Context(), "sale", w.TokenID); (v.Status == queue.StatusAdmitted) != (place <= 20) {
			t.Errorf("token %d at place %d: %s, 2 s after the opening at 10 a second", i, place, v.Status)
		}
	}
	if len(places) < 100 {
		t.Errorf("200 people on %d distinct places: want them spread over 1..200", len(places))
	}
}

// TestOpeningSettings: the opening moves only while it is ahead, the
// shuffle is armed only before anyone entered and only with an opening.
func TestOpeningSettings(t *testing.T) {
	ctx := context.Background()
	svc, c := newService(t, queue.WithProgramCache(time.Second))
	opens, soon := t0.Add(time.Hour), t0.Add(time.Second)
	yes, no := true, false
	for _, tc := range []struct {
		name string
		set  queue.Settings
		code string
	}{
		{"shuffle without an opening", queue.Settings{ShuffleAtOpen: &yes}, queue.CodeInvalidSettings},
		{"opening within the change delay", queue.Settings{OpensAt: &soon}, queue.CodeInvalidSettings},
		{"OK", queue.Settings{OpensAt: &opens, ShuffleAtOpen: &yes}, ""},
		{"clearing the opening of a shuffle", queue.Settings{OpensAt: &time.Time{}}, queue.CodeInvalidSettings},
		{"moving it while ahead", queue.Settings{OpensAt: ptr(opens.Add(time.Hour))}, ""},
	} {
		_, _, err := svc.PutProgram(ctx, "p", tc.set)
		if code := codeOf(err); code != tc.code {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.code)
		}
		c.Advance(3 * time.Second) // past the change delay
	}
	if _, _, err := svc.Enter(ctx, "p", queue.Entry{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.PutProgram(ctx, "q", queue.Settings{OpensAt: &opens}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Enter(ctx, "q", queue.Entry{}); err != nil {
		t.Fatal(err)
	}
	c.Advance(3 * time.Second)
	if _, _, err := svc.PutProgram(ctx, "q", queue.Settings{ShuffleAtOpen: &yes}); codeOf(err) != queue.CodeInvalidSettings {
		t.Errorf("arming a shuffle after someone entered: %v, want INVALID_SETTINGS", err)
	}
	setClock(c, opens.Add(time.Hour+time.Second))
	if _, _, err := svc.PutProgram(ctx, "p", queue.Settings{OpensAt: ptr(opens.Add(3 * time.Hour))}); codeOf(err) != queue.CodeNotOpen {
		t.Errorf("moving an opening that has passed: %v, want NOT_OPEN", err)
	}
	if _, err := svc.Poll(ctx, "p", mustEnter(t, svc, "p")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.PutProgram(ctx, "p", queue.Settings{ShuffleAtOpen: &no}); codeOf(err) != queue.CodeNotOpen {
		t.Errorf("disarming a shuffle that happened: %v, want NOT_OPEN", err)
	}
	got, err := svc.Program(ctx, "p")
	if err != nil || !got.PrequeueFixed || got.Prequeue != 1 || got.ShuffleSeed == "" || got.ShuffleCommitment != queue.Commitment(got.ShuffleSeed) {
		t.Errorf("counters after the opening: %+v %v; want the pre-queue of 1 and the seed revealed", got, err)
	}
}

func codeOf(err error) string {
	if e, ok := err.(*queue.Error); ok {
		return e.Code
	}
	return ""
}

func mustEnter(t *testing.T, svc *queue.Service, id string) string {
	t.Helper()
	v, _, err := svc.Enter(t.Context(), id, queue.Entry{})
	if err != nil {
		t.Fatal(err)
	}
	return v.TokenID
}

// TestShuffleUniform: across many seeds, a token's rank in the draw order
// of a pre-queue of 40 is uniform over 1..40 (chi-square over the ranks of
// every token, 39 degrees of freedom), and a run's ranks are not
// correlated with the order of arrival (Spearman's rho averages 0 within
// its standard error).
func TestShuffleUniform(t *testing.T) {
	const n, runs = 40, 2_000
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%022d", rng.Uint64()) // stand-ins for token ids, fixed across runs
	}
	counts := make([][]int, n) // [arrival][rank]
	for i := range counts {
		counts[i] = make([]int, n)
	}
	var rhoSum float64
	for run := range runs {
		seed := fmt.Sprintf("%064x", run*7919+1)
		type drawn struct {
			arrival int
			draw    uint64
		}
		ds := make([]drawn, n)
		for i, id := range ids {
			ds[i] = drawn{i, queue.Draw(seed, "gala", id)}
		}
		slices.SortFunc(ds, func(a, b drawn) int {
			switch {
			case a.draw < b.draw:
				return -1
			case a.draw > b.draw:
				return 1
			}
			return 0
		})
		var d2 float64
		for rank, d := range ds {
			counts[d.arrival][rank]++
			diff := float64(rank - d.arrival)
			d2 += diff * diff
		}
		rhoSum += 1 - 6*d2/float64(n*(n*n-1))
	}
	// Each arrival's ranks: chi-square with n-1 degrees of freedom; the
	// 0.1 % critical value of 39 is 72.05. Every one of the 40 must pass
	// (a 4 % chance that one of them fails by luck is the test's flakiness
	// at 0.1 % each; the seeds are fixed, so it fails the same way again).
	expected := float64(runs) / n
	for i, row := range counts {
		var chi float64
		for _, c := range row {
			chi += (float64(c) - expected) * (float64(c) - expected) / expected
		}
		if chi > 72.05 {
			t.Errorf("arrival %d: chi-square of its ranks %.1f over 39 degrees of freedom (p < 0.001): not uniform", i, chi)
		}
	}
	// Spearman's rho of independent orders has mean 0 and variance
	// 1/(n-1); its mean over runs, 1/sqrt((n-1)·runs).
	if mean, se := rhoSum/runs, 1/math.Sqrt(float64((n-1)*runs)); math.Abs(mean) > 4*se {
		t.Errorf("mean Spearman rho between arrival and draw order %.4f, more than 4 standard errors (%.4f) from 0", mean, se)
	}
	// The places a pre-queue of n gets are uniform too: PlaceOf maps a
	// uniform draw to 1..n evenly.
	for _, d := range []uint64{0, math.MaxUint64, 1 << 63} {
		if p := queue.PlaceOf(d, n); p < 1 || p > n {
			t.Errorf("PlaceOf(%d, %d) = %d, outside 1..%d", d, n, p, n)
		}
	}
	if p := queue.PlaceOf(1<<63, n); p != n/2+1 {
		t.Errorf("PlaceOf(2⁶³, %d) = %d, want %d", n, p, n/2+1)
	}
}

// setClock moves c forward to at.
func setClock(c *clock.Fake, at time.Time) { c.Advance(at.Sub(c.Now())) }
