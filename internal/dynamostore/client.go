package dynamostore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/example/waitingroom/internal/awsconfig"
)

// The client's time budget: at most DefaultMaxAttempts attempts of
// DefaultAttemptTimeout, DefaultMaxBackoff apart, giving up
// DefaultDeadlineReserve before the context's deadline.
const (
	DefaultMaxAttempts     = 3
	DefaultMaxBackoff      = 200 * time.Millisecond
	DefaultAttemptTimeout  = time.Second
	DefaultDeadlineReserve = 500 * time.Millisecond
	retryBaseDelay         = 25 * time.Millisecond // the first backoff of a non-throttling error
)

// ClientOptions configures NewClientWithOptions; zero fields take the defaults above.
type ClientOptions struct {
	Endpoint  string            // a DynamoDB-compatible server instead of AWS
	Transport http.RoundTripper // instead of the SDK's (tests: internal/testing/faultinject)
	// MaxAttempts is how many times one call is tried, at most MaxBackoff
	// apart; AttemptTimeout bounds one attempt, dial to last byte.
	MaxAttempts    int
	MaxBackoff     time.Duration
	AttemptTimeout time.Duration
	// DeadlineReserve: a call gives up this long before its context's
	// deadline (at most a quarter of the time left).
	DeadlineReserve time.Duration
	// Backoff, if set, replaces the SDK's exponential backoff with jitter.
	Backoff retry.BackoffDelayer
}

// NoBackoff retries at once.
var NoBackoff retry.BackoffDelayer = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })

func (o ClientOptions) withDefaults() ClientOptions {
	o.MaxAttempts = cmp.Or(max(o.MaxAttempts, 0), DefaultMaxAttempts)
	o.MaxBackoff = cmp.Or(max(o.MaxBackoff, 0), DefaultMaxBackoff)
	o.AttemptTimeout = cmp.Or(max(o.AttemptTimeout, 0), DefaultAttemptTimeout)
	o.DeadlineReserve = cmp.Or(max(o.DeadlineReserve, 0), DefaultDeadlineReserve)
	return o
}

// NewClient returns a DynamoDB client configured from the environment with
// the default time budget; build it once per cold start. A non-empty
// endpoint points it at a DynamoDB-compatible server (see awsconfig.Load).
func NewClient(ctx context.Context, endpoint string) (*dynamodb.Client, error) {
	return NewClientWithOptions(ctx, ClientOptions{Endpoint: endpoint})
}

// NewClientWithOptions is NewClient with the retry policy, timeouts and transport of o.
func NewClientWithOptions(ctx context.Context, o ClientOptions) (*dynamodb.Client, error) {
	o = o.withDefaults()
	opts := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer {
			return clientRetryer{
				RetryerV2: newRetryer(o.MaxAttempts, o.MaxBackoff, o.Backoff, false),
				issue:     newRetryer(DefaultMaxAttempts, DefaultMaxBackoff, o.Backoff, true),
			}
		}),
	}
	if o.Transport == nil { // the SDK's own, with the per-attempt timeout on top
		opts = append(opts, config.WithHTTPClient(awshttp.NewBuildableClient().WithTimeout(o.AttemptTimeout)))
	}
	cfg, err := awsconfig.Load(ctx, o.Endpoint, opts...)
	if err != nil {
		return nil, fmt.Errorf("dynamostore: %w", err)
	}
	return dynamodb.NewFromConfig(cfg, func(do *dynamodb.Options) {
		if o.Transport != nil {
			do.HTTPClient = &http.Client{Transport: o.Transport, Timeout: o.AttemptTimeout}
		}
		do.APIOptions = append(do.APIOptions, awsconfig.ReserveBeforeDeadline(o.DeadlineReserve))
	}), nil
}

// IssueAttemptTimeout bounds the one attempt of a write that must not be
// repeated (a ticket), or the client's AttemptTimeout if that is longer.
const IssueAttemptTimeout = 5 * time.Second

// clientRetryer is a client's retry policy, with issue for its ticket-taking writes (notRepeated).
type clientRetryer struct {
	aws.RetryerV2
	issue aws.RetryerV2
}

// newRetryer is the SDK's standard retryer; for the ticket-taking writes
// (issue) it never retries a timed-out attempt and has no retry quota.
func newRetryer(attempts int, maxBackoff time.Duration, backoff retry.BackoffDelayer, issue bool) *retry.Standard {
	return retry.NewStandard(func(so *retry.StandardOptions) {
		so.MaxAttempts, so.MaxBackoff, so.BaseDelay = attempts, maxBackoff, retryBaseDelay
		if backoff != nil {
			so.Backoff = backoff
		}
		if issue {
			so.RateLimiter = ratelimit.None
			so.Retryables = append([]retry.IsErrorRetryable{retry.IsErrorRetryableFunc(timedOut)}, retry.DefaultRetryables...)
		}
	})
}

// defaultIssueRetryer is the ticket writes' policy of a client not made by NewClientWithOptions.
var defaultIssueRetryer = newRetryer(DefaultMaxAttempts, DefaultMaxBackoff, nil, true)

// notRepeated is the call option of a write that is not idempotent (taking
// a ticket): the client's issue retryer, and attempts of IssueAttemptTimeout.
func notRepeated(o *dynamodb.Options) {
	if r, ok := o.Retryer.(clientRetryer); ok {
		o.Retryer = r.issue
	} else {
		o.Retryer = defaultIssueRetryer
	}
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
// have been applied: no answer or a 5xx (a 4xx was refused).
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
