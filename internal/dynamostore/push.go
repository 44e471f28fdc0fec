package dynamostore

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/queue"
)

// PushIndex is the table's global secondary index of subscribed tokens:
// hash pushList, range pushTicket, keys only.
const PushIndex = "push"

var _ queue.PushStore = (*Store)(nil)

var (
	pushListName, pushTicketName = expression.Name("pushList"), expression.Name("pushTicket")
	pushStageName, pushOwnerName = expression.Name("pushStage"), expression.Name("pushOwner")
)

func pushList(programID string) string { return "PUSH#" + programID }

// Subscribe implements queue.PushStore: one UpdateItem on the pending token
// holding t.Ticket.
func (s *Store) Subscribe(ctx context.Context, t queue.Token, sub queue.Subscription) (queue.Token, error) {
	t.Push = sub
	item, err := attributevalue.MarshalMap(toTokenItem(t))
	if err != nil {
		return queue.Token{}, opErr(err, "subscribe")
	}
	cond := all(expression.Name("ticket").Equal(expression.Value(t.Ticket)), waiting(),
		expression.Or(expression.AttributeNotExists(pushStageName), pushStageName.LessThan(expression.Value(int8(queue.PushTurn)))))
	upd := setOrRemove(expression.UpdateBuilder{}, item, "pushEndpoint", "pushP256dh", "pushAuth")
	upd = upd.Set(pushListName, expression.Value(pushList(t.ProgramID))).Set(pushTicketName, expression.Value(t.Ticket))
	out, err := s.updateItem(ctx, tokenKey(t.ID), cond, upd, types.ReturnValueAllNew)
	if err == nil {
		return decoded("subscribe", DecodeToken, out.Attributes, nil)
	}
	return s.tokenFailedOn(ctx, "subscribe", t.ID, err)
}

// Unsubscribe implements queue.PushStore: one UpdateItem removing the
// subscription and its listing.
func (s *Store) Unsubscribe(ctx context.Context, id string) error {
	upd := expression.Remove(expression.Name("pushEndpoint")).Remove(expression.Name("pushP256dh")).
		Remove(expression.Name("pushAuth")).Remove(pushListName).Remove(pushTicketName)
	_, err := s.updateItem(ctx, tokenKey(id), expression.AttributeExists(expression.Name("pk")), upd, types.ReturnValueNone)
	if _, failed := conditionFailed(err); failed {
		return nil
	}
	return opErr(throttled(err), "unsubscribe")
}

// pushEntry is an entry of PushIndex: the keys of the table and the index.
type pushEntry struct {
	PK     string `dynamodbav:"pk"`
	Ticket int64  `dynamodbav:"pushTicket"`
}

// Subscribed implements queue.PushStore: one query of PushIndex (a page
// per 1 MB).
func (s *Store) Subscribed(ctx context.Context, programID string, after, through int64, limit int) ([]queue.PushEntry, error) {
	if through <= after {
		return nil, nil
	}
	key := expression.Key("pushList").Equal(expression.Value(pushList(programID))).
		And(expression.Key("pushTicket").Between(expression.Value(after+1), expression.Value(through)))
	items, err := queryOn[pushEntry](ctx, s, PushIndex, key, true, limit)
	if err != nil {
		return nil, opErr(err, "list subscriptions of %s", programID)
	}
	out := make([]queue.PushEntry, len(items))
	for i, it := range items {
		out[i] = queue.PushEntry{TokenID: strings.TrimPrefix(it.PK, "TOKEN#"), Ticket: it.Ticket}
	}
	return out, nil
}

// ClaimPush implements queue.PushStore: one UpdateItem on a pending,
// subscribed token told less, or this stage by owner.
func (s *Store) ClaimPush(ctx context.Context, id string, stage queue.PushStage, owner string, at time.Time) (queue.Token, error) {
	st := expression.Value(int8(stage))
	cond := all(waiting(), expression.AttributeExists(expression.Name("pushEndpoint")),
		expression.Or(expression.AttributeNotExists(pushStageName), pushStageName.LessThan(st),
			pushStageName.Equal(st).And(pushOwnerName.Equal(expression.Value(owner)))))
	upd := expression.Set(pushStageName, st).Set(pushOwnerName, expression.Value(owner)).
		Set(expression.Name("pushedMs"), expression.Value(pace.UnixMs(at)))
	if stage == queue.PushTurn {
		upd = upd.Remove(pushListName).Remove(pushTicketName)
	}
	out, err := s.updateItem(ctx, tokenKey(id), cond, upd, types.ReturnValueAllNew)
	if err == nil {
		return decoded("claim push", DecodeToken, out.Attributes, nil)
	}
	return s.tokenFailedOn(ctx, "claim push", id, err)
}

// vapidItem is the stack's VAPID key (VAPID, KEY).
type vapidItem struct {
	PK        string `dynamodbav:"pk"`
	SK        string `dynamodbav:"sk"`
	Public    []byte `dynamodbav:"public"`
	Wrapped   []byte `dynamodbav:"wrapped"`
	CreatedMs int64  `dynamodbav:"createdMs"`
}

func vapidKey() map[string]types.AttributeValue { return itemKey("VAPID", "KEY") }

// VAPIDKey implements notify.KeyStore with a strongly consistent read.
func (s *Store) VAPIDKey(ctx context.Context) (admissionpass.StoredKey, error) {
	item, err := s.getItem(ctx, vapidKey())
	if err == nil && item == nil {
		return admissionpass.StoredKey{}, queue.ErrNotFound
	}
	it, err := decoded("get VAPID key", unmarshal[vapidItem], item, err)
	return admissionpass.StoredKey{Public: it.Public, Wrapped: it.Wrapped, Created: pace.FromUnixMs(it.CreatedMs)}, err
}

// PutVAPIDKey implements notify.KeyStore: one PutItem on no item, then the
// read of the item it failed on.
func (s *Store) PutVAPIDKey(ctx context.Context, k admissionpass.StoredKey) (admissionpass.StoredKey, error) {
	av, err := attributevalue.MarshalMap(vapidItem{PK: "VAPID", SK: "KEY", Public: k.Public, Wrapped: k.Wrapped, CreatedMs: pace.UnixMs(k.Created)})
	if err == nil {
		err = s.putNew(ctx, av)
	}
	switch {
	case err == nil:
		k.Created = k.Created.Truncate(time.Millisecond)
		return k, nil
	case errors.Is(err, queue.ErrConflict):
		return s.VAPIDKey(ctx)
	}
	return admissionpass.StoredKey{}, opErr(throttled(err), "put VAPID key")
}
