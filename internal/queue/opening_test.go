package queue_test

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/queuetest"
)

// opening is a program opening 10 s after t0 at 10 a second, seen through
// two instances with a program cache, as the service runs on Lambda.
type opening struct {
	clock   *clock.Fake
	store   *memstore.Store
	a, b    *queue.Service
	opensAt time.Time
	waiting []queue.View
}

func newOpening(t *testing.T, shuffle bool) *opening {
	t.Helper()
	o := &opening{clock: clock.NewFake(t0), opensAt: t0.Add(10 * time.Second)}
	store := memstore.New()
	o.store = store
	eta := polling.DefaultETA()
	key := queue.WithShuffleKey(queuetest.ShuffleKey(t))
	o.a = queue.NewService(store, eta, queue.WithClock(o.clock), queue.WithProgramCache(time.Second), key)
	o.b = queue.NewService(store, eta, queue.WithClock(o.clock), queue.WithProgramCache(time.Second), key)
	rate := 10.0
	if _, _, err := o.a.PutProgram(t.Context(), "sale", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(rate)), OpensAt: new(o.opensAt.Format(time.RFC3339Nano)), ShuffleAtOpen: &shuffle}); err != nil {
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
	if _, err := o.a.Admit(t.Context(), "sale", 5); codeOf(err) != api.CodeNotOpen {
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
// carry the commitment and the key, and no position nor estimate, and come
// back in the seconds after the opening; at the opening every pre-queue
// ticket gets the place the revealed seed gives it, which anyone can check
// with the published key; who entered after the opening queues behind them
// all, in order.
func TestOpeningShuffled(t *testing.T) {
	o := newOpening(t, true)
	o.enter(t, 200) // 2 s
	first := o.waiting[0]
	if first.Shuffle == nil || first.Shuffle.Commitment == "" || first.Shuffle.PublicKey == "" || first.Shuffle.Seed != "" || first.Position != 0 || first.EstimatedWait != 0 ||
		!first.OpensAt.Equal(o.opensAt) || first.StatusLine == "" {
		t.Fatalf("answer before a shuffled opening: %+v", first)
	}
	if d := first.RetryAfter; d < 10*time.Second-20*time.Millisecond || d > 10*time.Second+6*time.Second {
		t.Errorf("retry after %v: want it a little after the opening, 10 s ahead", d)
	}
	commitment := first.Shuffle.Commitment
	pub, err := queue.ParsePublicKey(first.Shuffle.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
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
			if sh == nil || sh.Commitment != commitment || sh.PublicKey != first.Shuffle.PublicKey || sh.Prequeue != 200 || sh.Place < 21 || v.Position != sh.Place-20 {
				t.Fatalf("pre-queue answer 2 s after the opening at 10 a second: %+v, %+v", v, sh)
			}
			if err := queue.VerifySeed(pub, commitment, sh.Seed); err != nil {
				t.Fatal(err)
			}
			if want := queue.PlaceOf(sh.Seed, 200, v.Ticket); sh.Place != want {
				t.Fatalf("token %d: place %d, the seed gives ticket %d place %d", i, sh.Place, v.Ticket, want)
			}
			seed = sh.Seed
		}
	}
	for i, w := range o.waiting[:200] { // admitted or not as the revealed seed says
		place := queue.PlaceOf(seed, 200, w.Ticket)
		places[place]++
		if v, _ := o.a.Poll(t.Context(), "sale", w.TokenID); (v.Status == queue.StatusAdmitted) != (place <= 20) {
			t.Errorf("token %d at place %d: %s, 2 s after the opening at 10 a second", i, place, v.Status)
		}
	}
	if len(places) != 200 {
		t.Errorf("200 people on %d distinct places: want 1..200, one each", len(places))
	}
}

// TestShufflePlacesArePermutation: the places of a pre-queue of n are
// exactly 1..n, one each, whichever instance answers and whether people
// entered with an Idempotency-Key (and retried it) or not.
func TestShufflePlacesArePermutation(t *testing.T) {
	o := newOpening(t, true)
	const n = 150
	for i := range n {
		o.clock.Advance(10 * time.Millisecond)
		e := queue.Entry{}
		if i%2 == 0 {
			e.IdempotencyKey = fmt.Sprintf("key-%04d-abcdefgh", i)
		}
		v, _, err := o.a.Enter(t.Context(), "sale", e)
		if err != nil {
			t.Fatal(err)
		}
		if e.IdempotencyKey != "" { // a retry answers the same token
			if again, _, err := o.b.Enter(t.Context(), "sale", e); err != nil || again.TokenID != v.TokenID {
				t.Fatalf("retry of %s: %+v %v, want token %s", e.IdempotencyKey, again, err, v.TokenID)
			}
		}
		o.waiting = append(o.waiting, v)
	}
	setClock(o.clock, o.opensAt.Add(time.Millisecond))
	var places []int64
	for i, w := range o.waiting {
		svc := o.a
		if i%2 == 1 {
			svc = o.b
		}
		v, err := svc.Poll(t.Context(), "sale", w.TokenID)
		if err != nil || v.Shuffle == nil {
			t.Fatalf("poll after the opening: %+v %v", v, err)
		}
		places = append(places, v.Shuffle.Place)
	}
	slices.Sort(places)
	want := make([]int64, n)
	for i := range want {
		want[i] = int64(i + 1)
	}
	if diff := cmp.Diff(want, slices.Compact(slices.Clone(places))); diff != "" || len(places) != n {
		t.Errorf("places of the %d in the pre-queue are not 1..%d, one each (-want +got distinct):\n%s", n, n, diff)
	}
}

// TestShuffleSeedSecretBeforeOpening: before the opening, neither the
// stored program and tokens nor any answer holds the seed the opening
// reveals.
func TestShuffleSeedSecretBeforeOpening(t *testing.T) {
	o := newOpening(t, true)
	o.enter(t, 20)
	p, err := o.store.GetProgram(t.Context(), "sale")
	if err != nil {
		t.Fatal(err)
	}
	before := []any{p}
	for _, w := range o.waiting {
		tk, err := o.store.GetToken(t.Context(), w.TokenID)
		if err != nil {
			t.Fatal(err)
		}
		v, err := o.b.Poll(t.Context(), "sale", w.TokenID)
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, tk, v, w, *v.Shuffle)
	}
	setClock(o.clock, o.opensAt.Add(time.Millisecond))
	v, err := o.a.Poll(t.Context(), "sale", o.waiting[0].TokenID)
	if err != nil || v.Shuffle == nil || v.Shuffle.Seed == "" {
		t.Fatalf("poll after the opening: %+v %v; want the seed revealed", v, err)
	}
	for _, x := range before {
		if s := fmt.Sprintf("%+v", x); strings.Contains(s, v.Shuffle.Seed) {
			t.Errorf("before the opening %T held the seed %s: %s", x, v.Shuffle.Seed, s)
		}
	}
}

// brokenKey is a shuffle key whose KMS cannot be reached.
// brokenKey is a shuffle key whose KMS is unreachable; it counts the
// calls made to it.
type brokenKey struct{ calls atomic.Int32 }

func (k *brokenKey) PublicKey(context.Context) (*rsa.PublicKey, error) {
	k.calls.Add(1)
	return nil, errors.New("kms: unreachable")
}

func (k *brokenKey) SignPKCS1v15(context.Context, []byte) ([]byte, error) {
	k.calls.Add(1)
	return nil, errors.New("kms: unreachable")
}

// TestShuffleKeyUnavailable: before the opening an unreachable key only
// leaves the public key out of the answer; after it, no place can be
// drawn: 503 KEYS_UNAVAILABLE, and the next poll on a working instance
// gets its place.
func TestShuffleKeyUnavailable(t *testing.T) {
	o := newOpening(t, true)
	key := &brokenKey{}
	broken := queue.NewService(o.store, polling.DefaultETA(), queue.WithClock(o.clock), queue.WithShuffleKey(key))
	v, _, err := broken.Enter(t.Context(), "sale", queue.Entry{})
	if err != nil || v.Shuffle == nil || v.Shuffle.PublicKey != "" || v.Shuffle.Commitment == "" {
		t.Fatalf("enter before the opening with the key unreachable: %+v %v", v, err)
	}
	// A failed call is not made again for every answer.
	for range 5 {
		if _, err := broken.Poll(t.Context(), "sale", v.TokenID); err != nil {
			t.Fatal(err)
		}
	}
	if n := key.calls.Load(); n != 1 {
		t.Errorf("%d calls to the unreachable key for 6 answers within its backoff, want 1", n)
	}
	setClock(o.clock, o.opensAt.Add(time.Millisecond))
	for range 3 {
		_, err := broken.Poll(t.Context(), "sale", v.TokenID)
		if codeOf(err) != api.CodeKeysUnavailable || queue.ErrorKind(err) != queue.KindUnavailable {
			t.Errorf("poll after the opening with the key unreachable: %v, want KEYS_UNAVAILABLE (503)", err)
		}
		var qe *queue.Error
		if errors.As(err, &qe) && (qe.RetryAfter <= 0 || qe.RetryAfter > 2*time.Second) {
			t.Errorf("Retry-After %v, want within the key's backoff", qe.RetryAfter)
		}
	}
	// One more call (the public key); its failure holds back the rest,
	// the signature included, until the backoff has passed.
	if n := key.calls.Load(); n != 2 {
		t.Errorf("%d calls to the unreachable key by 3 polls after the opening, want 2", n)
	}
	if got, err := o.a.Poll(t.Context(), "sale", v.TokenID); err != nil || got.Shuffle == nil || got.Shuffle.Place != 1 || got.Shuffle.Seed == "" {
		t.Errorf("poll on a working instance: %+v %v, want place 1 of 1", got, err)
	}
	o.clock.Advance(3 * time.Second)
	if _, err := broken.Poll(t.Context(), "sale", v.TokenID); codeOf(err) != api.CodeKeysUnavailable {
		t.Errorf("poll past the backoff: %v, want KEYS_UNAVAILABLE", err)
	}
	if n := key.calls.Load(); n != 3 {
		t.Errorf("%d calls to the unreachable key past its backoff, want 3", n)
	}
}

// TestOpeningSettings: the opening moves only while it is ahead, the
// shuffle is armed only before anyone entered and only with an opening.
func TestOpeningSettings(t *testing.T) {
	ctx := context.Background()
	svc, c := newService(t, queue.WithProgramCache(time.Second), queue.WithShuffleKey(queuetest.ShuffleKey(t)))
	opens, soon := t0.Add(time.Hour), t0.Add(time.Second)
	yes, no := true, false
	for _, tc := range []struct {
		name string
		set  api.ProgramSettings
		code string
	}{
		{"shuffle without an opening", api.ProgramSettings{ShuffleAtOpen: &yes}, api.CodeInvalidSettings},
		{"opening within the change delay", api.ProgramSettings{OpensAt: new(soon.Format(time.RFC3339Nano))}, api.CodeInvalidSettings},
		{"OK", api.ProgramSettings{OpensAt: new(opens.Format(time.RFC3339Nano)), ShuffleAtOpen: &yes}, ""},
		{"clearing the opening of a shuffle", api.ProgramSettings{OpensAt: new("")}, api.CodeInvalidSettings},
		{"moving it while ahead", api.ProgramSettings{OpensAt: new(opens.Add(time.Hour).Format(time.RFC3339Nano))}, ""},
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
	if _, _, err := svc.PutProgram(ctx, "q", api.ProgramSettings{OpensAt: new(opens.Format(time.RFC3339Nano))}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Enter(ctx, "q", queue.Entry{}); err != nil {
		t.Fatal(err)
	}
	c.Advance(3 * time.Second)
	if _, _, err := svc.PutProgram(ctx, "q", api.ProgramSettings{ShuffleAtOpen: &yes}); codeOf(err) != api.CodeInvalidSettings {
		t.Errorf("arming a shuffle after someone entered: %v, want INVALID_SETTINGS", err)
	}
	setClock(c, opens.Add(time.Hour+time.Second))
	if _, _, err := svc.PutProgram(ctx, "p", api.ProgramSettings{OpensAt: new(opens.Add(3 * time.Hour).Format(time.RFC3339Nano))}); codeOf(err) != api.CodeNotOpen {
		t.Errorf("moving an opening that has passed: %v, want NOT_OPEN", err)
	}
	if _, err := svc.Poll(ctx, "p", mustEnter(t, svc, "p")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.PutProgram(ctx, "p", api.ProgramSettings{ShuffleAtOpen: &no}); codeOf(err) != api.CodeNotOpen {
		t.Errorf("disarming a shuffle that happened: %v, want NOT_OPEN", err)
	}
	got, err := svc.Program(ctx, "p")
	if err != nil || !got.PrequeueFixed || got.Prequeue != 1 || !strings.HasPrefix(got.ShuffleCommitment, "waitingroom/shuffle/v2 p ") {
		t.Errorf("counters after the opening: %+v %v; want the pre-queue of 1 and the commitment", got, err)
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

// TestShuffleUniform: across many seeds, a ticket's place in a pre-queue
// of 40 is uniform over 1..40 (chi-square over the places of every
// ticket, 39 degrees of freedom), and a run's places are not correlated
// with the order of arrival (Spearman's rho averages 0 within its
// standard error).
func TestShuffleUniform(t *testing.T) {
	const n, runs = 40, 2_000
	counts := make([][]int, n) // [arrival][place-1]
	for i := range counts {
		counts[i] = make([]int, n)
	}
	var rhoSum float64
	for run := range runs {
		sum := sha256.Sum256(fmt.Appendf(nil, "seed %d", run))
		seed := base64.RawURLEncoding.EncodeToString(sum[:]) // a stand-in for a signature
		var d2 float64
		for arrival := range n {
			rank := int(queue.PlaceOf(seed, n, int64(arrival+1))) - 1
			counts[arrival][rank]++
			diff := float64(rank - arrival)
			d2 += diff * diff
		}
		rhoSum += 1 - 6*d2/float64(n*(n*n-1))
	}
	// Each arrival's places: chi-square with n-1 degrees of freedom; the
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
			t.Errorf("arrival %d: chi-square of its places %.1f over 39 degrees of freedom (p < 0.001): not uniform", i, chi)
		}
	}
	// Spearman's rho of independent orders has mean 0 and variance
	// 1/(n-1); its mean over runs, 1/sqrt((n-1)·runs).
	if mean, se := rhoSum/runs, 1/math.Sqrt(float64((n-1)*runs)); math.Abs(mean) > 4*se {
		t.Errorf("mean Spearman rho between arrival and place %.4f, more than 4 standard errors (%.4f) from 0", mean, se)
	}
}

// TestPlaceOfPermutation: for every pre-queue size, under several seeds,
// PlaceOf gives the tickets 1..n the places 1..n, one each; a ticket
// outside the pre-queue keeps its number.
func TestPlaceOfPermutation(t *testing.T) {
	sizes := []int64{65_537} // 2¹⁶ + 1: the most cycle-walking (a domain of 2¹⁸)
	for n := int64(1); n <= 300; n++ {
		sizes = append(sizes, n)
	}
	for _, n := range sizes {
		for s := range 3 {
			if n > 300 && s > 0 {
				break
			}
			seed := base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "seed %d of %d", s, n))
			taken := make([]bool, n+1)
			for ticket := int64(1); ticket <= n; ticket++ {
				p := queue.PlaceOf(seed, n, ticket)
				if p < 1 || p > n || taken[p] {
					t.Fatalf("pre-queue of %d, seed %d: ticket %d gets place %d, outside 1..%d or taken", n, s, ticket, p, n)
				}
				taken[p] = true
			}
			if p := queue.PlaceOf(seed, n, n+1); p != n+1 {
				t.Errorf("ticket %d after a pre-queue of %d: place %d", n+1, n, p)
			}
		}
	}
}

// setClock moves c forward to at.
func setClock(c *clock.Fake, at time.Time) { c.Advance(at.Sub(c.Now())) }

// BenchmarkPlaceOf measures one place of a pre-queue of 600,000 (the
// million scenario's opening at 36 s): docs/benchmarks.md, "The poll in
// process".
func BenchmarkPlaceOf(b *testing.B) {
	seed := base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{7}, 256))
	const n = 600_000
	var sink int64
	for i := 0; b.Loop(); i++ {
		sink += queue.PlaceOf(seed, n, int64(i%n)+1)
	}
	if sink == 0 {
		b.Fatal("no place computed")
	}
}
