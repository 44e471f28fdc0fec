package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/example/waitingroom/internal/awsconfig"
)

// The client's time budget. A request must end in the handler's own answer
// (a JSON 503 with Retry-After when the table misbehaves) before Lambda
// kills the invocation at its timeout (template.yaml: Timeout 5 s), which
// API Gateway would turn into a bare error. Every call the store makes is a
// small read or write that DynamoDB answers in milliseconds, so:
//
//   - an attempt that has not been answered in DefaultAttemptTimeout (1 s)
//     is abandoned and retried on a fresh connection: a hung connection
//     costs a second, not the invocation;
//   - DefaultMaxAttempts (3) attempts per call, at most DefaultMaxBackoff
//     (200 ms) apart; the SDK's default would wait up to 20 s between
//     attempts, throttling errors included;
//   - so one call, failing or not, takes at most 3 × 1 s + 2 × 0.2 s =
//     3.4 s, inside the 5 s;
//   - a request makes several calls (an enter up to four), so the budget
//     that holds them is the invocation's deadline, which the Lambda
//     runtime puts on the context: every call gives up DefaultDeadlineReserve
//     (500 ms) before it, leaving the handler time to answer 503. A store
//     that is down, throttled or slow therefore costs a request at most
//     4.5 s and always ends in a 503.
//
// The SDK's retry quota is kept (a token bucket of 500 per client, 14 per
// retry, 5 per throttled retry, refunded by successes): when the table is
// down for good an instance stops retrying and answers 503 at once, rather
// than tripling the load on a table that is already failing.
const (
	DefaultMaxAttempts     = 3
	DefaultMaxBackoff      = 200 * time.Millisecond
	DefaultAttemptTimeout  = time.Second
	DefaultDeadlineReserve = 500 * time.Millisecond
	// retryBaseDelay is the first backoff of a non-throttling error
	// (DynamoDB's own default); throttling errors start from 1 s, which
	// DefaultMaxBackoff caps. Each delay is drawn uniformly below its cap.
	retryBaseDelay = 25 * time.Millisecond
)

// ClientOptions configures NewClientWithOptions. Zero fields take the
// defaults above.
type ClientOptions struct {
	// Endpoint, if set, points the client at a DynamoDB-compatible server
	// instead of AWS (see NewClient).
	Endpoint string
	// Transport, if set, carries the HTTP requests instead of the SDK's
	// default transport: tests put internal/testing/faultinject here.
	Transport http.RoundTripper
	// MaxAttempts is how many times one call is tried.
	MaxAttempts int
	// MaxBackoff caps the delay between two attempts.
	MaxBackoff time.Duration
	// AttemptTimeout bounds one attempt, from dialling to reading the
	// answer's last byte.
	AttemptTimeout time.Duration
	// DeadlineReserve: a call whose context has a deadline gives up this
	// long before it (at most a quarter of the time left), so that the
	// caller still has time to answer.
	DeadlineReserve time.Duration
}

func (o ClientOptions) withDefaults() ClientOptions {
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = DefaultAttemptTimeout
	}
	if o.DeadlineReserve <= 0 {
		o.DeadlineReserve = DefaultDeadlineReserve
	}
	return o
}

// MaxCallDuration is the longest one call of a client with these options
// can take when its context has no deadline: every attempt timing out, with
// the longest backoff between them.
func (o ClientOptions) MaxCallDuration() time.Duration {
	o = o.withDefaults()
	return time.Duration(o.MaxAttempts)*o.AttemptTimeout + time.Duration(o.MaxAttempts-1)*o.MaxBackoff
}

// NewClient returns a DynamoDB client configured from the environment (the
// Lambda role, AWS_REGION, ...) with the default time budget above. Build it
// once per cold start and share it.
//
// A non-empty endpoint (e.g. "http://127.0.0.1:8000") points the client at
// a DynamoDB-compatible server instead of AWS; then, for lack of anything
// better in the environment, the region defaults to us-east-1 and the
// credentials to static dummy ones, which local servers accept.
func NewClient(ctx context.Context, endpoint string) (*dynamodb.Client, error) {
	return NewClientWithOptions(ctx, ClientOptions{Endpoint: endpoint})
}

// NewClientWithOptions is NewClient with the retry policy, the timeouts and
// the transport chosen by o.
func NewClientWithOptions(ctx context.Context, o ClientOptions) (*dynamodb.Client, error) {
	o = o.withDefaults()
	opts := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(so *retry.StandardOptions) {
				so.MaxAttempts = o.MaxAttempts
				so.MaxBackoff = o.MaxBackoff
				so.BaseDelay = retryBaseDelay
			})
		}),
	}
	if o.Transport == nil {
		// The SDK's own transport (dial and TLS timeouts tuned per
		// service, AWS_CA_BUNDLE applied), with the per-attempt timeout on
		// top.
		opts = append(opts, config.WithHTTPClient(awshttp.NewBuildableClient().WithTimeout(o.AttemptTimeout)))
	}
	cfg, err := awsconfig.Load(ctx, o.Endpoint, opts...)
	if err != nil {
		return nil, fmt.Errorf("dynamostore: %w", err)
	}
	return dynamodb.NewFromConfig(cfg, func(do *dynamodb.Options) {
		if o.Endpoint != "" {
			do.BaseEndpoint = aws.String(o.Endpoint)
		}
		if o.Transport != nil {
			do.HTTPClient = &http.Client{Transport: o.Transport, Timeout: o.AttemptTimeout}
		}
		do.APIOptions = append(do.APIOptions, awsconfig.ReserveBeforeDeadline(o.DeadlineReserve))
	}), nil
}

// IssueAttemptTimeout bounds the one attempt of a write that must not be
// repeated (a ticket), or the client's AttemptTimeout if that is longer:
// as long as a Lambda invocation may last, so that in practice the call's
// deadline (the invocation's, less the reserve) bounds it.
const IssueAttemptTimeout = 5 * time.Second

// notRepeated makes a call that is not idempotent (taking a ticket) never
// retry an attempt that timed out: under a stalled store every timed-out
// attempt is applied once the store wakes up, so three attempts would take
// three tickets for one person. Its one attempt may instead last up to
// IssueAttemptTimeout, which rides out a stall of a few seconds; other
// faults are retried as usual.
func notRepeated(o *dynamodb.Options) {
	o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
		so.MaxAttempts = DefaultMaxAttempts
		so.MaxBackoff = DefaultMaxBackoff
		so.BaseDelay = retryBaseDelay
		so.Retryables = append([]retry.IsErrorRetryable{retry.IsErrorRetryableFunc(timedOut)}, retry.DefaultRetryables...)
	})
	switch c := o.HTTPClient.(type) {
	case *awshttp.BuildableClient:
		o.HTTPClient = c.WithTimeout(max(IssueAttemptTimeout, c.GetTimeout()))
	case *http.Client:
		longer := *c
		longer.Timeout = max(IssueAttemptTimeout, c.Timeout)
		o.HTTPClient = &longer
	}
}

// timedOut marks an attempt that timed out as not retryable.
func timedOut(err error) aws.Ternary {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		return aws.FalseTernary
	}
	return aws.UnknownTernary
}

// attempts records whether an attempt of one call failed in a way that may
// have been applied: no answer (a dropped connection, a timeout) or a 5xx.
// A 4xx, throttling included, was refused.
type attempts struct{ retried atomic.Bool }

// record is the call option that makes the call's retryer tell a.
func (a *attempts) record(o *dynamodb.Options) {
	if r, ok := o.Retryer.(aws.RetryerV2); ok {
		o.Retryer = recordingRetryer{r, a}
	} else {
		a.retried.Store(true) // nothing to tell by: assume the worst
	}
}

type recordingRetryer struct {
	aws.RetryerV2
	a *attempts
}

func (r recordingRetryer) IsErrorRetryable(err error) bool {
	retry := r.RetryerV2.IsErrorRetryable(err)
	var re *awshttp.ResponseError
	if retry && !(errors.As(err, &re) && re.HTTPStatusCode() > 0 && re.HTTPStatusCode() < 500) {
		r.a.retried.Store(true)
	}
	return retry
}
