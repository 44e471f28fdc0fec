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

const tokenSK = "TOKEN"

// tokenItem is a token item (TOKEN#<tokenId>); a claim has no ticket.
type tokenItem struct {
	PK                 string `dynamodbav:"pk"`
	SK                 string `dynamodbav:"sk"`
	TokenID            string `dynamodbav:"tokenId"`
	ProgramID          string `dynamodbav:"programId"`
	Ticket             int64  `dynamodbav:"ticket,omitempty"` // absent in a claim
	IssuedAt           int64  `dynamodbav:"issuedAt,omitempty"`
	AdmittedAt         int64  `dynamodbav:"admittedAt,omitempty"`
	AdmissionExpiresAt int64  `dynamodbav:"admissionExpiresAt,omitempty"`
	LeftAt             int64  `dynamodbav:"leftAt,omitempty"`
	RevokedAt          int64  `dynamodbav:"revokedAt,omitempty"`
	AdmissionPass      string `dynamodbav:"admissionPass,omitempty"`
	TTL                int64  `dynamodbav:"ttl,omitempty"`
	ClaimID            string `dynamodbav:"claimId,omitempty"`
	ClaimMs            int64  `dynamodbav:"claimMs,omitempty"`
}

func tokenKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "TOKEN#" + id},
		"sk": &types.AttributeValueMemberS{Value: tokenSK},
	}
}

// ttlSeconds is t in Unix seconds rounded up (0 for the zero time), so that
// TTL never deletes an item before t.
func ttlSeconds(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	s := t.Unix()
	if t.After(time.Unix(s, 0)) {
		s++
	}
	return s
}

func fromTTL(s int64) time.Time {
	if s == 0 {
		return time.Time{}
	}
	return time.Unix(s, 0).UTC()
}

func toTokenItem(t queue.Token) tokenItem {
	return tokenItem{
		PK:                 "TOKEN#" + t.ID,
		SK:                 tokenSK,
		TokenID:            t.ID,
		ProgramID:          t.ProgramID,
		Ticket:             t.Ticket,
		IssuedAt:           queue.UnixMs(t.IssuedAt),
		AdmittedAt:         queue.UnixMs(t.AdmittedAt),
		AdmissionExpiresAt: queue.UnixMs(t.AdmissionExpiresAt),
		LeftAt:             queue.UnixMs(t.LeftAt),
		RevokedAt:          queue.UnixMs(t.RevokedAt),
		AdmissionPass:      t.AdmissionPass,
		TTL:                ttlSeconds(t.ExpiresAt),
		ClaimID:            t.Claim,
		ClaimMs:            queue.UnixMs(t.ClaimedAt),
	}
}

func (it tokenItem) token() queue.Token {
	return queue.Token{
		ID:                 it.TokenID,
		ProgramID:          it.ProgramID,
		Ticket:             it.Ticket,
		IssuedAt:           queue.FromUnixMs(it.IssuedAt),
		AdmittedAt:         queue.FromUnixMs(it.AdmittedAt),
		AdmissionExpiresAt: queue.FromUnixMs(it.AdmissionExpiresAt),
		LeftAt:             queue.FromUnixMs(it.LeftAt),
		RevokedAt:          queue.FromUnixMs(it.RevokedAt),
		AdmissionPass:      it.AdmissionPass,
		ExpiresAt:          fromTTL(it.TTL),
		Claim:              it.ClaimID,
		ClaimedAt:          queue.FromUnixMs(it.ClaimMs),
	}
}

func decodeToken(av map[string]types.AttributeValue) (queue.Token, error) {
	var it tokenItem
	if err := attributevalue.UnmarshalMap(av, &it); err != nil {
		return queue.Token{}, err
	}
	return it.token(), nil
}

// PutToken implements queue.Store.
func (s *Store) PutToken(ctx context.Context, t queue.Token) error {
	av, err := attributevalue.MarshalMap(toTokenItem(t))
	if err == nil {
		err = s.putNew(ctx, av)
	}
	if err != nil {
		return fmt.Errorf("dynamostore: put token: %w", err)
	}
	return nil
}

// GetToken implements queue.Store with a strongly consistent read, so the
// poll right after an enter finds its token on any instance.
func (s *Store) GetToken(ctx context.Context, id string) (queue.Token, error) {
	item, err := s.getItem(ctx, tokenKey(id))
	if err != nil {
		return queue.Token{}, fmt.Errorf("dynamostore: get token: %w", err)
	}
	if item == nil {
		return queue.Token{}, queue.ErrNotFound
	}
	t, err := decodeToken(item)
	if err != nil {
		return queue.Token{}, fmt.Errorf("dynamostore: get token: %w", err)
	}
	return t, nil
}

// MarkAdmitted implements queue.Store.
func (s *Store) MarkAdmitted(ctx context.Context, t queue.Token) (queue.Token, error) {
	it := toTokenItem(t)
	upd := setOrRemove(expression.UpdateBuilder{}, "admittedAt", it.AdmittedAt)
	upd = setOrRemove(upd, "admissionExpiresAt", it.AdmissionExpiresAt)
	if it.AdmissionPass != "" {
		upd = upd.Set(expression.Name("admissionPass"), expression.Value(it.AdmissionPass))
	}
	upd = setOrRemove(upd, "ttl", it.TTL)
	return s.mark(ctx, "mark admitted", t.ID, waiting(), upd)
}

// MarkLeft implements queue.Store.
func (s *Store) MarkLeft(ctx context.Context, t queue.Token) (queue.Token, error) {
	it := toTokenItem(t)
	upd := setOrRemove(expression.UpdateBuilder{}, "leftAt", it.LeftAt)
	upd = setOrRemove(upd, "ttl", it.TTL)
	return s.mark(ctx, "mark left", t.ID, waiting(), upd)
}

// EndAdmission implements queue.Store.
func (s *Store) EndAdmission(ctx context.Context, t queue.Token) (queue.Token, error) {
	it := toTokenItem(t)
	upd := setOrRemove(expression.UpdateBuilder{}, "leftAt", it.LeftAt)
	upd = setOrRemove(upd, "ttl", it.TTL)
	admitted := expression.AttributeExists(expression.Name("pk")).
		And(expression.AttributeExists(expression.Name("admittedAt"))).
		And(expression.AttributeNotExists(expression.Name("leftAt"))).
		And(expression.Name("admissionExpiresAt").GreaterThan(expression.Value(it.LeftAt)))
	return s.mark(ctx, "end admission", t.ID, admitted, upd)
}

// RevokeToken implements queue.Store.
func (s *Store) RevokeToken(ctx context.Context, t queue.Token) (queue.Token, error) {
	it := toTokenItem(t)
	upd := setOrRemove(expression.UpdateBuilder{}, "revokedAt", it.RevokedAt)
	upd = setOrRemove(upd, "ttl", it.TTL)
	live := expression.AttributeExists(expression.Name("ticket")).
		And(expression.AttributeNotExists(expression.Name("revokedAt")))
	got, err := s.mark(ctx, "revoke token", t.ID, live, upd)
	if err == nil && got.Claim != "" {
		return queue.Token{}, queue.ErrNotFound
	}
	return got, err
}

// waiting is the condition of a token neither admitted, left nor revoked.
func waiting() expression.ConditionBuilder {
	return expression.AttributeExists(expression.Name("pk")).
		And(expression.AttributeNotExists(expression.Name("admittedAt"))).
		And(expression.AttributeNotExists(expression.Name("leftAt"))).
		And(expression.AttributeNotExists(expression.Name("revokedAt")))
}

// setOrRemove sets a number attribute, or removes it for 0, keeping "absent
// when zero".
func setOrRemove(upd expression.UpdateBuilder, name string, v int64) expression.UpdateBuilder {
	if v == 0 {
		return upd.Remove(expression.Name(name))
	}
	return upd.Set(expression.Name(name), expression.Value(v))
}

// mark applies upd to a token for which cond holds (the token exists, in
// the state the change is for): the first writer wins, and every caller
// gets the token as stored afterwards.
func (s *Store) mark(ctx context.Context, op, id string, cond expression.ConditionBuilder, upd expression.UpdateBuilder) (queue.Token, error) {
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return queue.Token{}, fmt.Errorf("dynamostore: %s: %w", op, err)
	}
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           &s.table,
		Key:                                 tokenKey(id),
		ConditionExpression:                 expr.Condition(),
		UpdateExpression:                    expr.Update(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var item map[string]types.AttributeValue
	old, failed := conditionFailed(err)
	switch {
	case failed:
		// Past that state: the stored token wins. It can only move on, so
		// reading it after the failure is as good.
		if item, err = s.failedOn(ctx, tokenKey(id), old); err != nil {
			return queue.Token{}, fmt.Errorf("dynamostore: %s: %w", op, err)
		} else if item == nil {
			return queue.Token{}, queue.ErrNotFound
		}
	case err != nil:
		return queue.Token{}, fmt.Errorf("dynamostore: %s: %w", op, err)
	default:
		item = out.Attributes
	}
	t, err := decodeToken(item)
	if err != nil {
		return queue.Token{}, fmt.Errorf("dynamostore: %s: %w", op, err)
	}
	return t, nil
}
