package localdynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// ErrNoTTL means the table was created but the DynamoDB API has no TTL
// operations (dynalite): ended tokens will not be removed by themselves.
var ErrNoTTL = errors.New("localdynamo: the DynamoDB API does not support TTL")

// noTTL wraps err in ErrNoTTL if the server does not know the operation.
func noTTL(err error) error {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode() == "UnknownOperationException" {
		return fmt.Errorf("%w: %w", ErrNoTTL, err)
	}
	return err
}

// CreateTable creates table with the key schema dynamostore.Store expects
// (pk and sk, strings), on-demand billing, waits until it is ACTIVE and
// enables TTL on ttl. It is idempotent: a table or a TTL setting already
// there is fine. On a server without TTL the table is made and the error is
// ErrNoTTL. Production's table comes from template.yaml instead.
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
		return fmt.Errorf("localdynamo: create table %s: %w", table, err)
	}
	// The waiter's default first delay is 20 s; a new on-demand table is
	// usually ACTIVE within a few seconds.
	waiter := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 250 * time.Millisecond
		o.MaxDelay = 5 * time.Second
	})
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: &table}, 5*time.Minute); err != nil {
		return fmt.Errorf("localdynamo: wait for table %s: %w", table, err)
	}
	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &table})
	if err != nil {
		return fmt.Errorf("localdynamo: describe TTL of %s: %w", table, noTTL(err))
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
		return fmt.Errorf("localdynamo: enable TTL on %s: %w", table, noTTL(err))
	}
	return nil
}
