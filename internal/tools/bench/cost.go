package bench

import (
	"math"
	"time"
)

// Prices are the cost model's AWS unit prices and its usage per event.
// Price defaults are us-east-1 list prices read in 2026 (first volume tier,
// no free tier); usage defaults are counted from the code. Every one is a
// flag of bench simulate (docs/benchmarks.md, "Cost model").
type Prices struct {
	// APIGatewayPerMillion is API Gateway HTTP API, per million requests
	// (first 300 million a month; $0.90 beyond).
	APIGatewayPerMillion float64
	// LambdaRequestsPerMillion is Lambda, per million invocations.
	LambdaRequestsPerMillion float64
	// LambdaPerGBSecond is Lambda arm64 duration, per GB-second.
	LambdaPerGBSecond float64
	// LambdaMemoryMB is the function's memory size (template.yaml's).
	LambdaMemoryMB float64
	// LambdaMsPerRequest is the billed duration of one invocation (1 ms
	// granularity).
	LambdaMsPerRequest float64
	// DynamoReadPerMillion and DynamoWritePerMillion are DynamoDB
	// on-demand, per million read and write request units.
	DynamoReadPerMillion, DynamoWritePerMillion float64
	// TokenRRUPerPoll is the read units of the token read of a poll: a
	// strongly consistent read of an item under 4 KB is 1.
	TokenRRUPerPoll float64
	// ProgramReadsPerPoll is how many program reads (1 RRU each, strongly
	// consistent) a poll costs: 1 without the per-instance program cache;
	// with PROGRAM_CACHE_TTL=1s it tends to (instances × seconds) / polls.
	ProgramReadsPerPoll float64
	// EnterRRU and EnterWRU are an enter's read and write units: with an
	// Idempotency-Key (the waiting page always sends one) the key's token
	// read, then the claim, the ticket take and the token's fill.
	EnterRRU, EnterWRU float64
	// AdmitWRU is the write units of an admission's first sighting: the
	// token's update with its pass. LeaveWRU is a leave's.
	AdmitWRU, LeaveWRU float64
	// KMSSymmetricPer10k prices kms:Decrypt and KMSKeyPairPer10k an ECC
	// kms:GenerateDataKeyPair, each per 10,000 requests.
	KMSSymmetricPer10k, KMSKeyPairPer10k float64
	// KeyRotation is the signing key's lifetime: one key pair made, and
	// opened once per instance, per period.
	KeyRotation time.Duration
	// LogsPerGB is CloudWatch Logs ingestion, per GB (10⁹ bytes).
	LogsPerGB float64
	// EMFBytes, LambdaLogBytes and AccessLogBytes are the log bytes of
	// one request: its EMF line, Lambda's platform lines and its API
	// Gateway access log line.
	EMFBytes, LambdaLogBytes, AccessLogBytes float64
}

// DefaultPrices returns the documented defaults.
func DefaultPrices() Prices {
	return Prices{
		APIGatewayPerMillion:     1.00,
		LambdaRequestsPerMillion: 0.20,
		LambdaPerGBSecond:        0.0000133334,
		LambdaMemoryMB:           256,
		LambdaMsPerRequest:       10,
		DynamoReadPerMillion:     0.125,
		DynamoWritePerMillion:    0.625,
		TokenRRUPerPoll:          1,
		ProgramReadsPerPoll:      1,
		EnterRRU:                 1,
		EnterWRU:                 3,
		AdmitWRU:                 1,
		LeaveWRU:                 1,
		KMSSymmetricPer10k:       0.03,
		KMSKeyPairPer10k:         0.10,
		KeyRotation:              24 * time.Hour,
		LogsPerGB:                0.50,
		EMFBytes:                 713,
		LambdaLogBytes:           375,
		AccessLogBytes:           553,
	}
}

// Usage is what a run consumed of each billed unit.
type Usage struct {
	Requests int64 `json:"requests"`
	// GBSeconds is the Lambda duration billed.
	GBSeconds float64 `json:"lambdaGBSeconds"`
	// Instances is the peak Lambda concurrency by Little's law: the peak
	// requests a second times the seconds a request takes, at least 1.
	Instances int64   `json:"lambdaInstances"`
	RRU       float64 `json:"dynamoRRU"`
	WRU       float64 `json:"dynamoWRU"`
	// KMS is the KMS requests: per key period, a GenerateDataKeyPair and
	// a Decrypt per instance (passes are signed in memory).
	KMS int64 `json:"kms"`
	// KeyPeriods is how many key rotation periods the run touches.
	KeyPeriods int64   `json:"keyPeriods"`
	LogBytes   float64 `json:"logBytes"`
}

// Cost is the AWS bill of a run, in US dollars.
type Cost struct {
	Usage          Usage   `json:"usage"`
	APIGateway     float64 `json:"apiGateway"`
	LambdaRequests float64 `json:"lambdaRequests"`
	LambdaDuration float64 `json:"lambdaDuration"`
	DynamoReads    float64 `json:"dynamoReads"`
	DynamoWrites   float64 `json:"dynamoWrites"`
	Logs           float64 `json:"logs"`
	KMS            float64 `json:"kms"`
	Total          float64 `json:"total"`
}

// Cost prices r's requests, each through API Gateway and one Lambda
// invocation; the enters, polls, leaves and admissions (first sightings)
// read and write DynamoDB, and each instance opens the signing key. r must
// be finished (its peak rate and duration set).
func (p Prices) Cost(r Result) Cost {
	req := float64(r.Requests)
	u := Usage{
		Requests:   r.Requests,
		GBSeconds:  req * p.LambdaMemoryMB / 1024 * p.LambdaMsPerRequest / 1000,
		Instances:  max(1, int64(math.Ceil(float64(r.PeakRps)*p.LambdaMsPerRequest/1000))),
		RRU:        float64(r.Polls)*(p.TokenRRUPerPoll+p.ProgramReadsPerPoll) + float64(r.Enters)*p.EnterRRU,
		WRU:        float64(r.Enters)*p.EnterWRU + float64(r.Admitted)*p.AdmitWRU + float64(r.Leaves)*p.LeaveWRU,
		KeyPeriods: 1,
		LogBytes:   req * (p.EMFBytes + p.LambdaLogBytes + p.AccessLogBytes),
	}
	if p.KeyRotation > 0 {
		u.KeyPeriods = max(1, int64(math.Ceil(r.DurationSeconds/p.KeyRotation.Seconds())))
	}
	decrypts := u.Instances * u.KeyPeriods
	u.KMS = decrypts + u.KeyPeriods
	c := Cost{
		Usage:          u,
		APIGateway:     req / 1e6 * p.APIGatewayPerMillion,
		LambdaRequests: req / 1e6 * p.LambdaRequestsPerMillion,
		LambdaDuration: u.GBSeconds * p.LambdaPerGBSecond,
		DynamoReads:    u.RRU / 1e6 * p.DynamoReadPerMillion,
		DynamoWrites:   u.WRU / 1e6 * p.DynamoWritePerMillion,
		Logs:           u.LogBytes / 1e9 * p.LogsPerGB,
		KMS:            (float64(decrypts)*p.KMSSymmetricPer10k + float64(u.KeyPeriods)*p.KMSKeyPairPer10k) / 1e4,
	}
	c.Total = c.APIGateway + c.LambdaRequests + c.LambdaDuration + c.DynamoReads + c.DynamoWrites + c.Logs + c.KMS
	return c
}

// Price sets r's Cost at prices p; r must be finished.
func (r *Result) Price(p Prices) {
	c := p.Cost(*r)
	r.Cost = &c
}
