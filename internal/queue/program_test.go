package queue_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/queue"
)

var t0 = time.Date(2026, 5, 19, 10, 0, 0, 0, time.UTC)

// program returns a program with issued tickets, base admitted at t0,
// admitting perSecond people per second.
func program(issued, base int64, perSecond float64, paused bool) queue.Program {
	p := queue.Program{ID: "p", Issued: issued}
	return p.Rebased(t0, rate(perSecond), paused, base, 0)
}

// rate is perSecond as a Rate; it panics if perSecond is not one.
func rate(perSecond float64) queue.Rate {
	r, ok := queue.NewRate(perSecond)
	if !ok {
		panic(fmt.Sprintf("rate %g is not a valid admission rate", perSecond))
	}
	return r
}

func TestServing(t *testing.T) {
	tests := []struct {
		name string
		p    queue.Program
		at   time.Duration
		want int64
	}{
		{"AtAnchor", program(100, 10, 2, false), 0, 10},
		{"BeforeOneTicket", program(100, 10, 2, false), 499 * time.Millisecond, 10},
		{"OneTicket", program(100, 10, 2, false), 500 * time.Millisecond, 11},
		{"TenSeconds", program(100, 10, 2, false), 10 * time.Second, 30},
		{"CappedAtIssued", program(100, 10, 2, false), time.Hour, 100},
		{"Paused", program(100, 10, 2, true), time.Hour, 10},
		{"RateZero", program(100, 10, 0, false), time.Hour, 10},
		{"SlowRateExact", program(100, 0, 0.1, false), 10 * time.Second, 1},
		{"SlowRateJustBefore", program(100, 0, 0.1, false), 9999 * time.Millisecond, 0},
		{"ClockBeforeAnchor", program(100, 10, 2, false), -time.Minute, 10},
		{"FractionalRate", program(1000, 0, 3, false), time.Second, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Serving(t0.Add(tt.at)); got != tt.want {
				t.Errorf("Serving(+%v) = %d, want %d", tt.at, got, tt.want)
			}
		})
	}
}

// TestAdmissionIsSmooth checks one-second granularity: at 10/s the counter
// moves by exactly 10 in every second, not in minute-sized steps.
func TestAdmissionIsSmooth(t *testing.T) {
	p := program(10_000, 0, 10, false)
	prev := p.Serving(t0)
	for s := 1; s <= 120; s++ {
		cur := p.Serving(t0.Add(time.Duration(s) * time.Second))
		if cur-prev != 10 {
			t.Fatalf("second %d admitted %d, want 10", s, cur-prev)
		}
		prev = cur
	}
}

// TestIdleCreditDoesNotPileUp: after an hour with an empty queue, a burst of
// 1,000 arrivals is admitted at the rate, not all at once.
func TestIdleCreditDoesNotPileUp(t *testing.T) {
	p := program(5, 0, 10, false) // five people, drained after 0.5 s
	later := t0.Add(time.Hour)
	if got := p.Serving(later); got != 5 {
		t.Fatalf("Serving after an hour = %d, want 5 (all issued)", got)
	}
	for range 1000 {
		p = p.WithTicketIssued(later)
	}
	if got := p.Serving(later); got != 5 {
		t.Errorf("right after the burst Serving = %d, want 5: nobody of the burst admitted on old credit", got)
	}
	if got := p.Serving(later.Add(time.Second)); got != 15 {
		t.Errorf("one second after the burst Serving = %d, want 15", got)
	}
	if got := p.Serving(later.Add(100 * time.Second)); got != 1005 {
		t.Errorf("100 s after the burst Serving = %d, want 1005 (all)", got)
	}
}

func TestWithTicketIssuedWhileBusyKeepsAnchor(t *testing.T) {
	p := program(100, 0, 10, false) // drains at t0+10s
	q := p.WithTicketIssued(t0.Add(5 * time.Second))
	want := p
	want.Issued, want.DrainAtNs = 101, p.DrainAtNs+100*int64(time.Millisecond)
	want.Recent[0] = t0.Add(5 * time.Second).UnixMilli()
	if d := cmp.Diff(want, q); d != "" {
		t.Errorf("busy queue: only Issued, DrainAtNs (by 100 ms) and the last ticket's instant move (-want +got):\n%s", d)
	}
	// Paused: only the counter of tickets moves.
	paused := program(100, 0, 10, true)
	want = paused
	want.Issued = 101
	want.Recent[0] = t0.Add(time.Hour).UnixMilli()
	if d := cmp.Diff(want, paused.WithTicketIssued(t0.Add(time.Hour))); d != "" {
		t.Errorf("paused (-want +got):\n%s", d)
	}
}

func TestRebased(t *testing.T) {
	p := program(1000, 100, 10, false)
	at := t0.Add(10 * time.Second) // serving 200
	tests := []struct {
		name        string
		rate        float64 // per second
		paused      bool
		admit       int64
		wantNow     int64
		wantLater   int64 // 10 s after the change
		wantVersion int64
	}{
		{"Pause", 10, true, 0, 200, 200, p.Version + 1},
		{"SlowDown", 1, false, 0, 200, 210, p.Version + 1},
		{"SpeedUp", 50, false, 0, 200, 700, p.Version + 1},
		{"Admit", 10, false, 30, 230, 330, p.Version + 1},
		{"AdmitCappedAtIssued", 10, false, 5000, 1000, 1000, p.Version + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := p.Rebased(at, rate(tt.rate), tt.paused, tt.admit, 0)
			if got := q.Serving(at); got != tt.wantNow {
				t.Errorf("serving at change = %d, want %d", got, tt.wantNow)
			}
			if got := q.Serving(at.Add(10 * time.Second)); got != tt.wantLater {
				t.Errorf("serving 10 s later = %d, want %d", got, tt.wantLater)
			}
			if q.Version != tt.wantVersion {
				t.Errorf("version = %d, want %d", q.Version, tt.wantVersion)
			}
			if q.Serving(at) < p.Serving(at) {
				t.Error("a change moved the counter backwards")
			}
		})
	}
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
