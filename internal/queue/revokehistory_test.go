package queue_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
)

// failingChanges fails PutChange while fail is set, CommitChange while
// failCommit is.
type failingChanges struct {
	*memstore.Store
	fail, failCommit atomic.Bool
}

func (s *failingChanges) CommitChange(ctx context.Context, programID string, at time.Time, id string) error {
	if s.failCommit.Load() {
		return errors.New("injected: commit change failed")
	}
	return s.Store.CommitChange(ctx, programID, at, id)
}

func (s *failingChanges) PutChange(ctx context.Context, programID string, c queue.Change) error {
	if s.fail.Load() {
		return errors.New("injected: put change failed")
	}
	return s.Store.PutChange(ctx, programID, c)
}

// TestRevokeAppliedIsInHistory: a revoke the store applied is an admin
// change applied, so it must be in the history even when recording it
// fails (the write of a program change is recorded before it is made; a
// revoke is recorded after, so a failure or a crash between hides it).
func TestRevokeAppliedIsInHistory(t *testing.T) {
	store := &failingChanges{Store: memstore.New()}
	svc := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(clock.NewFake(t0)))
	ctx := queue.WithActor(context.Background(), "arn:aws:iam::1:user/support")
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{Paused: new(true)}); err != nil {
		t.Fatal(err)
	}
	v, _, err := svc.Enter(ctx, "gala", queue.Entry{})
	if err != nil {
		t.Fatal(err)
	}
	store.fail.Store(true)
	err = svc.RevokeToken(ctx, "gala", v.TokenID)
	store.fail.Store(false)
	if err == nil {
		t.Fatal("revoke with the history failing answered no error")
	}
	look, lerr := svc.Token(ctx, "gala", v.TokenID)
	if lerr != nil {
		t.Fatal(lerr)
	}
	revoked := look.View.Status == queue.StatusRevoked
	inHistory := false
	for _, ch := range historyOf(t, svc, "gala") {
		inHistory = inHistory || ch.Action == queue.ActionRevoke
	}
	if revoked != inHistory {
		t.Errorf("token revoked: %v, revoke in the history: %v; an applied change must be in the history", revoked, inHistory)
	}
}

// TestRevokeUncommittedIsInHistory: a revoke stored whose history entry
// was left uncommitted (the commit failed, or the instance died) is in the
// history once, with its actor; a second admin's revoke of the same token
// adds nothing.
func TestRevokeUncommittedIsInHistory(t *testing.T) {
	store := &failingChanges{Store: memstore.New()}
	c := clock.NewFake(t0)
	svc := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(c))
	ctx := queue.WithActor(context.Background(), "arn:aws:iam::1:user/alice")
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{Paused: new(true)}); err != nil {
		t.Fatal(err)
	}
	v, _, err := svc.Enter(ctx, "gala", queue.Entry{})
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Second)
	store.failCommit.Store(true)
	if err := svc.RevokeToken(ctx, "gala", v.TokenID); err != nil {
		t.Fatalf("revoke with the commit failing: %v (the revoke is stored; the commit is not needed)", err)
	}
	store.failCommit.Store(false)
	c.Advance(time.Second)
	if err := svc.RevokeToken(queue.WithActor(ctx, "arn:aws:iam::1:user/bob"), "gala", v.TokenID); err != nil {
		t.Fatal(err)
	}
	var revokes []string
	for _, ch := range historyOf(t, svc, "gala") {
		if ch.Action == queue.ActionRevoke {
			revokes = append(revokes, ch.Actor)
		}
	}
	if len(revokes) != 1 || revokes[0] != "arn:aws:iam::1:user/alice" {
		t.Errorf("revokes in the history: %v, want alice's alone", revokes)
	}
}
