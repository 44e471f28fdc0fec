package queue_test

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/shuffle"
	"github.com/example/waitingroom/internal/testing/queuetest"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/simclock"
)

// opening is a program opening 10 s after t0 at 10 a second, seen through
// two instances with a program cache, as the service runs on Lambda.
type opening struct {
	clock   *simclock.Fake
	store   *memstore.Store
	a, b    *queue.Service
	opensAt time.Time
	waiting []queue.View
}

func newOpening(t *testing.T, shuffle bool) *opening {
	t.Helper()
	o := &opening{clock: simclock.NewFake(t0), opensAt: t0.Add(10 * time.Second)}
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
	pub, err := shuffle.ParsePublicKey(first.Shuffle.PublicKey)
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
			if err := shuffle.VerifySeed(pub, commitment, sh.Seed); err != nil {
				t.Fatal(err)
			}
			if want := shuffle.PlaceOf(sh.Seed, 200, v.Ticket); sh.Place != want {
				t.Fatalf("token %d: place %d, the seed gives ticket %d place %d", i, sh.Place, v.Ticket, want)
			}
			seed = sh.Seed
		}
	}
	for i, w := range o.waiting[:200] { // admitted or not as the revealed seed says
		place := shuffle.PlaceOf(seed, 200, w.Ticket)
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

// setClock moves c forward to at.
func setClock(c *simclock.Fake, at time.Time) { c.Advance(at.Sub(c.Now())) }

func rfc(t time.Time) *string { return new(t.Format(time.RFC3339Nano)) }

// TestClosingSettings: closesAt moves only while it and the new one are
// both more than the change delay ahead, "" clears it while allowed, and
// it must come after opensAt.
func TestClosingSettings(t *testing.T) {
	ctx := t.Context()
	svc, c := newService(t, queue.WithProgramCache(time.Second)) // a change delay of 2 s
	opens, closes := t0.Add(time.Hour), t0.Add(2*time.Hour)
	for _, tc := range []struct {
		name string
		set  api.ProgramSettings
		code string
	}{
		{"not a time", api.ProgramSettings{ClosesAt: new("tomorrow")}, api.CodeInvalidSettings},
		{"before the year 2000", api.ProgramSettings{ClosesAt: new("1999-12-31T23:59:59Z")}, api.CodeInvalidSettings},
		{"within the change delay", api.ProgramSettings{ClosesAt: rfc(t0.Add(time.Second))}, api.CodeInvalidSettings},
		{"at the opening", api.ProgramSettings{OpensAt: rfc(opens), ClosesAt: rfc(opens)}, api.CodeInvalidSettings},
		{"OK", api.ProgramSettings{OpensAt: rfc(opens), ClosesAt: rfc(closes)}, ""},
		{"the opening moved past it", api.ProgramSettings{OpensAt: rfc(closes.Add(time.Minute))}, api.CodeInvalidSettings},
		{"moved before the opening", api.ProgramSettings{ClosesAt: rfc(opens.Add(-time.Minute))}, api.CodeInvalidSettings},
		{"cleared while ahead", api.ProgramSettings{ClosesAt: new("")}, ""},
		{"set again", api.ProgramSettings{ClosesAt: rfc(closes)}, ""},
		{"moved while ahead", api.ProgramSettings{ClosesAt: rfc(closes.Add(time.Hour))}, ""},
	} {
		_, _, err := svc.PutProgram(ctx, "p", tc.set)
		if code := codeOf(err); code != tc.code {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.code)
		}
		c.Advance(3 * time.Second) // past the change delay
	}
	got, err := svc.Program(ctx, "p")
	if err != nil || !got.ClosesAt.Equal(closes.Add(time.Hour)) {
		t.Fatalf("counters: closesAt %v %v, want %v", got.ClosesAt, err, closes.Add(time.Hour))
	}
	setClock(c, closes.Add(time.Hour-time.Second)) // within the change delay of it
	for _, set := range []api.ProgramSettings{{ClosesAt: rfc(closes.Add(2 * time.Hour))}, {ClosesAt: new("")}} {
		if _, _, err := svc.PutProgram(ctx, "p", set); codeOf(err) != api.CodeInvalidSettings || !strings.Contains(err.Error(), "can no longer change") {
			t.Errorf("moving %v a close within the change delay: %v, want INVALID_SETTINGS", *set.ClosesAt, err)
		}
	}
}

// TestScheduledClose: before closesAt enters are taken; from the instant
// on, on every instance and whatever its program cache holds, an enter
// answers PROGRAM_CLOSED naming the time, while the people already waiting
// keep their places, see closesAt in their answers, and are admitted.
func TestScheduledClose(t *testing.T) {
	ctx := t.Context()
	c := simclock.NewFake(t0)
	store := memstore.New()
	a := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(c), queue.WithProgramCache(time.Second))
	b := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(c), queue.WithProgramCache(time.Second))
	closes := t0.Add(10 * time.Second)
	if _, _, err := a.PutProgram(ctx, "p", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(1)), Paused: new(true), ClosesAt: rfc(closes)}); err != nil {
		t.Fatal(err)
	}
	var waiting []queue.View
	for _, svc := range []*queue.Service{a, b} {
		v, _, err := svc.Enter(ctx, "p", queue.Entry{})
		if err != nil {
			t.Fatal(err)
		}
		if !v.ClosesAt.Equal(closes) {
			t.Errorf("WAITING answer's ClosesAt = %v, want %v", v.ClosesAt, closes)
		}
		waiting = append(waiting, v)
	}
	if s, err := a.Showing(ctx, "p"); err != nil || s.Closed || !s.ClosesAt.Equal(closes) {
		t.Errorf("Showing before the close = %+v %v, want open, closing at %v", s, err, closes)
	}
	setClock(c, closes.Add(-time.Millisecond)) // both caches still hold the program read before
	if _, _, err := b.Enter(ctx, "p", queue.Entry{}); err != nil {
		t.Fatalf("enter a millisecond before the close: %v", err)
	}
	setClock(c, closes)
	for i, svc := range []*queue.Service{a, b} {
		for _, e := range []queue.Entry{{}, {IdempotencyKey: "late-key-0123456789"}} {
			_, _, err := svc.Enter(ctx, "p", e)
			if codeOf(err) != api.CodeProgramClosed || !strings.Contains(err.Error(), closes.Format(time.RFC3339)) {
				t.Errorf("instance %d: enter %+v at the close: %v, want PROGRAM_CLOSED at %s", i, e, err, closes.Format(time.RFC3339))
			}
		}
		if s, err := svc.Showing(ctx, "p"); err != nil || !s.Closed {
			t.Errorf("instance %d: Showing at the close = %+v %v, want closed", i, s, err)
		}
	}
	v, created, err := a.Enter(ctx, "p", queue.Entry{Token: waiting[0].TokenID})
	if err != nil || created || v.Position != 1 || v.Status != queue.StatusWaiting || !v.ClosesAt.Equal(closes) {
		t.Errorf("refresh after the close: %+v created=%v %v, want place 1, closesAt shown", v, created, err)
	}
	if _, _, err := a.PutProgram(ctx, "p", api.ProgramSettings{Paused: new(false)}); err != nil {
		t.Fatal(err)
	}
	c.Advance(5 * time.Second)
	for _, w := range waiting {
		if v, err := b.Poll(ctx, "p", w.TokenID); err != nil || v.Status != queue.StatusAdmitted {
			t.Errorf("poll of ticket %d after the close: %+v %v, want ADMITTED", w.Ticket, v, err)
		}
	}
}
