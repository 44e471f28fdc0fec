package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/tools/bench"
	"github.com/example/waitingroom/internal/tools/bench/simulate"
	"github.com/example/waitingroom/internal/tools/partitionmodel"
)

const simulateSynopsis = `The scenario on a virtual clock with no network: users enter (burst or
uniform), then poll as the policy says until they see ADMITTED or, with
-abandon, leave at a random instant of their wait. Admission is the
service's admission.Program, -rate-schedule changes in force -cache-ttl after
their offset (-cache-ttl 2s models the server's default); requests take no
time, time advances in whole milliseconds, and a -seed gives the same run.
Each run is priced: API Gateway, Lambda, DynamoDB, CloudWatch Logs and KMS,
with the total per million people admitted (us-east-1 list prices of 2026,
usage counted from the code; every price and count is a flag).

-partition-model, -opens-at, -shuffle, -tickets, -clock-skew and the crowd
flags (-max-active, -no-show, -no-show-seconds, -session) run the service
itself (queue.Service, its ticket shards and its opening) on -instances
instances over one table, charged with -partition-model to DynamoDB's
per-partition limits; a refused enter is sent again 1 s later, and -policy
defaults to eta. With -max-active or -no-show-seconds each policy runs
twice on the same crowd: a rate-only program, then the capped one.

-push-share models Web Push on the program model: that share of people
subscribe with their enter and sleep polling.Pushed; a sender pushes "get
ready" within 2 min of their earliest admission and "it's your turn" at
every whole second at which the program admits them, and they poll on that
(-push-latency after it is sent). Each policy runs once per share, and the
bill adds the sender's Lambda and DynamoDB units.
`

// simulateFlags are the flags of simulate beyond the scenario's, and the
// runs they resolve to.
type simulateFlags struct {
	scenarioFlags
	policyList, tiersSpec, etaSpec, steadySpec string
	prices                                     bench.Prices
	partitionModel                             bool
	partitionLimits                            string
	instances                                  int
	opensAt                                    time.Duration
	shuffle                                    bool
	tickets, skewList                          string
	pushShares                                 string
	pushLatency                                time.Duration
	crowd                                      crowdFlags
	simulations                                // by policy, then skew, then program
}

// register defines simulate's flags on fs.
func (s *simulateFlags) register(fs *flag.FlagSet) {
	s.scenarioFlags.register(fs, 0, "virtual time after which the simulation stops (0: when everyone has seen ADMITTED or left; required when admission ends paused)",
		"delay of every -rate-schedule change after the first, from its offset: the server's PROGRAM_CACHE_TTL plus its 1 s admin write budget (2s at the default TTL)")
	fs.StringVar(&s.policyList, "policy", "fixed:3s,tiers", "comma-separated policies, the first being the baseline: fixed:DURATION, tiers, eta or steady (default with the service: eta)")
	fs.StringVar(&s.tiersSpec, "tiers", polling.DefaultTiersSpec, "the bands of the tiers policy, MAXPOS:INTERVAL[+-JITTER],…,inf:INTERVAL[+-JITTER]")
	fs.StringVar(&s.etaSpec, "eta", "", "parameters of the eta policy over its defaults, key=value pairs such as fraction=0.8,cap=2m (see polling.ParseETA); it falls back to -tiers")
	fs.StringVar(&s.steadySpec, "steady", "", "parameters of the steady policy over its defaults, key=value pairs such as hold=30s (see polling.ParseSteady); it falls back to eta")
	s.prices = bench.DefaultPrices()
	p := &s.prices
	fs.Float64Var(&p.APIGatewayPerMillion, "price-apigw", p.APIGatewayPerMillion, "API Gateway HTTP API, USD per million requests")
	fs.Float64Var(&p.LambdaRequestsPerMillion, "price-lambda-requests", p.LambdaRequestsPerMillion, "Lambda, USD per million invocations")
	fs.Float64Var(&p.LambdaPerGBSecond, "price-lambda-gbs", p.LambdaPerGBSecond, "Lambda arm64 duration, USD per GB-second")
	fs.Float64Var(&p.LambdaMemoryMB, "lambda-memory-mb", p.LambdaMemoryMB, "Lambda memory size, MB (template.yaml's MemorySize)")
	fs.Float64Var(&p.LambdaMsPerRequest, "lambda-ms", p.LambdaMsPerRequest, "billed Lambda duration per request, ms")
	fs.Float64Var(&p.DynamoReadPerMillion, "price-dynamo-read", p.DynamoReadPerMillion, "DynamoDB on-demand, USD per million read request units")
	fs.Float64Var(&p.DynamoWritePerMillion, "price-dynamo-write", p.DynamoWritePerMillion, "DynamoDB on-demand, USD per million write request units")
	fs.Float64Var(&p.TokenRRUPerPoll, "token-rru", p.TokenRRUPerPoll, "read units of a poll's token read (strongly consistent, under 4 KB: 1)")
	fs.DurationVar(&p.ProgramCacheTTL, "program-cache-ttl", p.ProgramCacheTTL, "PROGRAM_CACHE_TTL: each Lambda instance reads the program item (1 RRU) once per TTL; 0: every poll reads it")
	fs.Float64Var(&p.EnterRRU, "enter-rru", p.EnterRRU, "read units of an enter: the Idempotency-Key's token read (0 without a key)")
	fs.Float64Var(&p.EnterWRU, "enter-wru", p.EnterWRU, "write units of an enter: claim PutItem, ticket take, token fill PutItem (2 without an Idempotency-Key: take, token PutItem)")
	fs.Float64Var(&p.AdmitWRU, "admit-wru", p.AdmitWRU, "write units of an admission's first sighting: the token's UpdateItem with its pass (item under 1 KB)")
	fs.Float64Var(&p.LeaveWRU, "leave-wru", p.LeaveWRU, "write units of a leave: the token's UpdateItem")
	fs.Float64Var(&p.KMSSymmetricPer10k, "price-kms-symmetric", p.KMSSymmetricPer10k, "KMS symmetric requests (Decrypt), USD per 10,000")
	fs.Float64Var(&p.KMSKeyPairPer10k, "price-kms-keypair", p.KMSKeyPairPer10k, "KMS GenerateDataKeyPair (ECC), USD per 10,000")
	fs.DurationVar(&p.KeyRotation, "key-rotation", p.KeyRotation, "the signing key's lifetime: one key pair, opened once per Lambda instance, per period")
	fs.Float64Var(&p.LogsPerGB, "price-logs-gb", p.LogsPerGB, "CloudWatch Logs ingestion, USD per GB")
	fs.Float64Var(&p.EMFBytes, "emf-bytes", p.EMFBytes, "bytes of EMF a request adds to its instance's aggregated lines (a WAITING poll's, the largest; 713 with METRICS_INTERVAL=0)")
	fs.Float64Var(&p.LambdaLogBytes, "lambda-log-bytes", p.LambdaLogBytes, "bytes of Lambda's platform lines per invocation (0 with the template's SystemLogLevel WARN; 375 with INFO: JSON platform.start and platform.report)")
	fs.Float64Var(&p.AccessLogBytes, "access-log-bytes", p.AccessLogBytes, "bytes of a request's API Gateway access log line (template.yaml's format)")
	fs.Float64Var(&p.SiteRequests, "site-requests", p.SiteRequests, "an admitted person's requests to the site through the edge gate (0: no gate); each arrival's first request and each admission's token exchange are counted too")
	fs.Float64Var(&p.EdgeKVSReads, "edge-kvs-reads", p.EdgeKVSReads, "KeyValueStore reads of an edge gate invocation (site, the program, the keys)")
	fs.Float64Var(&p.EdgeFunctionPerMillion, "price-edge-function", p.EdgeFunctionPerMillion, "CloudFront Functions, USD per million invocations")
	fs.Float64Var(&p.EdgeKVSReadPerMillion, "price-edge-kvs-read", p.EdgeKVSReadPerMillion, "CloudFront KeyValueStore, USD per million reads")
	fs.Float64Var(&p.CloudFrontPerMillion, "price-cloudfront", p.CloudFrontPerMillion, "CloudFront HTTPS requests of the gated site, USD per million (0: the site is on CloudFront already)")
	fs.Float64Var(&p.SenderMsPerMinute, "sender-ms-per-minute", p.SenderMsPerMinute, "with -push-share: billed ms of the push sender Lambda per minute in which a subscribed person waits (60000: it runs its whole minute, re-evaluating every second); plus one invocation a minute")
	fs.Float64Var(&p.SenderMemoryMB, "sender-memory-mb", p.SenderMemoryMB, "with -push-share: the push sender Lambda's memory size, MB")
	fs.Float64Var(&p.PushWRU, "push-wru", p.PushWRU, "with -push-share: write units of each push sent, ready or turn (its conditional claim write)")
	fs.Float64Var(&p.PushIndexWRU, "push-index-wru", p.PushIndexWRU, "with -push-share: write units a subscribed person's sender index entry costs (written with the enter, removed with the turn)")
	fs.Float64Var(&p.PushListRRU, "push-list-rru", p.PushListRRU, "with -push-share: read units of listing one subscriber for the sender (3 reads of a ~100-byte entry, 80 to an eventually consistent unit)")
	fs.Float64Var(&p.ReportMinuteWRU, "report-minute-wru", p.ReportMinuteWRU, "write units of a minute's report tally, written by each Lambda instance busy in the minute")
	fs.Float64Var(&p.ReportRRUPerPerson, "report-rru", p.ReportRRUPerPerson, "read units of the report's pass a person (a ~1 KB token item scanned, 4 KB a half unit)")
	fs.BoolVar(&s.partitionModel, "partition-model", false, "run the service itself on a table with DynamoDB's per-partition limits (1,000 WCU and 3,000 RCU a second per partition key)")
	fs.StringVar(&s.partitionLimits, "partition-limits", "", "with -partition-model: other limits, scale=F or write=W,read=R (see the local server's -partition-limits)")
	fs.IntVar(&s.instances, "instances", 100, "service instances sharing the table (Lambda instances warm for the crowd), with the service")
	fs.DurationVar(&s.opensAt, "opens-at", 0, "open the program this long after the start (before it, entries are taken and nobody admitted); runs the service")
	fs.BoolVar(&s.shuffle, "shuffle", false, "with -opens-at: shuffle everyone who entered before the opening (shuffleAtOpen)")
	fs.StringVar(&s.tickets, "tickets", "shards", "with the service: shards (ticket shards above a rate, sized by the pace), fixed:K,N (K shards, blocks of N, whatever the pace) or single (every ticket from the program item, as before them)")
	s.crowd.register(fs, "none: sessions run to the window's end; any crowd flag runs the service, -max-active or -no-show-seconds beside a rate-only program")
	fs.StringVar(&s.pushShares, "push-share", "0", "comma-separated shares of people subscribed to Web Push, each in [0, 1], e.g. 0,0.5,1: each policy runs once per share (who subscribes follows -seed, apart from the rest); program model only")
	fs.DurationVar(&s.pushLatency, "push-latency", 500*time.Millisecond, "with -push-share: the push service's delivery time from the sender to the person's page (an assumption, not a measurement)")
	fs.StringVar(&s.skewList, "clock-skew", "0", "comma-separated clock skews, e.g. 0,500ms: each instance's clock is off by an offset drawn uniformly in [-skew, +skew]; runs the service")
}

// check resolves the parsed flags into the runs.
func (s *simulateFlags) check(fs *flag.FlagSet, _ env) error {
	var limits *partitionmodel.Limits
	if s.partitionModel {
		l, err := partitionmodel.ParseSpec(s.partitionLimits)
		if err != nil {
			return err
		}
		limits = &l
	} else if s.partitionLimits != "" {
		return errors.New("-partition-limits needs -partition-model")
	}
	var fixedShards int
	var fixedBlock int64
	if s.tickets != "shards" && s.tickets != "single" {
		if _, err := fmt.Sscanf(s.tickets, "fixed:%d,%d", &fixedShards, &fixedBlock); err != nil || fixedShards < 1 || fixedBlock < 1 {
			return fmt.Errorf("-tickets %q: want shards, single or fixed:K,N (K shards, blocks of N, both at least 1)", s.tickets)
		}
	}
	if s.instances < 1 {
		return errors.New("-instances: at least 1")
	}
	skews, err1 := parseSkews(s.skewList)
	sc, err2 := s.scenario()
	crowd, err3 := s.crowd.crowd()
	reg, err4 := registry(s.tiersSpec, s.etaSpec, s.steadySpec)
	shares, err5 := parseShares(s.pushShares)
	if err := cmp.Or(err1, err2, err3, err4, err5); err != nil {
		return err
	}
	push := slices.Max(shares) > 0 // otherwise the output is as without the flag
	base := simulate.Config{Scenario: sc, Seed: s.seed, CacheTTL: s.cacheTTL, Prices: s.prices,
		Service: len(skews) > 1 || skews[0] != 0, PartitionLimits: limits, Instances: s.instances, OpensAt: s.opensAt, Shuffle: s.shuffle,
		SingleTickets: s.tickets == "single", FixedShards: fixedShards, FixedBlock: fixedBlock, Crowd: crowd,
		PushShare: slices.Max(shares), PushLatency: s.pushLatency, ReportPush: push}
	if base.UsesService() && !flagGiven(fs, "policy") {
		s.policyList = "eta" // with the service, a poll every 3 s would be hundreds of millions of calls
	}
	policies, err := bench.ParsePolicies(s.policyList, reg)
	if err != nil {
		return err
	}
	for _, named := range policies {
		for _, skew := range skews {
			for _, share := range shares {
				cfg := base
				cfg.Policy, cfg.ClockSkew, cfg.PushShare = named, skew, share
				if len(skews) > 1 || skew != 0 {
					cfg.Policy.Name = fmt.Sprintf("%s, skew ±%v", named.Name, skew)
				}
				if push {
					cfg.Policy.Name = fmt.Sprintf("%s, push %g%%", cfg.Policy.Name, share*100)
				}
				s.runs = append(s.runs, programs(cfg)...)
			}
		}
	}
	base.Policy = policies[0]
	return base.Validate()
}

// simulations are the runs simulate and tradeoff resolve their flags to.
type simulations struct{ runs []simulate.Config }

// run simulates the runs in turn and returns their results.
func (s *simulations) run(ctx context.Context, _ env) (string, []bench.Result, error) {
	var results []bench.Result
	for _, cfg := range s.runs {
		if err := ctx.Err(); err != nil {
			return "", nil, err
		}
		r, err := simulate.Run(cfg)
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", cfg.Policy.Name, err)
		}
		results = append(results, r)
	}
	return "", results, nil
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

// parseShares parses -push-share: comma-separated shares in [0, 1].
func parseShares(list string) ([]float64, error) {
	var shares []float64
	for f := range strings.SplitSeq(list, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(v >= 0 && v <= 1) {
			return nil, fmt.Errorf("-push-share %q: want shares in [0, 1], e.g. 0,0.5,1", list)
		}
		shares = append(shares, v)
	}
	return shares, nil
}

// programs returns the programs cfg is run on: with a cap or no-show
// handling, a rate-only program first (the same crowd, neither setting),
// then cfg's, each named for it; otherwise cfg alone.
func programs(cfg simulate.Config) []simulate.Config {
	c := cfg.Crowd
	if c.MaxActive == 0 && c.NoShowSeconds == 0 {
		return []simulate.Config{cfg}
	}
	rateOnly := cfg
	rateOnly.Crowd.MaxActive, rateOnly.Crowd.NoShowSeconds, rateOnly.FollowAdmissions = 0, 0, true
	rateOnly.Policy.Name += ", rate only"
	var parts []string
	if c.MaxActive > 0 {
		parts = append(parts, fmt.Sprintf("cap %d", c.MaxActive))
	}
	if c.NoShowSeconds > 0 {
		parts = append(parts, fmt.Sprintf("no-show %ds", c.NoShowSeconds))
	}
	cfg.Policy.Name += ", " + strings.Join(parts, ", ")
	return []simulate.Config{rateOnly, cfg}
}
