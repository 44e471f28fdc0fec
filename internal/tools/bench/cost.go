package bench

import (
	"math"
	"time"
)

// Prices are the cost model's AWS unit prices and its usage per event:
// us-east-1 list prices of 2026 (first tier, no free tier) and usage
// counted from the code, each a flag of bench simulate (docs/benchmarks.md,
// "Cost model").
type Prices struct {
	// APIGatewayPerMillion is API Gateway HTTP API, per million requests.
	APIGatewayPerMillion float64
	// LambdaRequestsPerMillion is Lambda, per million invocations;
	// LambdaPerGBSecond its arm64 duration, per GB-second.
	LambdaRequestsPerMillion, LambdaPerGBSecond float64
	// LambdaMemoryMB is the function's memory size and LambdaMsPerRequest
	// the billed duration of an invocation.
	LambdaMemoryMB, LambdaMsPerRequest float64
	// DynamoReadPerMillion and DynamoWritePerMillion are DynamoDB
	// on-demand, per million read and write request units.
	DynamoReadPerMillion, DynamoWritePerMillion float64
	// TokenRRUPerPoll is the read units of a poll's token read, and
	// ProgramReadsPerPoll its program reads (1 RRU each): 1 without the
	// per-instance program cache.
	TokenRRUPerPoll, ProgramReadsPerPoll float64
	// EnterRRU and EnterWRU are an enter's read and write units (with an
	// Idempotency-Key), AdmitWRU an admission's first sighting's, LeaveWRU
	// a leave's.
	EnterRRU, EnterWRU, AdmitWRU, LeaveWRU float64
	// KMSSymmetricPer10k prices kms:Decrypt and KMSKeyPairPer10k an ECC
	// kms:GenerateDataKeyPair, each per 10,000 requests.
	KMSSymmetricPer10k, KMSKeyPairPer10k float64
	// KeyRotation is the signing key's lifetime: one key pair made, and
	// opened once per instance, per period.
	KeyRotation time.Duration
	// LogsPerGB is CloudWatch Logs ingestion, per GB (10⁹ bytes); EMFBytes,
	// LambdaLogBytes and AccessLogBytes are a request's log bytes.
	LogsPerGB, EMFBytes, LambdaLogBytes, AccessLogBytes float64
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
	// Instances is the peak Lambda concurrency by Little's law, at least 1.
	Instances int64   `json:"lambdaInstances"`
	RRU       float64 `json:"dynamoRRU"`
	WRU       float64 `json:"dynamoWRU"`
	// KMS is the KMS requests: per key period, a GenerateDataKeyPair and
	// a Decrypt per instance.
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
// invocation, with their DynamoDB units and the signing key's KMS calls.
// r must be finished (its peak rate and duration set).
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
