package memstore_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/storetest"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/simclock"
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

// TestHandoffRace: 16 devices redeeming one handoff code move the place once.
func TestHandoffRace(t *testing.T) { storetest.HandoffRace(t, memstore.New()) }

// TestPassKeys holds the store to admissionpass.KeyStore's contract.
func TestPassKeys(t *testing.T) { storetest.PassKeys(t, memstore.New()) }

// TestSweepCapacity: a capped program's capacity records go as
// dynamostore's TTL takes them, dated by the store's clock from the write
// that made them (a mark from its last write): end indexes a day after,
// groups and marks three days after; a later write does not extend a
// group's or an end index's.
func TestSweepCapacity(t *testing.T) {
	ctx := t.Context()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := simclock.NewFake(t0)
	s := memstore.NewWithClock(clk)
	if _, err := s.Sight(ctx, "p", 7); err != nil {
		t.Fatal(err)
	}
	if err := s.PutMark(ctx, "p", capacity.Mark{AtMs: t0.UnixMilli(), Counter: 5, NoShowThrough: 2}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour) // a later write: the group keeps its expiry
	if _, err := s.Sight(ctx, "p", 8); err != nil {
		t.Fatal(err)
	}
	type records struct {
		sighted []int64
		mark    bool
	}
	read := func() records {
		t.Helper()
		g, err := s.ExpireGroup(ctx, "p", capacity.GroupOf(7), 0) // changes nothing: reads the group
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.MarkBefore(ctx, "p", t0.UnixMilli())
		if err != nil && !errors.Is(err, queue.ErrNotFound) {
			t.Fatal(err)
		}
		return records{sighted: g.Sighted, mark: err == nil}
	}
	for _, step := range []struct {
		at   time.Time
		want records
	}{
		{t0.Add(24 * time.Hour), records{sighted: []int64{7, 8}, mark: true}},
		{t0.Add(72 * time.Hour), records{sighted: []int64{7, 8}, mark: true}},
		{t0.Add(72*time.Hour + time.Second), records{}},
	} {
		s.Sweep(step.at)
		if got := read(); !slices.Equal(got.sighted, step.want.sighted) || got.mark != step.want.mark {
			t.Errorf("swept at %v: sighted %v, mark %v; want %v, %v", step.at.Sub(t0), got.sighted, got.mark, step.want.sighted, step.want.mark)
		}
	}

	// End indexes: kept through a day after they were made, gone after,
	// one written again an hour later too.
	clk = simclock.NewFake(t0)
	s = memstore.NewWithClock(clk)
	for _, k := range []int{0, 1} {
		if err := s.AddEnd(ctx, "p", 3, k, 7); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Hour)
	if err := s.AddEnd(ctx, "p", 3, 1, 8); err != nil {
		t.Fatal(err)
	}
	s.Sweep(t0.Add(24 * time.Hour))
	if places, err := s.SealEnds(ctx, "p", 3, 0); err != nil || !slices.Equal(places, []int64{7}) {
		t.Errorf("a day after: end index %v %v, want [7]", places, err)
	}
	s.Sweep(t0.Add(24*time.Hour + time.Second))
	if places, err := s.SealEnds(ctx, "p", 3, 1); err != nil || len(places) != 0 {
		t.Errorf("a day and a second after: end index %v %v, want it gone", places, err)
	}
}
