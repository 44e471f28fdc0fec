package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/tools/bench"
)

func ptr[T any](v T) *T { return &v }

func TestNextFrame(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	program := func(waiting int64, rate float64, paused bool) api.Program {
		return api.Program{ProgramID: "gala", Issued: 1000, Admitted: 1000 - waiting, Waiting: waiting, AdmissionRatePerSecond: rate, Paused: paused}
	}
	opening := program(300, 2, false)
	opening.OpensAt = api.TimeOf(now.Add(10 * time.Minute))
	opened := program(300, 2, false)
	opened.OpensAt = api.TimeOf(now.Add(-time.Minute))
	for _, tc := range []struct {
		name     string
		p        api.Program
		state    string
		inMs     *int64
		describe string
	}{
		{"Advancing", program(300, 2, false), "advancing", ptr[int64](150_000), "in 2m30s, at "},
		{"Paused", program(300, 2, true), "paused", nil, "paused"},
		{"Manual", program(300, 0, false), "manual", nil, "manual"},
		{"Empty", program(0, 2, false), "empty", nil, "empty"},
		{"NotOpenYet", opening, "not open", ptr[int64](750_000), "in 12m30s, at "},
		{"Opened", opened, "advancing", ptr[int64](150_000), "in 2m30s"},
		{"Hours", program(100_000, 10, false), "advancing", ptr[int64](10_000_000), "in 2h47m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := nextFrame(nil, tc.p, now)
			if f.LastInLine != tc.state || !cmp.Equal(f.LastInLineMs, tc.inMs) {
				t.Errorf("last in line %q %v, want %q %v", f.LastInLine, deref(f.LastInLineMs), tc.state, deref(tc.inMs))
			}
			if got := f.lastInLine(); !strings.HasPrefix(got, tc.describe) {
				t.Errorf("described as %q, want %q…", got, tc.describe)
			}
		})
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestFrameRates(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	p := api.Program{ProgramID: "gala", Issued: 100, Admitted: 10, Waiting: 90, AdmissionRatePerSecond: 5}
	f := nextFrame(nil, p, t0)
	if f.EntersPerSecond != nil || f.AdmissionsPerSecond != nil {
		t.Fatal("rates on the first sample")
	}
	p.Issued, p.Admitted, p.Waiting = 400, 20, 380
	g := nextFrame(&f, p, t0.Add(2*time.Second))
	if *g.EntersPerSecond != 150 || *g.AdmissionsPerSecond != 5 {
		t.Errorf("rates %v/s %v/s, want 150 and 5", *g.EntersPerSecond, *g.AdmissionsPerSecond)
	}
	if diff := cmp.Diff([]int64{90, 380}, g.history); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	// A failed sample keeps the counters, has no rates, and the next good
	// one none either (the counters it would difference are stale).
	bad := failedFrame(&g, "gala", errors.New("boom"), t0.Add(3*time.Second))
	if bad.Issued != 400 || bad.EntersPerSecond != nil || bad.Error != "boom" {
		t.Errorf("failed frame %+v", bad)
	}
	h := nextFrame(&bad, p, t0.Add(4*time.Second))
	if h.EntersPerSecond != nil {
		t.Error("rates right after a failed sample")
	}
	// The history keeps the last sparkWidth samples.
	for i := range 2 * sparkWidth {
		p.Waiting = int64(i)
		h = nextFrame(&h, p, t0.Add(time.Duration(5+i)*time.Second))
	}
	if len(h.history) != sparkWidth || h.history[sparkWidth-1] != 2*sparkWidth-1 {
		t.Errorf("history %v", h.history)
	}
}

func TestSparkline(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   []int64
		want string
	}{
		{nil, ""},
		{[]int64{0, 0}, "▁▁"},
		{[]int64{0, 1, 2, 3, 4, 5, 6, 7}, "▁▂▃▄▅▆▇█"},
		{[]int64{10, 5, 0}, "█▅▁"},
	} {
		if got := sparkline(tc.in); got != tc.want {
			t.Errorf("sparkline(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestThousands(t *testing.T) {
	t.Parallel()
	for in, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -45000: "-45,000"} {
		if got := bench.Thousands(in); got != want {
			t.Errorf("thousands(%d) = %q, want %q", in, got, want)
		}
	}
}

// TestDisplayTerminal checks the in-place redraw: the second frame moves
// the cursor back over the first and clears each line it draws.
func TestDisplayTerminal(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	d := &display{w: &buf, terminal: true, url: "http://127.0.0.1:3000"}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	f := nextFrame(nil, api.Program{ProgramID: "gala", Issued: 12345, Admitted: 2000, Waiting: 10345, AdmissionRatePerSecond: 50}, at)
	if err := d.show(f); err != nil {
		t.Fatal(err)
	}
	first := buf.String()
	lines := strings.Split(strings.TrimSuffix(first, "\n"), "\n")
	if strings.Contains(first, "\x1b[7A") || len(lines) != 7 {
		t.Fatalf("first frame: %q", first)
	}
	for _, want := range []string{"12,345", "10,345", "50/s", "in 3m27s"} {
		if !strings.Contains(first, want) {
			t.Errorf("frame lacks %q:\n%s", want, first)
		}
	}
	buf.Reset()
	g := nextFrame(&f, api.Program{ProgramID: "gala", Issued: 12500, Admitted: 2050, Waiting: 10450, AdmissionRatePerSecond: 50, Paused: true}, at.Add(time.Second))
	if err := d.show(g); err != nil {
		t.Fatal(err)
	}
	second := buf.String()
	if !strings.HasPrefix(second, "\x1b[7A\x1b[2K") || strings.Count(second, "\x1b[2K") != 7 {
		t.Errorf("second frame does not redraw in place: %q", second)
	}
	for _, want := range []string{"155.0 enters/s", "50.0 admissions/s", "paused"} {
		if !strings.Contains(second, want) {
			t.Errorf("frame lacks %q:\n%s", want, second)
		}
	}
}

// TestFrameClosesAt: a scheduled close is printed, and the frame reads
// closed from the instant on.
func TestFrameClosesAt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		closes  time.Time
		closed  bool
		wantIn  string
		wantOut string
	}{
		{"ahead", now.Add(time.Minute), false, "closed=false", "(entries close at "},
		{"passed", now, true, "closed=true", "closed to new entries (entries closed at "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := nextFrame(nil, api.Program{ProgramID: "gala", ClosesAt: api.TimeOf(tc.closes)}, now)
			if f.Closed != tc.closed || f.ClosesAt == nil || !f.ClosesAt.Equal(tc.closes) {
				t.Errorf("frame closed=%v closesAt=%v, want %v %v", f.Closed, f.ClosesAt, tc.closed, tc.closes)
			}
			if line := f.plainLine(); !strings.Contains(line, tc.wantIn) || !strings.Contains(line, "closesAt="+tc.closes.Format(time.RFC3339)) {
				t.Errorf("plain line %q, want %s and closesAt", line, tc.wantIn)
			}
			if screen := strings.Join(f.screen("http://x"), "\n"); !strings.Contains(screen, tc.wantOut) {
				t.Errorf("screen %q, want %q", screen, tc.wantOut)
			}
		})
	}
}
