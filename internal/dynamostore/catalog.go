package dynamostore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/queue"
)

// The catalog's items: the list of programs (one partition), a deleted
// program's tombstone (beside its item) and its changes (their own partition).
const (
	listPK        = "PROGRAMS"
	deletedSK     = "DELETED"
	changePrefix  = "CHANGE#"
	changeMsWidth = 15 // zero-pads a change's instant so that sort keys order as the instants
)

func listKey(id string) map[string]types.AttributeValue { return itemKey(listPK, id) }

func tombstoneKey(id string) map[string]types.AttributeValue {
	return itemKey("PROGRAM#"+id, deletedSK)
}

func changesPK(programID string) string { return "CHANGES#" + programID }

func changeSK(at time.Time, id string) string {
	return fmt.Sprintf("%s%0*d#%s", changePrefix, changeMsWidth, pace.UnixMs(at), id)
}

type changeItem struct {
	PK          string `dynamodbav:"pk"`
	SK          string `dynamodbav:"sk"`
	ID          string `dynamodbav:"changeId"`
	AtMs        int64  `dynamodbav:"atMs"`
	EffectiveMs int64  `dynamodbav:"effectiveAtMs,omitempty"`
	Actor       string `dynamodbav:"actor"`
	Action      string `dynamodbav:"action"`
	Fields      string `dynamodbav:"fields"`
	Version     int64  `dynamodbav:"version,omitempty"`
	Committed   bool   `dynamodbav:"committed"`
	TTL         int64  `dynamodbav:"ttl"`
}

// IndexProgram implements queue.CatalogStore.
func (s *Store) IndexProgram(ctx context.Context, id string) error {
	item := listKey(id)
	item["programId"] = &types.AttributeValueMemberS{Value: id}
	return opErr(throttled(s.putItem(ctx, item, expression.ConditionBuilder{})), "list program %s", id)
}

// ListPrograms implements queue.CatalogStore with one strongly consistent query.
func (s *Store) ListPrograms(ctx context.Context, after string, limit int) ([]string, bool, error) {
	key := expression.Key("pk").Equal(expression.Value(listPK))
	if after != "" {
		key = key.And(expression.Key("sk").GreaterThan(expression.Value(after)))
	}
	items, err := query[struct {
		SK string `dynamodbav:"sk"`
	}](ctx, s, key, true, limit+1)
	if err != nil {
		return nil, false, opErr(err, "list programs")
	}
	ids := make([]string, 0, len(items))
	for _, it := range items {
		ids = append(ids, it.SK)
	}
	if len(ids) > limit {
		return ids[:limit], true, nil
	}
	return ids, false, nil
}

// query decodes a strongly consistent query of up to limit items (0: all), forward or backward.
func query[T any](ctx context.Context, s *Store, key expression.KeyConditionBuilder, forward bool, limit int) ([]T, error) {
	return queryOn[T](ctx, s, "", key, forward, limit)
}

// queryOn is query on index ("": the table, strongly consistent; else
// eventually consistent).
func queryOn[T any](ctx context.Context, s *Store, index string, key expression.KeyConditionBuilder, forward bool, limit int) ([]T, error) {
	expr, err := expression.NewBuilder().WithKeyCondition(key).Build()
	if err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{
		TableName: &s.table, ConsistentRead: aws.Bool(index == ""), ScanIndexForward: aws.Bool(forward),
		KeyConditionExpression: expr.KeyCondition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	}
	if index != "" {
		in.IndexName = aws.String(index)
	}
	if limit > 0 {
		in.Limit = aws.Int32(int32(limit))
	}
	var items []map[string]types.AttributeValue
	for p := dynamodb.NewQueryPaginator(s.client, in); p.HasMorePages() && (limit == 0 || len(items) < limit); {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, throttled(err)
		}
		items = append(items, out.Items...)
	}
	if limit > 0 && len(items) > limit {
		items = items[:limit]
	}
	var all []T
	return all, attributevalue.UnmarshalListOfMaps(items, &all)
}

// DeleteProgram implements queue.CatalogStore: the tombstone first, so that
// no creation slips in, taken back if the program changed.
func (s *Store) DeleteProgram(ctx context.Context, p admission.Program, until time.Time) error {
	tomb := tombstoneKey(p.ID)
	tomb["untilMs"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(pace.UnixMs(until), 10)}
	tomb["ttl"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(ttlSeconds(until), 10)}
	err := s.putItem(ctx, tomb, expression.ConditionBuilder{})
	if err == nil {
		err = s.deleteItem(ctx, programKey(p.ID), nameOf("version").Equal(expression.Value(p.Version)))
	}
	if old, failed := conditionFailed(err); failed {
		if old, err = s.failedOn(ctx, programKey(p.ID), old); err == nil && old != nil {
			return s.takeBackTombstone(ctx, p.ID, until) // changed since it was read: not deleted
		}
		// Else deleted by this call's earlier attempt, or by another.
	}
	if err == nil {
		err = s.deleteItem(ctx, listKey(p.ID), expression.ConditionBuilder{})
	}
	for i := 0; err == nil && i < p.Shards; i++ {
		err = s.deleteItem(ctx, shardKey(p.ID, i), expression.ConditionBuilder{})
	}
	return opErr(throttled(err), "delete program %s", p.ID)
}

// takeBackTombstone deletes the tombstone until until, unless replaced, and answers queue.ErrConflict.
func (s *Store) takeBackTombstone(ctx context.Context, id string, until time.Time) error {
	err := s.deleteItem(ctx, tombstoneKey(id), expression.Name("untilMs").Equal(expression.Value(pace.UnixMs(until))))
	if _, failed := conditionFailed(err); err != nil && !failed {
		return opErr(throttled(err), "delete program %s: take back its tombstone", id)
	}
	return queue.ErrConflict
}

// PutChange implements queue.CatalogStore.
func (s *Store) PutChange(ctx context.Context, programID string, c history.Change) error {
	av, err := attributevalue.MarshalMap(changeItem{
		PK: changesPK(programID), SK: changeSK(c.At, c.ID), ID: c.ID,
		AtMs: pace.UnixMs(c.At), EffectiveMs: pace.UnixMs(c.EffectiveAt), TTL: ttlSeconds(c.At.Add(history.Retention)),
		Actor: c.Actor, Action: c.Action, Fields: string(c.Fields), Version: c.Version, Committed: c.Committed,
	})
	if err == nil {
		err = s.putItem(ctx, av, expression.ConditionBuilder{})
	}
	return opErr(throttled(err), "put change %s", programID)
}

// CommitChange implements queue.CatalogStore.
func (s *Store) CommitChange(ctx context.Context, programID string, at time.Time, id string) error {
	key := itemKey(changesPK(programID), changeSK(at, id))
	_, err := s.update(ctx, key, expression.AttributeExists(expression.Name("pk")),
		expression.Set(expression.Name("committed"), expression.Value(true)), types.ReturnValueNone)
	return opErr(err, "commit change %s", programID)
}

// Changes implements queue.CatalogStore with one strongly consistent query, newest first.
func (s *Store) Changes(ctx context.Context, programID string, from history.Key, limit int) ([]history.Change, bool, error) {
	pk := expression.Key("pk").Equal(expression.Value(changesPK(programID)))
	key := pk.And(expression.Key("sk").BeginsWith(changePrefix))
	if from != (history.Key{}) {
		// BETWEEN includes from's own item: it is dropped below.
		key = pk.And(expression.Key("sk").Between(expression.Value(changePrefix), expression.Value(changeSK(from.At, from.ID))))
	}
	items, err := query[changeItem](ctx, s, key, false, limit+2)
	if err != nil {
		return nil, false, opErr(err, "changes %s", programID)
	}
	var out []history.Change
	for _, it := range items {
		c := history.Change{
			ID: it.ID, At: pace.FromUnixMs(it.AtMs), EffectiveAt: pace.FromUnixMs(it.EffectiveMs),
			Actor: it.Actor, Action: it.Action, Fields: json.RawMessage(it.Fields), Version: it.Version, Committed: it.Committed,
		}
		if c.Key() != from {
			out = append(out, c)
		}
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// errDeletedIfTombstoned is queue.ErrDeleted if a tombstone still holds p.ID at p.CreatedAt.
func (s *Store) errDeletedIfTombstoned(ctx context.Context, p admission.Program) error {
	item, err := s.getItem(ctx, tombstoneKey(p.ID))
	var tomb struct {
		UntilMs int64 `dynamodbav:"untilMs"`
	}
	if err == nil {
		err = attributevalue.UnmarshalMap(item, &tomb) // zero when there is none
	}
	switch {
	case err != nil:
		return throttled(err)
	case !p.CreatedAt.Before(pace.FromUnixMs(tomb.UntilMs)):
		return nil
	}
	// A live program beside a tombstone is one whose deletion failed.
	if item, err := s.getItem(ctx, programKey(p.ID)); err != nil {
		return throttled(err)
	} else if item != nil {
		return queue.ErrConflict
	}
	return queue.ErrDeleted
}
