package main

import "context"

const compareSynopsis = `Runs each -poll mode in turn (Before first) on the same scenario, each on
a fresh program, and prints them side by side with the change in percent.
` + loadSynopsis

// cmdCompare runs bench compare: a load test per -poll mode, side by side.
func cmdCompare(ctx context.Context, args []string, e env) error {
	return cmdLoad(ctx, loadCommand{
		name:     "compare",
		synopsis: compareSynopsis,
		defPoll:  "fixed:3s,server",
		pollHelp: "comma-separated poll modes to compare, the first being the baseline: server, server:POLICY (e.g. fixed:3s,server:tiers,server:eta) or fixed:DURATION",
	}, args, e)
}
