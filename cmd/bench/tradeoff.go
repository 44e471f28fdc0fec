package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/example/waitingroom/internal/bench"
	"github.com/example/waitingroom/internal/bench/simulate"
	"github.com/example/waitingroom/internal/polling"
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

func cmdTradeoff(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("tradeoff", tradeoffSynopsis, e)
	var sf scenarioFlags
	sf.register(fs, 0, "virtual time after which each simulation stops (0: when everyone has seen ADMITTED or left)",
		"delay of every -rate-schedule change after the first, from its offset (the server's: PROGRAM_CACHE_TTL plus a 1 s write budget)")
	vary := fs.String("vary", "fraction=0.5,0.6,0.7,0.8,0.9", "the eta parameter to sweep and its values, KEY=V1,V2,… (keys as in -eta)")
	mark := fs.String("mark", "", "the value of the chosen setting, highlighted")
	etaSpec := fs.String("eta", "", "the other eta parameters, key=value pairs over its defaults (see polling.ParseETA)")
	tiersSpec := fs.String("tiers", polling.DefaultTiersSpec, "the bands of the tiers policy (also eta's fallback)")
	refs := fs.String("reference", "fixed:3s,tiers", "policies placed on the chart for reference, as -policy of simulate")
	goalP99 := fs.Duration("goal-p99", 0, "draw a goal line at this p99 notify delay")
	goalReq := fs.Float64("goal-requests", 0, "draw a goal line at this many requests per user")
	if err := parse(fs, args); err != nil {
		return err
	}
	sc, err := sf.scenario()
	if err != nil {
		return usageError(fs, err)
	}
	if sc.Timeout == 0 && sc.Rates.Final() == 0 {
		return usageError(fs, errors.New("admission ends paused (rate 0) and never admits everyone: set -timeout"))
	}
	key, list, ok := strings.Cut(*vary, "=")
	if !ok || key == "" || list == "" {
		return usageError(fs, fmt.Errorf("-vary %q: want KEY=V1,V2,… (fraction=0.5,0.6)", *vary))
	}
	tiers, err := polling.ParseTiers(*tiersSpec)
	if err != nil {
		return usageError(fs, err)
	}
	type variant struct {
		label string
		pol   bench.NamedPolicy
		curve bool
	}
	var variants []variant
	for v := range strings.SplitSeq(list, ",") {
		v = strings.TrimSpace(v)
		spec := key + "=" + v
		if *etaSpec != "" {
			spec = *etaSpec + "," + spec
		}
		eta, err := polling.ParseETA(spec)
		if err != nil {
			return usageError(fs, err)
		}
		eta.Fallback = tiers
		variants = append(variants, variant{key + "=" + v, bench.NamedPolicy{Name: "eta " + spec, Policy: eta}, true})
	}
	if *refs != "" {
		base, err := polling.ParseETA(*etaSpec)
		if err != nil {
			return usageError(fs, err)
		}
		ps, err := bench.DefaultPolicies(tiers, base).Parse(*refs)
		if err != nil {
			return usageError(fs, err)
		}
		for _, p := range ps {
			variants = append(variants, variant{p.Name, p, false})
		}
	}
	var results []bench.Result
	var points []bench.TradeoffPoint
	for _, v := range variants {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := simulate.Run(simulate.Config{Scenario: sc, Policy: v.pol, Seed: sf.seed, CacheTTL: sf.cacheTTL, Prices: bench.DefaultPrices(), Progress: e.progress})
		if err != nil {
			return fmt.Errorf("%s: %w", v.label, err)
		}
		results = append(results, r)
		pt := bench.PointOf(v.label, r, v.curve)
		pt.Marked = v.curve && *mark != "" && v.label == key+"="+*mark
		points = append(points, pt)
	}
	if sf.jsonOut {
		if err := bench.WriteJSON(e.stdout, results); err != nil {
			return err
		}
	} else {
		fmt.Fprint(e.stdout, bench.TradeoffTable(points))
	}
	if sf.outDir == "" {
		return nil
	}
	title := fmt.Sprintf("Trade-off, %s users, %s arrival, %s", bench.Thousands(int64(sc.Users)), sc.Arrival, admission(sc))
	chart := bench.Tradeoff{Title: title, Points: points, GoalRequests: *goalReq, GoalP99Ms: bench.Ms(*goalP99)}
	if err := os.MkdirAll(sf.outDir, 0o755); err != nil {
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
		if err := os.WriteFile(filepath.Join(sf.outDir, name), data, 0o644); err != nil {
			return err
		}
	}
	if !sf.jsonOut {
		fmt.Fprintf(e.stdout, "\nwrote %s/{%s,%s,%s}\n", sf.outDir, tradeoffTableFile, tradeoffChartFile, bench.ResultsFile)
	}
	return nil
}
