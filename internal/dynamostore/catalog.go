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

	"github.com/example/waitingroom/internal/queue"
)

// The catalog's items: the list of programs (one partition, a sort key per
// program id), a deleted program's tombstone (beside its item) and its
// changes (a partition of their own, away from the hot program item).
const (
	listPK       = "PROGRAMS"
	deletedSK    = "DELETED"
	changePrefix = "CHANGE#"
	// changeMsWidth zero-pads a change's instant so that sort keys order
	// as the instants do.
	changeMsWidth = 15
)

func listKey(id string) map[string]types.AttributeValue {
	return capKey(listPK, id)
}

func tombstoneKey(id string) map[string]types.AttributeValue {
	return capKey("PROGRAM#"+id, deletedSK)
}

func changesPK(programID string) string { return "CHANGES#" + programID }

// changeSK is the sort key of the change at at with id.
func changeSK(at time.Time, id string) string {
	return fmt.Sprintf("%s%0*d#%s", changePrefix, changeMsWidth, queue.UnixMs(at), id)
}

// changeItem is a change's item.
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

// tombstoneItem is a deleted program's tombstone.
type tombstoneItem struct {
	UntilMs int64 `dynamodbav:"untilMs"`
}

// IndexProgram implements queue.CatalogStore.
func (s *Store) IndexProgram(ctx context.Context, id string) error {
	item := listKey(id)
	item["programId"] = &types.AttributeValueMemberS{Value: id}
	if _, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: item}); err != nil {
		return fmt.Errorf("dynamostore: list program %s: %w", id, throttled(err))
	}
	return nil
}

// ListPrograms implements queue.CatalogStore with one strongly consistent
// query of the list's partition.
func (s *Store) ListPrograms(ctx context.Context, after string, limit int) ([]string, bool, error) {
	key := expression.Key("pk").Equal(expression.Value(listPK))
	if after != "" {
		key = key.And(expression.Key("sk").GreaterThan(expression.Value(after)))
	}
	items, err := s.query(ctx, key, true, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("dynamostore: list programs: %w", err)
	}
	ids := make([]string, 0, len(items))
	for _, it := range items {
		if sk, ok := it["sk"].(*types.AttributeValueMemberS); ok {
			ids = append(ids, sk.Value)
		}
	}
	if len(ids) > limit {
		return ids[:limit], true, nil
	}
	return ids, false, nil
}

// query runs a strongly consistent query of up to limit items, in sort
// key order or its reverse.
func (s *Store) query(ctx context.Context, key expression.KeyConditionBuilder, forward bool, limit int) ([]map[string]types.AttributeValue, error) {
	expr, err := expression.NewBuilder().WithKeyCondition(key).Build()
	if err != nil {
		return nil, err
	}
	var items []map[string]types.AttributeValue
	p := dynamodb.NewQueryPaginator(s.client, &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ConsistentRead:            aws.Bool(true),
		ScanIndexForward:          aws.Bool(forward),
		Limit:                     aws.Int32(int32(limit)),
	})
	for p.HasMorePages() && len(items) < limit {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, throttled(err)
		}
		items = append(items, out.Items...)
	}
	return items[:min(len(items), limit)], nil
}

// deletedUntil is when program id's tombstone frees the id; zero if none.
func (s *Store) deletedUntil(ctx context.Context, id string) (time.Time, error) {
	item, err := s.getItem(ctx, tombstoneKey(id))
	if err != nil || item == nil {
		return time.Time{}, err
	}
	var t tombstoneItem
	if err := attributevalue.UnmarshalMap(item, &t); err != nil {
		return time.Time{}, err
	}
	return queue.FromUnixMs(t.UntilMs), nil
}

// DeleteProgram implements queue.CatalogStore. The tombstone is written
// first, so that no creation slips in between; a program found changed
// takes it back.
func (s *Store) DeleteProgram(ctx context.Context, p queue.Program, until time.Time) error {
	tomb := tombstoneKey(p.ID)
	tomb["untilMs"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(queue.UnixMs(until), 10)}
	tomb["ttl"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(ttlSeconds(until), 10)}
	if _, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: tomb}); err != nil {
		return fmt.Errorf("dynamostore: delete program %s: %w", p.ID, throttled(err))
	}
	cond := nameOf("version").Equal(expression.Value(p.Version))
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return fmt.Errorf("dynamostore: delete program %s: %w", p.ID, err)
	}
	_, err = s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                           &s.table,
		Key:                                 programKey(p.ID),
		ConditionExpression:                 expr.Condition(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if old, failed := conditionFailed(err); failed {
		if old, err = s.failedOn(ctx, programKey(p.ID), old); err != nil {
			return fmt.Errorf("dynamostore: delete program %s: %w", p.ID, throttled(err))
		}
		if old != nil { // changed since it was read: not deleted
			return s.takeBackTombstone(ctx, p.ID, until)
		}
		// Gone: deleted by this call's earlier attempt, or by another.
	} else if err != nil {
		return fmt.Errorf("dynamostore: delete program %s: %w", p.ID, throttled(err))
	}
	keys := []map[string]types.AttributeValue{listKey(p.ID)}
	for i := range p.Shards {
		keys = append(keys, shardKey(p.ID, i))
	}
	for _, k := range keys {
		if _, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.table, Key: k}); err != nil {
			return fmt.Errorf("dynamostore: delete program %s: %w", p.ID, throttled(err))
		}
	}
	return nil
}

// takeBackTombstone deletes the tombstone of program id that a deletion
// until until wrote, unless another deletion has written its own since,
// and answers queue.ErrConflict: the program was not deleted.
func (s *Store) takeBackTombstone(ctx context.Context, id string, until time.Time) error {
	expr, err := expression.NewBuilder().WithCondition(expression.Name("untilMs").Equal(expression.Value(queue.UnixMs(until)))).Build()
	if err == nil {
		_, err = s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: &s.table, Key: tombstoneKey(id), ConditionExpression: expr.Condition(),
			ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		})
	}
	if _, failed := conditionFailed(err); err != nil && !failed {
		return fmt.Errorf("dynamostore: delete program %s: take back its tombstone: %w", id, throttled(err))
	}
	return queue.ErrConflict
}

// PutChange implements queue.CatalogStore.
func (s *Store) PutChange(ctx context.Context, programID string, c queue.Change) error {
	it := changeItem{
		PK: changesPK(programID), SK: changeSK(c.At, c.ID), ID: c.ID, AtMs: queue.UnixMs(c.At),
		Actor: c.Actor, Action: c.Action, Fields: string(c.Fields), Version: c.Version, Committed: c.Committed,
		TTL: ttlSeconds(c.At.Add(queue.ChangeRetention)),
	}
	if !c.EffectiveAt.IsZero() {
		it.EffectiveMs = queue.UnixMs(c.EffectiveAt)
	}
	av, err := attributevalue.MarshalMap(it)
	if err == nil {
		_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: av})
	}
	if err != nil {
		return fmt.Errorf("dynamostore: put change %s: %w", programID, throttled(err))
	}
	return nil
}

// CommitChange implements queue.CatalogStore.
func (s *Store) CommitChange(ctx context.Context, programID string, at time.Time, id string) error {
	key := capKey(changesPK(programID), changeSK(at, id))
	_, err := s.update(ctx, key, expression.AttributeExists(expression.Name("pk")),
		expression.Set(expression.Name("committed"), expression.Value(true)), types.ReturnValueNone)
	if err != nil {
		return fmt.Errorf("dynamostore: commit change %s: %w", programID, err)
	}
	return nil
}

// Changes implements queue.CatalogStore with one strongly consistent
// query of the program's partition, newest first.
func (s *Store) Changes(ctx context.Context, programID string, from queue.ChangeKey, limit int) ([]queue.Change, bool, error) {
	pk := expression.Key("pk").Equal(expression.Value(changesPK(programID)))
	key := pk.And(expression.Key("sk").BeginsWith(changePrefix))
	if from != (queue.ChangeKey{}) {
		// BETWEEN includes from's own item: it is dropped below.
		key = pk.And(expression.Key("sk").Between(expression.Value(changePrefix), expression.Value(changeSK(from.At, from.ID))))
	}
	items, err := s.query(ctx, key, false, limit+2)
	if err != nil {
		return nil, false, fmt.Errorf("dynamostore: changes %s: %w", programID, err)
	}
	var out []queue.Change
	for _, av := range items {
		var it changeItem
		if err := attributevalue.UnmarshalMap(av, &it); err != nil {
			return nil, false, fmt.Errorf("dynamostore: changes %s: %w", programID, err)
		}
		c := changeOf(it)
		if c.Key() == from {
			continue
		}
		out = append(out, c)
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// changeOf is the change an item holds.
func changeOf(it changeItem) queue.Change {
	c := queue.Change{ID: it.ID, At: queue.FromUnixMs(it.AtMs), Actor: it.Actor, Action: it.Action, Fields: json.RawMessage(it.Fields), Version: it.Version, Committed: it.Committed}
	if it.EffectiveMs != 0 {
		c.EffectiveAt = queue.FromUnixMs(it.EffectiveMs)
	}
	return c
}

// errDeletedIfTombstoned is queue.ErrDeleted if program p.ID has a tombstone
// that still takes its id at p.CreatedAt, else nil.
func (s *Store) errDeletedIfTombstoned(ctx context.Context, p queue.Program) error {
	until, err := s.deletedUntil(ctx, p.ID)
	switch {
	case err != nil:
		return throttled(err)
	case !p.CreatedAt.Before(until):
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
