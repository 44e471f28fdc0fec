package bench

// Prices are the AWS unit prices the cost model uses. Defaults are
// us-east-1 list prices as of 2026 (first volume tier, no free tier); every
// one is a flag of bench simulate.
type Prices struct {
	// APIGatewayPerMillion is API Gateway HTTP API, per million requests
	// (first 300 million a month; $0.90 beyond).
	APIGatewayPerMillion float64
	// LambdaRequestsPerMillion is Lambda, per million invocations.
	LambdaRequestsPerMillion float64
	// LambdaPerGBSecond is Lambda arm64 duration, per GB-second.
	LambdaPerGBSecond float64
	// LambdaMemoryMB is the function's memory size.
	LambdaMemoryMB float64
	// LambdaMsPerRequest is the billed duration of one invocation (1 ms
	// granularity).
	LambdaMsPerRequest float64
	// DynamoReadPerMillion is DynamoDB on-demand, per million read request
	// units.
	DynamoReadPerMillion float64
	// TokenRRUPerPoll is the read units of the token read of a poll: a
	// strongly consistent read of an item under 4 KB is 1.
	TokenRRUPerPoll float64
	// ProgramReadsPerPoll is how many program reads (1 RRU each, strongly
	// consistent) a poll costs: 1 without the per-instance program cache;
	// with PROGRAM_CACHE_TTL=1s it tends to (instances × seconds) / polls.
	ProgramReadsPerPoll float64
}

// DefaultPrices returns the documented defaults.
func DefaultPrices() Prices {
	return Prices{
		APIGatewayPerMillion:     1.00,
		LambdaRequestsPerMillion: 0.20,
		LambdaPerGBSecond:        0.0000133334,
		LambdaMemoryMB:           128,
		LambdaMsPerRequest:       10,
		DynamoReadPerMillion:     0.125,
		TokenRRUPerPoll:          1,
		ProgramReadsPerPoll:      1,
	}
}

// Cost is the price of a run's requests, in US dollars.
type Cost struct {
	APIGateway     float64 `json:"apiGateway"`
	LambdaRequests float64 `json:"lambdaRequests"`
	LambdaDuration float64 `json:"lambdaDuration"`
	DynamoReads    float64 `json:"dynamoReads"`
	Total          float64 `json:"total"`
}

// RRU returns the DynamoDB read units of polls polls; the model counts no
// reads for enters, which only write.
func (p Prices) RRU(polls int64) float64 {
	return float64(polls) * (p.TokenRRUPerPoll + p.ProgramReadsPerPoll)
}

// Cost prices requests (every one goes through API Gateway and a Lambda
// invocation) of which polls read DynamoDB.
func (p Prices) Cost(requests, polls int64) Cost {
	req := float64(requests)
	c := Cost{
		APIGateway:     req / 1e6 * p.APIGatewayPerMillion,
		LambdaRequests: req / 1e6 * p.LambdaRequestsPerMillion,
		LambdaDuration: req * (p.LambdaMemoryMB / 1024) * (p.LambdaMsPerRequest / 1000) * p.LambdaPerGBSecond,
		DynamoReads:    p.RRU(polls) / 1e6 * p.DynamoReadPerMillion,
	}
	c.Total = c.APIGateway + c.LambdaRequests + c.LambdaDuration + c.DynamoReads
	return c
}
