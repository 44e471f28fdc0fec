package main

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/queue"
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
	fs.StringVar(&s.outDir, "out", "", "also write results.json, report.md and rps.svg (requests per second over time) into this directory")
}

// scenario checks the shared flags and returns the scenario they describe.
func (s *scenarioFlags) scenario() (bench.Scenario, error) {
	arr, err := bench.ParseArrival(s.arrival)
	if err != nil {
		return bench.Scenario{}, err
	}
	if s.admitRate < 0 || s.admitRate > queue.MaxAdmissionRate {
		return bench.Scenario{}, fmt.Errorf("-admit-rate %g: want 0 to %g", s.admitRate, queue.MaxAdmissionRate)
	}
	rates := bench.ConstantRate(s.admitRate)
	if s.rateSchedule != "" {
		admitRateSet := false
		s.fs.Visit(func(f *flag.Flag) { admitRateSet = admitRateSet || f.Name == "admit-rate" })
		if admitRateSet {
			return bench.Scenario{}, errors.New("-admit-rate and -rate-schedule: give one of them")
		}
		if rates, err = bench.ParseSchedule(s.rateSchedule); err != nil {
			return bench.Scenario{}, err
		}
	}
	if s.pausedFor != 0 {
		switch {
		case s.pausedFor < 0:
			return bench.Scenario{}, errors.New("-paused-for: negative")
		case s.rateSchedule != "":
			return bench.Scenario{}, errors.New("-paused-for and -rate-schedule: give one of them (0s:RATE:paused,DURATION:RATE)")
		case s.admitRate == 0:
			return bench.Scenario{}, errors.New("-paused-for: the program needs a rate to resume with: set -admit-rate above 0")
		}
		rates = bench.PausedFor(s.admitRate, s.pausedFor)
	}
	if s.cacheTTL < 0 {
		return bench.Scenario{}, errors.New("-cache-ttl: negative")
	}
	sc := bench.Scenario{Users: s.users, Arrival: arr, Rates: rates, Abandon: s.abandon, Timeout: s.timeout}
	return sc, sc.Validate()
}

// admission describes the scenario's admission for a report title:
// "admission 10/s" or "admission 0s:200,120s:100, 20% leave".
func admission(sc bench.Scenario) string {
	s := "admission " + sc.Rates.String()
	if sc.Abandon > 0 {
		s += fmt.Sprintf(", %g%% leave", sc.Abandon*100)
	}
	return s
}

// output prints results and writes the -out directory.
func (s *scenarioFlags) output(e env, rep bench.Report, results []bench.Result) error {
	var err error
	if s.jsonOut {
		err = bench.WriteJSON(e.stdout, results)
	} else if err = bench.WriteTable(e.stdout, results); err == nil {
		for _, n := range notes(results) {
			fmt.Fprintln(e.stdout, n)
		}
	}
	if err != nil {
		return err
	}
	if s.outDir != "" {
		if err := bench.WriteDir(s.outDir, rep, results); err != nil {
			return err
		}
		if !s.jsonOut {
			fmt.Fprintf(e.stdout, "\nwrote %s/{%s,%s,%s}\n", s.outDir, bench.ResultsFile, bench.ReportFile, bench.ChartFile)
		}
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
		line := "\nerrors: requests that failed: transport errors, 5xx, 429 and answers the bench does not expect (409 PROGRAM_CLOSED: enters after the program closed)"
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
		line := "gaps: tickets of the program that no user of the bench holds: taken by others during the run (a curl, a browser) or by enters whose answer was lost"
		if !errs {
			line = "\n" + line
		}
		out = append(out, line)
	}
	return out
}

// newFlagSet returns the flag set of bench name, printing synopsis in its
// usage.
func newFlagSet(name, synopsis string, e env) *flag.FlagSet {
	fs := flag.NewFlagSet("bench "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: bench %s [flags]\n\n%s\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args into fs; it returns flag.ErrHelp for -h and errUsage
// for a bad flag or an argument.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "bench: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	return nil
}

// usageError prints err and a pointer to -h, and returns errUsage.
func usageError(fs *flag.FlagSet, err error) error {
	fmt.Fprintf(fs.Output(), "bench: %v\n(see bench %s -h)\n", err, strings.TrimPrefix(fs.Name(), "bench "))
	return errUsage
}
