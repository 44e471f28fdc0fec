package dynamostore

import (
	"context"
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

// The ticket shards of a program: one item each, SHARD#<programId>#<i>,
// each in its own partition. See the README, "Data model (DynamoDB)".

const shardSK = "SHARD"

// shardItem is a shard item; absent attributes are zero.
type shardItem struct {
	PK           string `dynamodbav:"pk"`
	SK           string `dynamodbav:"sk"`
	ProgramID    string `dynamodbav:"programId"`
	Shard        int    `dynamodbav:"shard"`
	Start        int64  `dynamodbav:"start"`
	Next         int64  `dynamodbav:"next"`
	End          int64  `dynamodbav:"end"`
	ReservedAtMs int64  `dynamodbav:"reservedAtMs"`
	Takes        int64  `dynamodbav:"takes"`
	ClaimID      string `dynamodbav:"claimId"`
	ClaimMs      int64  `dynamodbav:"claimMs"`
}

func (it shardItem) shard() queue.Shard {
	return queue.Shard{
		Start: it.Start, Next: it.Next, End: it.End,
		ReservedAt: fromUnixMs(it.ReservedAtMs), Takes: it.Takes,
		Claim: it.ClaimID, ClaimedAt: fromUnixMs(it.ClaimMs),
	}
}

func shardKey(programID string, i int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "SHARD#" + programID + "#" + strconv.Itoa(i)},
		"sk": &types.AttributeValueMemberS{Value: shardSK},
	}
}

// The shard item's attributes in expressions.
var (
	shNext, shEnd, shStart = expression.Name("next"), expression.Name("end"), expression.Name("start")
	shReserved, shTakes    = expression.Name("reservedAtMs"), expression.Name("takes")
	shClaimID, shClaimMs   = expression.Name("claimId"), expression.Name("claimMs")
)

// shardUpdate runs one conditional UpdateItem on shard i of programID,
// returning the item as ret asks and whether the condition held.
func (s *Store) shardUpdate(ctx context.Context, op, programID string, i int, cond expression.ConditionBuilder, upd expression.UpdateBuilder, ret types.ReturnValue) (map[string]types.AttributeValue, bool, error) {
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return nil, false, fmt.Errorf("dynamostore: %s: %w", op, err)
	}
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       shardKey(programID, i),
		ConditionExpression:       expr.Condition(),
		UpdateExpression:          expr.Update(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ReturnValues:              ret,
	})
	if _, failed := conditionFailed(err); failed {
		return nil, false, nil
	} else if err != nil {
		return nil, false, fmt.Errorf("dynamostore: %s %s shard %d: %w", op, programID, i, throttled(err))
	}
	return out.Attributes, true, nil
}

// TakeShardTickets implements queue.TicketStore: one conditional
// UpdateItem, SET next = next + m, takes = takes + 1 if the block is fresh
// and not used up (next may pass end: those numbers are nobody's).
func (s *Store) TakeShardTickets(ctx context.Context, programID string, i int, notBefore time.Time, m int64) (queue.Run, bool, error) {
	cond := shNext.LessThanEqual(shEnd).And(shReserved.GreaterThanEqual(expression.Value(notBefore.UnixMilli())))
	upd := expression.Set(shNext, shNext.Plus(expression.Value(m))).Set(shTakes, shTakes.Plus(expression.Value(1)))
	item, ok, err := s.shardUpdate(ctx, "take shard tickets", programID, i, cond, upd, types.ReturnValueAllNew)
	if err != nil || !ok {
		return queue.Run{}, false, err
	}
	var it shardItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return queue.Run{}, false, fmt.Errorf("dynamostore: take shard tickets: %w", err)
	}
	return queue.Run{First: it.Next - m, Last: min(it.Next-1, it.End), ReservedAt: fromUnixMs(it.ReservedAtMs), Block: it.Start, After: it.Next}, true, nil
}

// ClaimShard implements queue.TicketStore: one conditional UpdateItem that
// sets the claim (creating the item if need be) and answers the item as it
// was.
func (s *Store) ClaimShard(ctx context.Context, programID string, i int, claim string, now, notBefore, claimNotBefore time.Time) (queue.Shard, bool, error) {
	unusable := expression.Or(expression.AttributeNotExists(shEnd), shNext.GreaterThan(shEnd), shReserved.LessThan(expression.Value(notBefore.UnixMilli())))
	free := expression.Or(expression.AttributeNotExists(shClaimMs), shClaimMs.LessThan(expression.Value(claimNotBefore.UnixMilli())), shClaimID.Equal(expression.Value(claim)))
	upd := expression.Set(shClaimID, expression.Value(claim)).
		Set(shClaimMs, expression.Value(now.UnixMilli())).
		Set(expression.Name("programId"), expression.Value(programID)).
		Set(expression.Name("shard"), expression.Value(i))
	item, ok, err := s.shardUpdate(ctx, "claim shard", programID, i, unusable.And(free), upd, types.ReturnValueAllOld)
	if err != nil || !ok {
		return queue.Shard{}, false, err
	}
	var it shardItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return queue.Shard{}, false, fmt.Errorf("dynamostore: claim shard: %w", err)
	}
	return it.shard(), true, nil
}

// FillShard implements queue.TicketStore: one UpdateItem conditioned on
// the claim, which it clears (claimMs 0), so that it never applies twice.
func (s *Store) FillShard(ctx context.Context, programID string, i int, claim string, claimedAt time.Time, b queue.Shard) (bool, error) {
	cond := shClaimID.Equal(expression.Value(claim)).And(shClaimMs.Equal(expression.Value(claimedAt.UnixMilli())))
	upd := expression.Set(shStart, expression.Value(b.Start)).
		Set(shNext, expression.Value(b.Next)).
		Set(shEnd, expression.Value(b.End)).
		Set(shReserved, expression.Value(b.ReservedAt.UnixMilli())).
		Set(shTakes, expression.Value(0)).
		Set(shClaimMs, expression.Value(0))
	_, ok, err := s.shardUpdate(ctx, "fill shard", programID, i, cond, upd, types.ReturnValueNone)
	return ok, err
}

// TrimShard implements queue.TicketStore: with back, one conditional
// UpdateItem that takes back's numbers back (SET next = back.First, end =
// back.First - 1 if next is still back.After); without it, or when that
// condition fails, one that ends the block (SET end = next - 1 if next ≤
// end). Each answers the item as it was.
func (s *Store) TrimShard(ctx context.Context, programID string, i int, start int64, reservedAt time.Time, back queue.Run) (queue.Run, bool, error) {
	block := shStart.Equal(expression.Value(start)).And(shReserved.Equal(expression.Value(reservedAt.UnixMilli())))
	if back.First > 0 && back.First <= back.Last {
		cond := block.And(shNext.Equal(expression.Value(back.After)))
		upd := expression.Set(shNext, expression.Value(back.First)).Set(shEnd, expression.Value(back.First-1))
		item, ok, err := s.shardUpdate(ctx, "trim shard", programID, i, cond, upd, types.ReturnValueAllOld)
		if err != nil {
			return queue.Run{}, false, err
		}
		if ok {
			var it shardItem
			if err := attributevalue.UnmarshalMap(item, &it); err != nil {
				return queue.Run{}, false, fmt.Errorf("dynamostore: trim shard: %w", err)
			}
			return queue.Run{First: back.First, Last: it.End, ReservedAt: fromUnixMs(it.ReservedAtMs)}, true, nil
		}
	}
	upd := expression.Set(shEnd, shNext.Minus(expression.Value(1)))
	item, ok, err := s.shardUpdate(ctx, "trim shard", programID, i, block.And(shNext.LessThanEqual(shEnd)), upd, types.ReturnValueAllOld)
	if err != nil || !ok {
		return queue.Run{}, false, err
	}
	var it shardItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return queue.Run{}, false, fmt.Errorf("dynamostore: trim shard: %w", err)
	}
	return queue.Run{First: it.Next, Last: it.End, ReservedAt: fromUnixMs(it.ReservedAtMs)}, true, nil
}

// ReturnTickets implements queue.TicketStore: one UpdateItem of the
// program item conditioned on its version, issued and pre-queue state
// (the version it bumps makes a repeated attempt fail).
func (s *Store) ReturnTickets(ctx context.Context, p queue.Program, from int64) (bool, error) {
	if from < 1 || from > p.Issued {
		return false, nil
	}
	q := p.WithTicketsReturned(from)
	cond := nameOf("version").Equal(expression.Value(p.Version)).And(nameOf("issued").Equal(expression.Value(p.Issued)))
	if p.PrequeueFixed {
		cond = cond.And(nameOf("prequeueFixed").Equal(expression.Value(true)))
	} else {
		cond = cond.And(expression.AttributeNotExists(nameOf("prequeueFixed")))
	}
	upd := expression.Set(nameOf("issued"), expression.Value(q.Issued)).
		Set(nameOf("drainAtNs"), expression.Value(q.DrainAtNs)).
		Set(nameOf("version"), expression.Value(q.Version))
	return s.programUpdate(ctx, "return tickets", p.ID, cond, upd)
}

// programUpdate runs one conditional UpdateItem on the program item,
// answering whether the condition held.
func (s *Store) programUpdate(ctx context.Context, op, programID string, cond expression.ConditionBuilder, upd expression.UpdateBuilder, opts ...func(*dynamodb.Options)) (bool, error) {
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return false, fmt.Errorf("dynamostore: %s: %w", op, err)
	}
	_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       programKey(programID),
		ConditionExpression:       expr.Condition(),
		UpdateExpression:          expr.Update(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}, opts...)
	if _, failed := conditionFailed(err); failed {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("dynamostore: %s %s: %w", op, programID, throttled(err))
	}
	return true, nil
}

// SetShards implements queue.TicketStore: one conditional UpdateItem of the
// program's shards attribute (absent reads as 0).
func (s *Store) SetShards(ctx context.Context, programID string, from, k int) (bool, error) {
	shards := nameOf("shards")
	was := shards.Equal(expression.Value(from))
	if from == 0 {
		was = expression.Or(was, expression.AttributeNotExists(shards))
	}
	return s.programUpdate(ctx, "set shards", programID, expression.AttributeExists(expression.Name("pk")).And(was), expression.Set(shards, expression.Value(k)))
}

// GetShard reads shard i of programID (strongly consistent); the zero
// Shard when it does not exist. For tests and audits.
func (s *Store) GetShard(ctx context.Context, programID string, i int) (queue.Shard, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: shardKey(programID, i), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return queue.Shard{}, fmt.Errorf("dynamostore: get shard: %w", err)
	}
	var it shardItem
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
		return queue.Shard{}, fmt.Errorf("dynamostore: get shard: %w", err)
	}
	return it.shard(), nil
}
