package report

import (
	"bytes"
	"encoding/csv"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"
)

var t0 = time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC)

// sale is a realistic report: 2,000 people over 20 minutes, tickets
// 1–1,500 served (one admitted every 0.7 s from 18:01), a fifth gone while
// waiting, a few no-shows and revoked, and two admin changes.
func sale() Report {
	const serving = 1500
	counter := func(t time.Time) int64 { return max(0, int64(t.Sub(t0.Add(time.Minute))/(700*time.Millisecond))) }
	var people []Person
	for k := int64(1); k <= 2000; k++ {
		p := Person{Place: k, TurnCame: k <= serving, IssuedAt: t0.Add(time.Duration(k) * 600 * time.Millisecond), Account: k%3 == 0}
		p.EnterPosition = max(1, k-counter(p.IssuedAt))
		p.EnterEstimate = time.Duration(p.EnterPosition) * 770 * time.Millisecond
		switch {
		case k%5 == 0:
			p.LeftAt = p.IssuedAt.Add(time.Duration(p.EnterPosition) * 300 * time.Millisecond)
			p.LeftPosition, p.LeftEstimate = max(1, p.EnterPosition/2), p.EnterEstimate/2
		case k%250 == 7:
			p.RevokedAt = p.IssuedAt.Add(time.Minute)
		case k%97 == 0 || k > serving:
		default:
			p.AdmittedAt = t0.Add(time.Minute + time.Duration(k)*700*time.Millisecond)
			if k%40 == 1 {
				p.LeftAt = p.AdmittedAt.Add(2 * time.Minute)
			}
		}
		people = append(people, p)
	}
	var minutes []Minute
	for i := range 20 {
		m := Minute{At: t0.Add(time.Duration(i) * time.Minute), Answers: 100, ProofsSolved: 90, ProofsFailed: 3, BypassPasses: 1}
		c := counter(m.At.Add(30 * time.Second))
		m.Counters, m.Positions = c*100, 100*int64(40+10*i)
		m.EstimatesMs = m.Positions * 770
		for s := range m.PerSecond {
			m.PerSecond[s] = int64(40 + i + s%7)
			m.Requests += m.PerSecond[s]
		}
		m.Polls = m.Requests - 120
		minutes = append(minutes, m)
	}
	changes := []Change{
		{At: t0.Add(6*time.Minute + 30*time.Second), Actor: "alice", Action: "pause", Fields: `{"paused":true}`},
		{At: t0.Add(12 * time.Minute), Actor: "bob", Action: "rate", Fields: `{"ratePerMinute":120}`},
	}
	return Build(Program{ID: "gala", DisplayName: "Gala Night"}, people, minutes, changes, t0.Add(25*time.Minute))
}

// small is a report with known numbers.
func small() Report {
	return Report{
		ProgramID: "gala", DisplayName: "Gala Night", MadeAt: t0.Add(time.Hour), Final: true,
		From: t0, To: t0.Add(2 * time.Minute), StepMinutes: 1,
		People: Counts{Arrivals: 1234, Admitted: 1000, Ended: 12, Left: 200, Revoked: 3, NoShows: 21, Waiting: 10, Accounts: 400,
			ChallengesSolved: 1200, ChallengesFailed: 7, BypassPasses: 2},
		Waits: Waits{P50Ms: 252_000, P90Ms: 600_000, P99Ms: 3_723_000, MaxMs: 4_000_000, MeanMs: 950},
		Abandoned: Abandonment{ByPosition: []Gave{{Label: "1–100", From: 1, UpTo: 100, Reached: 1234, Left: 20, NoShows: 1},
			{Label: "over 100", From: 101, Reached: 0}}},
		Estimates: Accuracy{AtEntry: Estimate{People: 900, MedianEstMs: 240_000, MedianActualMs: 252_000, MedianErrorPct: -5, P90AbsErrorPct: 31, Within20: 450}},
		Requests:  Requests{Total: 10_000, Polls: 9_000, PerPerson: 8.1037, PeakPerSecond: 77, PeakAt: t0.Add(61 * time.Second)},
		Minutes: []Row{{At: t0, Arrivals: 5, Admitted: 1, Left: 0, Waiting: 4, Requests: 100, PeakPerSecond: 7},
			{At: t0.Add(time.Minute), Arrivals: 2, Admitted: 3, Left: 1, Waiting: 2, Requests: 80, PeakPerSecond: 5}},
		Changes: []Change{{At: t0.Add(90 * time.Second), Actor: "alice", Action: "pause", Fields: `{"paused":true}`}},
	}
}

// lines is text's lines with their runs of spaces made one.
func lines(text string) map[string]bool {
	m := map[string]bool{}
	for l := range strings.SplitSeq(text, "\n") {
		m[strings.Join(strings.Fields(l), " ")] = true
	}
	return m
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, small()); err != nil {
		t.Fatal(err)
	}
	got := lines(b.String())
	for _, want := range []string{
		"Waiting room report: Gala Night (gala), 2026-12-07 18:00–18:03 UTC, final",
		"People", "arrivals 1,234", "admitted 1,000", "of them ended early 12", "left while waiting 200", "revoked 3",
		"no-shows 21", "still waiting 10", "accounts 400", "challenges solved 1,200", "challenges failed 7", "bypass passes 2",
		"Waits of the admitted", "p50 4m12s", "p90 10m00s", "p99 1h02m", "max 1h06m", "mean 950ms",
		"Abandonment by position", "position reached left no-shows left %", "1–100 1,234 20 1 1.6 %", "over 100 0 0 0 –",
		"Abandonment by the estimate shown",
		"Estimate accuracy", "at entry 900 4m00s 4m12s -5 % 31 % 450 (50.0 %)", "halfway 0 – – – – –",
		"Requests", "total 10,000", "polls 9,000", "per person 8.1", "peak a second 77 at 18:01:01 UTC",
		"Admin changes", "time actor action fields", `18:01:30 alice pause {"paused":true}`,
	} {
		if !got[want] {
			t.Errorf("no line %q in\n%s", want, b.String())
		}
	}
	for l := range strings.SplitSeq(b.String(), "\n") {
		if n := len([]rune(l)); n > 100 {
			t.Errorf("%d columns: %q", n, l)
		}
	}
	b.Reset()
	if err := WriteTable(&b, Report{ProgramID: "none"}); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !lines(got)["Waiting room report: none, no activity, live, made at 0001-01-01 00:00:00 UTC"] || strings.Contains(got, "NaN") {
		t.Errorf("empty report:\n%s", got)
	}
	live := small()
	live.Final, live.Changes = false, nil
	b.Reset()
	if err := WriteTable(&b, live); err != nil {
		t.Fatal(err)
	}
	if got := lines(b.String()); !got["Waiting room report: Gala Night (gala), 2026-12-07 18:00–18:03 UTC, live, made at 2026-12-07 19:00:00 UTC"] || !got["none"] {
		t.Errorf("live report:\n%s", b.String())
	}
}

func TestWriteCSV(t *testing.T) {
	for _, tt := range []struct {
		name string
		r    Report
		want [][]string
	}{
		{"small", small(), [][]string{
			{"minute", "arrivals", "admitted", "left", "waiting", "requests", "peak_per_second"},
			{"2026-12-07T18:00:00Z", "5", "1", "0", "4", "100", "7"},
			{"2026-12-07T18:01:00Z", "2", "3", "1", "2", "80", "5"},
		}},
		{"empty", Report{}, [][]string{{"minute", "arrivals", "admitted", "left", "waiting", "requests", "peak_per_second"}}},
		// Plain numbers, for a spreadsheet: no thousands separators.
		{"large", Report{Minutes: []Row{{At: time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC), Arrivals: 12_345, Requests: 1_234_567}}}, [][]string{
			{"minute", "arrivals", "admitted", "left", "waiting", "requests", "peak_per_second"},
			{"2026-12-07T18:00:00Z", "12345", "0", "0", "0", "1234567", "0"},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteCSV(&b, tt.r); err != nil {
				t.Fatal(err)
			}
			got, err := csv.NewReader(&b).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("CSV (-want +got):\n%s", d)
			}
		})
	}
	var b bytes.Buffer
	r := sale()
	if err := WriteCSV(&b, r); err != nil {
		t.Fatal(err)
	}
	if got, _ := csv.NewReader(&b).ReadAll(); len(got) != len(r.Minutes)+1 || len(r.Minutes) < 20 {
		t.Errorf("%d records for %d minutes", len(got), len(r.Minutes))
	}
}

func TestWriteHTML(t *testing.T) {
	for _, tt := range []struct {
		name  string
		r     Report
		marks []string // the change markers' labels
	}{
		{"sale", sale(), []string{"alice: pause", "bob: rate"}},
		{"small", small(), []string{"alice: pause"}},
		{"empty", Report{ProgramID: "none"}, nil},
		{"built empty", Build(Program{ID: "none"}, nil, nil, nil, t0), nil},
		{"three days", long(), []string{"carol: resume"}},
		{"one minute", Report{ProgramID: "brief", StepMinutes: 1, From: t0, To: t0.Add(time.Minute),
			Minutes: []Row{{At: t0, Arrivals: 3, Waiting: 3}}}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteHTML(&b, tt.r); err != nil {
				t.Fatal(err)
			}
			page := b.String()
			for _, bad := range []string{"<script", "http://", "https://", "NaN", "Inf", "<link", "url("} {
				if strings.Contains(page, bad) {
					t.Errorf("the page has %q", bad)
				}
			}
			doc, err := html.Parse(strings.NewReader(page))
			if err != nil {
				t.Fatal(err)
			}
			var svgs, headings []string
			var marks []string
			for n := range doc.Descendants() {
				if n.Type != html.ElementNode {
					continue
				}
				switch n.Data {
				case "h1", "h2", "h3":
					headings = append(headings, n.Data)
				case "polyline": // a line, not a point nobody sees
					if pts := strings.Fields(attr(n, "points")); len(tt.r.Minutes) > 0 && len(pts) < 2 {
						t.Errorf("a polyline of %d points: %q", len(pts), pts)
					}
				case "svg":
					if attr(n, "role") != "img" {
						t.Errorf("an svg without role=img")
					}
					title, titleID, labels := "", "", map[string]string{}
					for c := range n.Descendants() {
						switch {
						case c.Data == "title" && c.Parent == n:
							title, titleID = text(c), attr(c, "id")
						case c.Data == "text" && attr(c, "class") != "":
							labels[attr(c, "class")] = text(c)
						case c.Data == "text" && c.Parent.Data == "g" && attr(c.Parent, "class") == "change":
							marks = append(marks, text(c))
						}
					}
					if title == "" || labels["xlabel"] == "" || labels["ylabel"] == "" || titleID == "" || !slices.Contains(strings.Fields(attr(n, "aria-labelledby")), titleID) {
						t.Errorf("svg %q: labels %v, aria-labelledby %q", title, labels, attr(n, "aria-labelledby"))
					}
					svgs = append(svgs, title)
				}
			}
			if len(svgs) != 5 {
				t.Errorf("svgs %q, want 5", svgs)
			}
			if d := cmp.Diff([]string{"h1", "h2", "h2", "h3", "h3", "h3", "h3", "h3", "h3", "h3"}, headings); d != "" {
				t.Errorf("headings (-want +got):\n%s", d)
			}
			var want []string
			for range 2 { // on the two time charts
				want = append(want, tt.marks...)
			}
			if d := cmp.Diff(want, marks); d != "" {
				t.Errorf("change markers (-want +got):\n%s", d)
			}
			if len(page) > 150_000 {
				t.Errorf("the page is %d bytes", len(page))
			}
		})
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func text(n *html.Node) string {
	var b strings.Builder
	for c := range n.Descendants() {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	}
	return strings.TrimSpace(b.String())
}

func TestHuman(t *testing.T) {
	for ms, want := range map[int64]string{0: "0ms", 999: "999ms", 1000: "1.0s", 6_875: "6.8s", 59_999: "59.9s", 60_000: "1m00s", 252_000: "4m12s", 3_600_000: "1h00m", 90_061_000: "25h01m"} {
		if got := human(ms); got != want {
			t.Errorf("human(%d) = %q, want %q", ms, got, want)
		}
	}
}

// long is three days of rows of 3 minutes, the most a report keeps.
func long() Report {
	r := Report{ProgramID: "marathon", From: t0, To: t0.Add(3 * 24 * time.Hour), StepMinutes: 3,
		Changes: []Change{{At: t0.Add(30 * time.Hour), Actor: "carol", Action: "resume"}}}
	for i := range MaxRows {
		r.Minutes = append(r.Minutes, Row{At: t0.Add(time.Duration(3*i) * time.Minute), Arrivals: int64(i % 50), Waiting: int64(i * 7)})
	}
	return r
}
