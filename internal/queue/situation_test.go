package queue_test

import (
	"testing"
	"time"

	"github.com/example/waitingroom/internal/queue"
)

func TestAdmissionTime(t *testing.T) {
	p := program(1000, 100, 10, false) // 10/s from 100 at t0
	tests := []struct {
		name   string
		p      queue.Program
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
