package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
)

// handoffOf is the handoff of hash for t, made at t0+at and kept 5 minutes.
func handoffOf(t queue.Token, hash string, at time.Duration) (queue.Handoff, queue.Token) {
	t.Handoff, t.HandoffAt = hash, t0.Add(at)
	return queue.Handoff{Hash: hash, ProgramID: t.ProgramID, TokenID: t.ID, ExpiresAt: t.HandoffAt.Add(queue.HandoffLife)}, t
}

// testHandoffs: a handoff is stored and recorded on its pending token at
// most once per gap; a token moves once, to the first MovedTo, only with
// its latest handoff, and a moved token is no longer pending.
func testHandoffs(t *testing.T, s queue.Store) {
	hs, ctx := s.(queue.HandoffStore), t.Context()
	tok := placed(waiting(11), 11, 42*time.Second) // what the enter answered stays through the move
	checkErr(t, "PutToken", s.PutToken(ctx, tok), nil)
	h1, with1 := handoffOf(tok, "hash-one", ms(1_000))
	checkErr(t, "PutHandoff", hs.PutHandoff(ctx, h1, with1, t0), nil)
	checkCall(t, "GetHandoff", answer(hs.GetHandoff(ctx, "hash-one")), h1)
	checkCall(t, "the token after PutHandoff", answer(s.GetToken(ctx, tok.ID)), with1)
	checkErr(t, "GetHandoff of no code", errOf(hs.GetHandoff(ctx, "hash-none")), queue.ErrNotFound)

	h2, with2 := handoffOf(tok, "hash-two", ms(5_000))
	checkErr(t, "PutHandoff within the gap", hs.PutHandoff(ctx, h2, with2, with1.HandoffAt.Add(-ms(1))), queue.ErrConflict)
	checkCall(t, "the token after a refused PutHandoff", answer(s.GetToken(ctx, tok.ID)), with1)
	checkErr(t, "PutHandoff after the gap", hs.PutHandoff(ctx, h2, with2, with1.HandoffAt), nil)

	stale := with1
	stale.MovedTo, stale.MovedAt = queue.NewTokenID(), t0.Add(ms(6_000))
	checkCall(t, "MoveToken with a replaced handoff", answer(hs.MoveToken(ctx, stale)), with2)
	first, second := with2, with2
	first.MovedTo, first.MovedAt = queue.NewTokenID(), t0.Add(ms(7_000))
	second.MovedTo, second.MovedAt = queue.NewTokenID(), t0.Add(ms(8_000))
	checkCall(t, "MoveToken", answer(hs.MoveToken(ctx, first)), first)
	checkCall(t, "MoveToken again (a retry)", answer(hs.MoveToken(ctx, first)), first)
	checkCall(t, "MoveToken to another", answer(hs.MoveToken(ctx, second)), first)
	checkCall(t, "MarkAdmitted of a moved token", answer(s.MarkAdmitted(ctx, admitted(first))), first)
	h3, with3 := handoffOf(first, "hash-three", ms(60_000))
	checkErr(t, "PutHandoff of a moved token", hs.PutHandoff(ctx, h3, with3, t0.Add(ms(50_000))), queue.ErrConflict)

	done := admitted(waiting(12))
	checkErr(t, "PutToken admitted", s.PutToken(ctx, done), nil)
	h4, with4 := handoffOf(done, "hash-four", ms(1_000))
	checkErr(t, "PutHandoff of an admitted token", hs.PutHandoff(ctx, h4, with4, t0), queue.ErrConflict)
	move := with4
	move.MovedTo, move.MovedAt = queue.NewTokenID(), t0.Add(ms(2_000))
	checkCall(t, "MoveToken of an admitted token", answer(hs.MoveToken(ctx, move)), done)
	checkErr(t, "MoveToken of no token", errOf(hs.MoveToken(ctx, waiting(13))), queue.ErrNotFound)

	arrived := waiting(14) // a place a handoff brought, of an account's kind of fields
	arrived.HandoffAt, arrived.Moves, arrived.Account = t0.Add(ms(3_000)), 2, "alice@shop"
	arrived = placed(arrived, 14, 90*time.Second)
	checkErr(t, "PutToken moved here", s.PutToken(ctx, arrived), nil)
	checkCall(t, "GetToken moved here", answer(s.GetToken(ctx, arrived.ID)), arrived)
}

// testHandoffsConcurrent: of MoveTokens racing on one handoff, one moves
// the token and every caller reads its MovedTo back.
func testHandoffsConcurrent(t *testing.T, s queue.Store) {
	hs, ctx := s.(queue.HandoffStore), t.Context()
	tok := waiting(21)
	checkErr(t, "PutToken", s.PutToken(ctx, tok), nil)
	h, with := handoffOf(tok, "hash-race", ms(1_000))
	checkErr(t, "PutHandoff", hs.PutHandoff(ctx, h, with, t0), nil)
	oneWins(t, "racing MoveToken", claimsPerKey, func(i int) (bool, error) {
		m := with
		m.MovedTo, m.MovedAt = fmt.Sprintf("moved-to-%02d", i), t0.Add(ms(2_000))
		got, err := hs.MoveToken(ctx, m)
		return got.MovedTo == m.MovedTo, err
	})
}

// HandoffRace holds a Service on s to issue 34's rule: devices that redeem
// one handoff code at once move the place once, to the one answered created
// with the same ticket; the others get HANDOFF_USED, the old token reads
// MOVED, and a retry of the winner answers its token again.
func HandoffRace(t *testing.T, s queue.Store) {
	ctx := t.Context()
	svc := queue.NewService(s, polling.DefaultTiers())
	paused := true
	_, _, err := svc.PutProgram(ctx, "moving", api.ProgramSettings{Paused: &paused})
	checkErr(t, "PutProgram", err, nil)
	v, _, err := svc.Enter(ctx, "moving", queue.Entry{})
	checkErr(t, "Enter", err, nil)
	code, _, err := svc.MakeHandoff(ctx, "moving", v.TokenID)
	checkErr(t, "MakeHandoff", err, nil)
	moved := make([]queue.View, claimsPerKey)
	key := func(i int) string { return fmt.Sprintf("device-%02d-redeem-key", i) }
	w := oneWins(t, "devices redeeming one code", claimsPerKey, func(i int) (bool, error) {
		got, created, err := svc.Redeem(ctx, "moving", code, key(i))
		if qe := (*queue.Error)(nil); errors.As(err, &qe) && qe.Code == api.CodeHandoffUsed {
			return false, nil
		} else if err != nil {
			return false, fmt.Errorf("redeem %d: %w", i, err)
		}
		moved[i] = got
		return created, nil
	})
	if moved[w].Ticket != v.Ticket || moved[w].TokenID == v.TokenID || moved[w].Status != queue.StatusWaiting {
		t.Errorf("the place moved to %+v; want ticket %d, WAITING, under a new id", moved[w], v.Ticket)
	}
	again, created, err := svc.Redeem(ctx, "moving", code, key(w))
	if err != nil || created || again.TokenID != moved[w].TokenID {
		t.Errorf("the winner's retry = %s, created %v, %v; want %s", again.TokenID, created, err, moved[w].TokenID)
	}
	if old, err := svc.Poll(ctx, "moving", v.TokenID); err != nil || old.Status != queue.StatusMoved {
		t.Errorf("the old token reads %+v, %v; want MOVED", old, err)
	}
	if c := answer(svc.Program(ctx, "moving")).must(t, "Program"); c.Issued != 1 {
		t.Errorf("%d tickets issued, want 1", c.Issued)
	}
}
