// Command wrctl runs a waiting room during an on-sale: it reads and changes
// a program's settings, admits people by hand and watches the crowd live,
// through the admin API of the local server (ADMIN_TOKEN) or of the stack
// on AWS (requests signed with the operator's AWS credentials).
//
//	wrctl list                    every program, a row each
//	wrctl get ID                  the program's counters and settings
//	wrctl put ID [-rate N] [...]  create it, or change the settings given
//	wrctl admit ID N              admit N more people now
//	wrctl pause|resume ID         stop or restart admission
//	wrctl close|reopen ID         stop or resume new entries
//	wrctl watch ID                a live view of the crowd
//	wrctl check ID -expect N      what may go wrong at the announced load
//	wrctl history ID              the program's changes and who made them
//	wrctl delete ID [-yes]        delete a closed program
//	wrctl keys                    the keys that sign the passes
//	wrctl keys rotate             a new signing key, signing 15 minutes on
//	wrctl keys revoke KID [-yes]  revoke a signing key
//
// Run "wrctl COMMAND -h" for the flags.
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
	a := newApp(os.Getenv, os.Stdout, os.Stderr, programSettings)
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
