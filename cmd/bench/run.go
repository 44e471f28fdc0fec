package main

import "context"

// cmdRun runs bench run: one load test with one -poll mode.
func cmdRun(ctx context.Context, args []string, e env) error {
	return cmdLoad(ctx, loadCommand{
		name:     "run",
		synopsis: loadSynopsis,
		defPoll:  "server",
		pollHelp: "how a user waits between polls: server (honour retryAfterMs; the program on the server's default policy), server:POLICY (the program created with that pollingPolicy, e.g. server:eta) or fixed:DURATION (e.g. fixed:3s)",
		oneMode:  true,
	}, args, e)
}
