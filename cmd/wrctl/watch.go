package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/tools/client"
)

// watchOptions are the sampling period, and a duration or a number of
// samples (zero: until interrupted).
type watchOptions struct {
	every  time.Duration
	forDur time.Duration
	count  int
}

// sparkWidth is how many samples the queue-length sparkline shows.
const sparkWidth = 30

// frame is one sample of watch, with what it derives from the previous
// one. Its JSON form is watch's -json output, one object per line.
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
	// LastInLine is when the last person now in line gets in: "advancing"
	// (LastInLineMs from now), "paused", "manual" (rate 0), "not open"
	// (opensAt ahead: LastInLineMs counts from now, the wait to the
	// opening included) or "empty".
	LastInLine   string `json:"lastInLine"`
	LastInLineMs *int64 `json:"lastInLineMs,omitempty"`
	// EntersPerSecond and AdmissionsPerSecond are the differences from the
	// previous good sample; absent on the first.
	EntersPerSecond     *float64 `json:"entersPerSecond,omitempty"`
	AdmissionsPerSecond *float64 `json:"admissionsPerSecond,omitempty"`
	Error               string   `json:"error,omitempty"` // a failed sample's, which has the last known counters

	history []int64 // queue lengths of the last samples, oldest first
}

// nextFrame derives the frame of p sampled at now from the previous frame
// (nil for the first sample).
func nextFrame(prev *frame, p api.Program, now time.Time) frame {
	f := frame{At: now, ProgramID: p.ProgramID, Issued: p.Issued, Admitted: p.Admitted, Waiting: p.Waiting,
		Rate: p.AdmissionRatePerSecond, Paused: p.Paused, Closed: p.Closed}
	if !p.ClosesAt.IsZero() {
		f.ClosesAt = &p.ClosesAt.Time
		f.Closed = f.Closed || domain(p).ClosedAt(now)
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
		ms := wait.Milliseconds()
		f.LastInLineMs = &ms
	}
	if prev != nil {
		if dt := now.Sub(prev.At).Seconds(); dt > 0 && prev.Error == "" {
			enters := float64(p.Issued-prev.Issued) / dt
			admissions := float64(p.Admitted-prev.Admitted) / dt
			f.EntersPerSecond, f.AdmissionsPerSecond = &enters, &admissions
		}
		f.history = append(f.history, prev.history...)
	}
	f.history = append(f.history, p.Waiting)
	f.history = f.history[max(0, len(f.history)-sparkWidth):]
	return f
}

// failedFrame is a sample of programID that failed with err: the previous
// counters, marked with the error.
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
	runes := []rune("▁▂▃▄▅▆▇█")
	var hi int64
	for _, v := range values {
		hi = max(hi, v)
	}
	var b strings.Builder
	for _, v := range values {
		i := 0
		if hi > 0 && v > 0 {
			i = int(math.Round(float64(v) / float64(hi) * float64(len(runes)-1)))
		}
		b.WriteRune(runes[i])
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
	if f.LastInLine == "not open" {
		s += " (after the opening)"
	}
	return s
}

// roundDuration rounds d for display: to the second, to the minute past an
// hour.
func roundDuration(d time.Duration) time.Duration {
	if d >= time.Hour {
		return d.Round(time.Minute)
	}
	return d.Round(time.Second)
}

func perSecond(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', 1, 64)
}

// plainLine is f as one line of text, for logs and pipes.
func (f frame) plainLine() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s issued=%d admitted=%d waiting=%d rate=%g/s last=%q enters/s=%s admissions/s=%s paused=%t closed=%t queue=%s",
		clock(f.At), f.ProgramID, f.Issued, f.Admitted, f.Waiting, f.Rate,
		f.lastInLine(), perSecond(f.EntersPerSecond), perSecond(f.AdmissionsPerSecond), f.Paused, f.Closed, sparkline(f.history))
	if f.ClosesAt != nil {
		fmt.Fprintf(&b, " closesAt=%s", clock(*f.ClosesAt))
	}
	if f.Error != "" {
		fmt.Fprintf(&b, " error=%q", f.Error)
	}
	return b.String()
}

// screen is f as the lines of the terminal view.
func (f frame) screen(apiURL string) []string {
	var states []string
	if f.Paused {
		states = append(states, "paused")
	}
	if f.Closed {
		states = append(states, "closed to new entries")
	}
	state := cmp.Or(strings.Join(states, ", "), "open")
	if f.ClosesAt != nil {
		verb := "close"
		if f.Closed {
			verb = "closed"
		}
		state += fmt.Sprintf(" (entries %s at %s)", verb, f.ClosesAt.Local().Format("15:04:05"))
	}
	rate := strconv.FormatFloat(f.Rate, 'f', -1, 64) + "/s"
	if f.Rate == 0 {
		rate = "0 (manual admission)"
	}
	status := ""
	if f.Error != "" {
		status = "error: " + f.Error + " (retrying)"
	}
	return []string{
		fmt.Sprintf("%s · %s · %s", f.ProgramID, apiURL, f.At.Local().Format("15:04:05")),
		fmt.Sprintf("  issued        %12s   %8s enters/s", thousands(f.Issued), perSecond(f.EntersPerSecond)),
		fmt.Sprintf("  admitted      %12s   %8s admissions/s", thousands(f.Admitted), perSecond(f.AdmissionsPerSecond)),
		fmt.Sprintf("  waiting       %12s   %s", thousands(f.Waiting), sparkline(f.history)),
		fmt.Sprintf("  rate          %12s   %s", rate, state),
		fmt.Sprintf("  last in line  %s", f.lastInLine()),
		status,
	}
}

// english formats numbers with thousands separators: 48,210.
var english = message.NewPrinter(language.English)

// thousands formats n with comma separators.
func thousands(n int64) string { return english.Sprintf("%d", n) }

// display writes frames: redrawn in place on a terminal, else one line (or
// one JSON object) per frame.
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

// watch samples the program every opt.every until interrupted or bounded,
// showing each sample. Server faults and network errors are shown and
// retried at the next sample; any other error ends the watch. -for ends it
// opt.forDur after it started, a request in flight included.
func (a *app) watch(ctx context.Context, c *call, opt watchOptions) error {
	if opt.every <= 0 || opt.forDur < 0 || opt.count < 0 {
		return errors.New("watch: -every must be positive, -for and -n not negative")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var end time.Time // of -for; zero without
	if opt.forDur > 0 {
		end = a.clock.Now().Add(opt.forDur)
		t := a.clock.AfterFunc(opt.forDur, cancel)
		defer t.Stop()
	}
	d := &display{w: a.stdout, json: c.json, terminal: a.terminal && !c.json, url: c.url}
	tick := a.clock.NewTicker(opt.every)
	defer tick.Stop()
	var prev *frame
	for n := 0; opt.count == 0 || n < opt.count; n++ {
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
		now := a.clock.Now()
		var f frame
		switch {
		case err == nil:
			f = nextFrame(prev, p.Program, now)
		case ctx.Err() != nil:
			return nil // interrupted or -for elapsed during the request
		case transient(err):
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

// transient reports an error worth retrying at the next sample: a server
// fault, throttling, or the network.
func transient(err error) bool {
	var (
		ae *client.Error
		ue *url.Error
	)
	return errors.As(err, &ae) && ae.Retryable() || errors.As(err, &ue)
}
