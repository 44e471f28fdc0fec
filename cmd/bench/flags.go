package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/tools/bench"
)

// scenarioFlags are the flags every command shares.
type scenarioFlags struct {
	fs           *flag.FlagSet
	users        int
	admitRate    float64
	rateSchedule string
	pausedFor    time.Duration
	arrival      string
	abandon      float64
	timeout      time.Duration
	cacheTTL     time.Duration
	seed         uint64
	jsonOut      bool
	outDir       string
}

// register defines the shared flags on fs, with the command's -timeout
// default and the help of -timeout and -cache-ttl.
func (s *scenarioFlags) register(fs *flag.FlagSet, timeout time.Duration, timeoutHelp, cacheTTLHelp string) {
	s.fs = fs
	fs.IntVar(&s.users, "users", 1000, "number of virtual users")
	fs.Float64Var(&s.admitRate, "admit-rate", 10, "admission rate of the program, people per second; 0 keeps admission paused (then bound the run with -timeout)")
	fs.StringVar(&s.rateSchedule, "rate-schedule", "", "admission rate changing over the run instead of -admit-rate: OFFSET:RATE,… from the start of admission, e.g. 0s:200,120s:100,240s:0,300s:200 (halved at 2 min, paused at 4, restarted at 5); rate 0 pauses, OFFSET:RATE:paused sets the rate and pauses")
	fs.DurationVar(&s.pausedFor, "paused-for", 0, "create the program with -admit-rate and paused, as an operator prepares an on-sale, and resume it this long after admission starts (an admin change, in force -cache-ttl later); the schedule 0s:RATE:paused,DURATION:RATE")
	fs.StringVar(&s.arrival, "arrival", "burst", "when users enter: burst (all at the start, admission starting once everyone is in) or uniform:DURATION (evenly spread, e.g. uniform:60s)")
	fs.Float64Var(&s.abandon, "abandon", 0, "fraction of users, in [0, 1), who leave while waiting (DELETE), each at a uniform random instant of its wait; who and when follow -seed")
	fs.DurationVar(&s.timeout, "timeout", timeout, timeoutHelp)
	fs.DurationVar(&s.cacheTTL, "cache-ttl", time.Second, cacheTTLHelp)
	fs.Uint64Var(&s.seed, "seed", 1, "seed of the abandonment draws and, in simulate, of the policies' jitter")
	fs.BoolVar(&s.jsonOut, "json", false, "print the results as a JSON array, one object per policy, instead of a table")
	fs.StringVar(&s.outDir, "out", "", "also write results.json and report.md (the table) into this directory (run: and report.html, its program's report)")
}

// scenario checks the shared flags and returns the scenario they describe.
func (s *scenarioFlags) scenario() (bench.Scenario, error) {
	arr, err := bench.ParseArrival(s.arrival)
	rates := bench.ConstantRate(s.admitRate)
	switch {
	case err != nil:
		return bench.Scenario{}, err
	case s.admitRate < 0 || s.admitRate > pace.MaxAdmissionRate:
		return bench.Scenario{}, fmt.Errorf("-admit-rate %g: want 0 to %g", s.admitRate, pace.MaxAdmissionRate)
	case s.rateSchedule != "" && flagGiven(s.fs, "admit-rate"):
		return bench.Scenario{}, errors.New("-admit-rate and -rate-schedule: give one of them")
	case s.pausedFor < 0:
		return bench.Scenario{}, errors.New("-paused-for: negative")
	case s.pausedFor > 0 && s.rateSchedule != "":
		return bench.Scenario{}, errors.New("-paused-for and -rate-schedule: give one of them (0s:RATE:paused,DURATION:RATE)")
	case s.pausedFor > 0 && s.admitRate == 0:
		return bench.Scenario{}, errors.New("-paused-for: the program needs a rate to resume with: set -admit-rate above 0")
	case s.cacheTTL < 0:
		return bench.Scenario{}, errors.New("-cache-ttl: negative")
	case s.pausedFor > 0:
		rates = bench.PausedFor(s.admitRate, s.pausedFor)
	case s.rateSchedule != "":
		if rates, err = bench.ParseSchedule(s.rateSchedule); err != nil {
			return bench.Scenario{}, err
		}
	}
	sc := bench.Scenario{Users: s.users, Arrival: arr, Rates: rates, Abandon: s.abandon, Timeout: s.timeout}
	return sc, sc.Validate()
}

// output prints results as table ("": the results' comparison, with
// notes), or with -json as JSON, and writes them into -out under title.
func (s *scenarioFlags) output(e env, title string, args []string, table string, results []bench.Result) error {
	return s.write(e, title, args, table, results, extra{})
}

// extra is what a command adds to its output: text printed under the table
// and its notes (not with -json), and files written into -out beside the
// results.
type extra struct {
	text  func(w io.Writer) error // nil: none
	files []outFile
}

// outFile is a file of -out and the function that writes it.
type outFile struct {
	name  string
	write func(w io.Writer) error
}

// write is output with x.
func (s *scenarioFlags) write(e env, title string, args []string, table string, results []bench.Result, x extra) error {
	if s.jsonOut {
		if err := bench.WriteJSON(e.stdout, results); err != nil {
			return err
		}
	} else if table != "" {
		fmt.Fprint(e.stdout, table)
	} else {
		fmt.Fprint(e.stdout, bench.MarkdownTable(results))
		for _, n := range notes(results) {
			fmt.Fprintln(e.stdout, n)
		}
	}
	if x.text != nil && !s.jsonOut {
		if err := x.text(e.stdout); err != nil {
			return err
		}
	}
	if s.outDir == "" {
		return nil
	}
	rep := bench.Report{Title: title, Command: s.fs.Name() + " " + strings.Join(args, " "), Table: table}
	if err := bench.WriteDir(s.outDir, rep, results); err != nil {
		return err
	}
	names := []string{bench.ResultsFile, bench.ReportFile}
	for _, f := range x.files {
		if err := writeFile(filepath.Join(s.outDir, f.name), f.write); err != nil {
			return err
		}
		names = append(names, f.name)
	}
	if !s.jsonOut {
		fmt.Fprintf(e.stdout, "\nwrote %s/{%s}\n", s.outDir, strings.Join(names, ","))
	}
	return nil
}

// writeFile creates name and writes it with write.
func writeFile(name string, write func(w io.Writer) error) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	if err := errors.Join(write(w), w.Flush(), f.Close()); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// notes explains, under the table, the rows that read as a failure when
// they are not zero, a line each: the errors, by code, and the gaps.
func notes(results []bench.Result) []string {
	var errs, gaps bool
	codes := map[string]int64{}
	for _, r := range results {
		errs, gaps = errs || r.Errors > 0, gaps || r.Gaps > 0
		for code, n := range r.ErrorCodes {
			codes[code] += n
		}
	}
	var out []string
	if errs {
		line := "errors: requests that failed: transport errors, 5xx, 429 and answers the bench does not expect (409 PROGRAM_CLOSED: enters after the program closed)"
		if len(codes) > 0 {
			var byCode []string
			for _, code := range slices.Sorted(maps.Keys(codes)) {
				byCode = append(byCode, code+" "+bench.Thousands(codes[code]))
			}
			line += "; by code: " + strings.Join(byCode, ", ")
		}
		out = append(out, line)
	}
	if gaps {
		out = append(out, "gaps: tickets of the program that no user of the bench holds: taken by others during the run (a curl, a browser) or by enters whose answer was lost")
	}
	if len(out) > 0 {
		out[0] = "\n" + out[0] // a blank line under the table
	}
	return out
}

// crowdFlags are the flags of a program's cap and of its crowd.
type crowdFlags struct {
	maxActive, noShowSeconds int64
	noShow                   float64
	session                  string
}

// register defines the crowd flags on fs; sessionHelp says what no -session
// means.
func (c *crowdFlags) register(fs *flag.FlagSet, sessionHelp string) {
	fs.Int64Var(&c.maxActive, "max-active", 0, "the program's maxActiveUsers: at most this many people admitted at once (0: no cap)")
	fs.Float64Var(&c.noShow, "no-show", 0, "fraction of users, in [0, 1), who stop polling right before their admission and never fetch it; who follows -seed")
	fs.Int64Var(&c.noShowSeconds, "no-show-seconds", 0, "the program's noShowSeconds, 5 to 3600: an admitted person who has not fetched their answer this long after is a no-show (0: not set)")
	fs.StringVar(&c.session, "session", "", "MIN-MAX, e.g. 5s-20s: the site ends the session of each user who came after a uniform random time in that range ("+sessionHelp+")")
}

// crowd returns the crowd the flags describe.
func (c *crowdFlags) crowd() (bench.Crowd, error) {
	session, err := parseSession(c.session)
	if err != nil {
		return bench.Crowd{}, err
	}
	out := bench.Crowd{MaxActive: c.maxActive, NoShowSeconds: c.noShowSeconds, NoShow: c.noShow, Session: session}
	return out, out.Validate()
}

// runCrowd returns the crowd of run and compare: nil without any crowd
// flag, an error without -max-active.
func (c *crowdFlags) runCrowd() (*bench.Crowd, error) {
	crowd, err := c.crowd()
	switch {
	case err != nil:
		return nil, err
	case crowd == (bench.Crowd{}):
		return nil, nil
	case crowd.MaxActive == 0:
		return nil, errors.New("-no-show, -no-show-seconds and -session need -max-active")
	}
	return &crowd, nil
}

// parseSession parses -session: MIN-MAX, each a duration or a number of
// seconds, 0 ≤ MIN ≤ MAX and MAX above 0; empty is none.
func parseSession(spec string) (bench.Range, error) {
	if spec == "" {
		return bench.Range{}, nil
	}
	lo, hi, ok := strings.Cut(spec, "-")
	var ends [2]time.Duration
	for i, f := range []string{lo, hi} {
		f = strings.TrimSpace(f)
		d, err := time.ParseDuration(f)
		if sec, ferr := strconv.ParseFloat(f, 64); err != nil && ferr == nil && !math.IsNaN(sec) && !math.IsInf(sec, 0) {
			d, err = time.Duration(sec*float64(time.Second)), nil
		}
		ends[i], ok = d, ok && err == nil
	}
	if !ok || ends[0] < 0 || ends[1] < ends[0] || ends[1] <= 0 {
		return bench.Range{}, fmt.Errorf("-session %q: want MIN-MAX, two durations with 0 < MIN ≤ MAX or MIN 0, e.g. 5s-20s", spec)
	}
	return bench.Range{Min: ends[0], Max: ends[1]}, nil
}

// registry parses the parameters of the tiers, eta and steady policies
// into the registry of named policies.
func registry(tiersSpec, etaSpec, steadySpec string) (polling.Registry, error) {
	tiers, err1 := polling.ParseTiers(tiersSpec)
	eta, err2 := polling.ParseETA(etaSpec)
	steady, err3 := polling.ParseSteady(steadySpec)
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, err
	}
	return polling.Named(tiers, eta, steady), nil
}

// flagGiven reports whether flag name was given on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
