// Command bench measures the waiting room's polling load: load tests over
// HTTP (run, compare) and simulations on a virtual clock (simulate,
// tradeoff). Run "bench COMMAND -h" for a command's flags; see
// docs/benchmarks.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/tools/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], env{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv})
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
	getenv         func(string) string
	clock          clock.Clock // the load tests' clock; nil is the real one
}

// errUsage is returned after a usage message has been printed.
var errUsage = errors.New("usage")

// command is a command's flags: check resolves them once parsed (its error
// is a usage error), run runs the command and returns its results and its
// table ("": the results' comparison).
type command interface {
	register(fs *flag.FlagSet)
	check(fs *flag.FlagSet, e env) error
	run(ctx context.Context, e env) (table string, results []bench.Result, err error)
	output(e env, title string, args []string, table string, results []bench.Result) error
}

// commands are bench's subcommands by name, with the title of their
// report.md.
var commands = map[string]struct {
	synopsis, title string
	flags           func() command
}{
	"run":      {runSynopsis, "Loopback run", func() command { return &loadFlags{} }},
	"compare":  {compareSynopsis, "Loopback compare", func() command { return &loadFlags{compare: true} }},
	"simulate": {simulateSynopsis, "Simulation", func() command { return &simulateFlags{} }},
	"tradeoff": {tradeoffSynopsis, "Trade-off", func() command { return &tradeoffFlags{} }},
}

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
            against the p99 notify delay, as a table

Run "bench COMMAND -h" for a command's flags.
`

// run runs the command named by args[0]; it returns errUsage for a missing
// or unknown command, a bad flag or an argument, and flag.ErrHelp for -h.
func run(ctx context.Context, args []string, e env) error {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, usage)
		return errUsage
	}
	name := args[0]
	c, ok := commands[name]
	switch {
	case name == "-h" || name == "-help" || name == "--help" || name == "help":
		fmt.Fprint(e.stdout, usage)
		return nil
	case !ok:
		fmt.Fprintf(e.stderr, "bench: unknown command %q\n\n%s", name, usage)
		return errUsage
	}
	flags := c.flags()
	fs := flag.NewFlagSet("bench "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: bench %s [flags]\n\n%s\nFlags:\n", name, c.synopsis)
		fs.PrintDefaults()
	}
	flags.register(fs)
	if err := fs.Parse(args[1:]); errors.Is(err, flag.ErrHelp) {
		return err
	} else if err != nil {
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "bench: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	if err := flags.check(fs, e); err != nil {
		fmt.Fprintf(fs.Output(), "bench: %v\n(see bench %s -h)\n", err, name)
		return errUsage
	}
	table, results, err := flags.run(ctx, e)
	if err != nil {
		return err
	}
	return flags.output(e, c.title, args[1:], table, results)
}
