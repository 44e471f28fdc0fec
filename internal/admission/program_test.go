package admission_test

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/pace"
)

var t0 = time.Date(2026, 5, 19, 10, 0, 0, 0, time.UTC)

// program returns a program with issued tickets, base admitted at t0,
// admitting perSecond people per second.
func program(issued, base int64, perSecond float64, paused bool) admission.Program {
	return admission.Program{ID: "p", Issued: issued}.Rebased(t0, rate(perSecond), paused, base, 0)
}

// rate is perSecond as a Rate; the tests give only valid rates.
func rate(perSecond float64) pace.Rate {
	r, _ := pace.NewRate(perSecond)
	return r
}

func TestServing(t *testing.T) {
	tests := []struct {
		name string
		p    admission.Program
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

func TestAdmissionTime(t *testing.T) {
	p := program(1000, 100, 10, false) // 10/s from 100 at t0
	tests := []struct {
		name   string
		p      admission.Program
		ticket int64
		now    time.Time
		want   time.Duration // after t0; -1: unknown
	}{
		{"Steady", p, 150, t0, 5 * time.Second},
		{"SteadyLater", p, 150, t0.Add(2 * time.Second), 5 * time.Second},
		{"AlreadyAdmitted", p, 90, t0.Add(time.Second), time.Second},
		{"FractionalRate", program(1000, 0, 3, false), 1, t0, 334 * time.Millisecond},
		{"Paused", program(1000, 100, 10, true), 150, t0, -1},
		{"PauseScheduledBefore", p.Rebased(t0, rate(10), true, 0, time.Second), 150, t0, -1},
		{"PauseScheduledAfter", p.Rebased(t0, rate(10), true, 0, time.Second), 105, t0, 500 * time.Millisecond},
		{"SpeedUpScheduled", p.Rebased(t0, rate(20), false, 0, time.Second), 150, t0, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at, ok := tt.p.AdmissionTime(tt.ticket, tt.now)
			if tt.want < 0 {
				if ok {
					t.Fatalf("AdmissionTime = %v, want unknown", at.Sub(t0))
				}
				return
			}
			if !ok || at.Sub(t0) != tt.want {
				t.Fatalf("AdmissionTime = %v (%v), want %v", at.Sub(t0), ok, tt.want)
			}
			// It is exactly the first millisecond that admits the ticket.
			if at.After(tt.now) && (!tt.p.Admits(tt.ticket, at) || tt.p.Admits(tt.ticket, at.Add(-time.Millisecond))) {
				t.Errorf("%v is not the instant of admission", at.Sub(t0))
			}
		})
	}
}

func TestSituation(t *testing.T) {
	p := program(1000, 100, 10, false)
	s := p.Situation(334, t0.Add(time.Second), 0) // counter 110
	if s.Position != 224 || s.RatePerSecond != 10 || s.Wait != 22400*time.Millisecond {
		t.Errorf("automatic: %+v", s)
	}
	paused := program(1000, 100, 10, true)
	if s := paused.Situation(334, t0, 0); s.Wait != 0 || s.RatePerSecond != 0 || s.Position != 234 {
		t.Errorf("paused: %+v", s)
	}
}

// TestSituationBeyondRange is the regression test of the endless loop: at
// the slowest rates behind millions of tickets the wait exceeds what a
// time.Duration holds. It is answered at once, capped at MaxEstimatedWait.
func TestSituationBeyondRange(t *testing.T) {
	for _, tt := range []struct {
		name    string
		rate    float64
		waiting int64
	}{
		{"0.001/s, 9.3 million waiting", 0.001, 9_300_000},
		{"0.01/s, 93 million waiting", 0.01, 93_000_000},
		{"0.001/s, every ticket there is", 0.001, math.MaxInt64 - 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := program(tt.waiting+1, 1, tt.rate, false)
			done := make(chan struct{})
			var sit, later = p.Situation(0, t0, 0), p.Situation(0, t0, 0)
			go func() {
				defer close(done)
				sit = p.Situation(p.Issued, t0, 0)
				later = p.Situation(p.Issued, t0.Add(time.Hour), 0)
			}()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Situation did not answer within 5 s")
			}
			if sit.Wait != admission.MaxEstimatedWait || later.Wait != admission.MaxEstimatedWait {
				t.Errorf("Wait = %v and an hour later %v, want both capped at %v", sit.Wait, later.Wait, admission.MaxEstimatedWait)
			}
			if sit.Position != tt.waiting {
				t.Errorf("Position = %d, want %d", sit.Position, tt.waiting)
			}
			if at, ok := p.AdmissionTime(p.Issued, t0); !ok || !at.After(t0.Add(math.MaxInt64)) {
				t.Errorf("AdmissionTime = %v, %v; want beyond %v", at, ok, t0.Add(math.MaxInt64))
			}
		})
	}
	t.Run("measured manual pace", func(t *testing.T) {
		p := admission.Program{ID: "p", Issued: math.MaxInt64, ManualRate: 1, LastAdmitAt: t0, LastAdmitGap: time.Minute}
		if sit := p.Situation(math.MaxInt64, t0, 0); sit.Wait != admission.MaxEstimatedWait {
			t.Errorf("Wait = %v, want %v", sit.Wait, admission.MaxEstimatedWait)
		}
	})
}
