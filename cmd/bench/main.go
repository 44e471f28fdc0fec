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
	// clock, when not nil, is the load tests' clock (loadtest.Config.Clock);
	// nil is the real one.
	clock clock.Clock
}

// errUsage is returned after a usage message has been printed.
var errUsage = errors.New("usage")

// commands are bench's subcommands by name.
var commands = map[string]func(ctx context.Context, args []string, e env) error{
	"run":      runCommand.main,
	"compare":  compareCommand.main,
	"simulate": cmdSimulate,
	"tradeoff": cmdTradeoff,
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
// or unknown command.
func run(ctx context.Context, args []string, e env) error {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, usage)
		return errUsage
	}
	if cmd, ok := commands[args[0]]; ok {
		return cmd(ctx, args[1:], e)
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(e.stdout, usage)
		return nil
	}
	fmt.Fprintf(e.stderr, "bench: unknown command %q\n\n%s", args[0], usage)
	return errUsage
}
