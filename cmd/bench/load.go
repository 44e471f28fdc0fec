package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/report"
	"github.com/example/waitingroom/internal/tools/bench"
	"github.com/example/waitingroom/internal/tools/bench/loadtest"
	"github.com/example/waitingroom/internal/tools/client"
)

// loadSynopsis describes the load test of run and compare.
const loadSynopsis = `Virtual users over real HTTP: each enters the queue of a fresh program
(created paused through the admin API, then set to -admit-rate or to each
-rate-schedule rate at its offset), then polls until it sees ADMITTED or
-timeout passes, sleeping either a fixed interval (-poll fixed:3s, the
Before) or exactly each answer's retryAfterMs (-poll server, the After;
server:eta creates the program with "pollingPolicy": "eta"). With
-abandon, that fraction of users leaves (DELETE) at a random instant of
its wait. run -program-id fills an existing program instead, leaving its
settings and its admission to the operator (a rehearsal with wrctl).
Loopback targets only, unless -allow-remote.
`

// runSynopsis is run's: the load test, then its program's report.
const runSynopsis = loadSynopsis + `
A run ends with its program's report as the admin API answers it (GET
/api/v1/admin/programs/{id}/report) under the table, and with -out writes
it as report.html too; a server that answers no report is one line on
stderr, and the run does not fail.
`

const compareSynopsis = `Runs each -poll mode in turn (Before first) on the same scenario, each on
a fresh program, and prints them side by side with the change in percent.
` + loadSynopsis

// loadFlags are the flags of run and compare beyond the scenario's, and the
// load tests they resolve to; -program-id (existing) and -passes are run's
// only.
type loadFlags struct {
	scenarioFlags
	compare                            bool
	baseURL, adminToken, polls, prefix string
	allowRemote                        bool
	existing, passes                   string
	crowd                              crowdFlags
	runs                               []loadtest.Config
	// report is the program's report after a run (nil: none, or reportErr).
	report    *api.Report
	reportErr error
}

// ReportHTML is the file of -out that holds a run's program report.
const ReportHTML = "report.html"

// reportBudget bounds the read of a run's program report.
const reportBudget = 30 * time.Second

// register defines the command's flags on fs.
func (lf *loadFlags) register(fs *flag.FlagSet) {
	lf.scenarioFlags.register(fs, 10*time.Minute, "stop each run this long after its start, whether or not everyone was admitted",
		"the delay of the server's admin changes (its PROGRAM_CACHE_TTL plus a 1 s write budget): used only to predict each user's admission and place -abandon leaves within the wait")
	fs.StringVar(&lf.baseURL, "url", "http://127.0.0.1:3000", "base URL of the waiting-room server (go run ./cmd/local)")
	fs.StringVar(&lf.adminToken, "admin-token", "", "admin bearer secret (default $ADMIN_TOKEN)")
	if lf.compare {
		fs.StringVar(&lf.polls, "poll", "fixed:3s,server", "comma-separated poll modes to compare, the first being the baseline: server, server:POLICY (e.g. fixed:3s,server:tiers,server:eta) or fixed:DURATION")
	} else {
		fs.StringVar(&lf.polls, "poll", "server", "how a user waits between polls: server (honour retryAfterMs; the program on the server's default policy), server:POLICY (the program created with that pollingPolicy, e.g. server:eta) fixed:DURATION (e.g. fixed:3s), or admission (first poll when the user's ticket is due at the scheduled rate: every poll a first sighting, each signing a pass)")
	}
	fs.StringVar(&lf.prefix, "program", "bench", "prefix of the program ids the runs create (a timestamp and the mode are appended)")
	fs.BoolVar(&lf.allowRemote, "allow-remote", false, "allow a -url that is not a loopback address (never point a load test at a server you do not own)")
	lf.crowd.register(fs, "default 0s-0s: at once; -no-show, -no-show-seconds and -session need -max-active")
	if !lf.compare {
		fs.StringVar(&lf.existing, "program-id", "", "fill this existing program instead of creating one: its settings and admission stay the operator's (wrctl), so -admit-rate, -rate-schedule, -abandon and -poll server:POLICY do not apply")
		fs.StringVar(&lf.passes, "passes", "", "write the admission pass of each user's first ADMITTED answer to this file, one compact JWS a line, to verify them afterwards")
	}
}

// check resolves the parsed flags into one load test per -poll mode.
func (lf *loadFlags) check(fs *flag.FlagSet, e env) error {
	sc, err := lf.scenario()
	if err != nil {
		return err
	}
	if err := existingProgram(fs, lf.existing, sc, lf.polls); err != nil {
		return err
	}
	crowd, err := lf.crowd.runCrowd()
	if err != nil {
		return err
	}
	if sc.Timeout <= 0 {
		return errors.New("-timeout must be positive")
	}
	token := cmp.Or(lf.adminToken, e.getenv("ADMIN_TOKEN"))
	stamp := time.Now().UTC().Format("20060102T150405")
	for mode := range strings.SplitSeq(lf.polls, ",") {
		m, err := loadtest.ParsePoll(mode)
		if err != nil {
			return err
		}
		id := cmp.Or(lf.existing, programID(lf.prefix, stamp, m))
		if !queue.ValidProgramID(id) {
			return fmt.Errorf("-program %q makes the invalid program id %q", lf.prefix, id)
		}
		lf.runs = append(lf.runs, loadtest.Config{BaseURL: lf.baseURL, AdminToken: token, ProgramID: id, Existing: lf.existing != "",
			Scenario: sc, Poll: m, Seed: lf.seed, CacheTTL: lf.cacheTTL, Crowd: crowd, Clock: e.clock})
	}
	if !lf.compare && len(lf.runs) != 1 {
		return errors.New("-poll: run takes one mode; use compare for several")
	}
	if err := loadtest.CheckLoopback(lf.baseURL); err != nil && !lf.allowRemote {
		return err
	}
	if token == "" {
		return errors.New("an admin token is required: -admin-token or $ADMIN_TOKEN")
	}
	return nil
}

// run runs the load tests in turn, two seconds apart.
func (lf *loadFlags) run(ctx context.Context, e env) (string, []bench.Result, error) {
	clk := cmp.Or[clock.Clock](e.clock, clock.Real{})
	var results []bench.Result
	for i, cfg := range lf.runs {
		if i > 0 {
			if err := clk.Sleep(ctx, 2*time.Second); err != nil { // let the server settle
				return "", nil, err
			}
		}
		finish := func() error { return nil }
		if lf.passes != "" {
			var err error
			if cfg.OnPass, finish, err = passWriter(lf.passes); err != nil {
				return "", nil, err
			}
		}
		r, err := loadtest.Run(ctx, cfg)
		if err := errors.Join(err, finish()); err != nil {
			return "", nil, fmt.Errorf("%s: %w", cfg.Poll, err)
		}
		results = append(results, r)
	}
	if !lf.compare && (!lf.jsonOut || lf.outDir != "") {
		lf.report, lf.reportErr = programReport(ctx, lf.runs[0])
	}
	return "", results, nil
}

// programReport reads the report of cfg's program through the admin API.
func programReport(ctx context.Context, cfg loadtest.Config) (*api.Report, error) {
	c, err := client.New(cfg.BaseURL, client.WithAuth(client.BearerToken(cfg.AdminToken)))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, reportBudget)
	defer cancel()
	r, err := c.Report(ctx, cfg.ProgramID)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// output is scenarioFlags.output, then, after a run, its program's report:
// as text under the table, and as ReportHTML into -out. A report the
// server did not answer is one line on stderr.
func (lf *loadFlags) output(e env, title string, args []string, table string, results []bench.Result) error {
	var x extra
	if lf.reportErr != nil {
		fmt.Fprintf(e.stderr, "report: %v\n", lf.reportErr)
	}
	if r := lf.report; r != nil {
		x.text = func(w io.Writer) error {
			fmt.Fprintln(w)
			return report.WriteTable(w, *r)
		}
		x.files = []outFile{{ReportHTML, func(w io.Writer) error { return report.WriteHTML(w, *r) }}}
	}
	return lf.write(e, title, args, table, results, x)
}

// programID returns a fresh program id: prefix, stamp, the mode and four
// random hex digits.
func programID(prefix, stamp string, m loadtest.Poll) string {
	mode := strings.NewReplacer(":", "", ".", "").Replace(m.String())
	return fmt.Sprintf("%s-%s-%s-%04x", prefix, stamp, mode, rand.N(1<<16))
}

// existingProgram checks that no flag given sets up the program a run on
// the existing program id ("": none) would otherwise create.
func existingProgram(fs *flag.FlagSet, id string, sc bench.Scenario, poll string) error {
	if id == "" {
		return nil
	} else if !queue.ValidProgramID(id) {
		return fmt.Errorf("-program-id %q is not a valid program id", id)
	}
	var clash []string
	fs.Visit(func(f *flag.Flag) {
		if slices.Contains([]string{"admit-rate", "rate-schedule", "paused-for", "program", "max-active"}, f.Name) {
			clash = append(clash, "-"+f.Name)
		}
	})
	if sc.Abandon > 0 {
		clash = append(clash, "-abandon")
	}
	if strings.HasPrefix(poll, "server:") || poll == "admission" {
		clash = append(clash, "-poll "+poll)
	}
	if len(clash) > 0 {
		return fmt.Errorf("-program-id runs on the program as the operator set it: %s do not apply", strings.Join(clash, ", "))
	}
	return nil
}

// passWriter creates the -passes file and returns its writer of one pass a
// line, safe for concurrent use, and the function that flushes and closes
// it.
func passWriter(name string) (write func(string), finish func() error, err error) {
	f, err := os.Create(name)
	if err != nil {
		return nil, nil, fmt.Errorf("-passes: %w", err)
	}
	var mu sync.Mutex
	w := bufio.NewWriterSize(f, 1<<20) // keeps its first error
	write = func(pass string) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = w.WriteString(pass + "\n")
	}
	finish = func() error { // after the run: nobody writes any more
		if err := errors.Join(w.Flush(), f.Close()); err != nil {
			return fmt.Errorf("-passes: %w", err)
		}
		return nil
	}
	return write, finish, nil
}
