// Package dynamoreplay is a passverify.ReplayGuard on DynamoDB for a site
// on many instances: one conditional put per jti, removed by TTL after the
// pass expires.
package dynamoreplay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/waitingroom/passverify"
)

// Defaults of Options.
const (
	DefaultKeyAttribute = "pk"
	DefaultTTLAttribute = "expiresAt"
	DefaultKeyPrefix    = "admission-pass#"
)

// API is the part of the DynamoDB client that Guard uses.
type API interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// Options name the attributes of the guard's items, so that the guard can
// share a table. Zero fields take the defaults.
type Options struct {
	KeyAttribute string // the table's partition key, a string
	TTLAttribute string // the table's TTL attribute (epoch seconds)
	KeyPrefix    string // goes before the jti in the key
}

// Guard records passes in a DynamoDB table. It is safe for concurrent use.
type Guard struct {
	client API
	table  string
	opts   Options
}

var _ passverify.ReplayGuard = (*Guard)(nil)

// New returns a Guard on table, whose string partition key is opts.KeyAttribute.
func New(client API, table string, opts Options) (*Guard, error) {
	opts.KeyAttribute = cmp.Or(opts.KeyAttribute, DefaultKeyAttribute)
	opts.TTLAttribute = cmp.Or(opts.TTLAttribute, DefaultTTLAttribute)
	opts.KeyPrefix = cmp.Or(opts.KeyPrefix, DefaultKeyPrefix)
	return &Guard{client: client, table: table, opts: opts}, nil
}

// FirstUse puts an item for jti, kept until until, unless one exists, and reports whether it did.
func (g *Guard) FirstUse(ctx context.Context, jti string, until time.Time) (bool, error) {
	_, err := g.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(g.table),
		Item: map[string]types.AttributeValue{
			g.opts.KeyAttribute: &types.AttributeValueMemberS{Value: g.opts.KeyPrefix + jti},
			// TTL deletes it days late at worst, which is harmless: an expired pass never gets here.
			g.opts.TTLAttribute: &types.AttributeValueMemberN{Value: strconv.FormatInt(until.Add(time.Second).Unix(), 10)},
		},
		ConditionExpression:      aws.String("attribute_not_exists(#key)"),
		ExpressionAttributeNames: map[string]string{"#key": g.opts.KeyAttribute},
	})
	var failed *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &failed):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("dynamoreplay: put %s: %w", g.table, err)
	}
	return true, nil
}

// CreateTable creates an on-demand table for a Guard with default Options
// (partition key "pk", TTL on "expiresAt") and waits until it is active.
func CreateTable(ctx context.Context, client *dynamodb.Client, table string) error {
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(DefaultKeyAttribute), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(DefaultKeyAttribute), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		return fmt.Errorf("dynamoreplay: create table %s: %w", table, err)
	}
	if err := dynamodb.NewTableExistsWaiter(client).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, time.Minute); err != nil {
		return fmt.Errorf("dynamoreplay: wait for table %s: %w", table, err)
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(DefaultTTLAttribute), Enabled: aws.Bool(true)},
	})
	if err != nil {
		return fmt.Errorf("dynamoreplay: enable TTL on %s: %w", table, err)
	}
	return nil
}
