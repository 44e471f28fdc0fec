package main

import "context"

// cmdRun runs bench run: one load test with one -poll mode.
func cmdRun(ctx context.Context, args []string, e env) error {
	return cmdLoad(ctx, loadCommand{
		name:     "run",
		synopsis: loadSynopsis,
		defPoll:  "server",
		pollHelp: "how a user waits between polls: server (honour retryAfterMs; the program on the server's default policy), server:POLICY (the program created with that pollingPolicy, e.g. server:eta) fixed:DURATION (e.g. fixed:3s), or admission (first poll when the user's ticket is due at the scheduled rate: every poll a first sighting, each signing a pass)",
		oneMode:  true,
	}, args, e)
}
