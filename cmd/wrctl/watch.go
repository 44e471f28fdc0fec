package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/tools/bench"
	"github.com/example/waitingroom/internal/tools/client"
)

// sparkWidth is how many samples the queue-length sparkline shows.
const sparkWidth = 30

// frame is one sample of watch and what it derives from the previous one; its JSON is a line of -json.
type frame struct {
	At        time.Time  `json:"at"`
	ProgramID string     `json:"programId"`
	Issued    int64      `json:"issued"`
	Admitted  int64      `json:"admitted"`
	Waiting   int64      `json:"waiting"`
	Rate      float64    `json:"admissionRatePerSecond"`
	Paused    bool       `json:"paused"`
	Closed    bool       `json:"closed"`
	ClosesAt  *time.Time `json:"closesAt,omitempty"` // the scheduled close, if any
	// LastInLine is when the last in line gets in: "advancing" or "not open" (in LastInLineMs,
	// the wait to opensAt included), "paused", "manual" (rate 0) or "empty".
	LastInLine   string `json:"lastInLine"`
	LastInLineMs *int64 `json:"lastInLineMs,omitempty"`
	// The rates are the differences from the previous good sample, if any.
	EntersPerSecond     *float64 `json:"entersPerSecond,omitempty"`
	AdmissionsPerSecond *float64 `json:"admissionsPerSecond,omitempty"`
	Error               string   `json:"error,omitempty"` // a failed sample's, which has the last known counters

	history []int64 // queue lengths of the last samples, oldest first
}

// nextFrame is the frame of p sampled at now after prev (nil: the first).
func nextFrame(prev *frame, p api.Program, now time.Time) frame {
	f := frame{At: now, ProgramID: p.ProgramID, Issued: p.Issued, Admitted: p.Admitted, Waiting: p.Waiting,
		Rate: p.AdmissionRatePerSecond, Paused: p.Paused, Closed: !domain(p).TakesEntries(now)}
	if !p.ClosesAt.IsZero() {
		f.ClosesAt = &p.ClosesAt.Time
	}
	switch {
	case p.Waiting <= 0:
		f.LastInLine = "empty"
	case p.Paused:
		f.LastInLine = "paused"
	case p.AdmissionRatePerSecond <= 0:
		f.LastInLine = "manual"
	default:
		wait := time.Duration(float64(p.Waiting) / p.AdmissionRatePerSecond * float64(time.Second))
		f.LastInLine = "advancing"
		if p.OpensAt.After(now) {
			wait += p.OpensAt.Sub(now)
			f.LastInLine = "not open"
		}
		f.LastInLineMs = new(wait.Milliseconds())
	}
	if prev != nil {
		if dt := now.Sub(prev.At).Seconds(); dt > 0 && prev.Error == "" {
			f.EntersPerSecond, f.AdmissionsPerSecond = new(float64(p.Issued-prev.Issued)/dt), new(float64(p.Admitted-prev.Admitted)/dt)
		}
		f.history = append(f.history, prev.history...)
	}
	f.history = append(f.history, p.Waiting)
	f.history = f.history[max(0, len(f.history)-sparkWidth):]
	return f
}

// failedFrame is a sample that failed with err: prev's counters and the error.
func failedFrame(prev *frame, programID string, err error, now time.Time) frame {
	f := frame{ProgramID: programID}
	if prev != nil {
		f = *prev
		f.EntersPerSecond, f.AdmissionsPerSecond = nil, nil
	}
	f.At, f.Error = now, err.Error()
	return f
}

// sparkline draws values as block characters scaled to their maximum.
func sparkline(values []int64) string {
	runes, hi := []rune("▁▂▃▄▅▆▇█"), slices.Max(append([]int64{1}, values...))
	var b strings.Builder
	for _, v := range values {
		b.WriteRune(runes[int(math.Round(float64(max(v, 0))/float64(hi)*float64(len(runes)-1)))])
	}
	return b.String()
}

// lastInLine describes when the last person in line gets in, for people.
func (f frame) lastInLine() string {
	if f.LastInLineMs == nil {
		return f.LastInLine
	}
	d := time.Duration(*f.LastInLineMs) * time.Millisecond
	s := "in " + roundDuration(d).String() + ", at " + f.At.Add(d).Local().Format("15:04:05")
	return s + either(f.LastInLine == "not open", " (after the opening)", "")
}

// roundDuration rounds d to the second, to the minute past an hour.
func roundDuration(d time.Duration) time.Duration {
	return d.Round(either(d >= time.Hour, time.Minute, time.Second))
}

func perSecond(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', 1, 64)
}

// plainLine is f as one line of text, for logs and pipes.
func (f frame) plainLine() string {
	s := fmt.Sprintf("%s %s issued=%d admitted=%d waiting=%d rate=%g/s last=%q enters/s=%s admissions/s=%s paused=%t closed=%t queue=%s",
		clock(f.At), f.ProgramID, f.Issued, f.Admitted, f.Waiting, f.Rate,
		f.lastInLine(), perSecond(f.EntersPerSecond), perSecond(f.AdmissionsPerSecond), f.Paused, f.Closed, sparkline(f.history))
	if f.ClosesAt != nil {
		s += " closesAt=" + clock(*f.ClosesAt)
	}
	return s + either(f.Error != "", fmt.Sprintf(" error=%q", f.Error), "")
}

// screen is f as the lines of the terminal view.
func (f frame) screen(apiURL string) []string {
	standing := state(either(f.Paused, "paused", ""), either(f.Closed, "closed to new entries", ""))
	if f.ClosesAt != nil {
		standing += fmt.Sprintf(" (entries %s at %s)", either(f.Closed, "closed", "close"), f.ClosesAt.Local().Format("15:04:05"))
	}
	rate := either(f.Rate == 0, "0 (manual admission)", strconv.FormatFloat(f.Rate, 'f', -1, 64)+"/s")
	status := either(f.Error != "", "error: "+f.Error+" (retrying)", "")
	return []string{
		fmt.Sprintf("%s · %s · %s", f.ProgramID, apiURL, f.At.Local().Format("15:04:05")),
		fmt.Sprintf("  issued        %12s   %8s enters/s", bench.Thousands(f.Issued), perSecond(f.EntersPerSecond)),
		fmt.Sprintf("  admitted      %12s   %8s admissions/s", bench.Thousands(f.Admitted), perSecond(f.AdmissionsPerSecond)),
		fmt.Sprintf("  waiting       %12s   %s", bench.Thousands(f.Waiting), sparkline(f.history)),
		fmt.Sprintf("  rate          %12s   %s", rate, standing),
		fmt.Sprintf("  last in line  %s", f.lastInLine()),
		status,
	}
}

// display writes frames: redrawn in place on a terminal, else a line (or JSON object) each.
type display struct {
	w        io.Writer
	json     bool
	terminal bool
	url      string
	drawn    int // lines of the last terminal frame
}

func (d *display) show(f frame) error {
	switch {
	case d.json:
		return writeJSON(d.w, f)
	case !d.terminal:
		_, err := fmt.Fprintln(d.w, f.plainLine())
		return err
	}
	var b strings.Builder
	if d.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", d.drawn) // back to the frame's first line
	}
	lines := f.screen(d.url)
	for _, l := range lines {
		b.WriteString("\x1b[2K" + l + "\n") // clear the line, then draw it
	}
	d.drawn = len(lines)
	_, err := io.WriteString(d.w, b.String())
	return err
}

// watchCommand shows a sample of the program every -every until interrupted, -n or -for (which
// ends a request in flight too); a transient error is shown and retried at the next sample.
func (a *app) watchCommand(fs *flag.FlagSet) runner {
	every := fs.Duration("every", time.Second, "time between samples")
	forDur := fs.Duration("for", 0, "stop after this `duration` (0: until interrupted)")
	count := fs.Int("n", 0, "stop after this many samples (0: until interrupted)")
	return func(ctx context.Context, c *call) error {
		if *every <= 0 || *forDur < 0 || *count < 0 {
			return errors.New("watch: -every must be positive, -for and -n not negative")
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var end time.Time // of -for; zero without
		if *forDur > 0 {
			end = a.clock.Now().Add(*forDur)
			t := a.clock.AfterFunc(*forDur, cancel)
			defer t.Stop()
		}
		d := &display{w: a.stdout, json: c.json, terminal: a.terminal && !c.json, url: c.url}
		tick := a.clock.NewTicker(*every)
		defer tick.Stop()
		var prev *frame
		for n := 0; *count == 0 || n < *count; n++ {
			if n > 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-tick.Chan():
				}
				if !end.IsZero() && !a.clock.Now().Before(end) {
					return nil // the end of -for, whether or not its timer has fired yet
				}
			}
			p, err := c.client.GetProgram(ctx, c.args[0])
			now, ae, ue := a.clock.Now(), &client.Error{}, &url.Error{}
			var f frame
			switch {
			case err == nil:
				f = nextFrame(prev, p.Program, now)
			case ctx.Err() != nil:
				return nil // interrupted or -for elapsed during the request
			case errors.As(err, &ae) && ae.Retryable() || errors.As(err, &ue): // a server fault, throttling or network error
				f = failedFrame(prev, c.args[0], err, now)
			default:
				return err
			}
			if err := d.show(f); err != nil {
				return err
			}
			prev = &f
		}
		return nil
	}
}
