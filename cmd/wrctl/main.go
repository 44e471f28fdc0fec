// Command wrctl runs a waiting room during an on-sale through its admin API: it changes programs,
// admits people by hand, watches the crowd and checks a program before the sale. "wrctl -h" lists
// the commands; docs/operations.md ("wrctl") has them all.
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

	"golang.org/x/term"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	a := newApp(os.Getenv, os.Stdout, os.Stderr)
	a.stdin = os.Stdin
	err := a.run(ctx, os.Args[1:])
	stop()
	os.Exit(exitStatus(err, os.Stderr))
}

// exitStatus prints err for the operator and returns the exit status: 0
// for none (or -h), 2 for a usage error (already explained), 1 otherwise.
func exitStatus(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	}
	fmt.Fprintln(stderr, "wrctl:", err)
	return 1
}

// isTerminal reports whether w is a terminal, where watch redraws in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
