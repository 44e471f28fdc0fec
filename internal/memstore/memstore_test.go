package memstore_test

import (
	"testing"
	"time"

	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/storetest"
)

func TestContract(t *testing.T) {
	storetest.Run(t, func(*testing.T) queue.Store { return memstore.New() })
}

func TestSweep(t *testing.T) {
	ctx := t.Context()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := memstore.New()
	tokens := map[string]time.Time{ // name → ExpiresAt
		"expired":        now.Add(-time.Second),
		"expiring now":   now, // TTL deletes items strictly after their time
		"expiring later": now.Add(time.Second),
		"no expiry":      {},
	}
	ids := make(map[string]string)
	for name, exp := range tokens {
		id := queue.NewTokenID()
		ids[name] = id
		if err := s.PutToken(ctx, queue.Token{ID: id, ProgramID: "p", Ticket: 1, ExpiresAt: exp}); err != nil {
			t.Fatalf("PutToken(%s): %v", name, err)
		}
	}

	got, want := s.Sweep(now), 1
	if got != want {
		t.Errorf("Sweep removed %d tokens, want %d", got, want)
	}
	for name, wantKept := range map[string]bool{"expired": false, "expiring now": true, "expiring later": true, "no expiry": true} {
		_, err := s.GetToken(ctx, ids[name])
		if got := err == nil; got != wantKept {
			t.Errorf("%s: kept = %v (GetToken: %v), want %v", name, got, err, wantKept)
		}
	}

	got, want = s.Sweep(now.Add(time.Hour)), 2
	if got != want {
		t.Errorf("second Sweep removed %d tokens, want %d", got, want)
	}
	if _, err := s.GetToken(ctx, ids["no expiry"]); err != nil {
		t.Errorf("token without ExpiresAt: GetToken: %v, want it kept", err)
	}
}

// TestProofReplay: 16 enters with one proof of work take one ticket.
func TestProofReplay(t *testing.T) { storetest.ProofReplay(t, memstore.New()) }

// TestPassKeys holds the store to admissionpass.KeyStore's contract.
func TestPassKeys(t *testing.T) { storetest.PassKeys(t, memstore.New()) }
