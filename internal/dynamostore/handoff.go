package dynamostore

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/queue"
)

var _ queue.HandoffStore = (*Store)(nil)

// handoffItem is a handoff code's item (HANDOFF#<hash of the code>).
type handoffItem struct {
	PK        string `dynamodbav:"pk"`
	SK        string `dynamodbav:"sk"`
	ProgramID string `dynamodbav:"programId"`
	TokenID   string `dynamodbav:"tokenId"`
	ExpiresMs int64  `dynamodbav:"expiresMs"`
	TTL       int64  `dynamodbav:"ttl"`
}

func handoffKey(hash string) map[string]types.AttributeValue {
	return itemKey("HANDOFF#"+hash, "HANDOFF")
}

// PutHandoff implements queue.HandoffStore: a PutItem of the handoff (on
// none, or its own retry), then an UpdateItem of the pending token made no
// code after notBefore.
func (s *Store) PutHandoff(ctx context.Context, h queue.Handoff, t queue.Token, notBefore time.Time) error {
	av, err := attributevalue.MarshalMap(handoffItem{PK: "HANDOFF#" + h.Hash, SK: "HANDOFF", ProgramID: h.ProgramID, TokenID: h.TokenID,
		ExpiresMs: pace.UnixMs(h.ExpiresAt), TTL: ttlSeconds(h.ExpiresAt)})
	if err == nil {
		err = s.putItem(ctx, av, expression.AttributeNotExists(expression.Name("pk")).Or(expression.Name("tokenId").Equal(expression.Value(h.TokenID))))
	}
	if err != nil {
		if _, failed := conditionFailed(err); failed {
			return queue.ErrConflict // a code drawn twice: 2^-80
		}
		return opErr(throttled(err), "put handoff")
	}
	handoffMs := expression.Name("handoffMs")
	cond := all(waiting(), expression.Or(expression.AttributeNotExists(handoffMs), handoffMs.LessThanEqual(expression.Value(pace.UnixMs(notBefore)))))
	upd := expression.Set(expression.Name("handoff"), expression.Value(t.Handoff)).Set(handoffMs, expression.Value(pace.UnixMs(t.HandoffAt)))
	_, err = s.updateItem(ctx, tokenKey(t.ID), cond, upd, types.ReturnValueNone)
	if _, failed := conditionFailed(err); failed {
		return queue.ErrConflict
	}
	return opErr(throttled(err), "record handoff")
}

// GetHandoff implements queue.HandoffStore with a strongly consistent read.
func (s *Store) GetHandoff(ctx context.Context, hash string) (queue.Handoff, error) {
	item, err := s.getItem(ctx, handoffKey(hash))
	if err == nil && item == nil {
		return queue.Handoff{}, queue.ErrNotFound
	}
	if err != nil {
		return queue.Handoff{}, opErr(err, "get handoff")
	}
	it, err := unmarshal[handoffItem](item)
	if err != nil {
		return queue.Handoff{}, opErr(err, "get handoff")
	}
	return queue.Handoff{Hash: hash, ProgramID: it.ProgramID, TokenID: it.TokenID, ExpiresAt: pace.FromUnixMs(it.ExpiresMs)}, nil
}

// MoveToken implements queue.HandoffStore: one UpdateItem of the pending
// token holding the handoff, which ends its push listing.
func (s *Store) MoveToken(ctx context.Context, t queue.Token) (queue.Token, error) {
	cond := all(waiting(), expression.Name("handoff").Equal(expression.Value(t.Handoff)))
	upd := expression.Set(expression.Name("movedTo"), expression.Value(t.MovedTo)).Set(expression.Name("movedMs"), expression.Value(pace.UnixMs(t.MovedAt))).
		Remove(pushListName).Remove(pushTicketName)
	out, err := s.updateItem(ctx, tokenKey(t.ID), cond, upd, types.ReturnValueAllNew)
	if err == nil {
		return decoded("move token", DecodeToken, out.Attributes, nil)
	}
	return s.tokenFailedOn(ctx, "move token", t.ID, err)
}
