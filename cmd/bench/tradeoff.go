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

// tradeoffFlags are the flags of tradeoff beyond the scenario's.
type tradeoffFlags struct {
	scenarioFlags
	vary, mark, etaSpec, tiersSpec, refs string
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

// variants checks the parsed flags and returns the scenario and the
// policies to simulate: the curve's points, each named for its setting
// (fraction=0.5), then the references; an error is a usage error.
func (t *tradeoffFlags) variants() (bench.Scenario, []bench.NamedPolicy, error) {
	sc, err := t.scenario()
	if err != nil {
		return sc, nil, err
	}
	if err := (simulate.Config{Scenario: sc, Policy: bench.NamedPolicy{Policy: polling.DefaultETA()}}).Validate(); err != nil {
		return sc, nil, err
	}
	key, list, ok := strings.Cut(t.vary, "=")
	if !ok || key == "" || list == "" {
		return sc, nil, fmt.Errorf("-vary %q: want KEY=V1,V2,… (fraction=0.5,0.6)", t.vary)
	}
	tiers, err := polling.ParseTiers(t.tiersSpec)
	if err != nil {
		return sc, nil, err
	}
	var variants []bench.NamedPolicy
	for v := range strings.SplitSeq(list, ",") {
		v = strings.TrimSpace(v)
		spec := key + "=" + v
		if t.etaSpec != "" {
			spec = t.etaSpec + "," + spec
		}
		eta, err := polling.ParseETA(spec)
		if err != nil {
			return sc, nil, err
		}
		eta.Fallback = tiers
		variants = append(variants, bench.NamedPolicy{Name: key + "=" + v, Policy: eta})
	}
	if t.refs != "" {
		base, err := polling.ParseETA(t.etaSpec)
		if err != nil {
			return sc, nil, err
		}
		refs, err := bench.ParsePolicies(t.refs, polling.Named(tiers, base, polling.DefaultSteady()))
		if err != nil {
			return sc, nil, err
		}
		variants = append(variants, refs...)
	}
	return sc, variants, nil
}

// cmdTradeoff runs bench tradeoff: one simulation per swept eta value and
// reference policy, printed as a Markdown table.
func cmdTradeoff(ctx context.Context, args []string, e env) error {
	var tf tradeoffFlags
	fs, err := parseFlags("tradeoff", tradeoffSynopsis, e, args, tf.register)
	if err != nil {
		return err
	}
	sc, variants, err := tf.variants()
	if err != nil {
		return usageError(fs, err)
	}
	marked := ""
	if tf.mark != "" {
		key, _, _ := strings.Cut(tf.vary, "=")
		marked = key + "=" + tf.mark
	}
	var results []bench.Result
	rows := [][]string{{"setting", "polls per user (GETs)", "requests per user (enter + GETs)", "notify p99"}}
	for _, v := range variants {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := simulate.Run(simulate.Config{Scenario: sc, Policy: v, Seed: tf.seed, CacheTTL: tf.cacheTTL, Prices: bench.DefaultPrices()})
		if err != nil {
			return fmt.Errorf("%s: %w", v.Name, err)
		}
		results = append(results, r)
		label := v.Name
		if label == marked {
			label = "**" + label + "** (chosen)"
		}
		rows = append(rows, []string{label, fmt.Sprintf("%.2f", r.PollsPerUser), fmt.Sprintf("%.2f", r.RequestsPerUser), fmt.Sprintf("%.2f s", r.NotifyDelayMs.P99/1000)})
	}
	return tf.output(e, "Trade-off", args, bench.Markdown(rows), results)
}
