package queue_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/simclock"
)

var t0 = time.Date(2026, 5, 19, 10, 0, 0, 0, time.UTC)

// program returns a program with issued tickets, base admitted at t0,
// admitting perSecond people per second.
func program(issued, base int64, perSecond float64, paused bool) admission.Program {
	p := admission.Program{ID: "p", Issued: issued}
	return p.Rebased(t0, rate(perSecond), paused, base, 0)
}

// rate is perSecond as a Rate; it panics if perSecond is not one.
func rate(perSecond float64) pace.Rate {
	r, ok := pace.NewRate(perSecond)
	if !ok {
		panic(fmt.Sprintf("rate %g is not a valid admission rate", perSecond))
	}
	return r
}

func TestValidIDs(t *testing.T) {
	long := "a123456789012345678901234567890123456789012345678901234567890123" // 64
	programs := map[string]bool{"demo": true, "Spring-Gala_2026": true, "9": true, long: true, long + "x": false,
		"": false, "-x": false, "_x": false, "a b": false, "a/b": false, "ü": false, "a.b": false}
	for id, want := range programs {
		if got := queue.ValidProgramID(id); got != want {
			t.Errorf("ValidProgramID(%q) = %v, want %v", id, got, want)
		}
	}
	tokens := map[string]bool{queue.NewTokenID(): true, "waitingTokenFixture001": true, "short": false,
		"waitingTokenFixture0012": false, "waitingTokenFixture00!": false, "": false}
	for id, want := range tokens {
		if got := queue.ValidTokenID(id); got != want {
			t.Errorf("ValidTokenID(%q) = %v, want %v", id, got, want)
		}
	}
}

func TestNewTokenIDIsRandom(t *testing.T) {
	seen := make(map[string]bool)
	for range 10_000 {
		id := queue.NewTokenID()
		if seen[id] {
			t.Fatalf("duplicate token id %s", id)
		}
		seen[id] = true
	}
}

// TestMeasuredRate: manual admissions at a steady pace give a rate and a
// wait estimate; a pause in them withdraws it.
func TestMeasuredRate(t *testing.T) {
	ctx := t.Context()
	svc, c := newService(t)
	mustPut(t, svc, "manual", 0, false)
	var last string
	for range 200 {
		v, _, err := svc.Enter(ctx, "manual", queue.Entry{})
		if err != nil {
			t.Fatal(err)
		}
		last = v.TokenID
	}
	for range 3 { // 10 people every 2 s: 5 per second
		if _, err := svc.Admit(ctx, "manual", 10); err != nil {
			t.Fatal(err)
		}
		c.Advance(2 * time.Second)
	}
	v, err := svc.Poll(ctx, "manual", last)
	if err != nil {
		t.Fatal(err)
	}
	if v.Position != 170 || v.EstimatedWait != 34*time.Second {
		t.Errorf("under a steady manual pace: position %d, wait %v; want 170 and 34s", v.Position, v.EstimatedWait)
	}
	c.Advance(time.Minute)
	if v, _ := svc.Poll(ctx, "manual", last); v.EstimatedWait != 0 {
		t.Errorf("a minute after the last admission the pace still counts: %+v", v)
	}
}

// TestPollBeyondRange: a poll at the back of a queue whose wait exceeds a
// time.Duration is answered, with the estimate capped (the service once
// spun forever on it).
func TestPollBeyondRange(t *testing.T) {
	store := memstore.New()
	svc := queue.NewService(store, polling.DefaultETA(), queue.WithClock(simclock.NewFake(t0)))
	for _, tt := range []struct {
		rate    float64
		waiting int64
	}{{0.001, 9_300_000}, {0.01, 93_000_000}} {
		id := fmt.Sprintf("slow-%d", tt.waiting)
		p := program(tt.waiting, 0, tt.rate, false)
		p.ID = id
		if err := store.CreateProgram(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		v, _, err := svc.Enter(t.Context(), id, queue.Entry{})
		if err != nil {
			t.Fatal(err)
		}
		if v.Position != tt.waiting+1 || v.EstimatedWait != admission.MaxEstimatedWait || v.RetryAfter <= 0 {
			t.Errorf("%s: position %d, wait %v, retry after %v; want %d, %v and a delay", id, v.Position, v.EstimatedWait, v.RetryAfter, tt.waiting+1, admission.MaxEstimatedWait)
		}
	}
}
