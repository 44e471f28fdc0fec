package bench

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
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

// lines collects a result's lines of the table.
type lines []cell

// add appends the line label when when holds.
func (ls *lines) add(when bool, label string, v float64, format func(float64) string, compare bool) {
	if when {
		*ls = append(*ls, cell{label, v, format, compare})
	}
}

// percentiles appends the lines "name p50" to "name max" of p when it has
// samples, p95 only when withP95.
func (ls *lines) percentiles(name string, p *Percentiles, format func(float64) string, compare, withP95 bool) {
	if p != nil && p.Count > 0 {
		ls.add(true, name+" p50", p.P50, format, compare)
		ls.add(withP95, name+" p95", p.P95, format, compare)
		ls.add(true, name+" p99", p.P99, format, compare)
		ls.add(true, name+" max", p.Max, format, compare)
	}
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
	var ls lines
	ls.add(true, "users", float64(r.Users), formatInteger, false)
	ls.add(true, "admitted", float64(r.Admitted), formatInteger, false)
	ls.add(left, "left while waiting", float64(r.Left), formatInteger, false)
	ls.add(true, requests, float64(r.Requests), formatInteger, true)
	ls.add(true, "polls (GET)", float64(r.Polls), formatInteger, true)
	ls.add(true, "polls per user (GETs only)", r.PollsPerUser, fixed(2, 1, ""), true)
	ls.add(true, perUser, r.RequestsPerUser, fixed(2, 1, ""), true)
	ls.add(true, "duration", r.DurationSeconds*1000, formatSeconds, false)
	ls.add(true, "avg requests/s", r.AvgRps, fixed(1, 1, ""), true)
	ls.add(true, "peak requests/s (1 s)", float64(r.PeakRps), formatInteger, true)
	ls.add(true, "peak polls/s (1 s)", float64(r.PeakPollRps), formatInteger, true)
	ls.add(true, "errors (of the requests)", float64(r.Errors), formatInteger, false)
	ls.add(true, "enters/s peak (1 s)", float64(r.EntersPerSecondPeak), formatInteger, true)
	ls.add(true, "throttled enters", float64(r.ThrottledEnters), formatInteger, false)
	if w := r.ProgramItemWritesPerSecondMax; w != nil {
		ls.add(true, "program item writes/s max", float64(*w), formatInteger, true)
	}
	ls.add(true, "gaps (tickets nobody holds)", float64(r.Gaps), formatInteger, false)
	ls.add(true, "max inversion", r.MaxInversionMs, formatSeconds, false)
	service := r.Instances > 0
	ls.add(service, "clock skew (±)", r.ClockSkewMs, formatSeconds, false)
	ls.add(service, "clock offsets spread", r.ClockSpreadMs, formatSeconds, false)
	ls.add(service, "duplicate tickets", float64(r.DuplicateTickets), formatInteger, false)
	ls.add(service, "tickets past issued", float64(r.TicketsPastIssued), formatInteger, false)
	ls.add(service, "status regressions", float64(r.StatusRegressions), formatInteger, false)
	ls.add(service, "max position rise", float64(r.MaxPositionRise), formatInteger, false)
	ls.add(r.AdminRequests > 0, "admin requests (the bench's own)", float64(r.AdminRequests), formatInteger, false)
	ls.add(r.AdminRequests > 0, "admin errors", float64(r.AdminErrors), formatInteger, false)
	ls.percentiles("latency", r.LatencyMs, formatMs, false, true)
	if r.Capacity != nil {
		r.Capacity.add(&ls, r.Mode == "run")
	}
	for _, kind := range slices.Sorted(maps.Keys(r.CapacityWrites)) {
		ls.add(r.Users > 0, "capacity writes a person: "+kind, float64(r.CapacityWrites[kind])/float64(r.Users), fixed(2, 1, ""), true)
	}
	ls.add(r.SessionEnds > 0 && r.Mode != "run", "site's session-end calls (billed)", float64(r.SessionEnds), formatInteger, false)
	push := r.PushShare != nil
	if push {
		ls.add(true, "push share (subscribed)", *r.PushShare*100, fixed(0, 1, "%"), false)
		ls.add(true, "subscribed people", float64(r.Subscribed), formatInteger, false)
		ls.add(true, "pushes sent: get ready", float64(r.PushesReady), formatInteger, true)
		ls.add(true, "pushes sent: your turn (each a poll)", float64(r.PushesTurn), formatInteger, true)
		ls.add(true, "push sender minutes (someone subscribed waits)", float64(r.SenderMinutes), formatInteger, true)
	}
	ls.percentiles("wait (enter to ADMITTED)", r.WaitMs, formatSeconds, true, true)
	ls.percentiles("notify delay", &r.NotifyDelayMs, formatSeconds, true, true)
	if r.Cost != nil {
		r.Cost.add(&ls, r.Admitted, push)
	}
	return ls
}

// add appends the lines of the capacity model, with those only a run
// (run) or only the simulator measures.
func (c Capacity) add(ls *lines, run bool) {
	ls.add(c.MaxActiveUsers > 0, "cap (maxActiveUsers)", float64(c.MaxActiveUsers), formatInteger, false)
	ls.add(c.NoShowSeconds > 0, "no-show seconds", float64(c.NoShowSeconds), formatInteger, false)
	ls.add(run, "showed (saw ADMITTED)", float64(c.Showed), formatInteger, false)
	ls.add(!run, "time to serve everyone who shows", c.ServedMs, formatSeconds, true)
	ls.add(true, "no-shows (never fetched their admission)", float64(c.NoShows), formatInteger, false)
	ls.add(true, "no-shows counted by the service", float64(c.ServerNoShows), formatInteger, false)
	ls.add(!run, "admissions wasted (net)", float64(c.Wasted), formatInteger, true)
	ls.add(true, "sessions ended by the site", float64(c.SessionsEnded), formatInteger, false)
	ls.add(true, "most active at once (users' view)", float64(c.MostActive), formatInteger, true)
	ls.add(run, "read EXPIRED while polling", float64(c.Expired), formatInteger, false)
	ls.add(run, "sessions ended, counted by the service", float64(c.ServerEnded), formatInteger, false)
	ls.add(run, "peak active, admin counter", float64(c.PeakActiveCounter), formatInteger, false)
	ls.percentiles("slot reuse delay", c.SlotReuseMs, formatSeconds, false, false)
	ls.add(run, "ends not followed by a move", float64(c.NotReused), formatInteger, false)
	ls.add(run, "mean session", c.MeanSessionMs, formatSeconds, false)
	ls.add(run, "duration (admission start to last done)", c.DurationMs, formatSeconds, false)
	ls.add(run, "turnover bound", c.BoundMs, formatSeconds, false)
	ls.add(run, "duration / bound", c.Ratio, fixed(2, 1, ""), false)
}

// add appends the lines of a simulation's bill: the units used, the
// prices (the Web Push sender's on their own lines when push), the total
// and, when anyone was admitted, the total per million admitted.
func (c Cost) add(ls *lines, admitted int, push bool) {
	u := c.Usage
	*ls = append(*ls, []cell{
		{"DynamoDB read units", u.RRU, formatInteger, true},
		{"DynamoDB write units", u.WRU, formatInteger, true},
		{"Lambda GB-seconds", u.GBSeconds, formatInteger, true},
		{"Lambda instances (peak, Little's law)", float64(u.Instances), formatInteger, true},
		{"KMS requests", float64(u.KMS), formatInteger, true},
		{"log bytes (EMF, Lambda, access)", u.LogBytes, formatBytes, true},
		{"of them, the report's write units (minute tallies)", u.ReportWRU, formatInteger, true},
		{"of them, the report's read units (its pass)", u.ReportRRU, formatInteger, true},
		{"cost: API Gateway", c.APIGateway, USD, true},
		{"cost: Lambda", c.LambdaRequests + c.LambdaDuration, USD, true},
		{"cost: DynamoDB reads", c.DynamoReads, USD, true},
		{"cost: DynamoDB writes", c.DynamoWrites, USD, true},
		{"cost: CloudWatch Logs", c.Logs, USD, true},
		{"cost: KMS", c.KMS, USD, true},
		{"edge gate invocations", u.EdgeCalls, formatInteger, u.EdgeCalls > 0},
		{"cost: edge gate", c.Edge, USD, u.EdgeCalls > 0},
	}...)
	ls.add(push, "push sender Lambda GB-seconds", u.SenderGBSeconds, formatInteger, true)
	ls.add(push, "push DynamoDB write units (claims, index)", u.PushWRU, formatInteger, true)
	ls.add(push, "push DynamoDB read units (sender query)", u.PushRRU, formatInteger, true)
	ls.add(push, "cost: push sender Lambda", c.PushLambda, USD, true)
	ls.add(push, "cost: push DynamoDB writes", c.PushDynamoWrite, USD, true)
	ls.add(push, "cost: push DynamoDB reads", c.PushDynamoRead, USD, true)
	ls.add(true, "cost: total", c.Total, USD, true)
	ls.add(admitted > 0, "per million admitted", c.Total/float64(admitted)*1e6, USD, true)
}

// formatInteger renders v rounded, with thousands separators.
func formatInteger(v float64) string { return Thousands(int64(math.Round(v))) }

// fixed returns a format of v/div with n decimals, then suffix.
func fixed(n int, div float64, suffix string) func(float64) string {
	return func(v float64) string { return strconv.FormatFloat(v/div, 'f', n, 64) + suffix }
}

var (
	formatSeconds = fixed(2, 1000, " s") // milliseconds as seconds
	formatMs      = fixed(2, 1, " ms")
)

// formatBytes renders a byte count in decimal units ("4.86 GB").
func formatBytes(v float64) string {
	for i, unit := range []string{"GB", "MB", "kB"} {
		if size := math.Pow(1000, float64(3-i)); v >= size {
			return fixed(2, size, " "+unit)(v)
		}
	}
	return formatInteger(v) + " B"
}

// USD formats a price: whole dollars with separators from a thousand,
// cents from a dollar, four decimals below, two significant digits below
// a hundredth of a cent.
func USD(v float64) string {
	n := 4
	switch {
	case v >= 1000:
		return "$" + Thousands(int64(math.Round(v)))
	case v >= 1:
		n = 2
	case v > 0 && v < 0.0001:
		n = 1 - int(math.Floor(math.Log10(v)))
	}
	return "$" + strconv.FormatFloat(v, 'f', n, 64)
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
			if !slices.Contains(labels, c.label) {
				labels = slices.Insert(labels, at, c.label)
			}
			at = slices.Index(labels, c.label) + 1
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
			line = append(line, "–")
			if c, ok := cs[label]; ok {
				line[len(line)-1] = c.format(c.v)
			}
		}
		base, ok := byLabel[0][label]
		for _, cs := range byLabel[1:] {
			line = append(line, "")
			if c, has := cs[label]; ok && has && c.compare {
				line[len(line)-1] = change(base.v, c.v)
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
	var js, b bytes.Buffer
	if err := WriteJSON(&js, results); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ResultsFile), js.Bytes(), 0o644); err != nil {
		return err
	}
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
	return os.WriteFile(filepath.Join(dir, ReportFile), b.Bytes(), 0o644)
}
