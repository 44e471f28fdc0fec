package bench

import (
	"math"
	"slices"
	"time"
)

// Prices are the cost model's AWS unit prices, in USD (us-east-1 list
// prices of 2026, first tier, no free tier), and its usage per event,
// counted from the code; each is a flag of bench simulate whose help says
// what it is (docs/benchmarks.md, "Cost model").
type Prices struct {
	APIGatewayPerMillion, LambdaRequestsPerMillion, LambdaPerGBSecond float64
	LambdaMemoryMB, LambdaMsPerRequest                                float64
	DynamoReadPerMillion, DynamoWritePerMillion                       float64
	// A poll reads TokenRRUPerPoll units, and a request the program item
	// (1 unit) once per ProgramCacheTTL per Lambda instance (every poll
	// when 0); an
	// enter (with an Idempotency-Key) reads EnterRRU and writes EnterWRU
	// units, an admission's first sighting AdmitWRU, a leave LeaveWRU.
	TokenRRUPerPoll                        float64
	ProgramCacheTTL                        time.Duration
	EnterRRU, EnterWRU, AdmitWRU, LeaveWRU float64
	// KMS requests (Decrypt, and an ECC GenerateDataKeyPair once per
	// KeyRotation) are priced per 10,000.
	KMSSymmetricPer10k, KMSKeyPairPer10k float64
	KeyRotation                          time.Duration
	// LogsPerGB prices 10⁹ bytes; the others are a request's log bytes.
	LogsPerGB, EMFBytes, LambdaLogBytes, AccessLogBytes float64
	// The edge gate: SiteRequests are an admitted person's requests to
	// the protected site through it (0: no gate), each a function
	// invocation reading EdgeKVSReads keys, as are each arrival's first
	// request (sent to the room) and each admission's token exchange;
	// CloudFrontPerMillion prices the distribution's requests (0 for a
	// site already on CloudFront).
	SiteRequests, EdgeKVSReads                                          float64
	EdgeFunctionPerMillion, EdgeKVSReadPerMillion, CloudFrontPerMillion float64
	// The Web Push sender, billed for the minutes of a run in which a
	// subscribed person waits (Result.SenderMinutes): a Lambda of
	// SenderMemoryMB that runs SenderMsPerMinute of each such minute
	// (re-evaluating every second), billed per GB-second at
	// LambdaPerGBSecond, plus one invocation a minute at
	// LambdaRequestsPerMillion.
	SenderMsPerMinute, SenderMemoryMB float64
	// PushWRU is the write units of a push's conditional claim (a turn
	// also writes that it was told, as much again); PushIndexWRU those of a subscribed person's
	// entry in the sender's index (written with the enter, removed with
	// the turn); PushListRRU the read units of listing one subscriber: the
	// sender reads its list again every 15 s for the lead and 15 s (9
	// reads of a ~100-byte entry, 80 to an eventually consistent unit).
	// A subscribed person's enter costs no extra request.
	PushWRU, PushIndexWRU, PushListRRU float64
	// The report's records: each Lambda instance busy in a minute adds its
	// tally to the minute's item (ReportMinuteWRU), and the report's pass
	// after the sale scans every token (ReportRRUPerPerson).
	ReportMinuteWRU, ReportRRUPerPerson float64
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
		ProgramCacheTTL:          time.Second,
		EnterRRU:                 1,
		EnterWRU:                 3,
		AdmitWRU:                 1,
		LeaveWRU:                 1,
		KMSSymmetricPer10k:       0.03,
		KMSKeyPairPer10k:         0.10,
		KeyRotation:              24 * time.Hour,
		LogsPerGB:                0.50,
		EMFBytes:                 26,
		LambdaLogBytes:           0,
		AccessLogBytes:           289,
		EdgeKVSReads:             3,
		EdgeFunctionPerMillion:   0.10,
		EdgeKVSReadPerMillion:    0.03,
		SenderMsPerMinute:        60000,
		SenderMemoryMB:           256,
		PushWRU:                  1,
		PushIndexWRU:             2,
		PushListRRU:              9.0 / 80,
		ReportMinuteWRU:          1,
		ReportRRUPerPerson:       0.125,
	}
}

// Usage is what a run consumed of each billed unit.
type Usage struct {
	Requests   int64   `json:"requests"`
	GBSeconds  float64 `json:"lambdaGBSeconds"` // the Lambda duration billed
	Instances  int64   `json:"lambdaInstances"` // peak Lambda concurrency by Little's law, at least 1
	RRU        float64 `json:"dynamoRRU"`
	WRU        float64 `json:"dynamoWRU"`
	KMS        int64   `json:"kms"`        // per key period, a GenerateDataKeyPair and a Decrypt per instance
	KeyPeriods int64   `json:"keyPeriods"` // the key rotation periods the run touches
	LogBytes   float64 `json:"logBytes"`
	EdgeCalls  float64 `json:"edgeCalls,omitempty"` // the edge gate's function invocations
	// The Web Push sender's: its minutes (one invocation each), its Lambda
	// duration, and its DynamoDB units (claims and index; the query).
	SenderMinutes   int64   `json:"senderMinutes,omitempty"`
	SenderGBSeconds float64 `json:"senderGBSeconds,omitempty"`
	PushWRU         float64 `json:"pushWRU,omitempty"`
	PushRRU         float64 `json:"pushRRU,omitempty"`
	// The report's: its minute tallies' writes and its pass's reads, also
	// in WRU and RRU.
	ReportWRU float64 `json:"reportWRU"`
	ReportRRU float64 `json:"reportRRU"`
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
	Edge           float64 `json:"edge,omitempty"`
	// The Web Push sender: its Lambda (invocations and duration) and its
	// DynamoDB writes and reads (Usage.PushWRU, Usage.PushRRU), apart from
	// the lines above.
	PushLambda      float64 `json:"pushLambda,omitempty"`
	PushDynamoWrite float64 `json:"pushDynamoWrites,omitempty"`
	PushDynamoRead  float64 `json:"pushDynamoReads,omitempty"`
	Total           float64 `json:"total"`
}

// Cost prices r's requests (a simulation's with the site's session ends),
// each through API Gateway and one Lambda invocation, with their DynamoDB
// units (a unit for each capacity record written), the signing key's KMS
// calls, the edge gate's invocations when p.SiteRequests is set, and the
// Web Push sender's Lambda and DynamoDB units when r has subscribed people.
// r must be finished (its peak rate and duration set).
func (p Prices) Cost(r Result) Cost {
	requests := r.Requests
	if r.Mode != "run" {
		requests += r.SessionEnds
	}
	req := float64(requests)
	u := Usage{
		Requests:   requests,
		GBSeconds:  req * p.LambdaMemoryMB / 1024 * p.LambdaMsPerRequest / 1000,
		Instances:  max(1, int64(math.Ceil(float64(r.PeakRps)*p.LambdaMsPerRequest/1000))),
		RRU:        float64(r.Polls)*p.TokenRRUPerPoll + float64(r.Enters)*p.EnterRRU,
		WRU:        float64(r.Enters)*p.EnterWRU + float64(r.Admitted)*p.AdmitWRU + float64(r.Leaves)*p.LeaveWRU,
		KeyPeriods: 1,
		LogBytes:   req * (p.EMFBytes + p.LambdaLogBytes + p.AccessLogBytes),
	}
	for _, n := range r.CapacityWrites {
		u.WRU += float64(n)
	}
	u.RRU += p.programReads(r)
	u.ReportWRU, u.ReportRRU = p.tallyMinutes(r)*p.ReportMinuteWRU, float64(r.Entered)*p.ReportRRUPerPerson
	u.WRU += u.ReportWRU
	u.RRU += u.ReportRRU
	u.SenderMinutes = r.SenderMinutes
	u.SenderGBSeconds = float64(r.SenderMinutes) * p.SenderMsPerMinute / 1000 * p.SenderMemoryMB / 1024
	u.PushWRU = float64(r.PushesReady+2*r.PushesTurn)*p.PushWRU + float64(r.Subscribed)*p.PushIndexWRU
	u.PushRRU = float64(r.PushesTurn) * p.PushListRRU
	if p.SiteRequests > 0 {
		u.EdgeCalls = float64(r.Entered) + float64(r.Admitted)*(1+p.SiteRequests)
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
	c.Edge = u.EdgeCalls / 1e6 * (p.EdgeFunctionPerMillion + p.EdgeKVSReads*p.EdgeKVSReadPerMillion + p.CloudFrontPerMillion)
	c.PushLambda = float64(u.SenderMinutes)/1e6*p.LambdaRequestsPerMillion + u.SenderGBSeconds*p.LambdaPerGBSecond
	c.PushDynamoWrite = u.PushWRU / 1e6 * p.DynamoWritePerMillion
	c.PushDynamoRead = u.PushRRU / 1e6 * p.DynamoReadPerMillion
	c.Total = c.APIGateway + c.LambdaRequests + c.LambdaDuration + c.DynamoReads + c.DynamoWrites + c.Logs + c.KMS + c.Edge +
		c.PushLambda + c.PushDynamoWrite + c.PushDynamoRead
	return c
}

// programReads is how many times r's requests read the program item: once
// per ProgramCacheTTL per Lambda instance busy in each second (Little's law
// on the second's requests), at most once per request; every poll without
// a cache.
func (p Prices) programReads(r Result) float64 {
	if p.ProgramCacheTTL <= 0 {
		return float64(r.Polls)
	}
	perInstance := math.Ceil(time.Second.Seconds() / p.ProgramCacheTTL.Seconds())
	n := 0.0
	for _, rps := range r.RpsSeries {
		instances := math.Ceil(float64(rps) * p.LambdaMsPerRequest / 1000)
		n += min(float64(rps), instances*perInstance)
	}
	return n
}

// tallyMinutes is how many minute tallies r's requests write: one a minute
// per Lambda instance busy in it (Little's law on its busiest second).
func (p Prices) tallyMinutes(r Result) float64 {
	n := 0.0
	for m := range slices.Chunk(r.RpsSeries, 60) {
		n += math.Ceil(float64(slices.Max(m)) * p.LambdaMsPerRequest / 1000)
	}
	return n
}

// Price sets r's Cost at prices p; r must be finished.
func (r *Result) Price(p Prices) { r.Cost = new(p.Cost(*r)) }
