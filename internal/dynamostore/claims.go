package dynamostore

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/waitingroom/internal/queue"
)

// A claim is a token item with claimId and claimMs and no ticket: an enter
// with an Idempotency-Key holds the id before it takes its ticket
// (queue.Store.ClaimToken). Filling it replaces the whole item by the
// token, which has no claim attributes.

// ClaimToken implements queue.Store: one conditional PutItem, on no item or
// a claim older than staleBefore. An attempt of this call that was applied
// but whose answer was lost fails the retry's condition on its own claim,
// which the caller recognises by its claim id.
func (s *Store) ClaimToken(ctx context.Context, c queue.Token, staleBefore time.Time) (queue.Token, error) {
	cond := expression.AttributeNotExists(expression.Name("pk")).Or(
		expression.AttributeNotExists(expression.Name("ticket")).And(
			expression.Name("claimMs").LessThan(expression.Value(queue.UnixMs(staleBefore)))))
	return s.putTokenIf(ctx, "claim token", c, cond)
}

// FillToken implements queue.Store: one PutItem of the token, conditioned
// on the claim and no ticket. A retried attempt whose first was applied
// finds the token with t's ticket, which is t.
func (s *Store) FillToken(ctx context.Context, t queue.Token, claim string) (queue.Token, error) {
	cond := expression.Name("claimId").Equal(expression.Value(claim)).And(
		expression.AttributeNotExists(expression.Name("ticket")))
	return s.putTokenIf(ctx, "fill token", t, cond)
}

// ReleaseClaim implements queue.Store: SET claimMs = 0 if the item is
// still that claim (an UpdateItem: the queue function may not delete).
func (s *Store) ReleaseClaim(ctx context.Context, id, claim string) error {
	cond := expression.Name("claimId").Equal(expression.Value(claim)).And(
		expression.AttributeNotExists(expression.Name("ticket")))
	expr, err := expression.NewBuilder().WithCondition(cond).
		WithUpdate(expression.Set(expression.Name("claimMs"), expression.Value(0))).Build()
	if err != nil {
		return fmt.Errorf("dynamostore: release claim: %w", err)
	}
	_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       tokenKey(id),
		ConditionExpression:       expr.Condition(),
		UpdateExpression:          expr.Update(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	})
	if _, failed := conditionFailed(err); failed || err == nil {
		return nil
	}
	return fmt.Errorf("dynamostore: release claim: %w", throttled(err))
}

// putTokenIf stores t's item if cond holds and returns what is stored
// afterwards: t, or the item the condition failed on (queue.ErrNotFound if
// it is gone when read).
func (s *Store) putTokenIf(ctx context.Context, op string, t queue.Token, cond expression.ConditionBuilder) (queue.Token, error) {
	av, err := attributevalue.MarshalMap(toTokenItem(t))
	if err != nil {
		return queue.Token{}, fmt.Errorf("dynamostore: %s: %w", op, err)
	}
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return queue.Token{}, fmt.Errorf("dynamostore: %s: %w", op, err)
	}
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           &s.table,
		Item:                                av,
		ConditionExpression:                 expr.Condition(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	old, failed := conditionFailed(err)
	switch {
	case err == nil:
		return t, nil
	case !failed:
		return queue.Token{}, fmt.Errorf("dynamostore: %s: %w", op, throttled(err))
	}
	item, err := s.failedOn(ctx, tokenKey(t.ID), old)
	if err != nil {
		return queue.Token{}, fmt.Errorf("dynamostore: %s: %w", op, err)
	} else if item == nil {
		return queue.Token{}, queue.ErrNotFound
	}
	got, err := decodeToken(item)
	if err != nil {
		return queue.Token{}, fmt.Errorf("dynamostore: %s: %w", op, err)
	}
	return got, nil
}
