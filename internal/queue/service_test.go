package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/clocktest"
	"github.com/example/waitingroom/internal/testing/queuetest"
	"github.com/example/waitingroom/internal/tools/localkeys"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/simclock"
)

func newService(t testing.TB, opts ...queue.Option) (*queue.Service, *simclock.Fake) {
	t.Helper()
	c := simclock.NewFake(t0)
	svc := queue.NewService(memstore.New(), polling.DefaultTiers(), append([]queue.Option{queue.WithClock(c)}, opts...)...)
	return svc, c
}

func ptr[T any](v T) *T { return &v }

func mustPut(t *testing.T, svc *queue.Service, id string, rate float64, paused bool) {
	t.Helper()
	if _, _, err := svc.PutProgram(context.Background(), id, api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(rate)), Paused: &paused}); err != nil {
		t.Fatal(err)
	}
}

func TestTokenLifecycle(t *testing.T) {
	ctx := context.Background()
	svc, c := newService(t)
	mustPut(t, svc, "gala", 1, true)
	var ids []string
	for i := range 3 {
		v, created, err := svc.Enter(ctx, "gala", queue.Entry{})
		if err != nil || !created {
			t.Fatalf("enter %d: %v created=%v", i, err, created)
		}
		if v.Status != queue.StatusWaiting || v.Position != int64(i+1) || v.RetryAfter != time.Second {
			t.Fatalf("enter %d: %+v", i, v)
		}
		ids = append(ids, v.TokenID)
	}
	// Paused: nobody moves, however long.
	c.Advance(time.Hour)
	if v, _ := svc.Poll(ctx, "gala", ids[2]); v.Position != 3 {
		t.Fatalf("paused queue moved: %+v", v)
	}
	// Resume at 1/s: after 1 s the first is admitted, the others move up.
	mustPut(t, svc, "gala", 1, false)
	c.Advance(time.Second)
	v, err := svc.Poll(ctx, "gala", ids[0])
	if err != nil || v.Status != queue.StatusAdmitted || !v.AdmittedAt.Equal(c.Now()) || !v.ExpiresAt.Equal(c.Now().Add(admission.DefaultAdmissionWindow)) {
		t.Fatalf("first after resume: %+v %v", v, err)
	}
	if v.Position != 0 || v.RetryAfter != 0 {
		t.Errorf("admitted view carries position/retry: %+v", v)
	}
	if v, _ := svc.Poll(ctx, "gala", ids[2]); v.Status != queue.StatusWaiting || v.Position != 2 {
		t.Errorf("third: %+v", v)
	}
	// Admission is recorded on first sight and does not move afterwards.
	admittedAt := v.AdmittedAt
	c.Advance(time.Minute)
	if v, _ := svc.Poll(ctx, "gala", ids[0]); !v.AdmittedAt.Equal(admittedAt) || v.Status != queue.StatusAdmitted {
		t.Errorf("admission moved: %+v", v)
	}
	// Leaving once admitted ends the admission: LEFT, for good. ids[1]
	// lets its admission run out.
	if err := svc.Leave(ctx, "gala", ids[0]); err != nil {
		t.Errorf("leave after admission: %v", err)
	}
	if v, _ := svc.Poll(ctx, "gala", ids[0]); v.Status != queue.StatusLeft || v.LeftAt.IsZero() || v.AdmissionPass != "" {
		t.Errorf("after ending the admission: %+v", v)
	}
	// ids[1] and ids[2] were admitted during the minute; enter a new one to leave.
	mustPut(t, svc, "gala", 1, true)
	w, _, _ := svc.Enter(ctx, "gala", queue.Entry{})
	if err := svc.Leave(ctx, "gala", w.TokenID); err != nil {
		t.Fatal(err)
	}
	if v, _ := svc.Poll(ctx, "gala", w.TokenID); v.Status != queue.StatusLeft || v.LeftAt.IsZero() || v.Position != 0 {
		t.Errorf("after leaving: %+v", v)
	}
	// The admission window passes: EXPIRED (an ended one stays LEFT;
	// leaving then changes nothing), and a refresh gets a new place.
	if _, err := svc.Poll(ctx, "gala", ids[1]); err != nil {
		t.Fatal(err)
	}
	c.Advance(admission.DefaultAdmissionWindow)
	if v, _ := svc.Poll(ctx, "gala", ids[1]); v.Status != queue.StatusExpired {
		t.Errorf("after the window: %+v", v)
	}
	if err := svc.Leave(ctx, "gala", ids[1]); err != nil {
		t.Errorf("leave after the window: %v", err)
	}
	if v, _ := svc.Poll(ctx, "gala", ids[1]); v.Status != queue.StatusExpired {
		t.Errorf("leave after the window changed it: %+v", v)
	}
	if v, _ := svc.Poll(ctx, "gala", ids[0]); v.Status != queue.StatusLeft {
		t.Errorf("ended, after the window: %+v", v)
	}
	for _, id := range ids[:2] {
		v, created, err := svc.Enter(ctx, "gala", queue.Entry{Token: id})
		if err != nil || !created || v.TokenID == id {
			t.Errorf("enter with an ended or expired token: %+v created=%v err=%v, want a new token", v, created, err)
		}
	}
}

func TestEnterErrors(t *testing.T) {
	ctx := context.Background()
	svc, _ := newService(t)
	mustPut(t, svc, "a", 1, false)
	mustPut(t, svc, "b", 1, true)
	other, _, _ := svc.Enter(ctx, "b", queue.Entry{})
	tests := []struct {
		name, program, token string
		wantCode             string
		wantCreated          bool
	}{
		{"UnknownProgram", "nope", "", api.CodeProgramNotFound, false},
		{"InvalidProgram", "no way", "", api.CodeInvalidProgramID, false},
		{"MalformedToken", "a", "xyz", api.CodeInvalidToken, false},
		{"UnknownTokenGetsNewPlace", "a", "unknownTokenFixture001", "", true},
		{"ForeignTokenGetsNewPlace", "a", other.TokenID, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, created, err := svc.Enter(ctx, tt.program, queue.Entry{Token: tt.token})
			var qe *queue.Error
			switch {
			case tt.wantCode != "":
				if !errors.As(err, &qe) || qe.Code != tt.wantCode {
					t.Fatalf("err = %v, want code %s", err, tt.wantCode)
				}
			case err != nil:
				t.Fatal(err)
			case created != tt.wantCreated || v.TokenID == tt.token:
				t.Errorf("created=%v token=%s", created, v.TokenID)
			}
		})
	}
}

// TestInstancesAgree: two instances with a program cache, one of which
// makes an admin change the other does not see yet, give the same answers
// at every instant: the change takes effect once every read made before it
// was stored has expired.
func TestInstancesAgree(t *testing.T) {
	ctx := context.Background()
	c := simclock.NewFake(t0)
	store := memstore.New()
	cached := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(c), queue.WithProgramCache(time.Second))
	admin := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(c), queue.WithProgramCache(time.Second))
	mustPut(t, admin, "gala", 1, true)
	w, _, _ := admin.Enter(ctx, "gala", queue.Entry{})
	if v, err := cached.Poll(ctx, "gala", w.TokenID); err != nil || v.Position != 1 { // fills the cache
		t.Fatalf("%+v %v", v, err)
	}
	counters, err := admin.Admit(ctx, "gala", 1)
	if err != nil {
		t.Fatal(err)
	}
	// One TTL plus the admin write budget (1 s) later.
	if !counters.EffectiveAt.Equal(t0.Add(2*time.Second)) || counters.Admitted != 0 {
		t.Errorf("admission answer %+v, want it effective 2 s later", counters)
	}
	for _, step := range []time.Duration{500 * time.Millisecond, 1499 * time.Millisecond} {
		c.Advance(step)
		a, _ := cached.Poll(ctx, "gala", w.TokenID)
		b, _ := admin.Poll(ctx, "gala", w.TokenID)
		if a.Status != queue.StatusWaiting || b.Status != queue.StatusWaiting {
			t.Errorf("before the change takes effect: cached %s, fresh %s; want both WAITING", a.Status, b.Status)
		}
	}
	c.Advance(time.Millisecond)
	if v, _ := cached.Poll(ctx, "gala", w.TokenID); v.Status != queue.StatusAdmitted {
		t.Errorf("when the change takes effect: %+v", v)
	}
	// A second change waits for the first to take effect, then is scheduled.
	if _, _, err := admin.PutProgram(ctx, "gala", api.ProgramSettings{Paused: ptr(false)}); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentEnters: 500 people entering at once get tickets 1..500,
// each exactly once, with positions to match.
func TestConcurrentEnters(t *testing.T) {
	ctx := context.Background()
	svc, _ := newService(t)
	mustPut(t, svc, "rush", 1, true)
	const n = 500
	positions := make([]atomic.Int32, n+1)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			v, _, err := svc.Enter(ctx, "rush", queue.Entry{})
			if err != nil {
				t.Error(err)
				return
			}
			if v.Position >= 1 && v.Position <= n {
				positions[v.Position].Add(1)
			}
		})
	}
	wg.Wait()
	for p := 1; p <= n; p++ {
		if got := positions[p].Load(); got != 1 {
			t.Errorf("position %d handed out %d times", p, got)
		}
	}
	c, _ := svc.Program(ctx, "rush")
	if c.Issued != n || c.Waiting != n {
		t.Errorf("counters %+v", c)
	}
}

func TestAdminValidation(t *testing.T) {
	ctx := context.Background()
	svc, _ := newService(t)
	tests := []struct {
		name string
		set  api.ProgramSettings
	}{
		{"NegativeRate", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(-1.0))}},
		{"HugeRate", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(1e9))}},
		{"TinyRate", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(0.0001))}},
		{"RateFinerThanAThousandth", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(2.0005))}},
		{"ShortWindow", api.ProgramSettings{AdmissionWindowSeconds: new(int64(1))}},
		{"LongWindow", api.ProgramSettings{AdmissionWindowSeconds: new(int64(48 * 3600))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := svc.PutProgram(ctx, "x", tt.set)
			if queue.ErrorKind(err) != queue.KindInvalid {
				t.Errorf("err = %v, want invalid", err)
			}
		})
	}
	for _, n := range []int64{0, -1, queue.MaxAdmissionCount + 1} {
		mustPut(t, svc, "x", 1, false)
		if _, err := svc.Admit(ctx, "x", n); queue.ErrorKind(err) != queue.KindInvalid {
			t.Errorf("Admit(%d) = %v, want invalid", n, err)
		}
	}
	if _, err := svc.Admit(ctx, "nope", 1); queue.ErrorKind(err) != queue.KindNotFound {
		t.Errorf("Admit on unknown program = %v", err)
	}
}

// TestClosedProgram: closing a program stops new entries, keeps everyone
// already waiting in place (a refresh included), and reopening lets people
// in again.
func TestClosedProgram(t *testing.T) {
	ctx := context.Background()
	svc, _ := newService(t)
	mustPut(t, svc, "gala", 1, true)
	w, _, err := svc.Enter(ctx, "gala", queue.Entry{})
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{Closed: ptr(true)})
	if err != nil || !c.Closed {
		t.Fatalf("close: %+v %v", c, err)
	}
	var qe *queue.Error
	if _, _, err := svc.Enter(ctx, "gala", queue.Entry{}); !errors.As(err, &qe) || qe.Code != api.CodeProgramClosed {
		t.Errorf("enter a closed program: %v, want PROGRAM_CLOSED", err)
	}
	if v, created, err := svc.Enter(ctx, "gala", queue.Entry{Token: w.TokenID}); err != nil || created || v.Position != 1 {
		t.Errorf("refresh in a closed program: %+v created=%v err=%v, want the same place", v, created, err)
	}
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{Closed: ptr(false)}); err != nil {
		t.Fatal(err)
	}
	if v, created, err := svc.Enter(ctx, "gala", queue.Entry{}); err != nil || !created || v.Position != 2 {
		t.Errorf("enter after reopening: %+v %v %v", v, created, err)
	}
}

func TestEnterIdempotencyKey(t *testing.T) {
	ctx := context.Background()
	svc, c := newService(t)
	mustPut(t, svc, "gala", 1, true)
	mustPut(t, svc, "fest", 1, true)
	const key = "0b6f4c1e-1d7a-4bb2-9a53-6c0f3e1f5a2d"

	first, created, err := svc.Enter(ctx, "gala", queue.Entry{IdempotencyKey: key})
	if err != nil || !created || first.Ticket != 1 {
		t.Fatalf("first enter = %+v, %v, created=%v", first, err, created)
	}
	c.Advance(time.Second)
	again, created, err := svc.Enter(ctx, "gala", queue.Entry{IdempotencyKey: key})
	if err != nil || created || again.TokenID != first.TokenID || again.Ticket != first.Ticket {
		t.Fatalf("retried enter = %+v, %v, created=%v; want token %s ticket %d again", again, err, created, first.TokenID, first.Ticket)
	}
	other, _, err := svc.Enter(ctx, "gala", queue.Entry{IdempotencyKey: key + "-2"})
	if err != nil || other.TokenID == first.TokenID || other.Ticket != 2 {
		t.Fatalf("another key = %+v, %v; want a new token with ticket 2", other, err)
	}
	elsewhere, created, err := svc.Enter(ctx, "fest", queue.Entry{IdempotencyKey: key})
	if err != nil || !created || elsewhere.TokenID == first.TokenID {
		t.Fatalf("same key in another program = %+v, %v; want a new place there", elsewhere, err)
	}
	if cs, _ := svc.Program(ctx, "gala"); cs.Issued != 2 {
		t.Errorf("gala issued %d tickets, want 2: a retried enter took a ticket", cs.Issued)
	}
	// A key whose token left answers that token: a new intent needs a new key.
	if err := svc.Leave(ctx, "gala", first.TokenID); err != nil {
		t.Fatal(err)
	}
	if v, created, err := svc.Enter(ctx, "gala", queue.Entry{IdempotencyKey: key}); err != nil || created || v.Status != queue.StatusLeft || v.TokenID != first.TokenID {
		t.Errorf("enter with the key of a left token = %+v, %v, created=%v; want that token, LEFT", v, err, created)
	}
}

func TestEnterIdempotencyKeyInvalid(t *testing.T) {
	svc, _ := newService(t)
	mustPut(t, svc, "gala", 1, true)
	for _, key := range []string{"short", strings.Repeat("k", 129), "0b6f4c1e 1d7a 4bb2 9a53", "ключ-ключ-ключ-ключ"} {
		var qe *queue.Error
		if _, _, err := svc.Enter(context.Background(), "gala", queue.Entry{IdempotencyKey: key}); !errors.As(err, &qe) || qe.Code != api.CodeInvalidIdempotencyKey {
			t.Errorf("key %q: %v, want %s", key, err, api.CodeInvalidIdempotencyKey)
		}
	}
}

// TestEnterIdempotencyKeyConcurrent: enters with one key, or with enqueue
// tokens of one account, at once answer one token and take one ticket
// between them, for every key and account (issue 16: each took a ticket and
// all but one burnt it).
func TestEnterIdempotencyKeyConcurrent(t *testing.T) {
	for _, tc := range []struct {
		name  string
		entry func(k int) queue.Entry
	}{
		{"Key", func(k int) queue.Entry {
			return queue.Entry{IdempotencyKey: fmt.Sprintf("concurrent-enter-key-%04d", k)}
		}},
		{"Account", func(k int) queue.Entry { return queue.Entry{Enqueue: fmt.Sprintf("account:user-%d", k)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const keys, parallel = 8, 16
			clk := clocktest.NewManual(t0)
			var rounds queuetest.KeyedEnters
			svc := queue.NewService(rounds.Wrap(memstore.New()), polling.DefaultTiers(), queue.WithClock(clk), queue.WithEnqueue(queuetest.Accounts{}))
			paused := true
			if _, _, err := svc.PutProgram(t.Context(), "rush", queuetest.TakingAccounts(api.ProgramSettings{Paused: &paused})); err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			rounds.Collide(t, []*queue.Service{svc}, clk, "rush", keys, parallel, tc.entry)
			if c, _ := svc.Program(ctx, "rush"); c.Issued != keys {
				t.Errorf("%d keys, %d concurrent enters each: issued %d tickets, want %d", keys, parallel, c.Issued, keys)
			}
		})
	}
}

// countingSigner signs "pass-N" for the Nth call, or fails while fail is set.
type countingSigner struct {
	calls atomic.Int64
	fail  atomic.Bool
}

func (s *countingSigner) SignPass(_ context.Context, t queue.Token) (string, error) {
	if s.fail.Load() {
		return "", errors.New("kms: throttled")
	}
	n := s.calls.Add(1)
	if t.AdmittedAt.IsZero() || t.AdmissionExpiresAt.IsZero() {
		return "", errors.New("signing a token without its admission")
	}
	return fmt.Sprintf("pass-%d-%s", n, t.ID), nil
}

func TestAdmissionPass(t *testing.T) {
	ctx := context.Background()
	signer := &countingSigner{}
	svc, c := newService(t, queue.WithPassSigner(signer))
	mustPut(t, svc, "gala", 1, true)
	w, _, err := svc.Enter(ctx, "gala", queue.Entry{})
	if err != nil || w.AdmissionPass != "" {
		t.Fatalf("waiting enter = %+v, %v; want no pass", w, err)
	}
	mustPut(t, svc, "gala", 1, false)
	c.Advance(3 * time.Second)

	signer.fail.Store(true)
	var qe *queue.Error
	if _, err := svc.Poll(ctx, "gala", w.TokenID); !errors.As(err, &qe) || qe.Code != api.CodePassUnavailable || queue.ErrorKind(err) != queue.KindUnavailable {
		t.Fatalf("poll while the signer fails: %v; want %s (retryable)", err, api.CodePassUnavailable)
	}
	signer.fail.Store(false)
	c.Advance(time.Second)
	first, err := svc.Poll(ctx, "gala", w.TokenID)
	want := "pass-1-" + w.TokenID
	if err != nil || first.Status != queue.StatusAdmitted || first.AdmissionPass != want || !first.AdmittedAt.Equal(c.Now()) {
		t.Fatalf("first admitted poll = %+v, %v; want pass %q admitted now", first, err, want)
	}
	for range 3 {
		c.Advance(time.Second)
		v, err := svc.Poll(ctx, "gala", w.TokenID)
		if err != nil || v.AdmissionPass != want {
			t.Fatalf("later poll = %+v, %v; want the same pass", v, err)
		}
	}
	if v, _, err := svc.Enter(ctx, "gala", queue.Entry{Token: w.TokenID}); err != nil || v.AdmissionPass != want {
		t.Errorf("enter with the admitted token = %+v, %v; want the same pass", v, err)
	}
	if n := signer.calls.Load(); n != 1 {
		t.Errorf("signed %d passes for one admission, want 1", n)
	}
	c.Advance(admission.DefaultAdmissionWindow)
	if v, _ := svc.Poll(ctx, "gala", w.TokenID); v.Status != queue.StatusExpired || v.AdmissionPass != "" {
		t.Errorf("expired = %+v; want no pass", v)
	}
}

// racingStore is a store on which another instance records every token's
// admission a millisecond before this one does.
type racingStore struct {
	queue.Store
}

func (s racingStore) MarkAdmitted(ctx context.Context, t queue.Token) (queue.Token, error) {
	other := t
	other.AdmittedAt = t.AdmittedAt.Add(-time.Millisecond)
	if _, err := s.Store.MarkAdmitted(ctx, other); err != nil {
		return queue.Token{}, err
	}
	return s.Store.MarkAdmitted(ctx, t)
}

// TestFirstSighting: the answer that records an admission says so, and no
// other: not a later poll, not an enter with the admitted token, not a poll
// that another instance beat to the write.
func TestFirstSighting(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		store func(queue.Store) queue.Store
		want  bool
	}{
		{"Recorded", func(s queue.Store) queue.Store { return s }, true},
		{"RecordedElsewhere", func(s queue.Store) queue.Store { return racingStore{s} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := simclock.NewFake(t0)
			svc := queue.NewService(tc.store(memstore.New()), polling.DefaultTiers(), queue.WithClock(c))
			mustPut(t, svc, "gala", 1, true)
			w, _, err := svc.Enter(ctx, "gala", queue.Entry{})
			if err != nil || w.FirstSighting {
				t.Fatalf("enter = %+v, %v", w, err)
			}
			mustPut(t, svc, "gala", 1, false)
			c.Advance(3 * time.Second)
			first, err := svc.Poll(ctx, "gala", w.TokenID)
			if err != nil || first.Status != queue.StatusAdmitted || first.FirstSighting != tc.want {
				t.Fatalf("first admitted poll = %+v, %v; want FirstSighting %v", first, err, tc.want)
			}
			again, err := svc.Poll(ctx, "gala", w.TokenID)
			if err != nil || again.Status != queue.StatusAdmitted || again.FirstSighting {
				t.Errorf("second poll = %+v, %v; want no first sighting", again, err)
			}
			re, _, err := svc.Enter(ctx, "gala", queue.Entry{Token: w.TokenID})
			if err != nil || re.Status != queue.StatusAdmitted || re.FirstSighting {
				t.Errorf("enter with the admitted token = %+v, %v; want no first sighting", re, err)
			}
		})
	}
}

// TestQueueFull: at its maxWaiting the line refuses new enters with
// QUEUE_FULL, taking no ticket and storing nothing (no token, no claim),
// while a token or an idempotency key already in the line is answered as
// before; as admission moves, room comes back.
func TestQueueFull(t *testing.T) {
	ctx := t.Context()
	svc, c := newService(t)
	paused := true
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(1)), Paused: &paused, MaxWaiting: new(int64(3))}); err != nil {
		t.Fatal(err)
	}
	first, _, err := svc.Enter(ctx, "gala", queue.Entry{IdempotencyKey: "key-of-the-first-one"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, _, err := svc.Enter(ctx, "gala", queue.Entry{}); err != nil {
			t.Fatal(err)
		}
	}
	full := func(what string, e queue.Entry) {
		t.Helper()
		_, _, err := svc.Enter(ctx, "gala", e)
		var qe *queue.Error
		if !errors.As(err, &qe) || qe.Code != api.CodeQueueFull || qe.Kind != queue.KindConflict {
			t.Fatalf("%s: err = %v, want QUEUE_FULL", what, err)
		}
	}
	full("a fourth enter", queue.Entry{})
	full("a fourth enter with a key", queue.Entry{IdempotencyKey: "key-of-the-fourth-one"})
	if _, err := svc.Poll(ctx, "gala", queue.IdempotentTokenID("gala", "key-of-the-fourth-one")); queue.ErrorKind(err) != queue.KindNotFound {
		t.Errorf("the refused keyed enter left a token or a claim: %v", err)
	}
	if got, _ := svc.Program(ctx, "gala"); got.Issued != 3 || got.Waiting != 3 || got.MaxWaiting != 3 {
		t.Errorf("after the refusals: issued %d, waiting %d, maxWaiting %d; want 3, 3, 3", got.Issued, got.Waiting, got.MaxWaiting)
	}
	// Who is in the line is still answered.
	for _, e := range []queue.Entry{{Token: first.TokenID}, {IdempotencyKey: "key-of-the-first-one"}} {
		if v, created, err := svc.Enter(ctx, "gala", e); err != nil || created || v.TokenID != first.TokenID {
			t.Errorf("enter again with %+v: %v, created %v, err %v; want the first token", e, v.TokenID, created, err)
		}
	}
	// One admitted: room for one more.
	if _, err := svc.Admit(ctx, "gala", 1); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Second)
	if _, created, err := svc.Enter(ctx, "gala", queue.Entry{}); err != nil || !created {
		t.Fatalf("after one admission: created %v, err %v; want a new place", created, err)
	}
	full("then a fifth", queue.Entry{})
	// Closed and full: closed, for good, not "try again later".
	closed := true
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{Closed: &closed}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Enter(ctx, "gala", queue.Entry{}); queue.ErrorKind(err) != queue.KindConflict || !strings.Contains(err.Error(), api.CodeProgramClosed) {
		t.Errorf("closed and full: %v, want PROGRAM_CLOSED", err)
	}
	closed = false
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{Closed: &closed}); err != nil {
		t.Fatal(err)
	}
	// 0 lifts the limit; a negative one is refused.
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{MaxWaiting: new(int64(-1))}); queue.ErrorKind(err) != queue.KindInvalid {
		t.Errorf("maxWaiting -1: %v, want INVALID_SETTINGS", err)
	}
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{MaxWaiting: new(int64(0))}); err != nil {
		t.Fatal(err)
	}
	if _, created, err := svc.Enter(ctx, "gala", queue.Entry{}); err != nil || !created {
		t.Errorf("without a limit: created %v, err %v", created, err)
	}
}

// TestUnknownProgramsLeaveNoState: enters to program ids that do not exist
// leave nothing in the program cache, and a program that exists is
// dropped from it once it has been idle past its use (the ticket shards'
// state: tickets.TestUnknownProgramsLeaveNoState).
func TestUnknownProgramsLeaveNoState(t *testing.T) {
	clk := simclock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	svc := queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(clk), queue.WithProgramCache(time.Second))
	queuetest.CheckIdleProgramsDropped(t, svc, clk, svc.CachedPrograms, "an entry in the program cache")
}

// newSigner signs passes with a fresh key, as the service does on AWS.
func newSigner(t testing.TB) queue.PassSigner {
	t.Helper()
	key, err := localkeys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	iss, err := localkeys.FixedIssuer("https://queue.example.com", key)
	if err != nil {
		t.Fatal(err)
	}
	return app.Signer(iss)
}

// TestEndSession: the site ends an admission with the pass it holds; the
// token then reads LEFT. A pass that is not the one stored for its token
// (forged, altered, another program's), none, or one whose admission is
// over is refused with its own code; ending twice is no error.
func TestEndSession(t *testing.T) {
	ctx := t.Context()
	signer := newSigner(t)
	svc, c := newService(t, queue.WithPassSigner(signer))
	mustPut(t, svc, "gala", 10, false)
	mustPut(t, svc, "other", 10, false)
	admitted := func(program string) queue.View {
		t.Helper()
		v, _, err := svc.Enter(ctx, program, queue.Entry{})
		if err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Second)
		if v, err = svc.Poll(ctx, program, v.TokenID); err != nil || v.Status != queue.StatusAdmitted || v.AdmissionPass == "" {
			t.Fatalf("not admitted with a pass: %+v, %v", v, err)
		}
		return v
	}
	a, b, elsewhere := admitted("gala"), admitted("gala"), admitted("other")
	refused := func(what, program, pass, code string) {
		t.Helper()
		err := svc.EndSession(ctx, program, pass)
		var qe *queue.Error
		if !errors.As(err, &qe) || qe.Code != code {
			t.Errorf("%s: %v, want %s", what, err, code)
		}
	}
	refused("no pass", "gala", "", api.CodeMissingPass)
	refused("not a JWT", "gala", "pass", api.CodeInvalidPass)
	refused("another program's pass", "gala", elsewhere.AdmissionPass, api.CodeInvalidPass)
	altered := []byte(a.AdmissionPass)
	altered[len(altered)-2] ^= 1 // a signature bit
	refused("an altered pass", "gala", string(altered), api.CodeInvalidPass)
	// A genuine pass signed by another key for the same token: not the one
	// stored, so refused too.
	forged, err := newSigner(t).SignPass(ctx, queue.Token{ID: a.TokenID, ProgramID: "gala", Ticket: a.Ticket, AdmittedAt: a.AdmittedAt, AdmissionExpiresAt: a.ExpiresAt})
	if err != nil {
		t.Fatal(err)
	}
	refused("a pass signed by another key", "gala", forged, api.CodeInvalidPass)
	if v, _ := svc.Poll(ctx, "gala", a.TokenID); v.Status != queue.StatusAdmitted {
		t.Fatalf("refused passes ended the admission: %+v", v)
	}

	for range 2 { // the second time changes nothing
		if err := svc.EndSession(ctx, "gala", a.AdmissionPass); err != nil {
			t.Fatalf("EndSession: %v", err)
		}
		if v, _ := svc.Poll(ctx, "gala", a.TokenID); v.Status != queue.StatusLeft || v.AdmissionPass != "" {
			t.Fatalf("after ending the session: %+v", v)
		}
	}
	c.Advance(admission.DefaultAdmissionWindow)
	refused("a pass whose admission is over", "gala", b.AdmissionPass, api.CodePassExpired)
	if v, _ := svc.Poll(ctx, "gala", b.TokenID); v.Status != queue.StatusExpired {
		t.Errorf("an expired admission ended: %+v", v)
	}
}
