package client_test

import (
	"testing"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/tools/client"
)

// TestProve: against the real handler, an enter without a proof needs one;
// Prove fetches and solves a challenge with which the enter takes its
// place; the same proof again needs a new one.
func TestProve(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv.URL+"/", client.WithAuth(client.BearerToken(secret)), client.WithHTTPClient(srv.Client()))
	ctx := t.Context()
	if _, _, err := c.PutProgram(ctx, "guarded", api.ProgramSettings{Paused: new(true), ChallengeBits: new(int64(8))}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Enter(ctx, "guarded", client.Entry{}); !client.NeedsProof(err) {
		t.Fatalf("enter without a proof: %v, want CHALLENGE_REQUIRED", err)
	}
	e, err := c.Prove(ctx, "guarded", client.Entry{IdempotencyKey: client.NewIdempotencyKey()})
	if err != nil || e.Challenge == "" || e.Solution == "" {
		t.Fatalf("Prove = %+v, %v", e, err)
	}
	if _, created, err := c.Enter(ctx, "guarded", e); err != nil || !created {
		t.Fatalf("enter with the proof: created %v, %v", created, err)
	}
	e.IdempotencyKey = client.NewIdempotencyKey()
	if _, _, err := c.Enter(ctx, "guarded", e); !client.NeedsProof(err) {
		t.Errorf("the proof again under another key: %v, want CHALLENGE_FAILED", err)
	}
	if _, _, err := c.PutProgram(ctx, "open", api.ProgramSettings{Paused: new(true)}); err != nil {
		t.Fatal(err)
	}
	if e, err := c.Prove(ctx, "open", client.Entry{}); err != nil || e.Challenge != "" {
		t.Errorf("Prove of a program without proof: %+v, %v; want no proof", e, err)
	}
}
