// Command bench measures the polling load of the waiting room, Before
// (clients polling every few seconds) and After (clients sleeping exactly
// the retryAfterMs the server answers).
//
//	bench run      one load test of real HTTP virtual users (loopback only)
//	bench compare  Before and After load tests, one after the other, side by side
//	bench simulate the same scenario on a virtual clock, up to millions of users
//	bench tradeoff eta over a range of one parameter: polls against delay
//
// Run "bench COMMAND -h" for the flags. See docs/benchmarks.md.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/example/waitingroom/internal/bench"
	"github.com/example/waitingroom/internal/bench/loadtest"
	"github.com/example/waitingroom/internal/bench/simulate"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var progress io.Writer
	if bench.IsTerminal(os.Stderr) {
		progress = os.Stderr
	}
	err := run(ctx, os.Args[1:], env{stdout: os.Stdout, stderr: os.Stderr, progress: progress, getenv: os.Getenv})
	switch {
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// env is the outside world of a command, so that tests can supply it.
type env struct {
	stdout, stderr io.Writer
	// progress receives live progress lines; nil when stderr is not a
	// terminal.
	progress io.Writer
	getenv   func(string) string
}

var errUsage = errors.New("usage")

const usage = `Usage: bench COMMAND [flags]

Measures the polling load of the waiting room: Before (clients that poll
every few seconds) and After (clients that sleep the retryAfterMs the server
answers).

Commands:
  run       one load test of real HTTP virtual users against a server
  compare   Before and After load tests on fresh programs, side by side
  simulate  the same scenario on a virtual clock, no network, up to millions
            of users, with DynamoDB read units and the AWS price
  tradeoff  simulate eta over a range of one parameter: requests per user
            against the p99 notify delay, as a table and a chart

Run "bench COMMAND -h" for a command's flags.
`

func run(ctx context.Context, args []string, e env) error {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, usage)
		return errUsage
	}
	switch args[0] {
	case "run":
		return cmdLoad(ctx, "run", args[1:], e)
	case "compare":
		return cmdLoad(ctx, "compare", args[1:], e)
	case "simulate":
		return cmdSimulate(ctx, args[1:], e)
	case "tradeoff":
		return cmdTradeoff(ctx, args[1:], e)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(e.stdout, usage)
		return nil
	}
	fmt.Fprintf(e.stderr, "bench: unknown command %q\n\n%s", args[0], usage)
	return errUsage
}

// scenarioFlags are the flags every command shares.
type scenarioFlags struct {
	fs           *flag.FlagSet
	users        int
	admitRate    float64
	rateSchedule string
	arrival      string
	abandon      float64
	timeout      time.Duration
	cacheTTL     time.Duration
	seed         uint64
	jsonOut      bool
	outDir       string
}

func (s *scenarioFlags) register(fs *flag.FlagSet, timeout time.Duration, timeoutHelp, cacheTTLHelp string) {
	s.fs = fs
	fs.IntVar(&s.users, "users", 1000, "number of virtual users")
	fs.Float64Var(&s.admitRate, "admit-rate", 10, "admission rate of the program, people per second; 0 keeps admission paused (then bound the run with -timeout)")
	fs.StringVar(&s.rateSchedule, "rate-schedule", "", "admission rate changing over the run instead of -admit-rate: OFFSET:RATE,… from the start of admission, e.g. 0s:200,120s:100,240s:0,300s:200 (halved at 2 min, paused at 4, restarted at 5); rate 0 pauses")
	fs.StringVar(&s.arrival, "arrival", "burst", "when users enter: burst (all at the start, admission starting once everyone is in) or uniform:DURATION (evenly spread, e.g. uniform:60s)")
	fs.Float64Var(&s.abandon, "abandon", 0, "fraction of users, in [0, 1), who leave while waiting (DELETE), each at a uniform random instant of its wait; who and when follow -seed")
	fs.DurationVar(&s.timeout, "timeout", timeout, timeoutHelp)
	fs.DurationVar(&s.cacheTTL, "cache-ttl", time.Second, cacheTTLHelp)
	fs.Uint64Var(&s.seed, "seed", 1, "seed of the abandonment draws and, in simulate, of the policies' jitter")
	fs.BoolVar(&s.jsonOut, "json", false, "print the results as a JSON array, one object per policy, instead of a table")
	fs.StringVar(&s.outDir, "out", "", "also write results.json, report.md and rps.svg (requests per second over time) into this directory")
}

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
	} else {
		err = bench.WriteTable(e.stdout, results)
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

func newFlagSet(name, synopsis string, e env) *flag.FlagSet {
	fs := flag.NewFlagSet("bench "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: bench %s [flags]\n\n%s\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

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

const loadSynopsis = `Virtual users over real HTTP: each enters the queue of a fresh program
(created paused through the admin API, then set to -admit-rate or to each
-rate-schedule rate at its offset), then polls until it sees ADMITTED or
-timeout passes, sleeping either a fixed interval (-poll fixed:3s, the
Before) or exactly each answer's retryAfterMs (-poll server, the After;
server:eta creates the program with "pollingPolicy": "eta"). With
-abandon, that fraction of users leaves (DELETE) at a random instant of
its wait. Loopback targets only, unless -allow-remote.
`

const compareSynopsis = `Runs each -poll mode in turn (Before first) on the same scenario, each on
a fresh program, and prints them side by side with the change in percent.
` + loadSynopsis

func cmdLoad(ctx context.Context, name string, args []string, e env) error {
	synopsis, defPoll, pollHelp := loadSynopsis, "server", "how a user waits between polls: server (honour retryAfterMs; the program on the server's default policy), server:POLICY (the program created with that pollingPolicy, e.g. server:eta) or fixed:DURATION (e.g. fixed:3s)"
	if name == "compare" {
		synopsis, defPoll, pollHelp = compareSynopsis, "fixed:3s,server", "comma-separated poll modes to compare, the first being the baseline: server, server:POLICY (e.g. fixed:3s,server:tiers,server:eta) or fixed:DURATION"
	}
	fs := newFlagSet(name, synopsis, e)
	var sf scenarioFlags
	sf.register(fs, 10*time.Minute, "stop each run this long after its start, whether or not everyone was admitted",
		"the server's PROGRAM_CACHE_TTL, by which it delays every admin change: used only to predict each user's admission and place -abandon leaves within the wait")
	baseURL := fs.String("url", "http://127.0.0.1:3000", "base URL of the waiting-room server (go run ./cmd/local)")
	adminToken := fs.String("admin-token", "", "admin bearer secret (default $ADMIN_TOKEN)")
	polls := fs.String("poll", defPoll, pollHelp)
	prefix := fs.String("program", "bench", "prefix of the program ids the runs create (a timestamp and the mode are appended)")
	sampleEvery := fs.Duration("sample-every", 100*time.Millisecond, "period of the admin counter reads that time admissions (for the notification delay)")
	conns := fs.Int("conns", loadtest.DefaultConns, "maximum HTTP connections shared by the virtual users")
	allowRemote := fs.Bool("allow-remote", false, "allow a -url that is not a loopback address (never point a load test at a server you do not own)")
	if err := parse(fs, args); err != nil {
		return err
	}
	sc, err := sf.scenario()
	if err != nil {
		return usageError(fs, err)
	}
	if sc.Timeout <= 0 {
		return usageError(fs, errors.New("-timeout must be positive"))
	}
	var modes []loadtest.Poll
	for p := range strings.SplitSeq(*polls, ",") {
		m, err := loadtest.ParsePoll(p)
		if err != nil {
			return usageError(fs, err)
		}
		modes = append(modes, m)
	}
	if name == "run" && len(modes) != 1 {
		return usageError(fs, errors.New("-poll: run takes one mode; use compare for several"))
	}
	if !*allowRemote {
		if err := loadtest.CheckLoopback(*baseURL); err != nil {
			return usageError(fs, err)
		}
	}
	token := *adminToken
	if token == "" {
		token = e.getenv("ADMIN_TOKEN")
	}
	if token == "" {
		return usageError(fs, errors.New("an admin token is required: -admin-token or $ADMIN_TOKEN"))
	}

	stamp := time.Now().UTC().Format("20060102T150405")
	var results []bench.Result
	for i, m := range modes {
		if i > 0 && !loadtest.Sleep(ctx, 2*time.Second) { // let the server settle
			return ctx.Err()
		}
		id := programID(*prefix, stamp, m)
		if !queue.ValidProgramID(id) {
			return usageError(fs, fmt.Errorf("-program %q makes the invalid program id %q", *prefix, id))
		}
		if e.progress != nil {
			fmt.Fprintf(e.progress, "%s: %d users on program %s, polling %s…\n", name, sc.Users, id, m)
		}
		r, err := loadtest.Run(ctx, loadtest.Config{
			BaseURL: *baseURL, AdminToken: token, ProgramID: id,
			Scenario: sc, Poll: m, SampleEvery: *sampleEvery, Conns: *conns, Progress: e.progress,
			Seed: sf.seed, CacheTTL: sf.cacheTTL,
		})
		if err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
		results = append(results, r)
	}
	rep := bench.Report{
		Title:   fmt.Sprintf("Loopback %s: %s users, %s arrival, %s", name, bench.Thousands(int64(sc.Users)), sc.Arrival, admission(sc)),
		Command: "bench " + name + " " + strings.Join(args, " "),
	}
	return sf.output(e, rep, results)
}

func programID(prefix, stamp string, m loadtest.Poll) string {
	var b [2]byte
	_, _ = rand.Read(b[:])
	mode := strings.NewReplacer(":", "", ".", "").Replace(m.String())
	return prefix + "-" + stamp + "-" + mode + "-" + hex.EncodeToString(b[:])
}

func usageError(fs *flag.FlagSet, err error) error {
	fmt.Fprintf(fs.Output(), "bench: %v\n(see bench %s -h)\n", err, strings.TrimPrefix(fs.Name(), "bench "))
	return errUsage
}

const simulateSynopsis = `The load test's scenario on a virtual clock with no network: users enter
(burst or uniform), then poll when the policy says until they see ADMITTED
or, with -abandon, stop polling at a random instant of their wait.
Admission is the service's own queue.Program, with -rate-schedule changes
taking effect -cache-ttl after their offset as on the server; delays are
the polling package's policies; time advances in whole milliseconds,
requests take no time and never fail. Deterministic for a given -seed.
Adds DynamoDB read units and the AWS price of the requests (defaults:
us-east-1 list prices as of 2026, first volume tier, no free tier).
`

func cmdSimulate(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("simulate", simulateSynopsis, e)
	var sf scenarioFlags
	sf.register(fs, 0, "virtual time after which the simulation stops (0: when everyone has seen ADMITTED or left; required when admission ends paused)",
		"the service's PROGRAM_CACHE_TTL: every -rate-schedule change after the first takes effect this long after its offset, as the service applies an admin change")
	policyList := fs.String("policy", "fixed:3s,tiers", "comma-separated policies, the first being the baseline: fixed:DURATION, tiers or eta")
	tiersSpec := fs.String("tiers", polling.DefaultTiersSpec, "the bands of the tiers policy, MAXPOS:INTERVAL[+-JITTER],…,inf:INTERVAL[+-JITTER]")
	etaSpec := fs.String("eta", "", "parameters of the eta policy over its defaults, key=value pairs such as fraction=0.8,cap=2m (see polling.ParseETA); it falls back to -tiers")
	p := bench.DefaultPrices()
	fs.Float64Var(&p.APIGatewayPerMillion, "price-apigw", p.APIGatewayPerMillion, "API Gateway HTTP API, USD per million requests")
	fs.Float64Var(&p.LambdaRequestsPerMillion, "price-lambda-requests", p.LambdaRequestsPerMillion, "Lambda, USD per million invocations")
	fs.Float64Var(&p.LambdaPerGBSecond, "price-lambda-gbs", p.LambdaPerGBSecond, "Lambda arm64 duration, USD per GB-second")
	fs.Float64Var(&p.LambdaMemoryMB, "lambda-memory-mb", p.LambdaMemoryMB, "Lambda memory size, MB")
	fs.Float64Var(&p.LambdaMsPerRequest, "lambda-ms", p.LambdaMsPerRequest, "billed Lambda duration per request, ms")
	fs.Float64Var(&p.DynamoReadPerMillion, "price-dynamo-read", p.DynamoReadPerMillion, "DynamoDB on-demand, USD per million read request units")
	fs.Float64Var(&p.TokenRRUPerPoll, "token-rru", p.TokenRRUPerPoll, "read units of a poll's token read (strongly consistent, under 4 KB: 1)")
	fs.Float64Var(&p.ProgramReadsPerPoll, "program-reads-per-poll", p.ProgramReadsPerPoll, "program reads (1 RRU each) per poll: 1 without the per-instance program cache, about 0 with it at high request rates")
	if err := parse(fs, args); err != nil {
		return err
	}
	sc, err := sf.scenario()
	if err != nil {
		return usageError(fs, err)
	}
	tiers, err := polling.ParseTiers(*tiersSpec)
	if err != nil {
		return usageError(fs, err)
	}
	eta, err := polling.ParseETA(*etaSpec)
	if err != nil {
		return usageError(fs, err)
	}
	policies, err := bench.DefaultPolicies(tiers, eta).Parse(*policyList)
	if err != nil {
		return usageError(fs, err)
	}
	if sc.Timeout == 0 && sc.Rates.Final() == 0 {
		return usageError(fs, errors.New("admission ends paused (rate 0) and never admits everyone: set -timeout"))
	}
	var results []bench.Result
	for _, pol := range policies {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := simulate.Run(simulate.Config{Scenario: sc, Policy: pol, Seed: sf.seed, CacheTTL: sf.cacheTTL, Prices: p, Progress: e.progress})
		if err != nil {
			return fmt.Errorf("%s: %w", pol.Name, err)
		}
		results = append(results, r)
	}
	rep := bench.Report{
		Title:   fmt.Sprintf("Simulation: %s users, %s arrival, %s", bench.Thousands(int64(sc.Users)), sc.Arrival, admission(sc)),
		Command: "bench simulate " + strings.Join(args, " "),
	}
	return sf.output(e, rep, results)
}

const tradeoffSynopsis = `Simulates the eta policy once per value of one of its parameters (-vary,
e.g. fraction=0.5,0.6,0.7,0.8,0.9, over -eta) and the -reference policies,
on the same scenario, and places each by requests per user (the enter
included) against its p99 notify delay: the curve a setting moves along.
-out writes tradeoff.md, tradeoff.svg and results.json.
`

// Files written by bench tradeoff -out.
const (
	tradeoffChartFile = "tradeoff.svg"
	tradeoffTableFile = "tradeoff.md"
)

func cmdTradeoff(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("tradeoff", tradeoffSynopsis, e)
	var sf scenarioFlags
	sf.register(fs, 0, "virtual time after which each simulation stops (0: when everyone has seen ADMITTED or left)",
		"the service's PROGRAM_CACHE_TTL: every -rate-schedule change after the first takes effect this long after its offset")
	vary := fs.String("vary", "fraction=0.5,0.6,0.7,0.8,0.9", "the eta parameter to sweep and its values, KEY=V1,V2,… (keys as in -eta)")
	mark := fs.String("mark", "", "the value of the chosen setting, highlighted")
	etaSpec := fs.String("eta", "", "the other eta parameters, key=value pairs over its defaults (see polling.ParseETA)")
	tiersSpec := fs.String("tiers", polling.DefaultTiersSpec, "the bands of the tiers policy (also eta's fallback)")
	refs := fs.String("reference", "fixed:3s,tiers", "policies placed on the chart for reference, as -policy of simulate")
	goalP99 := fs.Duration("goal-p99", 0, "draw a goal line at this p99 notify delay")
	goalReq := fs.Float64("goal-requests", 0, "draw a goal line at this many requests per user")
	if err := parse(fs, args); err != nil {
		return err
	}
	sc, err := sf.scenario()
	if err != nil {
		return usageError(fs, err)
	}
	if sc.Timeout == 0 && sc.Rates.Final() == 0 {
		return usageError(fs, errors.New("admission ends paused (rate 0) and never admits everyone: set -timeout"))
	}
	key, list, ok := strings.Cut(*vary, "=")
	if !ok || key == "" || list == "" {
		return usageError(fs, fmt.Errorf("-vary %q: want KEY=V1,V2,… (fraction=0.5,0.6)", *vary))
	}
	tiers, err := polling.ParseTiers(*tiersSpec)
	if err != nil {
		return usageError(fs, err)
	}
	type variant struct {
		label string
		pol   bench.NamedPolicy
		curve bool
	}
	var variants []variant
	for v := range strings.SplitSeq(list, ",") {
		v = strings.TrimSpace(v)
		spec := key + "=" + v
		if *etaSpec != "" {
			spec = *etaSpec + "," + spec
		}
		eta, err := polling.ParseETA(spec)
		if err != nil {
			return usageError(fs, err)
		}
		eta.Fallback = tiers
		variants = append(variants, variant{key + "=" + v, bench.NamedPolicy{Name: "eta " + spec, Policy: eta}, true})
	}
	if *refs != "" {
		base, err := polling.ParseETA(*etaSpec)
		if err != nil {
			return usageError(fs, err)
		}
		ps, err := bench.DefaultPolicies(tiers, base).Parse(*refs)
		if err != nil {
			return usageError(fs, err)
		}
		for _, p := range ps {
			variants = append(variants, variant{p.Name, p, false})
		}
	}
	var results []bench.Result
	var points []bench.TradeoffPoint
	for _, v := range variants {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := simulate.Run(simulate.Config{Scenario: sc, Policy: v.pol, Seed: sf.seed, CacheTTL: sf.cacheTTL, Prices: bench.DefaultPrices(), Progress: e.progress})
		if err != nil {
			return fmt.Errorf("%s: %w", v.label, err)
		}
		results = append(results, r)
		pt := bench.PointOf(v.label, r, v.curve)
		pt.Marked = v.curve && *mark != "" && v.label == key+"="+*mark
		points = append(points, pt)
	}
	if sf.jsonOut {
		if err := bench.WriteJSON(e.stdout, results); err != nil {
			return err
		}
	} else {
		fmt.Fprint(e.stdout, bench.TradeoffTable(points))
	}
	if sf.outDir == "" {
		return nil
	}
	title := fmt.Sprintf("Trade-off, %s users, %s arrival, %s", bench.Thousands(int64(sc.Users)), sc.Arrival, admission(sc))
	chart := bench.Tradeoff{Title: title, Points: points, GoalRequests: *goalReq, GoalP99Ms: bench.Ms(*goalP99)}
	if err := os.MkdirAll(sf.outDir, 0o755); err != nil {
		return err
	}
	var js strings.Builder
	if err := bench.WriteJSON(&js, results); err != nil {
		return err
	}
	md := fmt.Sprintf("# %s\n\n```\nbench tradeoff %s\n```\n\n%s\n![trade-off](%s)\n", title, strings.Join(args, " "), bench.TradeoffTable(points), tradeoffChartFile)
	for name, data := range map[string][]byte{
		bench.ResultsFile: []byte(js.String()),
		tradeoffChartFile: chart.SVG(),
		tradeoffTableFile: []byte(md),
	} {
		if err := os.WriteFile(filepath.Join(sf.outDir, name), data, 0o644); err != nil {
			return err
		}
	}
	if !sf.jsonOut {
		fmt.Fprintf(e.stdout, "\nwrote %s/{%s,%s,%s}\n", sf.outDir, tradeoffTableFile, tradeoffChartFile, bench.ResultsFile)
	}
	return nil
}
