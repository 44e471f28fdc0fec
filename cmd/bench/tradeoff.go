package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/tools/bench"
	"github.com/example/waitingroom/internal/tools/bench/simulate"
)

const tradeoffSynopsis = `Simulates the eta policy once per value of one of its parameters (-vary,
e.g. fraction=0.5,0.6,0.7,0.8,0.9, over -eta) and the -reference policies,
on the same scenario, and places each by requests per user (the enter
included) against its p99 notify delay: the curve a setting moves along.
-out writes the table as report.md, and results.json.
`

// tradeoffFlags are the flags of tradeoff beyond the scenario's, and the
// runs they resolve to: the curve's points, each named for its setting
// (fraction=0.5), then the references.
type tradeoffFlags struct {
	scenarioFlags
	vary, mark, etaSpec, tiersSpec, refs string
	chosen                               string // the -mark setting, KEY=VALUE
	simulations
}

// register defines tradeoff's flags on fs.
func (t *tradeoffFlags) register(fs *flag.FlagSet) {
	t.scenarioFlags.register(fs, 0, "virtual time after which each simulation stops (0: when everyone has seen ADMITTED or left)",
		"delay of every -rate-schedule change after the first, from its offset (the server's: PROGRAM_CACHE_TTL plus a 1 s write budget)")
	fs.StringVar(&t.vary, "vary", "fraction=0.5,0.6,0.7,0.8,0.9", "the eta parameter to sweep and its values, KEY=V1,V2,… (keys as in -eta)")
	fs.StringVar(&t.mark, "mark", "", "the value of the chosen setting, in bold in the table")
	fs.StringVar(&t.etaSpec, "eta", "", "the other eta parameters, key=value pairs over its defaults (see polling.ParseETA)")
	fs.StringVar(&t.tiersSpec, "tiers", polling.DefaultTiersSpec, "the bands of the tiers policy (also eta's fallback)")
	fs.StringVar(&t.refs, "reference", "fixed:3s,tiers", "policies placed in the table for reference, as -policy of simulate")
}

// check resolves the parsed flags into the runs.
func (t *tradeoffFlags) check(*flag.FlagSet, env) error {
	sc, err := t.scenario()
	if err != nil {
		return err
	}
	base := simulate.Config{Scenario: sc, Policy: bench.NamedPolicy{Policy: polling.DefaultETA()}, Seed: t.seed, CacheTTL: t.cacheTTL,
		Prices: bench.DefaultPrices()}
	if err := base.Validate(); err != nil {
		return err
	}
	key, list, ok := strings.Cut(t.vary, "=")
	if !ok || key == "" || list == "" {
		return fmt.Errorf("-vary %q: want KEY=V1,V2,… (fraction=0.5,0.6)", t.vary)
	}
	reg, err := registry(t.tiersSpec, t.etaSpec, "")
	if err != nil {
		return err
	}
	var policies []bench.NamedPolicy
	for v := range strings.SplitSeq(list, ",") {
		name := key + "=" + strings.TrimSpace(v)
		eta, err := polling.ParseETA(strings.TrimPrefix(t.etaSpec+","+name, ","))
		if err != nil {
			return err
		}
		eta.Fallback = reg[polling.NameTiers]
		policies = append(policies, bench.NamedPolicy{Name: name, Policy: eta})
	}
	if t.refs != "" {
		refs, err := bench.ParsePolicies(t.refs, reg)
		if err != nil {
			return err
		}
		policies = append(policies, refs...)
	}
	t.chosen = key + "=" + t.mark
	for _, p := range policies {
		base.Policy = p
		t.runs = append(t.runs, base)
	}
	return nil
}

// run simulates each policy and returns them as a Markdown table of
// requests per user against the p99 notify delay.
func (t *tradeoffFlags) run(ctx context.Context, e env) (string, []bench.Result, error) {
	_, results, err := t.simulations.run(ctx, e)
	if err != nil {
		return "", nil, err
	}
	rows := [][]string{{"setting", "polls per user (GETs)", "requests per user (enter + GETs)", "notify p99"}}
	for _, r := range results {
		label := r.Policy
		if t.mark != "" && label == t.chosen {
			label = "**" + label + "** (chosen)"
		}
		rows = append(rows, []string{label, fmt.Sprintf("%.2f", r.PollsPerUser), fmt.Sprintf("%.2f", r.RequestsPerUser), fmt.Sprintf("%.2f s", r.NotifyDelayMs.P99/1000)})
	}
	return bench.Markdown(rows), results, nil
}
