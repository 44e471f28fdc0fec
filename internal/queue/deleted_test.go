package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/queue"
)

// TestDeletedProgramTokensAre404: once a program is deleted it is 404
// everywhere (issue 20), its tokens' admin routes included: a lookup or a
// revoke must not answer, nor write a change for a program that is gone.
func TestDeletedProgramTokensAre404(t *testing.T) {
	svc, c := newService(t)
	ctx := context.Background()
	mustPut(t, svc, "gala", 1, true)
	v, _, err := svc.Enter(ctx, "gala", queue.Entry{})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Leave(ctx, "gala", v.TokenID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{Closed: new(true)}); err != nil {
		t.Fatal(err)
	}
	c.Advance(3 * time.Second)
	if err := svc.DeleteProgram(ctx, "gala"); err != nil {
		t.Fatal(err)
	}
	if l, err := svc.Token(ctx, "gala", v.TokenID); !hasCode(err, api.CodeProgramNotFound) {
		t.Errorf("lookup of a deleted program's token = %+v, %v; want PROGRAM_NOT_FOUND", l.View, err)
	}
	if err := svc.RevokeToken(ctx, "gala", v.TokenID); !hasCode(err, api.CodeProgramNotFound) {
		t.Errorf("revoke of a deleted program's token = %v; want PROGRAM_NOT_FOUND", err)
	}
}
