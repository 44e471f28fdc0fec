package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/bench"
	"github.com/example/waitingroom/internal/bench/simulate"
	"github.com/example/waitingroom/internal/partitionmodel"
	"github.com/example/waitingroom/internal/polling"
)

const simulateSynopsis = `The load test's scenario on a virtual clock with no network: users enter
(burst or uniform), then poll when the policy says until they see ADMITTED
or, with -abandon, stop polling at a random instant of their wait.
Admission is the service's own queue.Program, with -rate-schedule changes
taking effect -cache-ttl after their offset (the server adds a 1 s write
budget: -cache-ttl 2s models its default); delays are
the polling package's policies; time advances in whole milliseconds,
requests take no time and never fail. Deterministic for a given -seed.
Adds DynamoDB read units and the AWS price of the requests (defaults:
us-east-1 list prices as of 2026, first volume tier, no free tier).

With -partition-model, -opens-at or -shuffle the simulator runs the service
itself (queue.Service, its ticket shards, its opening) on -instances
instances sharing an in-memory table charged to DynamoDB's per-partition
limits (internal/partitionmodel): every enter is Service.Enter
(sent again 1 s after a 503, with its Idempotency-Key), every poll
Service.Poll; -policy then defaults to eta. -tickets single takes every
ticket from the program item, as before ticket shards. -clock-skew sets
each instance's clock off the true time by an offset drawn uniformly in
[-skew, +skew] (by -seed); a list gives a column per skew, policy by policy.
`

func cmdSimulate(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("simulate", simulateSynopsis, e)
	var sf scenarioFlags
	sf.register(fs, 0, "virtual time after which the simulation stops (0: when everyone has seen ADMITTED or left; required when admission ends paused)",
		"delay of every -rate-schedule change after the first, from its offset: the server's PROGRAM_CACHE_TTL plus its 1 s admin write budget (2s at the default TTL)")
	policyList := fs.String("policy", "fixed:3s,tiers", "comma-separated policies, the first being the baseline: fixed:DURATION, tiers or eta (default with the service: eta)")
	tiersSpec := fs.String("tiers", polling.DefaultTiersSpec, "the bands of the tiers policy, MAXPOS:INTERVAL[+-JITTER],…,inf:INTERVAL[+-JITTER]")
	etaSpec := fs.String("eta", "", "parameters of the eta policy over its defaults, key=value pairs such as fraction=0.8,cap=2m (see polling.ParseETA); it falls back to -tiers")
	p := bench.DefaultPrices()
	fs.Float64Var(&p.APIGatewayPerMillion, "price-apigw", p.APIGatewayPerMillion, "API Gateway HTTP API, USD per million requests")
	fs.Float64Var(&p.LambdaRequestsPerMillion, "price-lambda-requests", p.LambdaRequestsPerMillion, "Lambda, USD per million invocations")
	fs.Float64Var(&p.LambdaPerGBSecond, "price-lambda-gbs", p.LambdaPerGBSecond, "Lambda arm64 duration, USD per GB-second")
	fs.Float64Var(&p.LambdaMemoryMB, "lambda-memory-mb", p.LambdaMemoryMB, "Lambda memory size, MB")
	fs.Float64Var(&p.LambdaMsPerRequest, "lambda-ms", p.LambdaMsPerRequest, "billed Lambda duration per request, ms")
	fs.Float64Var(&p.DynamoReadPerMillion, "price-dynamo-read", p.DynamoReadPerMillion, "DynamoDB on-demand, USD per million read request units")
	fs.Float64Var(&p.TokenRRUPerPoll, "token-rru", p.TokenRRUPerPoll, "read units of a poll's token read (strongly consistent, under 4 KB: 1)")
	fs.Float64Var(&p.ProgramReadsPerPoll, "program-reads-per-poll", p.ProgramReadsPerPoll, "program reads (1 RRU each) per poll: 1 without the per-instance program cache, about 0 with it at high request rates")
	partitionModel := fs.Bool("partition-model", false, "run the service itself on a table with DynamoDB's per-partition limits (1,000 WCU and 3,000 RCU a second per partition key)")
	partitionLimits := fs.String("partition-limits", "", "with -partition-model: other limits, scale=F or write=W,read=R (see the local server's -partition-limits)")
	instances := fs.Int("instances", 100, "service instances sharing the table (Lambda instances warm for the crowd), with the service")
	opensAt := fs.Duration("opens-at", 0, "open the program this long after the start (before it, entries are taken and nobody admitted); runs the service")
	shuffle := fs.Bool("shuffle", false, "with -opens-at: shuffle everyone who entered before the opening (shuffleAtOpen)")
	tickets := fs.String("tickets", "shards", "with the service: shards (ticket shards above a rate) or single (every ticket from the program item, as before them)")
	skewList := fs.String("clock-skew", "0", "comma-separated clock skews, e.g. 0,500ms: each instance's clock is off by an offset drawn uniformly in [-skew, +skew]; runs the service")
	if err := parse(fs, args); err != nil {
		return err
	}
	var limits *partitionmodel.Limits
	if *partitionModel {
		l, err := partitionmodel.ParseSpec(*partitionLimits)
		if err != nil {
			return usageError(fs, err)
		}
		limits = &l
	} else if *partitionLimits != "" {
		return usageError(fs, errors.New("-partition-limits needs -partition-model"))
	}
	if *tickets != "shards" && *tickets != "single" {
		return usageError(fs, fmt.Errorf("-tickets %q: want shards or single", *tickets))
	}
	if *instances < 1 {
		return usageError(fs, errors.New("-instances: at least 1"))
	}
	skews, err := parseSkews(*skewList)
	if err != nil {
		return usageError(fs, err)
	}
	sc, err := sf.scenario()
	if err != nil {
		return usageError(fs, err)
	}
	tiers, err := polling.ParseTiers(*tiersSpec)
	if err != nil {
		return usageError(fs, err)
	}
	eta, err := polling.ParseETA(*etaSpec)
	if err != nil {
		return usageError(fs, err)
	}
	service := *partitionModel || *opensAt != 0 || *shuffle || *tickets == "single" || len(skews) > 1 || skews[0] != 0
	if service && !flagSet(fs, "policy") {
		// The service's crowds are a million strong: a poll every 3 s
		// would be hundreds of millions of service calls.
		*policyList = "eta"
	}
	policies, err := bench.DefaultPolicies(tiers, eta).Parse(*policyList)
	if err != nil {
		return usageError(fs, err)
	}
	if sc.Timeout == 0 && sc.Rates.Final() == 0 {
		return usageError(fs, errors.New("admission ends paused (rate 0) and never admits everyone: set -timeout"))
	}
	var results []bench.Result
	for _, named := range policies {
		for _, skew := range skews {
			if err := ctx.Err(); err != nil {
				return err
			}
			pol := named
			if len(skews) > 1 || skew != 0 {
				pol.Name = fmt.Sprintf("%s, skew ±%v", named.Name, skew)
			}
			r, err := simulate.Run(simulate.Config{Scenario: sc, Policy: pol, Seed: sf.seed, CacheTTL: sf.cacheTTL, Prices: p, Progress: e.progress,
				Service: service, PartitionLimits: limits, Instances: *instances, OpensAt: *opensAt, Shuffle: *shuffle, SingleTickets: *tickets == "single", ClockSkew: skew})
			if err != nil {
				return fmt.Errorf("%s: %w", pol.Name, err)
			}
			results = append(results, r)
		}
	}
	rep := bench.Report{
		Title:   fmt.Sprintf("Simulation: %s users, %s arrival, %s", bench.Thousands(int64(sc.Users)), sc.Arrival, admission(sc)),
		Command: "bench simulate " + strings.Join(args, " "),
	}
	return sf.output(e, rep, results)
}

// parseSkews parses -clock-skew: comma-separated durations, none negative.
func parseSkews(list string) ([]time.Duration, error) {
	var skews []time.Duration
	for f := range strings.SplitSeq(list, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d < 0 {
			return nil, fmt.Errorf("-clock-skew %q: want durations of 0 or more, e.g. 0,500ms", list)
		}
		skews = append(skews, d)
	}
	return skews, nil
}

// flagSet reports whether flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
