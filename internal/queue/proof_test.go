package queue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/challenge"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/simclock"
)

// guarded puts a paused program id asking for bits of proof of work.
func guarded(t *testing.T, svc *queue.Service, id string, bits int64) {
	t.Helper()
	paused := true
	if _, _, err := svc.PutProgram(t.Context(), id, api.ProgramSettings{Paused: &paused, ChallengeBits: &bits}); err != nil {
		t.Fatal(err)
	}
}

// proof fetches a challenge of program id and solves it.
func proof(t *testing.T, svc *queue.Service, id string) queue.Entry {
	t.Helper()
	c, err := svc.Challenge(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	sol, _, err := challenge.Solve(t.Context(), c.Challenge, c.Bits)
	if err != nil {
		t.Fatal(err)
	}
	return queue.Entry{Challenge: c.Challenge, Solution: sol}
}

// wantRefused fails t unless err is a 403 of code.
func wantRefused(t *testing.T, what string, err error, code string) {
	t.Helper()
	var qe *queue.Error
	if !errors.As(err, &qe) || qe.Code != code || qe.Kind != queue.KindForbidden {
		t.Errorf("%s: err = %v, want %s", what, err, code)
	}
}

func TestChallengeRefusals(t *testing.T) {
	ctx := t.Context()
	svc, c := newService(t)
	guarded(t, svc, "gala", 8)
	guarded(t, svc, "other", 8)

	_, _, err := svc.Enter(ctx, "gala", queue.Entry{})
	wantRefused(t, "no proof", err, api.CodeChallengeRequired)
	if err != nil && !strings.Contains(err.Error(), "/api/v1/queues/programs/gala/challenge") {
		t.Errorf("CHALLENGE_REQUIRED does not name the challenge route: %v", err)
	}
	good := proof(t, svc, "gala")
	wrong := good
	for wrong.Solution = "x"; challenge.ZeroBits(wrong.Challenge, wrong.Solution) >= 8; wrong.Solution += "x" {
	}
	expired := proof(t, svc, "gala")
	tests := []struct {
		name string
		e    queue.Entry
	}{
		{"a challenge without its solution", queue.Entry{Challenge: good.Challenge}},
		{"a solution without its challenge", queue.Entry{Solution: good.Solution}},
		{"a wrong solution", wrong},
		{"a forged challenge", queue.Entry{Challenge: strings.Repeat("A", challenge.EncodedLen), Solution: "a"}},
		{"another program's proof", proof(t, svc, "other")},
	}
	for _, tt := range tests {
		_, _, err := svc.Enter(ctx, "gala", tt.e)
		wantRefused(t, tt.name, err, api.CodeChallengeFailed)
	}
	c.Advance(challenge.Lifetime)
	_, _, err = svc.Enter(ctx, "gala", expired)
	wantRefused(t, "an expired proof", err, api.CodeChallengeFailed)
	if n := issued(t, svc, "gala"); n != 0 {
		t.Errorf("the refusals took %d tickets, want none", n)
	}
}

func TestChallengeServesOneEnter(t *testing.T) {
	ctx := t.Context()
	svc, _ := newService(t)
	guarded(t, svc, "gala", 8)
	e := proof(t, svc, "gala")
	if _, created, err := svc.Enter(ctx, "gala", e); err != nil || !created {
		t.Fatalf("enter with a solved proof: created %v, %v", created, err)
	}
	_, _, err := svc.Enter(ctx, "gala", e)
	wantRefused(t, "the proof used again", err, api.CodeChallengeFailed)
	e.IdempotencyKey = "another-enter-with-the-proof"
	_, _, err = svc.Enter(ctx, "gala", e)
	wantRefused(t, "the proof used again with a key", err, api.CodeChallengeFailed)
	if n := issued(t, svc, "gala"); n != 1 {
		t.Errorf("%d tickets, want 1", n)
	}
}

func TestChallengeRetryWithKey(t *testing.T) {
	ctx := t.Context()
	svc, _ := newService(t)
	guarded(t, svc, "gala", 8)
	e := proof(t, svc, "gala")
	e.IdempotencyKey = "the-enter-of-one-person"
	first, created, err := svc.Enter(ctx, "gala", e)
	if err != nil || !created {
		t.Fatalf("first enter: created %v, %v", created, err)
	}
	// The answer was lost: the retry, with or without the proof, answers
	// the same token.
	for _, retry := range []queue.Entry{e, {IdempotencyKey: e.IdempotencyKey}} {
		v, created, err := svc.Enter(ctx, "gala", retry)
		if err != nil || created || v.TokenID != first.TokenID {
			t.Errorf("retry %+v: %s created %v, %v; want the first token", retry, v.TokenID, created, err)
		}
	}
	// A token sent again needs no proof either.
	if v, _, err := svc.Enter(ctx, "gala", queue.Entry{Token: first.TokenID}); err != nil || v.TokenID != first.TokenID {
		t.Errorf("enter with the token: %s, %v", v.TokenID, err)
	}
}

// faultyIssue fails the first IssueTicket, after the proof was recorded.
type faultyIssue struct {
	*memstore.Store
	failed bool
}

func (s *faultyIssue) IssueTicket(ctx context.Context, id string, now time.Time) (admission.Program, error) {
	if !s.failed {
		s.failed = true
		return admission.Program{}, errors.New("injected fault")
	}
	return s.Store.IssueTicket(ctx, id, now)
}

// TestChallengeRetryAfterFault: a keyed enter that recorded its proof and
// failed before its ticket may use the same proof again on its retry.
func TestChallengeRetryAfterFault(t *testing.T) {
	ctx := t.Context()
	store := &faultyIssue{Store: memstore.New()}
	svc := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(simclock.NewFake(t0)))
	guarded(t, svc, "gala", 8)
	e := proof(t, svc, "gala")
	e.IdempotencyKey = "the-enter-that-failed-once"
	if _, _, err := svc.Enter(ctx, "gala", e); queue.ErrorKind(err) != queue.KindUnavailable {
		t.Fatalf("first enter: %v, want the store fault", err)
	}
	if _, created, err := svc.Enter(ctx, "gala", e); err != nil || !created {
		t.Errorf("retry with the same key and proof: created %v, %v", created, err)
	}
}

func TestChallengeBitsRaised(t *testing.T) {
	ctx := t.Context()
	svc, _ := newService(t)
	guarded(t, svc, "gala", 4)
	e := proof(t, svc, "gala")
	for challenge.ZeroBits(e.Challenge, e.Solution) >= 12 { // 1 in 256
		e = proof(t, svc, "gala")
	}
	guarded(t, svc, "gala", 12)
	_, _, err := svc.Enter(ctx, "gala", e)
	wantRefused(t, "a proof of fewer bits than asked now", err, api.CodeChallengeFailed)
}

func TestChallengeOff(t *testing.T) {
	ctx := t.Context()
	svc, _ := newService(t)
	mustPut(t, svc, "gala", 1, true)
	c, err := svc.Challenge(ctx, "gala")
	if err != nil || c.Bits != 0 || len(c.Challenge) != challenge.EncodedLen {
		t.Fatalf("challenge of a program without proof: %+v, %v", c, err)
	}
	if _, created, err := svc.Enter(ctx, "gala", queue.Entry{Challenge: "ignored", Solution: "!"}); err != nil || !created {
		t.Errorf("enter of a program without proof: %v", err)
	}
	if _, err := svc.Challenge(ctx, "nope"); queue.ErrorKind(err) != queue.KindNotFound {
		t.Errorf("challenge of an unknown program: %v, want not found", err)
	}
	if _, err := svc.Challenge(ctx, "bad id!"); queue.ErrorKind(err) != queue.KindInvalid {
		t.Errorf("challenge of a malformed id: %v, want invalid", err)
	}
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{ChallengeBits: new(int64(27))}); queue.ErrorKind(err) != queue.KindInvalid {
		t.Errorf("challengeBits 27: %v, want INVALID_SETTINGS", err)
	}
}
