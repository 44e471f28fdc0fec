package main

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tools/bench"
	"github.com/example/waitingroom/internal/tools/bench/loadtest"
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

const compareSynopsis = `Runs each -poll mode in turn (Before first) on the same scenario, each on
a fresh program, and prints them side by side with the change in percent.
` + loadSynopsis

// loadCommand is what sets run and compare apart.
type loadCommand struct {
	name, synopsis    string
	defPoll, pollHelp string
	// oneMode: the command takes a single -poll mode.
	oneMode bool
}

var (
	runCommand = loadCommand{
		name:     "run",
		synopsis: loadSynopsis,
		defPoll:  "server",
		pollHelp: "how a user waits between polls: server (honour retryAfterMs; the program on the server's default policy), server:POLICY (the program created with that pollingPolicy, e.g. server:eta) fixed:DURATION (e.g. fixed:3s), or admission (first poll when the user's ticket is due at the scheduled rate: every poll a first sighting, each signing a pass)",
		oneMode:  true,
	}
	compareCommand = loadCommand{
		name:     "compare",
		synopsis: compareSynopsis,
		defPoll:  "fixed:3s,server",
		pollHelp: "comma-separated poll modes to compare, the first being the baseline: server, server:POLICY (e.g. fixed:3s,server:tiers,server:eta) or fixed:DURATION",
	}
)

// loadFlags are the flags of run and compare beyond the scenario's;
// -program-id (existing) and -passes are run's only.
type loadFlags struct {
	scenarioFlags
	baseURL, adminToken, polls, prefix string
	allowRemote                        bool
	existing, passes                   string
	crowd                              crowdFlags
}

// register defines lc's flags on fs.
func (lf *loadFlags) register(fs *flag.FlagSet, lc loadCommand) {
	lf.scenarioFlags.register(fs, 10*time.Minute, "stop each run this long after its start, whether or not everyone was admitted",
		"the delay of the server's admin changes (its PROGRAM_CACHE_TTL plus a 1 s write budget): used only to predict each user's admission and place -abandon leaves within the wait")
	fs.StringVar(&lf.baseURL, "url", "http://127.0.0.1:3000", "base URL of the waiting-room server (go run ./cmd/local)")
	fs.StringVar(&lf.adminToken, "admin-token", "", "admin bearer secret (default $ADMIN_TOKEN)")
	fs.StringVar(&lf.polls, "poll", lc.defPoll, lc.pollHelp)
	fs.StringVar(&lf.prefix, "program", "bench", "prefix of the program ids the runs create (a timestamp and the mode are appended)")
	fs.BoolVar(&lf.allowRemote, "allow-remote", false, "allow a -url that is not a loopback address (never point a load test at a server you do not own)")
	lf.crowd.register(fs, "default 0s-0s: at once; -no-show, -no-show-seconds and -session need -max-active")
	if lc.oneMode {
		fs.StringVar(&lf.existing, "program-id", "", "fill this existing program instead of creating one: its settings and admission stay the operator's (wrctl), so -admit-rate, -rate-schedule, -abandon and -poll server:POLICY do not apply")
		fs.StringVar(&lf.passes, "passes", "", "write the admission pass of each user's first ADMITTED answer to this file, one compact JWS a line, to verify them afterwards")
	}
}

// loadPlan is what the parsed flags of run or compare resolve to.
type loadPlan struct {
	sc    bench.Scenario
	modes []loadtest.Poll
	token string
	crowd *bench.Crowd
}

// plan checks the parsed flags and resolves them into a loadPlan; an error
// is a usage error to report against fs.
func (lf *loadFlags) plan(fs *flag.FlagSet, lc loadCommand, e env) (loadPlan, error) {
	sc, err := lf.scenario()
	if err != nil {
		return loadPlan{}, err
	}
	if lf.existing != "" {
		if err := existingProgram(fs, lf.existing, sc, lf.polls); err != nil {
			return loadPlan{}, err
		}
	}
	crowd, err := lf.crowd.runCrowd()
	if err != nil {
		return loadPlan{}, err
	}
	p := loadPlan{sc: sc, crowd: crowd}
	if sc.Timeout <= 0 {
		return loadPlan{}, errors.New("-timeout must be positive")
	}
	for mode := range strings.SplitSeq(lf.polls, ",") {
		m, err := loadtest.ParsePoll(mode)
		if err != nil {
			return loadPlan{}, err
		}
		p.modes = append(p.modes, m)
	}
	if lc.oneMode && len(p.modes) != 1 {
		return loadPlan{}, errors.New("-poll: run takes one mode; use compare for several")
	}
	if !lf.allowRemote {
		if err := loadtest.CheckLoopback(lf.baseURL); err != nil {
			return loadPlan{}, err
		}
	}
	if p.token = cmp.Or(lf.adminToken, e.getenv("ADMIN_TOKEN")); p.token == "" {
		return loadPlan{}, errors.New("an admin token is required: -admin-token or $ADMIN_TOKEN")
	}
	return p, nil
}

// main runs the load test of each -poll mode in turn and prints them.
func (lc loadCommand) main(ctx context.Context, args []string, e env) error {
	var lf loadFlags
	fs, err := parseFlags(lc.name, lc.synopsis, e, args, func(fs *flag.FlagSet) { lf.register(fs, lc) })
	if err != nil {
		return err
	}
	p, err := lf.plan(fs, lc, e)
	if err != nil {
		return usageError(fs, err)
	}
	results, err := lf.runModes(ctx, fs, lc.name, p, e)
	if err != nil {
		return err
	}
	return lf.output(e, "Loopback "+lc.name, args, "", results)
}

// runModes runs the load test once per mode of p, two seconds apart, and
// returns their results in order.
func (lf *loadFlags) runModes(ctx context.Context, fs *flag.FlagSet, name string, p loadPlan, e env) ([]bench.Result, error) {
	stamp := time.Now().UTC().Format("20060102T150405")
	var clk clock.Clock = clock.Real{}
	if e.clock != nil {
		clk = e.clock
	}
	var results []bench.Result
	for i, m := range p.modes {
		if i > 0 {
			if err := clk.Sleep(ctx, 2*time.Second); err != nil { // let the server settle
				return nil, err
			}
		}
		id := programID(lf.prefix, stamp, m)
		if lf.existing != "" {
			id = lf.existing
		} else if !queue.ValidProgramID(id) {
			return nil, usageError(fs, fmt.Errorf("-program %q makes the invalid program id %q", lf.prefix, id))
		}
		cfg := loadtest.Config{
			BaseURL: lf.baseURL, AdminToken: p.token, ProgramID: id, Existing: lf.existing != "",
			Scenario: p.sc, Poll: m,
			Seed: lf.seed, CacheTTL: lf.cacheTTL, Crowd: p.crowd, Clock: e.clock,
		}
		var passes *passFile
		if lf.passes != "" {
			var err error
			if passes, err = createPassFile(lf.passes); err != nil {
				return nil, err
			}
			cfg.OnPass = passes.write
		}
		r, err := loadtest.Run(ctx, cfg)
		if passes != nil {
			err = errors.Join(err, passes.close())
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m, err)
		}
		results = append(results, r)
	}
	return results, nil
}

// programID returns a fresh program id: prefix, stamp, the mode and four
// random hex digits.
func programID(prefix, stamp string, m loadtest.Poll) string {
	var b [2]byte
	_, _ = rand.Read(b[:])
	mode := strings.NewReplacer(":", "", ".", "").Replace(m.String())
	return prefix + "-" + stamp + "-" + mode + "-" + hex.EncodeToString(b[:])
}

// existingProgram checks that no flag given sets up the program a run on
// the existing program id would otherwise create.
func existingProgram(fs *flag.FlagSet, id string, sc bench.Scenario, poll string) error {
	if !queue.ValidProgramID(id) {
		return fmt.Errorf("-program-id %q is not a valid program id", id)
	}
	var clash []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "admit-rate", "rate-schedule", "paused-for", "program", "max-active":
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

// passFile is the -passes file: one pass a line, written by the virtual
// users concurrently.
type passFile struct {
	mu sync.Mutex
	f  *os.File
	w  *bufio.Writer // keeps its first error
}

func createPassFile(name string) (*passFile, error) {
	f, err := os.Create(name)
	if err != nil {
		return nil, fmt.Errorf("-passes: %w", err)
	}
	return &passFile{f: f, w: bufio.NewWriterSize(f, 1<<20)}, nil
}

func (p *passFile) write(pass string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = p.w.WriteString(pass + "\n")
}

// close flushes and closes the file, and returns the first error.
func (p *passFile) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	err := errors.Join(p.w.Flush(), p.f.Close())
	if err != nil {
		return fmt.Errorf("-passes: %w", err)
	}
	return nil
}
