// Package edgekv reads and writes the CloudFront KeyValueStore the edge gate
// reads its keys and configuration from, through the data-plane API.
package edgekv

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	kvs "github.com/aws/aws-sdk-go-v2/service/cloudfrontkeyvaluestore"
	"github.com/aws/aws-sdk-go-v2/service/cloudfrontkeyvaluestore/types"
	smithyendpoints "github.com/aws/smithy-go/endpoints"

	"github.com/example/waitingroom/internal/awsconfig"
)

// The service's limits (a key of 1 to MaxKeyBytes bytes, a value of at most
// MaxValueBytes) and how many times Put tries a write whose ETag went stale.
const (
	MaxKeyBytes    = 512
	MaxValueBytes  = 1024
	MaxPutAttempts = 5
)

var (
	// ErrNotFound is the error of Get for a key the store does not hold.
	ErrNotFound = errors.New("key not found")
	// ErrLimit is the error of a key or value outside the service's limits, refused before any call.
	ErrLimit = errors.New("outside the KeyValueStore limits")
)

// Store is a KeyValueStore: Get returns ErrNotFound for a missing key.
type Store interface {
	Get(ctx context.Context, key string) (string, error)
	Put(ctx context.Context, key, value string) error
}

// API is the part of the SDK's data-plane client that Client uses.
type API interface {
	DescribeKeyValueStore(context.Context, *kvs.DescribeKeyValueStoreInput, ...func(*kvs.Options)) (*kvs.DescribeKeyValueStoreOutput, error)
	GetKey(context.Context, *kvs.GetKeyInput, ...func(*kvs.Options)) (*kvs.GetKeyOutput, error)
	PutKey(context.Context, *kvs.PutKeyInput, ...func(*kvs.Options)) (*kvs.PutKeyOutput, error)
}

// Client is the Store of one KeyValueStore, named by its ARN.
type Client struct {
	api API
	arn string
}

var _ Store = (*Client)(nil)

// New returns the Store of the KeyValueStore kvsARN, called through api.
func New(api API, kvsARN string) *Client { return &Client{api: api, arn: kvsARN} }

// Get returns the value of key, or ErrNotFound.
func (c *Client) Get(ctx context.Context, key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", fmt.Errorf("edgekv: get %q: %w", key, err)
	}
	out, err := c.api.GetKey(ctx, &kvs.GetKeyInput{KvsARN: &c.arn, Key: &key})
	var nf *types.ResourceNotFoundException
	switch {
	case errors.As(err, &nf):
		return "", fmt.Errorf("edgekv: get %q: %w", key, ErrNotFound)
	case err != nil:
		return "", fmt.Errorf("edgekv: get %q: %w", key, err)
	}
	return aws.ToString(out.Value), nil
}

// ErrStale is the error of PutIf when the store changed since etag.
var ErrStale = errors.New("edgekv: the store changed since it was read")

// ETag returns the store's version: any write changes it.
func (c *Client) ETag(ctx context.Context) (string, error) {
	d, err := c.api.DescribeKeyValueStore(ctx, &kvs.DescribeKeyValueStoreInput{KvsARN: &c.arn})
	if err != nil {
		return "", fmt.Errorf("edgekv: describe: %w", err)
	}
	return aws.ToString(d.ETag), nil
}

// PutIf sets key to value if the store is still at etag, else ErrStale:
// what was computed from reads made after ETag is written only if still true.
func (c *Client) PutIf(ctx context.Context, key, value, etag string) error {
	if err := checkKey(key); err != nil {
		return fmt.Errorf("edgekv: put %q: %w", key, err)
	}
	if len(value) > MaxValueBytes {
		return fmt.Errorf("edgekv: put %q: value of %d bytes: %w", key, len(value), ErrLimit)
	}
	_, err := c.api.PutKey(ctx, &kvs.PutKeyInput{KvsARN: &c.arn, Key: &key, Value: &value, IfMatch: &etag})
	switch {
	case stale(err):
		return fmt.Errorf("edgekv: put %q: %w", key, ErrStale)
	case err != nil:
		return fmt.Errorf("edgekv: put %q: %w", key, err)
	}
	return nil
}

// Put sets key to value under the store's current ETag; when another write
// changed the ETag meanwhile it reads the new one and tries again, MaxPutAttempts times in all.
func (c *Client) Put(ctx context.Context, key, value string) error {
	if err := checkKey(key); err != nil {
		return fmt.Errorf("edgekv: put %q: %w", key, err)
	}
	if len(value) > MaxValueBytes {
		return fmt.Errorf("edgekv: put %q: value of %d bytes: %w", key, len(value), ErrLimit)
	}
	for attempt := 1; ; attempt++ {
		d, err := c.api.DescribeKeyValueStore(ctx, &kvs.DescribeKeyValueStoreInput{KvsARN: &c.arn})
		if err != nil {
			return fmt.Errorf("edgekv: put %q: describe: %w", key, err)
		}
		_, err = c.api.PutKey(ctx, &kvs.PutKeyInput{KvsARN: &c.arn, Key: &key, Value: &value, IfMatch: d.ETag})
		switch {
		case err == nil:
			return nil
		case !stale(err):
			return fmt.Errorf("edgekv: put %q: %w", key, err)
		case attempt == MaxPutAttempts:
			return fmt.Errorf("edgekv: put %q: the ETag changed under each of %d attempts: %w", key, attempt, err)
		}
	}
}

// stale reports whether err refuses a write for an ETag that is no longer the store's.
func stale(err error) bool {
	var ce *types.ConflictException
	var re *awshttp.ResponseError
	return errors.As(err, &ce) || errors.As(err, &re) && re.HTTPStatusCode() == http.StatusPreconditionFailed
}

func checkKey(key string) error {
	if len(key) == 0 || len(key) > MaxKeyBytes {
		return fmt.Errorf("key of %d bytes: %w", len(key), ErrLimit)
	}
	return nil
}

// The SDK client's time budget: at most MaxAttempts attempts of AttemptTimeout,
// MaxBackoff apart, giving up DeadlineReserve before the context's deadline.
const (
	MaxAttempts     = 3
	MaxBackoff      = 200 * time.Millisecond
	AttemptTimeout  = 2 * time.Second
	DeadlineReserve = 500 * time.Millisecond
)

// NewAPI returns the SDK's data-plane client from cfg, signing with SigV4A.
// A non-empty endpoint (the local emulator) is called as given; empty means
// AWS, whatever cfg.BaseEndpoint names for the other local services.
func NewAPI(cfg aws.Config, endpoint string) *kvs.Client {
	return kvs.NewFromConfig(cfg, func(o *kvs.Options) {
		o.BaseEndpoint = nil
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			o.EndpointResolverV2 = verbatim{o.EndpointResolverV2}
		}
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts, so.MaxBackoff = MaxAttempts, MaxBackoff
		})
		if c, ok := o.HTTPClient.(*awshttp.BuildableClient); ok { // the SDK's own, not one of cfg's
			o.HTTPClient = c.WithTimeout(AttemptTimeout)
		}
		o.APIOptions = append(o.APIOptions, awsconfig.ReserveBeforeDeadline(DeadlineReserve))
	})
}

// verbatim calls the base endpoint as given: the service's rules put the
// account ID in front of its host (123456789012.127.0.0.1), which names no local host.
type verbatim struct{ kvs.EndpointResolverV2 }

func (v verbatim) ResolveEndpoint(ctx context.Context, p kvs.EndpointParameters) (smithyendpoints.Endpoint, error) {
	e, err := v.EndpointResolverV2.ResolveEndpoint(ctx, p) // checks the ARN and sets the SigV4A signing properties
	if err != nil || p.Endpoint == nil {
		return e, err
	}
	u, err := url.Parse(*p.Endpoint)
	if err != nil {
		return e, fmt.Errorf("edgekv: endpoint %q: %w", *p.Endpoint, err)
	}
	e.URI = *u
	return e, nil
}
