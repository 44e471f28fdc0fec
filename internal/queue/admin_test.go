package queue_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/bypass"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/await"
	"github.com/example/waitingroom/internal/testing/clocktest"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/simclock"
)

// lossyStore is a memstore whose writes of programs can lose their answer
// as an SDK sees it: the write is applied, the answer never arrives, and
// the retried write fails its condition. conflictAlways makes every update
// conflict without applying it.
type lossyStore struct {
	*memstore.Store
	loseAnswers    atomic.Bool
	conflictAlways atomic.Bool
	updates        atomic.Int64
	// moveFails is how many more MoveDrain calls fail without writing;
	// moves counts the calls.
	moveFails, moves atomic.Int64
	// flood, if set, runs just before each UpdateScheduled: an enter
	// flood's ticket between the admin's read and write.
	flood func(ctx context.Context)
	// reads, if set, holds each program read's answer until every admin
	// still running has read: concurrent admins move in rounds.
	reads *rounds
}

func (s *lossyStore) GetProgram(ctx context.Context, id string) (admission.Program, error) {
	p, err := s.Store.GetProgram(ctx, id)
	if s.reads != nil {
		if werr := s.reads.arrive(ctx); werr != nil {
			return admission.Program{}, werr
		}
	}
	return p, err
}

// rounds holds its callers until every active one has arrived, then
// lets them all go: admins that each read, write and read again move in
// lockstep, all reading one version, then all writing, one winning.
type rounds struct {
	mu              sync.Mutex
	active, arrived int
	gate            chan struct{}
}

func newRounds(active int) *rounds { return &rounds{active: active, gate: make(chan struct{})} }

// arrive waits until every active caller has arrived, or ctx ends.
func (r *rounds) arrive(ctx context.Context) error {
	r.mu.Lock()
	r.arrived++
	gate := r.gate
	r.releaseIfAll()
	r.mu.Unlock()
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// leave takes a caller that is done out of the rounds.
func (r *rounds) leave() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active--
	r.releaseIfAll()
}

func (r *rounds) releaseIfAll() {
	if r.arrived > 0 && r.arrived >= r.active {
		close(r.gate)
		r.gate, r.arrived = make(chan struct{}), 0
	}
}

func (s *lossyStore) UpdateProgram(ctx context.Context, p admission.Program, expectIssued int64) error {
	s.updates.Add(1)
	if s.conflictAlways.Load() {
		return queue.ErrConflict
	}
	err := s.Store.UpdateProgram(ctx, p, expectIssued)
	if err == nil && s.loseAnswers.Load() {
		return s.Store.UpdateProgram(ctx, p, expectIssued) // the retry
	}
	return err
}

// UpdateScheduled loses answers and conflicts as UpdateProgram does: the
// admin path takes it for a scheduled change.
func (s *lossyStore) UpdateScheduled(ctx context.Context, p admission.Program) (int64, error) {
	s.updates.Add(1)
	if s.conflictAlways.Load() {
		return 0, queue.ErrConflict
	}
	if s.flood != nil {
		s.flood(ctx)
	}
	issued, err := s.Store.UpdateScheduled(ctx, p)
	if err == nil && s.loseAnswers.Load() {
		return s.Store.UpdateScheduled(ctx, p) // the retry
	}
	return issued, err
}

func (s *lossyStore) MoveDrain(ctx context.Context, p admission.Program, issued int64) error {
	s.moves.Add(1)
	if s.moveFails.Add(-1) >= 0 {
		return errors.New("lossy store: connection reset")
	}
	err := s.Store.MoveDrain(ctx, p, issued)
	if err == nil && s.loseAnswers.Load() {
		return s.Store.MoveDrain(ctx, p, issued)
	}
	return err
}

func (s *lossyStore) CreateProgram(ctx context.Context, p admission.Program) error {
	err := s.Store.CreateProgram(ctx, p)
	if err == nil && s.loseAnswers.Load() {
		return s.Store.CreateProgram(ctx, p)
	}
	return err
}

func newLossyService(t *testing.T, opts ...queue.Option) (*queue.Service, *lossyStore, *simclock.Fake) {
	t.Helper()
	store := &lossyStore{Store: memstore.New()}
	c := simclock.NewFake(t0)
	return queue.NewService(store, polling.DefaultTiers(), append([]queue.Option{queue.WithClock(c)}, opts...)...), store, c
}

// enterN hands out n tickets of programID and returns their token ids.
func enterN(t *testing.T, svc *queue.Service, programID string, n int) []string {
	t.Helper()
	ids := make([]string, 0, n)
	for range n {
		v, _, err := svc.Enter(t.Context(), programID, queue.Entry{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.TokenID)
	}
	return ids
}

func isBusy(err error) bool {
	var qe *queue.Error
	return errors.As(err, &qe) && qe.Code == api.CodeBusy && qe.RetryAfter > 0
}

// TestAdmissionsCountOnce is the regression test of lost admissions:
// concurrent admissions made at the same instant (a frozen clock makes
// their writes identical) move in rounds (each read's answer is held until
// every admin still running has read), so that each round all read one
// version, one write wins and the others conflict and see one change that
// is not theirs. Each counts exactly once when answered without error, and
// so does one whose answer was lost and that the store retried; an admin
// answers BUSY only after MaxAdminTrials rounds, and none is left unsure
// whether it was applied.
func TestAdmissionsCountOnce(t *testing.T) {
	type outcome struct{ OK, Busy, Maybe, Admitted int64 }
	for _, tc := range []struct {
		name        string
		concurrent  int
		loseAnswers bool
		cacheTTL    time.Duration
		want        outcome
	}{
		{"three at once", 3, false, 0, outcome{OK: 3, Admitted: 3}},
		{"twenty at once", 20, false, 0, outcome{OK: queue.MaxAdminTrials, Busy: 20 - queue.MaxAdminTrials, Admitted: queue.MaxAdminTrials}},
		{"one, answer lost", 1, true, 0, outcome{OK: 1, Admitted: 1}},
		{"ten at once, answers lost", 10, true, 0, outcome{OK: 10, Admitted: 10}},
		// The first change is pending on the frozen clock: the others
		// find it pending until their trials run out.
		{"ten at once, with a program cache", 10, false, time.Second, outcome{OK: 1, Busy: 9, Admitted: 1}},
		{"ten at once, answers lost, with a program cache", 10, true, time.Second, outcome{OK: 1, Busy: 9, Admitted: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &lossyStore{Store: memstore.New()}
			clk := clocktest.NewFrozen(t0)
			svc := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(clk), queue.WithProgramCache(tc.cacheTTL))
			mustPut(t, svc, "gala", 1, true)
			enterN(t, svc, "gala", 100)
			clk.Advance(time.Hour) // the creation long in effect
			store.loseAnswers.Store(tc.loseAnswers)
			store.reads = newRounds(tc.concurrent)
			var ok, busy, maybe atomic.Int64
			var wg sync.WaitGroup
			for range tc.concurrent {
				wg.Go(func() {
					defer store.reads.leave()
					_, err := svc.Admit(t.Context(), "gala", 1)
					var qe *queue.Error
					switch {
					case err == nil:
						ok.Add(1)
					case isBusy(err):
						busy.Add(1)
					case errors.As(err, &qe) && qe.Code == api.CodeUnavailable:
						// May have been applied (more changes since than the
						// program remembers): counted at most once.
						maybe.Add(1)
					default:
						t.Errorf("Admit: %v", err)
					}
				})
			}
			wg.Wait()
			store.reads = nil
			store.loseAnswers.Store(false)
			p, err := store.GetProgram(t.Context(), "gala")
			if err != nil {
				t.Fatal(err)
			}
			got := outcome{OK: ok.Load(), Busy: busy.Load(), Maybe: maybe.Load(), Admitted: p.Settled().Base}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("answers and admissions (-want +got):\n%s", d)
			}
		})
	}
}

// TestCreateAnswerLost: a creation whose answer was lost is still a
// creation, made once.
func TestCreateAnswerLost(t *testing.T) {
	svc, store, _ := newLossyService(t)
	store.loseAnswers.Store(true)
	rate := 2.0
	c, created, err := svc.PutProgram(t.Context(), "gala", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(rate))})
	if err != nil || !created || c.Rate != 2 {
		t.Fatalf("PutProgram = %+v, created %v, %v; want created at 2/s", c, created, err)
	}
	if p, _ := store.GetProgram(t.Context(), "gala"); p.Version != 1 {
		t.Errorf("version %d after one creation, want 1", p.Version)
	}
}

// TestAdminWaitsOnTheClock: an admin change made while the previous one is
// pending waits for it on the service's clock, never in real time (the
// clock here moves only when the test moves it: a wait anywhere else would
// never end); one that would have to wait past the admin deadline is
// answered BUSY at once, with the time until the pending change takes
// effect.
func TestAdminWaitsOnTheClock(t *testing.T) {
	t.Run("waits, then applies", func(t *testing.T) {
		store := &lossyStore{Store: memstore.New()}
		c := clocktest.NewManual(t0)
		svc := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(c), queue.WithProgramCache(time.Second))
		mustPut(t, svc, "gala", 1, true)
		enterN(t, svc, "gala", 10)
		first, err := svc.Admit(t.Context(), "gala", 1)
		if err != nil {
			t.Fatal(err)
		}
		type answer struct {
			c   admission.Counters
			err error
		}
		result := make(chan answer, 1)
		go func() {
			c, err := svc.Admit(t.Context(), "gala", 1)
			result <- answer{c, err}
		}()
		if err := c.BlockUntilContext(t.Context(), 1); err != nil { // it waits on the clock
			t.Fatal(err)
		}
		c.Advance(first.EffectiveAt.Sub(c.Now()) - time.Millisecond)
		if !c.Asleep(1) {
			t.Fatalf("the second Admit woke at +%v, before the first change takes effect at +%v", c.Now().Sub(t0), first.EffectiveAt.Sub(t0))
		}
		for c.Asleep(1) { // a millisecond at a time, to its wake
			if c.Now().After(first.EffectiveAt.Add(300 * time.Millisecond)) {
				t.Fatalf("the second Admit still waits at +%v, want awake within 300 ms after +%v", c.Now().Sub(t0), first.EffectiveAt.Sub(t0))
			}
			c.Advance(time.Millisecond)
		}
		woke := c.Now()
		second := <-result
		if second.err != nil {
			t.Fatalf("second Admit: %v", second.err)
		}
		if want := woke.Add(2 * time.Second).Truncate(time.Millisecond); !second.c.EffectiveAt.Equal(want) {
			t.Errorf("second change effective at +%v, want +%v (woke at +%v)", second.c.EffectiveAt.Sub(t0), want.Sub(t0), woke.Sub(t0))
		}
		c.Advance(time.Hour)
		if got, _ := svc.Program(t.Context(), "gala"); got.Admitted != 2 {
			t.Errorf("admitted %d, want 2", got.Admitted)
		}
	})
	t.Run("BUSY when the wait passes the deadline", func(t *testing.T) {
		// A 5 s cache: changes take effect 6 s after they are made.
		svc, _, c := newLossyService(t, queue.WithProgramCache(5*time.Second))
		mustPut(t, svc, "gala", 1, true)
		enterN(t, svc, "gala", 10)
		if _, err := svc.Admit(t.Context(), "gala", 1); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Second)
		_, err := svc.Admit(t.Context(), "gala", 1)
		var qe *queue.Error
		if !errors.As(err, &qe) || qe.Code != api.CodeBusy || qe.RetryAfter != 5*time.Second {
			t.Fatalf("second Admit: %v, want BUSY with RetryAfter 5s", err)
		}
		if got := c.Now().Sub(t0); got != time.Second {
			t.Errorf("the clock moved to +%v: BUSY should come without waiting", got)
		}
		c.Advance(3500 * time.Millisecond) // the first takes effect in 2.5 s: time to wait and write
		if _, err := svc.Admit(t.Context(), "gala", 1); err != nil {
			t.Errorf("Admit 2.5 s before the previous change takes effect: %v, want it to wait and apply", err)
		}
	})
	t.Run("BUSY when conflicts never end", func(t *testing.T) {
		store := &lossyStore{Store: memstore.New()}
		c := clocktest.NewManual(t0)
		svc := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(c))
		mustPut(t, svc, "gala", 1, true)
		store.conflictAlways.Store(true)
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, err = svc.Admit(t.Context(), "gala", 1)
		}()
		// Each backoff after a conflict is a sleep on the service's
		// clock, at most maxConflictBackoff (20 ms).
		backoffs, derr := c.Drive(t.Context(), 1, 20*time.Millisecond, done)
		if derr != nil {
			t.Fatal(derr)
		}
		if !isBusy(err) {
			t.Fatalf("Admit: %v, want BUSY", err)
		}
		if waited := c.Now().Sub(t0); waited > 3*time.Second {
			t.Errorf("BUSY after %v on the service's clock, want within the 3 s admin deadline", waited)
		}
		if n := store.updates.Load(); n < 2 || backoffs != int(n) {
			t.Errorf("%d update attempts with %d waits on the clock, want retries, each conflict followed by a wait", n, backoffs)
		}
	})
}

// TestMoveDrainRetried: a scheduled admission stored during an enter
// flood whose drain instant move fails is answered OK once a retry within
// the admin deadline moves it; if every try fails, STORE_UNAVAILABLE
// (which the admin client does not repeat for an admission) and a log.
func TestMoveDrainRetried(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fails int64
		moved bool
	}{
		{"fails once, then moves", 1, true},
		{"fails every time", 1000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			svc, store, c := newLossyService(t, queue.WithProgramCache(time.Second), queue.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
			mustPut(t, svc, "gala", 1, false)
			enterN(t, svc, "gala", 10)
			store.flood = func(ctx context.Context) {
				if _, err := store.Store.IssueTicket(ctx, "gala", c.Now()); err != nil {
					t.Errorf("IssueTicket in the flood: %v", err)
				}
			}
			store.moveFails.Store(tc.fails)
			_, err := svc.Admit(t.Context(), "gala", 1)
			p, gerr := store.GetProgram(t.Context(), "gala")
			if gerr != nil {
				t.Fatal(gerr)
			}
			if !p.Pending(c.Now()) {
				t.Fatalf("want the admission scheduled: %+v", p)
			}
			if n := store.moves.Load(); n < 2 || n > 5 {
				t.Errorf("%d MoveDrain calls, want a few", n)
			}
			if !tc.moved {
				var qe *queue.Error
				if !errors.As(err, &qe) || qe.Code != api.CodeUnavailable {
					t.Errorf("Admit: %v, want %s", err, api.CodeUnavailable)
				}
				if !strings.Contains(log.String(), "drain instant not moved") {
					t.Errorf("log %q, want the unmoved drain instant", log.String())
				}
				return
			}
			if err != nil {
				t.Fatalf("Admit: %v", err)
			}
			if want := p.ScheduledDrainAtNs(p.Issued); p.DrainAtNs != want {
				t.Errorf("drain instant %d, want %d for %d tickets (%+d)", p.DrainAtNs, want, p.Issued, p.DrainAtNs-want)
			}
		})
	}
}

// bypassClaims are the claims of a pass as its payload says.
type bypassClaims struct {
	Iss, Sub, Jti string
	Aud           string
	Iat, Nbf, Exp int64
	Ticket        *int64
	Bypass        bool
}

func claimsOfPass(t *testing.T, pass string) bypassClaims {
	t.Helper()
	parts := strings.Split(pass, ".")
	if len(parts) != 3 {
		t.Fatalf("pass %q is not a compact JWS", pass)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c bypassClaims
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestIssueBypass: count passes, each with an admission's claims (the
// program as aud, a fresh token id as sub, its own jti, valid from now for
// the validity), ticket 0 and bypass true; a closed program gets them too.
func TestIssueBypass(t *testing.T) {
	ctx := t.Context()
	svc, c := newService(t, queue.WithPassSigner(newSigner(t)))
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{Closed: new(true)}); err != nil {
		t.Fatal(err)
	}
	c.Advance(1500 * time.Millisecond)
	passes, err := svc.IssueBypass(ctx, "gala", 3, 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(passes) != 3 {
		t.Fatalf("%d passes, want 3", len(passes))
	}
	now := c.Now().Unix()
	seen := map[string]bool{}
	for i, p := range passes {
		got := claimsOfPass(t, p)
		want := bypassClaims{Iss: "https://queue.example.com", Aud: "gala", Iat: now, Nbf: now, Exp: now + 7200, Ticket: new(int64(0)), Bypass: true}
		if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(bypassClaims{}, "Sub", "Jti")); diff != "" {
			t.Errorf("pass %d (-want +got):\n%s", i, diff)
		}
		if !queue.ValidTokenID(got.Sub) || seen[got.Sub] || seen[got.Jti] || got.Jti == "" {
			t.Errorf("pass %d: sub %q jti %q, want fresh ones", i, got.Sub, got.Jti)
		}
		seen[got.Sub], seen[got.Jti] = true, true
	}
}

// TestIssueBypassRefuses: bad counts, validities and program ids, an
// unknown program, and a service without a signer.
func TestIssueBypassRefuses(t *testing.T) {
	ctx := t.Context()
	// What is refused does not depend on the signature: a stub signs, so
	// that a thousand passes cost nothing.
	svc, _ := newService(t, queue.WithPassSigner(stubSigner{}))
	mustPut(t, svc, "gala", 1, false)
	unsigned, _ := newService(t)
	mustPut(t, unsigned, "gala", 1, false)
	for _, tc := range []struct {
		name     string
		svc      *queue.Service
		program  string
		count    int64
		validity time.Duration
		want     string
	}{
		{"count 0", svc, "gala", 0, time.Hour, api.CodeInvalidCount},
		{"count 1001", svc, "gala", 1001, time.Hour, api.CodeInvalidCount},
		{"validity 59 s", svc, "gala", 1, 59 * time.Second, api.CodeInvalidValidity},
		{"validity a day and a second", svc, "gala", 1, 24*time.Hour + time.Second, api.CodeInvalidValidity},
		{"bad program id", svc, "-gala", 1, time.Hour, api.CodeInvalidProgramID},
		{"unknown program", svc, "gone", 1, time.Hour, api.CodeProgramNotFound},
		{"no signer", unsigned, "gala", 1, time.Hour, api.CodePassUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			passes, err := tc.svc.IssueBypass(ctx, tc.program, tc.count, tc.validity)
			var qe *queue.Error
			if !errors.As(err, &qe) || qe.Code != tc.want || passes != nil {
				t.Errorf("IssueBypass = %d passes, %v; want %s", len(passes), err, tc.want)
			}
		})
	}
	for _, n := range []int64{1, bypass.MaxCount} {
		if passes, err := svc.IssueBypass(ctx, "gala", n, bypass.MinValidity); err != nil || int64(len(passes)) != n {
			t.Errorf("IssueBypass(%d) = %d passes, %v", n, len(passes), err)
		}
	}
}

// TestBypassTakesSlots: under a cap, bypass passes hold slots until they
// expire (plus the verifiers' margin): the line waits meanwhile, more
// passes than the room left get NO_ROOM with a retry delay, and a
// failed signing reserves nothing.
func TestBypassTakesSlots(t *testing.T) {
	ctx := t.Context()
	signer := &flakySigner{PassSigner: newSigner(t)}
	svc, c := newService(t, queue.WithPassSigner(signer), queue.WithProgramCache(time.Second))
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(10)), MaxActiveUsers: new(int64(5))}); err != nil {
		t.Fatal(err)
	}
	signer.fail.Store(true)
	if _, err := svc.IssueBypass(ctx, "gala", 5, time.Minute); !hasCode(err, api.CodePassUnavailable) {
		t.Fatalf("failing signer: %v, want PASS_UNAVAILABLE", err)
	}
	signer.fail.Store(false)
	if _, err := svc.IssueBypass(ctx, "gala", 4, time.Minute); err != nil {
		t.Fatalf("4 of 5 after a failed signing: %v", err)
	}
	_, err := svc.IssueBypass(ctx, "gala", 2, time.Minute)
	var qe *queue.Error
	if !errors.As(err, &qe) || qe.Code != api.CodeNoRoom || qe.Kind != queue.KindConflict || qe.RetryAfter <= 0 {
		t.Fatalf("2 more: %v, want NO_ROOM with a retry delay", err)
	}
	var tokens []string
	for range 3 {
		v, _, err := svc.Enter(ctx, "gala", queue.Entry{})
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, v.TokenID)
	}
	admitted := func() int {
		n := 0
		for _, id := range tokens {
			v, err := svc.Poll(ctx, "gala", id)
			if err != nil {
				t.Fatal(err)
			}
			if v.Status == queue.StatusAdmitted {
				n++
			}
		}
		return n
	}
	c.Advance(30 * time.Second)
	if n := admitted(); n != 1 {
		t.Fatalf("while 4 passes of a cap of 5 live: %d admitted, want 1", n)
	}
	if cs, err := svc.Program(ctx, "gala"); err != nil || cs.BypassHeld != 4 {
		t.Errorf("counters: %d slots held by bypass passes, %v; want 4", cs.BypassHeld, err)
	}
	c.Advance(2 * time.Minute) // past exp plus the margin, and the release
	if n := admitted(); n != 3 {
		t.Fatalf("after the passes expired: %d admitted, want 3", n)
	}
	if cs, err := svc.Program(ctx, "gala"); err != nil || cs.BypassHeld != 0 {
		t.Errorf("counters: %d slots held by bypass passes, %v; want none", cs.BypassHeld, err)
	}
}

func hasCode(err error, code string) bool {
	var qe *queue.Error
	return errors.As(err, &qe) && qe.Code == code
}

// stubSigner signs a pass as its token's or bypass's id.
type stubSigner struct{}

func (stubSigner) SignPass(_ context.Context, t queue.Token) (string, error) {
	return "pass." + t.ID, nil
}
func (stubSigner) SignBypass(_ context.Context, b bypass.Pass) (string, error) {
	return "bypass." + b.ID, nil
}

// flakySigner fails its bypass passes while fail is set.
type flakySigner struct {
	queue.PassSigner
	fail atomic.Bool
}

func (s *flakySigner) SignBypass(ctx context.Context, b bypass.Pass) (string, error) {
	if s.fail.Load() {
		return "", errors.New("KMS is down")
	}
	return s.PassSigner.(bypass.Signer).SignBypass(ctx, b)
}

// TestBypassSigningBounds: an issuance signs at most BypassSigners passes
// at a time, and gives up, reserving nothing, in time to leave the
// request AdminDeadline for the change: every signature's deadline is the
// request's less AdminDeadline. The signer fails once BypassSigners
// signatures are in flight.
func TestBypassSigningBounds(t *testing.T) {
	signer := &blockingSigner{PassSigner: newSigner(t)}
	signer.block.Store(true)
	svc, _ := newService(t, queue.WithPassSigner(signer))
	if _, _, err := svc.PutProgram(t.Context(), "gala", api.ProgramSettings{MaxActiveUsers: new(int64(100))}); err != nil {
		t.Fatal(err)
	}
	// A request deadline that binds before the signing budget does.
	deadline := time.Now().Add(queue.AdminDeadline + bypass.SignBudget - time.Second)
	ctx, cancel := context.WithDeadline(t.Context(), deadline)
	defer cancel()
	if _, err := svc.IssueBypass(ctx, "gala", 100, time.Hour); !hasCode(err, api.CodePassUnavailable) {
		t.Fatalf("signer that fails: %v, want PASS_UNAVAILABLE", err)
	}
	if got := signer.most.Load(); got != bypass.Signers {
		t.Errorf("at most %d signatures in flight, want %d", got, bypass.Signers)
	}
	for _, d := range signer.deadlines() {
		if want := deadline.Add(-queue.AdminDeadline); !d.Equal(want) {
			t.Errorf("a signature's deadline %v before the request's, want AdminDeadline (%v)", deadline.Sub(d), queue.AdminDeadline)
		}
	}
	signer.block.Store(false)
	if passes, err := svc.IssueBypass(t.Context(), "gala", 100, time.Hour); err != nil || len(passes) != 100 {
		t.Fatalf("the whole cap after a failed signing: %d passes, %v", len(passes), err)
	}
}

// blockingSigner, while block is set, holds each signature until
// BypassSigners are in flight, then fails them, recording their deadlines.
type blockingSigner struct {
	queue.PassSigner
	block     atomic.Bool
	now, most atomic.Int64
	arrived   await.Counter
	mu        sync.Mutex
	seen      []time.Time
}

func (s *blockingSigner) SignBypass(ctx context.Context, b bypass.Pass) (string, error) {
	if !s.block.Load() {
		return s.PassSigner.(bypass.Signer).SignBypass(ctx, b)
	}
	n := s.now.Add(1)
	defer s.now.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	d, _ := ctx.Deadline()
	s.mu.Lock()
	s.seen = append(s.seen, d)
	s.mu.Unlock()
	s.arrived.Add()
	if err := s.arrived.Wait(ctx, bypass.Signers); err != nil {
		return "", err
	}
	return "", errors.New("blocking signer: no signature")
}

func (s *blockingSigner) deadlines() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen)
}

// BenchmarkIssueBypass issues n bypass passes with an in-process key (the
// local server's), on a program without a cap: the signatures, 8 at a
// time, and the one admin change that records them.
func BenchmarkIssueBypass(b *testing.B) {
	for _, n := range []int64{1, 100, 1000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			svc, c := newService(b, queue.WithPassSigner(newSigner(b)), queue.WithLogger(slog.New(slog.DiscardHandler)))
			if _, _, err := svc.PutProgram(b.Context(), "gala", api.ProgramSettings{}); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := svc.IssueBypass(b.Context(), "gala", n, time.Hour); err != nil {
					b.Fatal(err)
				}
				c.Advance(time.Second)
			}
		})
	}
}
