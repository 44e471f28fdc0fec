package dynamostore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/queue"
)

// PushIndex is the table's global secondary index of subscribed tokens:
// hash pushList, range pushTicket, keys only.
const PushIndex = "push"

// PushListShards spreads a program's listing over this many index
// partitions (by ticket), so that subscribed enters are not held to one
// partition's write rate.
const PushListShards = 32

var _ queue.PushStore = (*Store)(nil)

var (
	pushListName, pushTicketName = expression.Name("pushList"), expression.Name("pushTicket")
	pushStageName, pushOwnerName = expression.Name("pushStage"), expression.Name("pushOwner")
	pushToldName                 = expression.Name("pushTold")
)

// pushList is the index partition that lists ticket of programID.
func pushList(programID string, ticket int64) string {
	return fmt.Sprintf("PUSH#%s#%d", programID, ticket%PushListShards)
}

// notTold is the condition that id was not told stage.
func notTold(stage queue.PushStage) expression.ConditionBuilder {
	return expression.Or(expression.AttributeNotExists(pushToldName), pushToldName.LessThan(expression.Value(int8(stage))))
}

// Subscribe implements queue.PushStore: one UpdateItem on the pending token
// holding t.Ticket, not told its turn, its tries counted afresh.
func (s *Store) Subscribe(ctx context.Context, t queue.Token, sub queue.Subscription) (queue.Token, error) {
	t.Push = sub
	item, err := attributevalue.MarshalMap(toTokenItem(t))
	if err != nil {
		return queue.Token{}, opErr(err, "subscribe")
	}
	cond := all(expression.Name("ticket").Equal(expression.Value(t.Ticket)), waiting(), notTold(queue.PushTurn))
	upd := setOrRemove(expression.UpdateBuilder{}, item, "pushEndpoint", "pushP256dh", "pushAuth")
	upd = upd.Set(pushListName, expression.Value(pushList(t.ProgramID, t.Ticket))).Set(pushTicketName, expression.Value(t.Ticket)).
		Remove(expression.Name(triesAttr(queue.PushReady))).Remove(expression.Name(triesAttr(queue.PushTurn))) // a new endpoint, new tries
	out, err := s.updateItem(ctx, tokenKey(t.ID), cond, upd, types.ReturnValueAllNew)
	if err == nil {
		return decoded("subscribe", DecodeToken, out.Attributes, nil)
	}
	return s.tokenFailedOn(ctx, "subscribe", t.ID, err)
}

// Unsubscribe implements queue.PushStore: one UpdateItem removing the
// subscription and its listing.
func (s *Store) Unsubscribe(ctx context.Context, id, endpoint string) error {
	upd := expression.Remove(expression.Name("pushEndpoint")).Remove(expression.Name("pushP256dh")).
		Remove(expression.Name("pushAuth")).Remove(pushListName).Remove(pushTicketName)
	cond := expression.AttributeExists(expression.Name("pk"))
	if endpoint != "" {
		cond = cond.And(expression.Name("pushEndpoint").Equal(expression.Value(endpoint)))
	}
	_, err := s.updateItem(ctx, tokenKey(id), cond, upd, types.ReturnValueNone)
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

// Subscribed implements queue.PushStore: a query of each of the program's
// PushListShards partitions of PushIndex, 8 at a time, merged by ticket;
// with a limit, each reads twice its share, so the merged prefix holds
// about 2 × limit when tickets spread evenly over the shards.
func (s *Store) Subscribed(ctx context.Context, programID string, after, through int64, limit int) ([]queue.PushEntry, bool, error) {
	if through <= after {
		return nil, true, nil
	}
	per := 0 // all
	if limit > 0 {
		per = 2*limit/PushListShards + 1
	}
	shards := make([][]pushEntry, PushListShards)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for k := range shards {
		g.Go(func() (err error) {
			key := expression.Key("pushList").Equal(expression.Value(pushList(programID, int64(k)))).
				And(expression.Key("pushTicket").Between(expression.Value(after+1), expression.Value(through)))
			shards[k], err = queryOn[pushEntry](gctx, s, PushIndex, key, true, per)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, false, opErr(err, "list subscriptions of %s", programID)
	}
	// A shard cut at its limit lists everything up to its last ticket only.
	cut, complete := through, true
	var out []queue.PushEntry
	for _, items := range shards {
		if per > 0 && len(items) == per {
			cut, complete = min(cut, items[len(items)-1].Ticket), false
		}
		for _, it := range items {
			out = append(out, queue.PushEntry{TokenID: strings.TrimPrefix(it.PK, "TOKEN#"), Ticket: it.Ticket})
		}
	}
	out = slices.DeleteFunc(out, func(e queue.PushEntry) bool { return e.Ticket > cut })
	slices.SortFunc(out, func(a, b queue.PushEntry) int { return cmp.Compare(a.Ticket, b.Ticket) })
	return out, complete, nil
}

// ClaimPush implements queue.PushStore: one UpdateItem on a pending,
// subscribed token not told stage, whose claims of it are fewer than
// queue.MaxPushTries and none another owner's since staleBefore.
func (s *Store) ClaimPush(ctx context.Context, id string, stage queue.PushStage, owner string, at, staleBefore time.Time) (queue.Token, error) {
	st, tries := expression.Value(int8(stage)), expression.Name(triesAttr(stage))
	free := expression.Or(expression.AttributeNotExists(pushStageName), pushStageName.LessThan(st),
		pushStageName.Equal(st).And(expression.Or(pushOwnerName.Equal(expression.Value(owner)),
			expression.Name("pushedMs").LessThan(expression.Value(pace.UnixMs(staleBefore))))))
	cond := all(waiting(), expression.AttributeExists(expression.Name("pushEndpoint")), notTold(stage), free,
		expression.Or(expression.AttributeNotExists(tries), tries.LessThan(expression.Value(queue.MaxPushTries))))
	upd := expression.Set(pushStageName, st).Set(pushOwnerName, expression.Value(owner)).
		Set(expression.Name("pushedMs"), expression.Value(pace.UnixMs(at))).
		Set(tries, expression.Plus(expression.IfNotExists(tries, expression.Value(0)), expression.Value(1)))
	out, err := s.updateItem(ctx, tokenKey(id), cond, upd, types.ReturnValueAllNew)
	if err == nil {
		return decoded("claim push", DecodeToken, out.Attributes, nil)
	}
	return s.tokenFailedOn(ctx, "claim push", id, err)
}

// PushTold implements queue.PushStore: one UpdateItem on owner's claim.
func (s *Store) PushTold(ctx context.Context, id string, stage queue.PushStage, owner string) error {
	st := expression.Value(int8(stage))
	upd := expression.Set(pushToldName, st)
	if stage == queue.PushTurn {
		upd = upd.Remove(pushListName).Remove(pushTicketName)
	}
	_, err := s.updateItem(ctx, tokenKey(id), pushOwnerName.Equal(expression.Value(owner)).And(pushStageName.Equal(st)), upd, types.ReturnValueNone)
	if _, failed := conditionFailed(err); failed {
		return nil
	}
	return opErr(throttled(err), "push told")
}

// triesAttr names the attribute counting the claims of stage.
func triesAttr(stage queue.PushStage) string { return fmt.Sprintf("pushTries%d", stage) }

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
