package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// row is one line of the comparison table: a label and how to read the
// value from a result; ok false leaves the cell empty.
type row struct {
	label string
	value func(Result) (v float64, ok bool)
	// format renders a value.
	format func(float64) string
	// compare: whether a change in percent means something for this row.
	compare bool
}

// rows returns the table's rows for results: the common ones, and those of
// leaves, clock skew, admin requests, latency, capacity and cost when any
// result has them.
func rows(results []Result) []row {
	var run, sim, left, admin, skew, capacity bool
	for _, r := range results {
		capacity = capacity || r.Capacity != nil
		skew = skew || r.ClockSkewMs > 0
		run = run || r.LatencyMs != nil
		admin = admin || r.AdminRequests > 0
		sim = sim || r.Cost != nil
		left = left || r.Abandon > 0 || r.Left > 0 || r.Leaves > 0
	}
	rs := append(requestRows(left), rateRows()...)
	if skew {
		rs = append(rs, skewRows()...)
	}
	if admin {
		rs = append(rs,
			row{"admin requests (the bench's own)", always(func(r Result) float64 { return float64(r.AdminRequests) }), formatInteger, false},
			row{"admin errors", always(func(r Result) float64 { return float64(r.AdminErrors) }), formatInteger, false},
		)
	}
	if run {
		rs = append(rs, latencyRows()...)
	}
	if capacity {
		rs = append(rs, capacityRows()...)
	}
	if slices.ContainsFunc(results, func(r Result) bool { return r.CapacityRun != nil }) {
		rs = append(rs, capacityRunRows()...)
	}
	notify := func(f func(Percentiles) float64) func(Result) (float64, bool) {
		return func(r Result) (float64, bool) { return f(r.NotifyDelayMs), r.NotifyDelayMs.Count > 0 }
	}
	rs = append(rs,
		row{"notify delay p50", notify(func(p Percentiles) float64 { return p.P50 }), formatSeconds, true},
		row{"notify delay p95", notify(func(p Percentiles) float64 { return p.P95 }), formatSeconds, true},
		row{"notify delay p99", notify(func(p Percentiles) float64 { return p.P99 }), formatSeconds, true},
		row{"notify delay max", notify(func(p Percentiles) float64 { return p.Max }), formatSeconds, true},
	)
	if sim {
		rs = append(rs, costRows()...)
	}
	return rs
}

// formatInteger renders v rounded, with thousands separators.
func formatInteger(v float64) string { return Thousands(int64(math.Round(v))) }

// formatDecimals returns a format with n decimals.
func formatDecimals(n int) func(float64) string {
	return func(v float64) string { return strconv.FormatFloat(v, 'f', n, 64) }
}

// formatSeconds renders milliseconds v as seconds with two decimals.
func formatSeconds(v float64) string { return strconv.FormatFloat(v/1000, 'f', 2, 64) + " s" }

// always returns a row value that every result has.
func always(f func(Result) float64) func(Result) (float64, bool) {
	return func(r Result) (float64, bool) { return f(r), true }
}

// requestRows returns the rows of users and their requests; left adds the
// leaves.
func requestRows(left bool) []row {
	// "Polls per user" has two readings: GETs only, and every request of
	// the user, the enter included.
	requests, perUser := "requests (enter + polls)", "requests per user (enter + GETs)"
	if left {
		requests, perUser = "requests (enter + polls + leaves)", "requests per user (enter + GETs + DELETE)"
	}
	rs := []row{
		{"users", always(func(r Result) float64 { return float64(r.Users) }), formatInteger, false},
		{"admitted", always(func(r Result) float64 { return float64(r.Admitted) }), formatInteger, false},
	}
	if left {
		rs = append(rs, row{"left while waiting", always(func(r Result) float64 { return float64(r.Left) }), formatInteger, false})
	}
	return append(rs,
		row{requests, always(func(r Result) float64 { return float64(r.Requests) }), formatInteger, true},
		row{"polls (GET)", always(func(r Result) float64 { return float64(r.Polls) }), formatInteger, true},
		row{"polls per user (GETs only)", always(func(r Result) float64 { return r.PollsPerUser }), formatDecimals(2), true},
		row{perUser, always(func(r Result) float64 { return r.RequestsPerUser }), formatDecimals(2), true},
		row{"polls per admitted user", func(r Result) (float64, bool) { return r.PollsPerAdmitted, r.Admitted > 0 }, formatDecimals(2), true},
	)
}

// rateRows returns the rows of duration, request rates, errors and order.
func rateRows() []row {
	return []row{
		{"duration", always(func(r Result) float64 { return r.DurationSeconds * 1000 }), formatSeconds, false},
		{"avg requests/s", always(func(r Result) float64 { return r.AvgRps }), formatDecimals(1), true},
		{"peak requests/s (1 s)", always(func(r Result) float64 { return float64(r.PeakRps) }), formatInteger, true},
		{"peak polls/s (1 s)", always(func(r Result) float64 { return float64(r.PeakPollRps) }), formatInteger, true},
		{"errors (of the requests)", always(func(r Result) float64 { return float64(r.Errors) }), formatInteger, false},
		{"enters/s peak (1 s)", always(func(r Result) float64 { return float64(r.EntersPerSecondPeak) }), formatInteger, true},
		{"throttled enters", always(func(r Result) float64 { return float64(r.ThrottledEnters) }), formatInteger, false},
		{"program item writes/s max", func(r Result) (float64, bool) {
			if r.ProgramItemWritesPerSecondMax == nil {
				return 0, false
			}
			return float64(*r.ProgramItemWritesPerSecondMax), true
		}, formatInteger, true},
		{"gaps (tickets nobody holds)", always(func(r Result) float64 { return float64(r.Gaps) }), formatInteger, false},
		{"max inversion", always(func(r Result) float64 { return r.MaxInversionMs }), formatSeconds, false},
	}
}

// skewRows returns the rows of the clock-skew checks.
func skewRows() []row {
	return []row{
		{"clock skew (±)", always(func(r Result) float64 { return r.ClockSkewMs }), formatSeconds, false},
		{"clock offsets spread", always(func(r Result) float64 { return r.ClockSpreadMs }), formatSeconds, false},
		{"duplicate tickets", always(func(r Result) float64 { return float64(r.DuplicateTickets) }), formatInteger, false},
		{"tickets past issued", always(func(r Result) float64 { return float64(r.TicketsPastIssued) }), formatInteger, false},
		{"status regressions", always(func(r Result) float64 { return float64(r.StatusRegressions) }), formatInteger, false},
		{"max position rise", always(func(r Result) float64 { return float64(r.MaxPositionRise) }), formatInteger, false},
	}
}

// capacityRows returns the rows of the capacity model: the program's cap
// and no-show handling, the no-shows and the slots.
func capacityRows() []row {
	c := func(f func(Capacity) (float64, bool)) func(Result) (float64, bool) {
		return func(r Result) (float64, bool) {
			if r.Capacity == nil {
				return 0, false
			}
			return f(*r.Capacity)
		}
	}
	set := func(f func(Capacity) int64) func(Result) (float64, bool) {
		return c(func(c Capacity) (float64, bool) { return float64(f(c)), f(c) > 0 })
	}
	all := func(f func(Capacity) float64) func(Result) (float64, bool) {
		return c(func(c Capacity) (float64, bool) { return f(c), true })
	}
	reuse := func(f func(Percentiles) float64) func(Result) (float64, bool) {
		return c(func(c Capacity) (float64, bool) {
			if c.SlotReuseMs == nil || c.SlotReuseMs.Count == 0 {
				return 0, false
			}
			return f(*c.SlotReuseMs), true
		})
	}
	return []row{
		{"cap (maxActiveUsers)", set(func(c Capacity) int64 { return c.MaxActiveUsers }), formatInteger, false},
		{"no-show seconds", set(func(c Capacity) int64 { return c.NoShowSeconds }), formatInteger, false},
		{"time to serve everyone who shows", all(func(c Capacity) float64 { return c.ServedMs }), formatSeconds, true},
		{"no-shows (admitted, never came)", all(func(c Capacity) float64 { return float64(c.NoShows) }), formatInteger, false},
		{"no-shows found by the folds", all(func(c Capacity) float64 { return float64(c.NoShowsFound) }), formatInteger, false},
		{"admissions wasted (net)", all(func(c Capacity) float64 { return float64(c.Wasted) }), formatInteger, true},
		{"sessions ended by the site", all(func(c Capacity) float64 { return float64(c.SessionsEnded) }), formatInteger, false},
		{"most active at once (users' view)", all(func(c Capacity) float64 { return float64(c.MostActive) }), formatInteger, true},
		{"slot reuse delay p50", reuse(func(p Percentiles) float64 { return p.P50 }), formatSeconds, false},
		{"slot reuse delay max", reuse(func(p Percentiles) float64 { return p.Max }), formatSeconds, false},
	}
}

// latencyRows returns the rows of a load test's request latency.
func latencyRows() []row {
	lat := func(f func(Percentiles) float64) func(Result) (float64, bool) {
		return func(r Result) (float64, bool) {
			if r.LatencyMs == nil || r.LatencyMs.Count == 0 {
				return 0, false
			}
			return f(*r.LatencyMs), true
		}
	}
	ms := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + " ms" }
	return []row{
		{"latency p50", lat(func(p Percentiles) float64 { return p.P50 }), ms, false},
		{"latency p95", lat(func(p Percentiles) float64 { return p.P95 }), ms, false},
		{"latency p99", lat(func(p Percentiles) float64 { return p.P99 }), ms, false},
	}
}

// costRows returns the rows of a simulation's bill: the units used, the
// price of each line, the totals Before and After (KMS per admission, KMS
// per key rotation) and the totals per million people admitted.
func costRows() []row {
	cost := func(f func(Cost) float64) func(Result) (float64, bool) {
		return func(r Result) (float64, bool) {
			if r.Cost == nil {
				return 0, false
			}
			return f(*r.Cost), true
		}
	}
	use := func(f func(Usage) float64) func(Result) (float64, bool) {
		return cost(func(c Cost) float64 { return f(c.Usage) })
	}
	perMillion := func(f func(Cost) float64) func(Result) (float64, bool) {
		return func(r Result) (float64, bool) {
			if r.Cost == nil || r.Admitted == 0 {
				return 0, false
			}
			return f(*r.Cost) / float64(r.Admitted) * 1e6, true
		}
	}
	return []row{
		{"DynamoDB read units", use(func(u Usage) float64 { return u.RRU }), formatInteger, true},
		{"DynamoDB write units", use(func(u Usage) float64 { return u.WRU }), formatInteger, true},
		{"Lambda GB-seconds", use(func(u Usage) float64 { return u.GBSeconds }), formatInteger, true},
		{"Lambda instances (peak, Little's law)", use(func(u Usage) float64 { return float64(u.Instances) }), formatInteger, true},
		{"KMS requests, Before (Sign per admission)", use(func(u Usage) float64 { return float64(u.KMSBefore) }), formatInteger, true},
		{"KMS requests, After (key per rotation)", use(func(u Usage) float64 { return float64(u.KMSAfter) }), formatInteger, true},
		{"log bytes (EMF, Lambda, access)", use(func(u Usage) float64 { return u.LogBytes }), formatBytes, true},
		{"cost: API Gateway", cost(func(c Cost) float64 { return c.APIGateway }), USD, true},
		{"cost: Lambda", cost(func(c Cost) float64 { return c.LambdaRequests + c.LambdaDuration }), USD, true},
		{"cost: DynamoDB reads", cost(func(c Cost) float64 { return c.DynamoReads }), USD, true},
		{"cost: DynamoDB writes", cost(func(c Cost) float64 { return c.DynamoWrites }), USD, true},
		{"cost: CloudWatch Logs", cost(func(c Cost) float64 { return c.Logs }), USD, true},
		{"cost: KMS, Before", cost(func(c Cost) float64 { return c.KMSBefore }), USD, true},
		{"cost: KMS, After", cost(func(c Cost) float64 { return c.KMSAfter }), USD, true},
		{"cost: total, Before", cost(func(c Cost) float64 { return c.TotalBefore }), USD, true},
		{"cost: total, After", cost(func(c Cost) float64 { return c.TotalAfter }), USD, true},
		{"per million admitted, Before", perMillion(func(c Cost) float64 { return c.TotalBefore }), USD, true},
		{"per million admitted, After", perMillion(func(c Cost) float64 { return c.TotalAfter }), USD, true},
	}
}

// formatBytes renders a byte count in decimal units ("4.86 GB").
func formatBytes(v float64) string {
	for _, u := range []struct {
		unit string
		size float64
	}{{"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}} {
		if v >= u.size {
			return strconv.FormatFloat(v/u.size, 'f', 2, 64) + " " + u.unit
		}
	}
	return formatInteger(v) + " B"
}

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

// table returns the comparison as cells: a header line, then one line per
// metric; with two results or more, a column per later result gives its
// change against the first (negative: a reduction).
func table(results []Result) [][]string {
	head := []string{"metric"}
	for _, r := range results {
		head = append(head, r.Policy)
	}
	for _, r := range results[1:] {
		head = append(head, r.Policy+" vs "+results[0].Policy)
	}
	out := [][]string{head}
	for _, rw := range rows(results) {
		line := []string{rw.label}
		vals := make([]float64, len(results))
		oks := make([]bool, len(results))
		for i, r := range results {
			vals[i], oks[i] = rw.value(r)
			if oks[i] {
				line = append(line, rw.format(vals[i]))
			} else {
				line = append(line, "–")
			}
		}
		for i := 1; i < len(results); i++ {
			if rw.compare && oks[0] && oks[i] {
				line = append(line, change(vals[0], vals[i]))
			} else {
				line = append(line, "")
			}
		}
		out = append(out, line)
	}
	return out
}

// WriteTable prints the side-by-side comparison of results for a terminal:
// labels left, numbers right-aligned.
func WriteTable(w io.Writer, results []Result) error {
	if len(results) == 0 {
		return nil
	}
	lines := table(results)
	width := 0
	for _, line := range lines {
		width = max(width, utf8.RuneCountInString(line[0]))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, line := range lines {
		line[0] += strings.Repeat(" ", width-utf8.RuneCountInString(line[0]))
		fmt.Fprintln(tw, strings.Join(line, "\t")+"\t")
	}
	return tw.Flush()
}

// USD formats a price: cents above a dollar, four decimals below, two
// significant digits below a hundredth of a cent.
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

// MarkdownTable returns the comparison as a Markdown table.
func MarkdownTable(results []Result) string {
	if len(results) == 0 {
		return ""
	}
	var b strings.Builder
	for i, line := range table(results) {
		b.WriteString("| " + strings.Join(line, " | ") + " |\n")
		if i == 0 {
			b.WriteString("|---" + strings.Repeat("|--:", len(line)-1) + "|\n")
		}
	}
	return b.String()
}

// WriteJSON writes results as an indented JSON array.
func WriteJSON(w io.Writer, results []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(results)
}

// Report describes a set of results for report.md.
type Report struct {
	Title string
	// Command is the command line that produced the results.
	Command string
	// Notes are paragraphs printed under the table.
	Notes []string
}

// Files written by WriteDir.
const (
	ResultsFile = "results.json"
	ReportFile  = "report.md"
	ChartFile   = "rps.svg"
)

// WriteDir writes results.json, report.md and rps.svg (requests per second
// over time, one line per result) into dir, creating it if needed.
func WriteDir(dir string, rep Report, results []Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var js strings.Builder
	if err := WriteJSON(&js, results); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ResultsFile), []byte(js.String()), 0o644); err != nil {
		return err
	}
	chart := Chart{Title: rep.Title + ": requests per second", Results: results}
	if err := os.WriteFile(filepath.Join(dir, ChartFile), chart.SVG(), 0o644); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", rep.Title)
	if rep.Command != "" {
		fmt.Fprintf(&b, "```\n%s\n```\n\n", rep.Command)
	}
	if len(results) > 0 {
		r := results[0]
		fmt.Fprintf(&b, "%s users, arrival %s, admission %s", Thousands(int64(r.Users)), r.Arrival, r.AdmitRate)
		if r.Abandon > 0 {
			fmt.Fprintf(&b, ", %g%% of users leave while waiting", r.Abandon*100)
		}
		if r.CacheTTLMs > 0 && strings.Contains(r.AdmitRate, ",") {
			fmt.Fprintf(&b, ", rate changes in effect %s after their offset (program cache TTL)", strconv.FormatFloat(float64(r.CacheTTLMs)/1000, 'g', -1, 64)+" s")
		}
		fmt.Fprintf(&b, ", mode %s.\n\n", r.Mode)
	}
	b.WriteString(MarkdownTable(results))
	fmt.Fprintf(&b, "\n![requests per second](%s)\n", ChartFile)
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "\n%s\n", n)
	}
	b.WriteString("\nRequests by route and status:\n\n")
	for _, r := range results {
		fmt.Fprintf(&b, "- %s: %s\n", r.Policy, routes(r.ByRoute))
	}
	return os.WriteFile(filepath.Join(dir, ReportFile), []byte(b.String()), 0o644)
}

func routes(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %s", k, Thousands(m[k]))
	}
	return strings.Join(parts, ", ")
}

// Thousands formats n with comma separators (1,234,567).
func Thousands(n int64) string { return english.Sprintf("%d", n) }

// english formats numbers as the reports write them.
var english = message.NewPrinter(language.English)
