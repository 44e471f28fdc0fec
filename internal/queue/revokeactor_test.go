package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/queue"
)

// historyOf is programID's history as "actor action" lines, newest first.
func historyOf(t *testing.T, svc *queue.Service, programID string) []queue.Change {
	t.Helper()
	h, err := svc.History(context.Background(), programID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	return h.Changes
}

// TestRevokeAgainKeepsTheActor: alice revokes a token; bob's second revoke
// of it changes nothing ("revoking it again is not an error"), so the
// history must still name alice, not bob, as the one who revoked it.
func TestRevokeAgainKeepsTheActor(t *testing.T) {
	svc, c := newService(t)
	ctx := context.Background()
	mustPut(t, svc, "gala", 1, true)
	v, _, err := svc.Enter(ctx, "gala", queue.Entry{})
	if err != nil {
		t.Fatal(err)
	}
	alice := queue.WithActor(ctx, "arn:aws:iam::1:user/alice")
	bob := queue.WithActor(ctx, "arn:aws:iam::1:user/bob")
	if err := svc.RevokeToken(alice, "gala", v.TokenID); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	if err := svc.RevokeToken(bob, "gala", v.TokenID); err != nil {
		t.Fatal(err)
	}
	var revokes []string
	for _, ch := range historyOf(t, svc, "gala") {
		if ch.Action == queue.ActionRevoke {
			revokes = append(revokes, ch.Actor)
		}
	}
	if len(revokes) != 1 || revokes[0] != "arn:aws:iam::1:user/alice" {
		t.Errorf("revokes in the history by %q; want one, by alice (bob's repeat applied nothing)", revokes)
	}
}
