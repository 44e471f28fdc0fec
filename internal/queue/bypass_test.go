package queue_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/await"
)

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
	for _, n := range []int64{1, queue.MaxBypassCount} {
		if passes, err := svc.IssueBypass(ctx, "gala", n, queue.MinBypassValidity); err != nil || int64(len(passes)) != n {
			t.Errorf("IssueBypass(%d) = %d passes, %v", n, len(passes), err)
		}
	}
}

// stubSigner signs a pass as its token's or bypass's id.
type stubSigner struct{}

func (stubSigner) SignPass(_ context.Context, t queue.Token) (string, error) {
	return "pass." + t.ID, nil
}
func (stubSigner) SignBypass(_ context.Context, b queue.Bypass) (string, error) {
	return "bypass." + b.ID, nil
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

// flakySigner fails its bypass passes while fail is set.
type flakySigner struct {
	queue.PassSigner
	fail atomic.Bool
}

func (s *flakySigner) SignBypass(ctx context.Context, b queue.Bypass) (string, error) {
	if s.fail.Load() {
		return "", errors.New("KMS is down")
	}
	return s.PassSigner.(queue.BypassSigner).SignBypass(ctx, b)
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
	deadline := time.Now().Add(queue.AdminDeadline + queue.BypassSignBudget - time.Second)
	ctx, cancel := context.WithDeadline(t.Context(), deadline)
	defer cancel()
	if _, err := svc.IssueBypass(ctx, "gala", 100, time.Hour); !hasCode(err, api.CodePassUnavailable) {
		t.Fatalf("signer that fails: %v, want PASS_UNAVAILABLE", err)
	}
	if got := signer.most.Load(); got != queue.BypassSigners {
		t.Errorf("at most %d signatures in flight, want %d", got, queue.BypassSigners)
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

func (s *blockingSigner) SignBypass(ctx context.Context, b queue.Bypass) (string, error) {
	if !s.block.Load() {
		return s.PassSigner.(queue.BypassSigner).SignBypass(ctx, b)
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
	if err := s.arrived.Wait(ctx, queue.BypassSigners); err != nil {
		return "", err
	}
	return "", errors.New("blocking signer: no signature")
}

func (s *blockingSigner) deadlines() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen)
}

// TestReserveBounded: however many issuances, a program keeps at most 8
// reservations, and from the last issuance on they hold at least what
// each issuance alone would, so merging never raises the ceiling.
func TestReserveBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 20))
	for trial := range 20 {
		var kept, all []queue.Reservation
		ms := int64(1_000_000)
		for range 30 {
			ms += rng.Int64N(60_000)
			r := queue.Reservation{FromMs: ms, UntilMs: ms + 60_000 + rng.Int64N(3_600_000), N: 1 + rng.Int64N(1000), Rate: queue.Rate(rng.Int64N(3) * 500_000)}
			kept, all = queue.Reserve(kept, r, ms), append(all, r)
			if len(kept) > 8 {
				t.Fatalf("trial %d: %d reservations kept", trial, len(kept))
			}
			for at := ms; at < ms+5_000_000; at += 1_000 + rng.Int64N(60_000) {
				var held, want int64
				for _, x := range kept {
					held += x.HeldAt(at)
				}
				for _, x := range all {
					want += x.HeldAt(at)
				}
				if held < want {
					t.Fatalf("trial %d: at %d the kept reservations hold %d, the issuances %d", trial, at, held, want)
				}
			}
		}
	}
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
