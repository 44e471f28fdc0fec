package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/bench"
	"github.com/example/waitingroom/internal/bench/loadtest"
	"github.com/example/waitingroom/internal/queue"
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

// loadCommand is what run and compare set apart in cmdLoad.
type loadCommand struct {
	name, synopsis    string
	defPoll, pollHelp string
	// oneMode: the command takes a single -poll mode.
	oneMode bool
}

// cmdLoad runs the load test of each -poll mode in turn and prints them.
func cmdLoad(ctx context.Context, lc loadCommand, args []string, e env) error {
	name := lc.name
	fs := newFlagSet(name, lc.synopsis, e)
	var sf scenarioFlags
	sf.register(fs, 10*time.Minute, "stop each run this long after its start, whether or not everyone was admitted",
		"the delay of the server's admin changes (its PROGRAM_CACHE_TTL plus a 1 s write budget): used only to predict each user's admission and place -abandon leaves within the wait")
	baseURL := fs.String("url", "http://127.0.0.1:3000", "base URL of the waiting-room server (go run ./cmd/local)")
	adminToken := fs.String("admin-token", "", "admin bearer secret (default $ADMIN_TOKEN)")
	polls := fs.String("poll", lc.defPoll, lc.pollHelp)
	prefix := fs.String("program", "bench", "prefix of the program ids the runs create (a timestamp and the mode are appended)")
	sampleEvery := fs.Duration("sample-every", 100*time.Millisecond, "period of the admin counter reads that time admissions (for the notification delay)")
	conns := fs.Int("conns", loadtest.DefaultConns, "maximum HTTP connections shared by the virtual users")
	allowRemote := fs.Bool("allow-remote", false, "allow a -url that is not a loopback address (never point a load test at a server you do not own)")
	var existing *string
	if lc.oneMode {
		existing = fs.String("program-id", "", "fill this existing program instead of creating one: its settings and admission stay the operator's (wrctl), so -admit-rate, -rate-schedule, -abandon and -poll server:POLICY do not apply")
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	sc, err := sf.scenario()
	if err != nil {
		return usageError(fs, err)
	}
	if existing != nil && *existing != "" {
		if err := existingProgram(fs, *existing, sc, *polls); err != nil {
			return usageError(fs, err)
		}
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
	if lc.oneMode && len(modes) != 1 {
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
		if existing != nil && *existing != "" {
			id = *existing
		} else if !queue.ValidProgramID(id) {
			return usageError(fs, fmt.Errorf("-program %q makes the invalid program id %q", *prefix, id))
		}
		if e.progress != nil {
			fmt.Fprintf(e.progress, "%s: %d users on program %s, polling %s…\n", name, sc.Users, id, m)
		}
		r, err := loadtest.Run(ctx, loadtest.Config{
			BaseURL: *baseURL, AdminToken: token, ProgramID: id, Existing: existing != nil && *existing != "",
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

// existingProgram checks that the flags given suit a run on the existing
// program id: none of those that set up the program the run would create.
func existingProgram(fs *flag.FlagSet, id string, sc bench.Scenario, poll string) error {
	if !queue.ValidProgramID(id) {
		return fmt.Errorf("-program-id %q is not a valid program id", id)
	}
	var clash []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "admit-rate", "rate-schedule", "program":
			clash = append(clash, "-"+f.Name)
		}
	})
	if sc.Abandon > 0 {
		clash = append(clash, "-abandon")
	}
	if strings.HasPrefix(poll, "server:") {
		clash = append(clash, "-poll "+poll)
	}
	if len(clash) > 0 {
		return fmt.Errorf("-program-id runs on the program as the operator set it: %s do not apply", strings.Join(clash, ", "))
	}
	return nil
}
