package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/tools/bench"
	"github.com/example/waitingroom/internal/tools/bench/simulate"
)

const tradeoffSynopsis = `Simulates the eta policy once per value of one of its parameters (-vary,
e.g. fraction=0.5,0.6,0.7,0.8,0.9, over -eta) and the -reference policies,
on the same scenario, and places each by requests per user (the enter
included) against its p99 notify delay: the curve a setting moves along.
-out writes tradeoff.md, tradeoff.svg and results.json.
`

// Files written by bench tradeoff -out.
const (
	tradeoffChartFile = "tradeoff.svg"
	tradeoffTableFile = "tradeoff.md"
)

// tradeoffFlags are the flags of tradeoff beyond the scenario's.
type tradeoffFlags struct {
	scenarioFlags
	vary, mark, etaSpec, tiersSpec, refs string
	goalP99                              time.Duration
	goalReq                              float64
}

// register defines tradeoff's flags on fs.
func (t *tradeoffFlags) register(fs *flag.FlagSet) {
	t.scenarioFlags.register(fs, 0, "virtual time after which each simulation stops (0: when everyone has seen ADMITTED or left)",
		"delay of every -rate-schedule change after the first, from its offset (the server's: PROGRAM_CACHE_TTL plus a 1 s write budget)")
	fs.StringVar(&t.vary, "vary", "fraction=0.5,0.6,0.7,0.8,0.9", "the eta parameter to sweep and its values, KEY=V1,V2,… (keys as in -eta)")
	fs.StringVar(&t.mark, "mark", "", "the value of the chosen setting, highlighted")
	fs.StringVar(&t.etaSpec, "eta", "", "the other eta parameters, key=value pairs over its defaults (see polling.ParseETA)")
	fs.StringVar(&t.tiersSpec, "tiers", polling.DefaultTiersSpec, "the bands of the tiers policy (also eta's fallback)")
	fs.StringVar(&t.refs, "reference", "fixed:3s,tiers", "policies placed on the chart for reference, as -policy of simulate")
	fs.DurationVar(&t.goalP99, "goal-p99", 0, "draw a goal line at this p99 notify delay")
	fs.Float64Var(&t.goalReq, "goal-requests", 0, "draw a goal line at this many requests per user")
}

// tradeoffVariant is one policy simulated: a point of the curve (an eta
// setting) or a reference.
type tradeoffVariant struct {
	label string
	pol   bench.NamedPolicy
	curve bool
}

// variants checks the parsed flags and returns the scenario and the
// policies to simulate, the curve's first; an error is a usage error.
func (t *tradeoffFlags) variants() (bench.Scenario, []tradeoffVariant, error) {
	sc, err := t.scenario()
	if err != nil {
		return sc, nil, err
	}
	if sc.Timeout == 0 && sc.Rates.Final() == 0 {
		return sc, nil, errors.New("admission ends paused (rate 0) and never admits everyone: set -timeout")
	}
	key, list, ok := strings.Cut(t.vary, "=")
	if !ok || key == "" || list == "" {
		return sc, nil, fmt.Errorf("-vary %q: want KEY=V1,V2,… (fraction=0.5,0.6)", t.vary)
	}
	tiers, err := polling.ParseTiers(t.tiersSpec)
	if err != nil {
		return sc, nil, err
	}
	var variants []tradeoffVariant
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
		variants = append(variants, tradeoffVariant{key + "=" + v, bench.NamedPolicy{Name: "eta " + spec, Policy: eta}, true})
	}
	if t.refs != "" {
		base, err := polling.ParseETA(t.etaSpec)
		if err != nil {
			return sc, nil, err
		}
		ps, err := bench.DefaultPolicies(polling.Named(tiers, base, polling.DefaultSteady())).Parse(t.refs)
		if err != nil {
			return sc, nil, err
		}
		for _, p := range ps {
			variants = append(variants, tradeoffVariant{p.Name, p, false})
		}
	}
	return sc, variants, nil
}

// cmdTradeoff runs bench tradeoff: one simulation per swept eta value and
// reference policy, printed as a table and, with -out, a chart.
func cmdTradeoff(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("tradeoff", tradeoffSynopsis, e)
	var tf tradeoffFlags
	tf.register(fs)
	if err := parse(fs, args); err != nil {
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
	var points []bench.TradeoffPoint
	for _, v := range variants {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := simulate.Run(simulate.Config{Scenario: sc, Policy: v.pol, Seed: tf.seed, CacheTTL: tf.cacheTTL, Prices: bench.DefaultPrices(), Progress: e.progress})
		if err != nil {
			return fmt.Errorf("%s: %w", v.label, err)
		}
		results = append(results, r)
		pt := bench.PointOf(v.label, r, v.curve)
		pt.Marked = v.curve && marked != "" && v.label == marked
		points = append(points, pt)
	}
	if tf.jsonOut {
		if err := bench.WriteJSON(e.stdout, results); err != nil {
			return err
		}
	} else {
		fmt.Fprint(e.stdout, bench.TradeoffTable(points))
	}
	if tf.outDir == "" {
		return nil
	}
	return tf.writeDir(e, sc, args, results, points)
}

// writeDir writes results.json, tradeoff.md and tradeoff.svg into -out.
func (t *tradeoffFlags) writeDir(e env, sc bench.Scenario, args []string, results []bench.Result, points []bench.TradeoffPoint) error {
	title := fmt.Sprintf("Trade-off, %s users, %s arrival, %s", bench.Thousands(int64(sc.Users)), sc.Arrival, admission(sc))
	chart := bench.Tradeoff{Title: title, Points: points, GoalRequests: t.goalReq, GoalP99Ms: bench.Ms(t.goalP99)}
	if err := os.MkdirAll(t.outDir, 0o755); err != nil {
		return err
	}
	var js strings.Builder
	if err := bench.WriteJSON(&js, results); err != nil {
		return err
	}
	md := fmt.Sprintf("# %s\n\n```\nbench tradeoff %s\n```\n\n%s\n![trade-off](%s)\n", title, strings.Join(args, " "), bench.TradeoffTable(points), tradeoffChartFile)
	for name, data := range map[string][]byte{
		bench.ResultsFile: []byte(js.String()),
		tradeoffChartFile: chart.SVG(),
		tradeoffTableFile: []byte(md),
	} {
		if err := os.WriteFile(filepath.Join(t.outDir, name), data, 0o644); err != nil {
			return err
		}
	}
	if !t.jsonOut {
		fmt.Fprintf(e.stdout, "\nwrote %s/{%s,%s,%s}\n", t.outDir, tradeoffTableFile, tradeoffChartFile, bench.ResultsFile)
	}
	return nil
}
