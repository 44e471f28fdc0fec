package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// cell is one result's value on one line of the comparison table; compare
// says whether a change in percent means something on this line.
type cell struct {
	label   string
	v       float64
	format  func(float64) string
	compare bool
}

// cells returns r's lines of the table: the common ones, then those r has
// of leaves, the service's checks, admin requests, latency, capacity and
// cost.
func (r Result) cells() []cell {
	left := r.Abandon > 0 || r.Left > 0 || r.Leaves > 0
	requests, perUser := "requests (enter + polls)", "requests per user (enter + GETs)"
	if left {
		requests, perUser = "requests (enter + polls + leaves)", "requests per user (enter + GETs + DELETE)"
	}
	cs := []cell{{"users", float64(r.Users), formatInteger, false}, {"admitted", float64(r.Admitted), formatInteger, false}}
	if left {
		cs = append(cs, cell{"left while waiting", float64(r.Left), formatInteger, false})
	}
	cs = append(cs,
		cell{requests, float64(r.Requests), formatInteger, true},
		cell{"polls (GET)", float64(r.Polls), formatInteger, true},
		cell{"polls per user (GETs only)", r.PollsPerUser, formatDecimals(2), true},
		cell{perUser, r.RequestsPerUser, formatDecimals(2), true},
		cell{"duration", r.DurationSeconds * 1000, formatSeconds, false},
		cell{"avg requests/s", r.AvgRps, formatDecimals(1), true},
		cell{"peak requests/s (1 s)", float64(r.PeakRps), formatInteger, true},
		cell{"peak polls/s (1 s)", float64(r.PeakPollRps), formatInteger, true},
		cell{"errors (of the requests)", float64(r.Errors), formatInteger, false},
		cell{"enters/s peak (1 s)", float64(r.EntersPerSecondPeak), formatInteger, true},
		cell{"throttled enters", float64(r.ThrottledEnters), formatInteger, false},
	)
	if w := r.ProgramItemWritesPerSecondMax; w != nil {
		cs = append(cs, cell{"program item writes/s max", float64(*w), formatInteger, true})
	}
	cs = append(cs,
		cell{"gaps (tickets nobody holds)", float64(r.Gaps), formatInteger, false},
		cell{"max inversion", r.MaxInversionMs, formatSeconds, false},
	)
	if r.Instances > 0 {
		cs = append(cs,
			cell{"clock skew (±)", r.ClockSkewMs, formatSeconds, false},
			cell{"clock offsets spread", r.ClockSpreadMs, formatSeconds, false},
			cell{"duplicate tickets", float64(r.DuplicateTickets), formatInteger, false},
			cell{"tickets past issued", float64(r.TicketsPastIssued), formatInteger, false},
			cell{"status regressions", float64(r.StatusRegressions), formatInteger, false},
			cell{"max position rise", float64(r.MaxPositionRise), formatInteger, false},
		)
	}
	if r.AdminRequests > 0 {
		cs = append(cs,
			cell{"admin requests (the bench's own)", float64(r.AdminRequests), formatInteger, false},
			cell{"admin errors", float64(r.AdminErrors), formatInteger, false},
		)
	}
	if l := r.LatencyMs; l != nil && l.Count > 0 {
		cs = append(cs, percentileCells("latency", *l, formatMs, false, true)...)
	}
	if r.Capacity != nil {
		cs = append(cs, r.Capacity.cells(r.Mode == "run")...)
	}
	if r.NotifyDelayMs.Count > 0 {
		cs = append(cs, percentileCells("notify delay", r.NotifyDelayMs, formatSeconds, true, true)...)
	}
	if r.Cost != nil {
		cs = append(cs, r.Cost.cells(r.Admitted)...)
	}
	return cs
}

// percentileCells returns the lines "name p50" to "name max" of p, p95
// only when withP95.
func percentileCells(name string, p Percentiles, format func(float64) string, compare, withP95 bool) []cell {
	cs := []cell{{name + " p50", p.P50, format, compare}}
	if withP95 {
		cs = append(cs, cell{name + " p95", p.P95, format, compare})
	}
	return append(cs, cell{name + " p99", p.P99, format, compare}, cell{name + " max", p.Max, format, compare})
}

// cells returns the lines of the capacity model, with those only a run
// (run) or only the simulator measures.
func (c Capacity) cells(run bool) []cell {
	var cs []cell
	add := func(label string, v float64, format func(float64) string, compare bool) {
		cs = append(cs, cell{label, v, format, compare})
	}
	if c.MaxActiveUsers > 0 {
		add("cap (maxActiveUsers)", float64(c.MaxActiveUsers), formatInteger, false)
	}
	if c.NoShowSeconds > 0 {
		add("no-show seconds", float64(c.NoShowSeconds), formatInteger, false)
	}
	if run {
		add("showed (saw ADMITTED)", float64(c.Showed), formatInteger, false)
	} else {
		add("time to serve everyone who shows", c.ServedMs, formatSeconds, true)
	}
	add("no-shows (never fetched their admission)", float64(c.NoShows), formatInteger, false)
	add("no-shows counted by the service", float64(c.ServerNoShows), formatInteger, false)
	if !run {
		add("admissions wasted (net)", float64(c.Wasted), formatInteger, true)
	}
	add("sessions ended by the site", float64(c.SessionsEnded), formatInteger, false)
	add("most active at once (users' view)", float64(c.MostActive), formatInteger, true)
	if run {
		add("read EXPIRED while polling", float64(c.Expired), formatInteger, false)
		add("sessions ended, counted by the service", float64(c.ServerEnded), formatInteger, false)
		add("peak active, admin counter", float64(c.PeakActiveCounter), formatInteger, false)
	}
	if p := c.SlotReuseMs; p != nil && p.Count > 0 {
		cs = append(cs, percentileCells("slot reuse delay", *p, formatSeconds, false, false)...)
	}
	if run {
		add("ends not followed by a move", float64(c.NotReused), formatInteger, false)
		add("mean session", c.MeanSessionMs, formatSeconds, false)
		add("duration (admission start to last done)", c.DurationMs, formatSeconds, false)
		add("turnover bound", c.BoundMs, formatSeconds, false)
		add("duration / bound", c.Ratio, formatDecimals(2), false)
	}
	return cs
}

// cells returns the lines of a simulation's bill: the units used, the
// prices, the total and, when anyone was admitted, the total per million
// admitted.
func (c Cost) cells(admitted int) []cell {
	u := c.Usage
	cs := []cell{
		{"DynamoDB read units", u.RRU, formatInteger, true},
		{"DynamoDB write units", u.WRU, formatInteger, true},
		{"Lambda GB-seconds", u.GBSeconds, formatInteger, true},
		{"Lambda instances (peak, Little's law)", float64(u.Instances), formatInteger, true},
		{"KMS requests", float64(u.KMS), formatInteger, true},
		{"log bytes (EMF, Lambda, access)", u.LogBytes, formatBytes, true},
		{"cost: API Gateway", c.APIGateway, USD, true},
		{"cost: Lambda", c.LambdaRequests + c.LambdaDuration, USD, true},
		{"cost: DynamoDB reads", c.DynamoReads, USD, true},
		{"cost: DynamoDB writes", c.DynamoWrites, USD, true},
		{"cost: CloudWatch Logs", c.Logs, USD, true},
		{"cost: KMS", c.KMS, USD, true},
		{"cost: total", c.Total, USD, true},
	}
	if admitted > 0 {
		cs = append(cs, cell{"per million admitted", c.Total / float64(admitted) * 1e6, USD, true})
	}
	return cs
}

// formatInteger renders v rounded, with thousands separators.
func formatInteger(v float64) string { return Thousands(int64(math.Round(v))) }

// formatDecimals returns a format with n decimals.
func formatDecimals(n int) func(float64) string {
	return func(v float64) string { return strconv.FormatFloat(v, 'f', n, 64) }
}

// formatSeconds renders milliseconds v as seconds with two decimals.
func formatSeconds(v float64) string { return strconv.FormatFloat(v/1000, 'f', 2, 64) + " s" }

// formatMs renders milliseconds v with two decimals.
func formatMs(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + " ms" }

// formatBytes renders a byte count in decimal units ("4.86 GB").
func formatBytes(v float64) string {
	for i, unit := range []string{"GB", "MB", "kB"} {
		if size := math.Pow(1000, float64(3-i)); v >= size {
			return strconv.FormatFloat(v/size, 'f', 2, 64) + " " + unit
		}
	}
	return formatInteger(v) + " B"
}

// USD formats a price: whole dollars with separators from a thousand,
// cents from a dollar, four decimals below, two significant digits below
// a hundredth of a cent.
func USD(v float64) string {
	switch {
	case v >= 1000:
		return "$" + Thousands(int64(math.Round(v)))
	case v >= 1:
		return "$" + strconv.FormatFloat(v, 'f', 2, 64)
	case v > 0 && v < 0.0001:
		return "$" + strconv.FormatFloat(v, 'f', 1-int(math.Floor(math.Log10(v))), 64)
	}
	return "$" + strconv.FormatFloat(v, 'f', 4, 64)
}

// Thousands formats n with comma separators (1,234,567).
func Thousands(n int64) string { return english.Sprintf("%d", n) }

var english = message.NewPrinter(language.English)

// change renders the change from base to v in percent ("−83.1%").
func change(base, v float64) string {
	if base == 0 {
		return ""
	}
	c := (v - base) / base * 100
	s := strconv.FormatFloat(math.Abs(c), 'f', 1, 64) + "%"
	switch {
	case s == "0.0%":
		return "0%"
	case c < 0:
		return "−" + s
	}
	return "+" + s
}

// table returns the comparison as text cells: a header line, then a line
// per label of any result, and a column per later result with its change
// against the first. A result without a line shows "–".
func table(results []Result) [][]string {
	var labels []string
	byLabel := make([]map[string]cell, len(results))
	for i, r := range results {
		byLabel[i] = map[string]cell{}
		at := 0 // where a new label goes: after this result's previous one
		for _, c := range r.cells() {
			byLabel[i][c.label] = c
			if j := slices.Index(labels, c.label); j >= 0 {
				at = j + 1
				continue
			}
			labels = slices.Insert(labels, at, c.label)
			at++
		}
	}
	head := []string{"metric"}
	for _, r := range results {
		head = append(head, r.Policy)
	}
	for _, r := range results[1:] {
		head = append(head, r.Policy+" vs "+results[0].Policy)
	}
	out := [][]string{head}
	for _, label := range labels {
		line := []string{label}
		for _, cs := range byLabel {
			if c, ok := cs[label]; ok {
				line = append(line, c.format(c.v))
			} else {
				line = append(line, "–")
			}
		}
		base, ok := byLabel[0][label]
		for _, cs := range byLabel[1:] {
			if c, has := cs[label]; ok && has && c.compare {
				line = append(line, change(base.v, c.v))
			} else {
				line = append(line, "")
			}
		}
		out = append(out, line)
	}
	return out
}

// Markdown renders rows as a Markdown table: the first row is its header,
// and every column but the first is right-aligned.
func Markdown(rows [][]string) string {
	var b strings.Builder
	for i, row := range rows {
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
		if i == 0 {
			b.WriteString("|---" + strings.Repeat("|--:", len(row)-1) + "|\n")
		}
	}
	return b.String()
}

// MarkdownTable returns the comparison of results as a Markdown table.
func MarkdownTable(results []Result) string {
	if len(results) == 0 {
		return ""
	}
	return Markdown(table(results))
}

// WriteJSON writes results as an indented JSON array.
func WriteJSON(w io.Writer, results []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(results)
}

// Report describes a set of results for report.md: the kind of run
// ("Simulation"), the command line that produced them, and its Markdown
// table ("" is MarkdownTable's).
type Report struct {
	Title, Command, Table string
}

// Files written by WriteDir.
const (
	ResultsFile = "results.json"
	ReportFile  = "report.md"
)

// WriteDir writes results.json and report.md into dir, creating it.
func WriteDir(dir string, rep Report, results []Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ResultsFile), append(js, '\n'), 0o644); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n```\n%s\n```\n\n", rep.Title, rep.Command)
	if len(results) > 0 {
		r := results[0]
		fmt.Fprintf(&b, "%s users, arrival %s, admission %s", Thousands(int64(r.Users)), r.Arrival, r.AdmitRate)
		if r.Abandon > 0 {
			fmt.Fprintf(&b, ", %g%% of users leave while waiting", r.Abandon*100)
		}
		if r.CacheTTLMs > 0 && strings.Contains(r.AdmitRate, ",") {
			fmt.Fprintf(&b, ", rate changes in effect %g s after their offset (program cache TTL)", float64(r.CacheTTLMs)/1000)
		}
		fmt.Fprintf(&b, ", mode %s.\n\n", r.Mode)
	}
	b.WriteString(cmp.Or(rep.Table, MarkdownTable(results)))
	return os.WriteFile(filepath.Join(dir, ReportFile), []byte(b.String()), 0o644)
}
