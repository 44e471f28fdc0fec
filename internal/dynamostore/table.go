package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Retry policy of the clients NewClient builds. Every request of the poll
// path is one or two small reads that DynamoDB answers in milliseconds; a
// client must answer well inside the Lambda timeout and API Gateway's 30 s,
// and a client that is told to retry later is cheaper than one held while
// the SDK backs off for seconds (its default: up to 20 s between attempts).
// So: three attempts, at most 200 ms apart, then the error goes up and the
// service answers 503 with a Retry-After.
const (
	retryMaxAttempts = 3
	retryMaxBackoff  = 200 * time.Millisecond
)

// NewClient returns a DynamoDB client configured from the environment (the
// Lambda role, AWS_REGION, ...) with the retry policy above. Build it once
// per cold start and share it.
//
// A non-empty endpoint (e.g. "http://127.0.0.1:8000") points the client at
// a DynamoDB-compatible server instead of AWS; then, for lack of anything
// better in the environment, the region defaults to us-east-1 and the
// credentials to static dummy ones, which local servers accept.
func NewClient(ctx context.Context, endpoint string) (*dynamodb.Client, error) {
	opts := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = retryMaxAttempts
				o.MaxBackoff = retryMaxBackoff
			})
		}),
	}
	if endpoint != "" && !credentialsInEnv() {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("local", "local", "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("dynamostore: load AWS config: %w", err)
	}
	if endpoint != "" && cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	}), nil
}

// credentialsInEnv reports whether the environment names credentials
// (keys, a profile, a web identity) that a local endpoint should get rather
// than dummy ones. Checking the variables avoids resolving the default
// chain, which outside AWS waits for the instance metadata service to time
// out.
func credentialsInEnv() bool {
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"} {
		if os.Getenv(v) != "" {
			return true
		}
	}
	return false
}

// CreateTable creates table with the key schema the Store expects (pk and
// sk, strings), on-demand billing, waits until it is ACTIVE and enables TTL
// on ttl. It is idempotent: a table or a TTL setting already there is fine.
func CreateTable(ctx context.Context, client *dynamodb.Client, table string) error {
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   &table,
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		},
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("dynamostore: create table %s: %w", table, err)
	}
	// The waiter's default first delay is 20 s; a new on-demand table is
	// usually ACTIVE within a few seconds.
	waiter := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 250 * time.Millisecond
		o.MaxDelay = 5 * time.Second
	})
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: &table}, 5*time.Minute); err != nil {
		return fmt.Errorf("dynamostore: wait for table %s: %w", table, err)
	}
	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &table})
	if err != nil {
		return fmt.Errorf("dynamostore: describe TTL of %s: %w", table, err)
	}
	if d := ttl.TimeToLiveDescription; d != nil && aws.ToString(d.AttributeName) == "ttl" &&
		(d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		return nil
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: &table,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String("ttl"),
			Enabled:       aws.Bool(true),
		},
	})
	if err != nil {
		return fmt.Errorf("dynamostore: enable TTL on %s: %w", table, err)
	}
	return nil
}
