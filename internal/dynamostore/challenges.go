package dynamostore

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/waitingroom/internal/queue"
)

// challengeSK is the sort key of a challenge use item.
const challengeSK = "CHALLENGE"

// UseChallenge implements queue.Store: one conditional PutItem of the item
// CHALLENGE#<key> with its owner and a TTL, on no item or one of the same
// owner (the SDK's retry of an attempt applied whose answer was lost).
func (s *Store) UseChallenge(ctx context.Context, key, owner string, expires time.Time) error {
	cond := expression.AttributeNotExists(expression.Name("pk")).Or(
		expression.Name("owner").Equal(expression.Value(owner)))
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return fmt.Errorf("dynamostore: use challenge: %w", err)
	}
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table,
		Item: map[string]types.AttributeValue{
			"pk":    &types.AttributeValueMemberS{Value: "CHALLENGE#" + key},
			"sk":    &types.AttributeValueMemberS{Value: challengeSK},
			"owner": &types.AttributeValueMemberS{Value: owner},
			"ttl":   &types.AttributeValueMemberN{Value: fmt.Sprint(ttlSeconds(expires))},
		},
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	})
	if _, failed := conditionFailed(err); failed {
		return queue.ErrConflict
	} else if err != nil {
		return fmt.Errorf("dynamostore: use challenge: %w", throttled(err))
	}
	return nil
}
