package queue_test

import (
	"strings"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
)

func rfc(t time.Time) *string { return new(t.Format(time.RFC3339Nano)) }

// TestClosingSettings: closesAt moves only while it and the new one are
// both more than the change delay ahead, "" clears it while allowed, and
// it must come after opensAt.
func TestClosingSettings(t *testing.T) {
	ctx := t.Context()
	svc, c := newService(t, queue.WithProgramCache(time.Second)) // a change delay of 2 s
	opens, closes := t0.Add(time.Hour), t0.Add(2*time.Hour)
	for _, tc := range []struct {
		name string
		set  api.ProgramSettings
		code string
	}{
		{"not a time", api.ProgramSettings{ClosesAt: new("tomorrow")}, api.CodeInvalidSettings},
		{"before the year 2000", api.ProgramSettings{ClosesAt: new("1999-12-31T23:59:59Z")}, api.CodeInvalidSettings},
		{"within the change delay", api.ProgramSettings{ClosesAt: rfc(t0.Add(time.Second))}, api.CodeInvalidSettings},
		{"at the opening", api.ProgramSettings{OpensAt: rfc(opens), ClosesAt: rfc(opens)}, api.CodeInvalidSettings},
		{"OK", api.ProgramSettings{OpensAt: rfc(opens), ClosesAt: rfc(closes)}, ""},
		{"the opening moved past it", api.ProgramSettings{OpensAt: rfc(closes.Add(time.Minute))}, api.CodeInvalidSettings},
		{"moved before the opening", api.ProgramSettings{ClosesAt: rfc(opens.Add(-time.Minute))}, api.CodeInvalidSettings},
		{"cleared while ahead", api.ProgramSettings{ClosesAt: new("")}, ""},
		{"set again", api.ProgramSettings{ClosesAt: rfc(closes)}, ""},
		{"moved while ahead", api.ProgramSettings{ClosesAt: rfc(closes.Add(time.Hour))}, ""},
	} {
		_, _, err := svc.PutProgram(ctx, "p", tc.set)
		if code := codeOf(err); code != tc.code {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.code)
		}
		c.Advance(3 * time.Second) // past the change delay
	}
	got, err := svc.Program(ctx, "p")
	if err != nil || !got.ClosesAt.Equal(closes.Add(time.Hour)) {
		t.Fatalf("counters: closesAt %v %v, want %v", got.ClosesAt, err, closes.Add(time.Hour))
	}
	setClock(c, closes.Add(time.Hour-time.Second)) // within the change delay of it
	for _, set := range []api.ProgramSettings{{ClosesAt: rfc(closes.Add(2 * time.Hour))}, {ClosesAt: new("")}} {
		if _, _, err := svc.PutProgram(ctx, "p", set); codeOf(err) != api.CodeInvalidSettings || !strings.Contains(err.Error(), "can no longer change") {
			t.Errorf("moving %v a close within the change delay: %v, want INVALID_SETTINGS", *set.ClosesAt, err)
		}
	}
}

// TestScheduledClose: before closesAt enters are taken; from the instant
// on, on every instance and whatever its program cache holds, an enter
// answers PROGRAM_CLOSED naming the time, while the people already waiting
// keep their places, see closesAt in their answers, and are admitted.
func TestScheduledClose(t *testing.T) {
	ctx := t.Context()
	c := clock.NewFake(t0)
	store := memstore.New()
	a := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(c), queue.WithProgramCache(time.Second))
	b := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(c), queue.WithProgramCache(time.Second))
	closes := t0.Add(10 * time.Second)
	if _, _, err := a.PutProgram(ctx, "p", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(1)), Paused: new(true), ClosesAt: rfc(closes)}); err != nil {
		t.Fatal(err)
	}
	var waiting []queue.View
	for _, svc := range []*queue.Service{a, b} {
		v, _, err := svc.Enter(ctx, "p", queue.Entry{})
		if err != nil {
			t.Fatal(err)
		}
		if !v.ClosesAt.Equal(closes) {
			t.Errorf("WAITING answer's ClosesAt = %v, want %v", v.ClosesAt, closes)
		}
		waiting = append(waiting, v)
	}
	if s, err := a.Showing(ctx, "p"); err != nil || s.Closed || !s.ClosesAt.Equal(closes) {
		t.Errorf("Showing before the close = %+v %v, want open, closing at %v", s, err, closes)
	}
	setClock(c, closes.Add(-time.Millisecond)) // both caches still hold the program read before
	if _, _, err := b.Enter(ctx, "p", queue.Entry{}); err != nil {
		t.Fatalf("enter a millisecond before the close: %v", err)
	}
	setClock(c, closes)
	for i, svc := range []*queue.Service{a, b} {
		for _, e := range []queue.Entry{{}, {IdempotencyKey: "late-key-0123456789"}} {
			_, _, err := svc.Enter(ctx, "p", e)
			if codeOf(err) != api.CodeProgramClosed || !strings.Contains(err.Error(), closes.Format(time.RFC3339)) {
				t.Errorf("instance %d: enter %+v at the close: %v, want PROGRAM_CLOSED at %s", i, e, err, closes.Format(time.RFC3339))
			}
		}
		if s, err := svc.Showing(ctx, "p"); err != nil || !s.Closed {
			t.Errorf("instance %d: Showing at the close = %+v %v, want closed", i, s, err)
		}
	}
	v, created, err := a.Enter(ctx, "p", queue.Entry{Token: waiting[0].TokenID})
	if err != nil || created || v.Position != 1 || v.Status != queue.StatusWaiting || !v.ClosesAt.Equal(closes) {
		t.Errorf("refresh after the close: %+v created=%v %v, want place 1, closesAt shown", v, created, err)
	}
	if _, _, err := a.PutProgram(ctx, "p", api.ProgramSettings{Paused: new(false)}); err != nil {
		t.Fatal(err)
	}
	c.Advance(5 * time.Second)
	for _, w := range waiting {
		if v, err := b.Poll(ctx, "p", w.TokenID); err != nil || v.Status != queue.StatusAdmitted {
			t.Errorf("poll of ticket %d after the close: %+v %v, want ADMITTED", w.Ticket, v, err)
		}
	}
}
