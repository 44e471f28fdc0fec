package report

import (
	_ "embed"
	"encoding/csv"
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// section is a titled table of the report, as both WriteTable and WriteHTML
// show it; a section without Head is a list of name, value.
type section struct {
	Title string
	Head  []string
	Rows  [][]string
	Text  bool // every column is text, aligned left (else only the first)
}

// WriteTable writes r as plain text for a terminal (at most 100 columns).
func WriteTable(w io.Writer, r Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if _, err := fmt.Fprintln(w, headline(r)); err != nil {
		return err
	}
	for _, s := range sections(r) {
		fmt.Fprintf(tw, "\n%s\n", s.Title)
		rows := s.Rows
		if s.Head != nil {
			rows = append([][]string{s.Head}, rows...)
		}
		// tabwriter aligns every column right: pad the text ones to the left.
		text, end := 1, "\t"
		if s.Text { // the last column is left as it is: no padding after it
			text, end = len(rows[0])-1, ""
		}
		for i := range text {
			wide := 0
			for _, row := range rows {
				wide = max(wide, utf8.RuneCountInString(row[i]))
			}
			for _, row := range rows {
				row[i] += strings.Repeat(" ", wide-utf8.RuneCountInString(row[i]))
			}
		}
		for _, row := range rows {
			if end == "" && len(row) > 1 {
				row[len(row)-1] = "  " + row[len(row)-1]
			}
			fmt.Fprintf(tw, "%s%s\n", strings.Join(row, "\t"), end)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// WriteCSV writes r's per-minute series as CSV.
func WriteCSV(w io.Writer, r Report) error {
	c := csv.NewWriter(w)
	c.Write([]string{"minute", "arrivals", "admitted", "left", "waiting", "requests", "peak_per_second"})
	for _, m := range r.Minutes {
		n := func(v int64) string { return strconv.FormatInt(v, 10) }
		c.Write([]string{m.At.UTC().Format(time.RFC3339), n(m.Arrivals), n(m.Admitted), n(m.Left), n(m.Waiting), n(m.Requests), n(m.PeakPerSecond)})
	}
	c.Flush()
	return c.Error()
}

//go:embed report.html
var pageHTML string

var page = template.Must(template.New("report").Parse(pageHTML))

// WriteHTML writes r as one self-contained page, its charts inline SVG.
func WriteHTML(w io.Writer, r Report) error {
	return page.Execute(w, struct {
		Title, Headline string
		Charts          []chart
		Sections        []section
	}{"Report: " + name(r), headline(r), charts(r), sections(r)})
}

func name(r Report) string {
	if r.DisplayName != "" && r.DisplayName != r.ProgramID {
		return r.DisplayName + " (" + r.ProgramID + ")"
	}
	return r.ProgramID
}

func headline(r Report) string {
	when := "no activity"
	if !r.From.IsZero() {
		end := r.To.UTC().Add(time.Duration(max(r.StepMinutes, 1)) * time.Minute)
		to := end.Format("15:04")
		if end.YearDay() != r.From.UTC().YearDay() || end.Year() != r.From.UTC().Year() {
			to = end.Format("2006-01-02 15:04")
		}
		when = r.From.UTC().Format("2006-01-02 15:04") + "–" + to + " UTC"
	}
	state := "final"
	if !r.Final {
		state = "live, made at " + r.MadeAt.UTC().Format("2006-01-02 15:04:05") + " UTC"
	}
	return "Waiting room report: " + name(r) + ", " + when + ", " + state
}

func sections(r Report) []section {
	p, e := r.People, r.Estimates
	ss := []section{
		{Title: "People", Rows: [][]string{
			{"arrivals", i64(p.Arrivals)}, {"admitted", i64(p.Admitted)}, {"of them ended early", i64(p.Ended)},
			{"left while waiting", i64(p.Left)}, {"revoked", i64(p.Revoked)}, {"no-shows", i64(p.NoShows)},
			{"still waiting", i64(p.Waiting)}, {"accounts", i64(p.Accounts)}, {"challenges solved", i64(p.ChallengesSolved)},
			{"challenges failed", i64(p.ChallengesFailed)}, {"bypass passes", i64(p.BypassPasses)}}},
		{Title: "Waits of the admitted", Rows: waitRows(r)},
		gave("Abandonment by position", "position", r.Abandoned.ByPosition),
		gave("Abandonment by the estimate shown", "estimate", r.Abandoned.ByEstimate),
		{Title: "Estimate accuracy", Head: []string{"estimate", "people", "median estimate", "median actual", "median error", "p90 |error|", "within ±20 %"},
			Rows: [][]string{accuracy("at entry", e.AtEntry), accuracy("halfway", e.Halfway)}},
		{Title: "Requests", Rows: [][]string{
			{"total", i64(r.Requests.Total)}, {"polls", i64(r.Requests.Polls)},
			{"per person", strconv.FormatFloat(r.Requests.PerPerson, 'f', 1, 64)}, {"peak a second", peak(r.Requests)}}},
	}
	changes := section{Title: "Admin changes", Head: []string{"time", "actor", "action", "fields"}, Text: true}
	for _, c := range r.Changes {
		changes.Rows = append(changes.Rows, []string{c.At.UTC().Format("15:04:05"), cutFront(c.Actor, 24), cut(c.Action, 16), cut(c.Fields, 56)})
	}
	if len(r.Changes) == 0 {
		changes.Head, changes.Rows = nil, [][]string{{"none"}}
	}
	return append(ss, changes)
}

// waitRows are the waits' percentiles, "–" with nobody admitted.
func waitRows(r Report) [][]string {
	w := r.Waits
	rows := [][]string{{"p50", human(w.P50Ms)}, {"p90", human(w.P90Ms)}, {"p99", human(w.P99Ms)}, {"max", human(w.MaxMs)}, {"mean", human(w.MeanMs)}}
	if r.People.Admitted == 0 {
		for _, row := range rows {
			row[1] = "–"
		}
	}
	return rows
}

func gave(title, what string, gs []Gave) section {
	s := section{Title: title, Head: []string{what, "reached", "left", "no-shows", "left %"}}
	for _, g := range gs {
		s.Rows = append(s.Rows, []string{g.Label, i64(g.Reached), i64(g.Left), i64(g.NoShows), pct(g.Left, g.Reached)})
	}
	return s
}

func accuracy(what string, e Estimate) []string {
	if e.People == 0 {
		return []string{what, "0", "–", "–", "–", "–", "–"}
	}
	return []string{what, i64(e.People), human(e.MedianEstMs), human(e.MedianActualMs), fmt.Sprintf("%+d %%", e.MedianErrorPct),
		fmt.Sprintf("%d %%", e.P90AbsErrorPct), i64(e.Within20) + " (" + pct(e.Within20, e.People) + ")"}
}

func peak(q Requests) string {
	if q.PeakPerSecond == 0 {
		return "0"
	}
	return i64(q.PeakPerSecond) + " at " + q.PeakAt.UTC().Format("15:04:05") + " UTC"
}

func i64(n int64) string {
	if n < 0 {
		return "-" + thousands(-n)
	}
	return thousands(n)
}

// pct is n of of in percent with one decimal; "–" for none of none.
func pct(n, of int64) string {
	if of == 0 {
		return "–"
	}
	return strconv.FormatFloat(float64(n)*100/float64(of), 'f', 1, 64) + " %"
}

// human writes ms as 850ms, 42.3s, 4m12s or 1h02m.
func human(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second:
		return strconv.FormatInt(ms, 10) + "ms"
	case d < time.Minute:
		return fmt.Sprintf("%d.%ds", ms/1000, ms%1000/100)
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", d/time.Minute, d%time.Minute/time.Second)
	}
	return fmt.Sprintf("%dh%02dm", d/time.Hour, d%time.Hour/time.Minute)
}

// cutFront keeps the end of s, where an ARN names its user or role.
func cutFront(s string, n int) string {
	if rs := []rune(s); len(rs) > n {
		return "…" + string(rs[len(rs)-n+1:])
	}
	return s
}

func cut(s string, n int) string {
	if rs := []rune(s); len(rs) > n {
		return string(rs[:n-1]) + "…"
	}
	return s
}

// A chart's geometry in its viewBox, 720 × 260 (report.html): the plot area is [left, right] × [top, bottom].
const (
	left, right, top, bottom = 60.0, 704.0, 44.0, 212.0
	plotWidth, plotHeight    = right - left, bottom - top
	legendX, labelsOffset    = 545.0, 16.0
)

type chart struct {
	ID, Title, Desc, XLabel, YLabel string
	XTicks, YTicks                  []tick
	Lines                           []polyline
	Bars                            []bar
	Marks                           []mark
	Legend                          []legend
}

type tick struct {
	Pos   float64
	Label string
}

type polyline struct{ Class, Points string }

type bar struct {
	Class      string
	X, Y, W, H float64
	Title      string
}

type mark struct {
	X, LabelY                      float64
	Anchor, Label, Title, LabelPos string
}

type legend struct {
	Class, Label string
	X            float64
	Line         bool
}

func charts(r Report) []chart {
	waiting := timeChart(r, "waiting", "People waiting over time", "people waiting")
	flow := timeChart(r, "flow", "Arrivals and admissions per minute", "people a minute")
	var wmax, fmax int64
	for _, m := range r.Minutes {
		wmax, fmax = max(wmax, m.Waiting), max(fmax, m.Arrivals, m.Admitted)
	}
	waiting.Lines = []polyline{timeLine(r, wmax, &waiting, func(m Row) int64 { return m.Waiting }, "s1")}
	flow.Lines = []polyline{timeLine(r, fmax, &flow, func(m Row) int64 { return m.Arrivals }, "s1"),
		timeLine(r, fmax, &flow, func(m Row) int64 { return m.Admitted }, "s2")}
	flow.Legend = []legend{{"s1", "arrivals", legendX, true}, {"s2", "admitted", legendX + 85, true}}
	if r.StepMinutes > 1 {
		flow.Title = fmt.Sprintf("Arrivals and admissions per %d minutes", r.StepMinutes)
		flow.YLabel = fmt.Sprintf("people per %d min", r.StepMinutes)
	}
	var labels []string
	var counts [][2]int64
	for _, b := range r.Waits.Bins {
		labels, counts = append(labels, b.Label), append(counts, [2]int64{b.Count, -1})
	}
	dist := barChart("waits", "Wait distribution of the admitted", "wait", "people", labels, counts, nil)
	return []chart{waiting, flow, dist, gaveChart("bypos", "Abandonment by position", "position in the line", r.Abandoned.ByPosition),
		gaveChart("byest", "Abandonment by the estimate shown", "estimated wait shown", r.Abandoned.ByEstimate)}
}

// timeChart is a chart over r's series with its time axis and the admin changes marked.
func timeChart(r Report, id, title, ylabel string) chart {
	c := chart{ID: id, Title: title, Desc: headline(r), XLabel: "time (UTC)", YLabel: ylabel}
	if len(r.Minutes) == 0 {
		c.Desc += "; no data"
		return c
	}
	step := max(r.StepMinutes, 1)
	span := len(r.Minutes) * step // minutes
	x := func(t time.Time) float64 {
		return math.Min(right, math.Max(left, left+t.Sub(r.From).Minutes()/float64(span)*plotWidth))
	}
	every, format := 1, "15:04"
	for _, k := range []int{1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440, 2880, 10080} {
		if every = k; span/k <= 8 {
			break
		}
	}
	if every >= 1440 {
		format = "Jan 2"
	}
	for t := r.From.UTC().Truncate(time.Duration(every) * time.Minute); !t.After(r.From.Add(time.Duration(span) * time.Minute)); t = t.Add(time.Duration(every) * time.Minute) {
		if !t.Before(r.From) {
			c.XTicks = append(c.XTicks, tick{r1(x(t)), t.Format(format)})
		}
	}
	for i, ch := range r.Changes {
		m := mark{X: r1(x(ch.At)), LabelY: 14 + float64(i%2)*labelsOffset, Anchor: "start", LabelPos: "3",
			Label: cut(ch.Actor+": "+ch.Action, 28), Title: ch.At.UTC().Format("15:04:05 UTC") + ", " + ch.Actor + ": " + ch.Action + " " + ch.Fields}
		if m.X > right-140 {
			m.Anchor, m.LabelPos = "end", "-3"
		}
		c.Marks = append(c.Marks, m)
	}
	return c
}

// timeLine is the polyline of v over r's rows, at their middles (a single
// row across the plot), setting c's y ticks.
func timeLine(r Report, vmax int64, c *chart, v func(Row) int64, class string) polyline {
	hi := yAxis(c, vmax)
	pts := make([]string, len(r.Minutes))
	for i, m := range r.Minutes {
		px := left + (float64(i)+0.5)/float64(len(r.Minutes))*plotWidth
		pts[i] = fmt.Sprintf("%.1f,%.1f", px, bottom-float64(v(m))/float64(hi)*plotHeight)
	}
	if len(r.Minutes) == 1 { // one row: a level across its width, not a point nobody sees
		y := pts[0][strings.IndexByte(pts[0], ','):]
		pts = []string{fmt.Sprintf("%.1f", left) + y, fmt.Sprintf("%.1f", right) + y}
	}
	return polyline{class, strings.Join(pts, " ")}
}

// yAxis sets c's y ticks for values up to vmax and returns the axis's top.
func yAxis(c *chart, vmax int64) int64 {
	step := int64(1)
	if raw := float64(vmax) / 4; raw > 1 {
		p := math.Pow(10, math.Floor(math.Log10(raw)))
		for _, f := range []float64{1, 2, 5, 10} {
			if step = int64(f * p); f*p >= raw {
				break
			}
		}
	}
	hi := max(step, (vmax+step-1)/step*step)
	c.YTicks = nil
	for v := int64(0); v <= hi; v += step {
		c.YTicks = append(c.YTicks, tick{r1(bottom - float64(v)/float64(hi)*plotHeight), i64(v)})
	}
	return hi
}

func gaveChart(id, title, xlabel string, gs []Gave) chart {
	var labels []string
	var counts [][2]int64
	for _, g := range gs {
		labels, counts = append(labels, g.Label), append(counts, [2]int64{g.Left, g.NoShows})
	}
	return barChart(id, title, xlabel, "people", labels, counts, []legend{{"b1", "left", legendX, false}, {"b2", "no-shows", legendX + 85, false}})
}

// barChart draws a bar per label, or two (a pair) when leg names two series;
// a second count of −1 is none.
func barChart(id, title, xlabel, ylabel string, labels []string, counts [][2]int64, leg []legend) chart {
	c := chart{ID: id, Title: title, XLabel: xlabel, YLabel: ylabel, Legend: leg}
	var vmax int64
	for _, n := range counts {
		vmax = max(vmax, n[0], n[1])
	}
	hi := yAxis(&c, vmax)
	slot := plotWidth / float64(max(len(labels), 1))
	var desc []string
	for i, l := range labels {
		c.XTicks = append(c.XTicks, tick{r1(left + (float64(i)+0.5)*slot), l})
		k := 1 + len(leg)/2
		for j := range k {
			n, w := counts[i][j], slot*0.7/float64(k)
			h := float64(n) / float64(hi) * plotHeight
			name := "people"
			if leg != nil {
				name = leg[j].Label
			}
			c.Bars = append(c.Bars, bar{"b" + strconv.Itoa(j+1), left + float64(i)*slot + slot*0.15 + float64(j)*w, bottom - h, w, h, l + ": " + i64(n) + " " + name})
			desc = append(desc, l+" "+i64(n)+" "+name)
		}
	}
	c.Desc = strings.Join(desc, "; ")
	return c
}

// r1 rounds a coordinate to a tenth.
func r1(x float64) float64 { return math.Round(x*10) / 10 }
