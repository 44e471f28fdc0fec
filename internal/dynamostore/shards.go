package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tickets"
)

// shardItem is a shard item as read (but its key, programId and shard); absent attributes are zero.
type shardItem struct {
	Start        int64  `dynamodbav:"start"`
	Next         int64  `dynamodbav:"next"`
	End          int64  `dynamodbav:"end"`
	ReservedAtMs int64  `dynamodbav:"reservedAtMs"`
	Takes        int64  `dynamodbav:"takes"`
	ClaimID      string `dynamodbav:"claimId"`
	ClaimMs      int64  `dynamodbav:"claimMs"`
	// The last take's id and next before it, the last trim's id and end
	// before it: a retry finds its own write by them.
	TakeID   string `dynamodbav:"takeId"`
	TakeFrom int64  `dynamodbav:"takeFrom"`
	TrimID   string `dynamodbav:"trimId"`
	TrimEnd  int64  `dynamodbav:"trimEnd"`
}

func (it shardItem) shard() tickets.Shard {
	return tickets.Shard{
		Start: it.Start, Next: it.Next, End: it.End,
		ReservedAt: pace.FromUnixMs(it.ReservedAtMs), Takes: it.Takes,
		Claim: it.ClaimID, ClaimedAt: pace.FromUnixMs(it.ClaimMs),
	}
}

// isBlock reports whether the item holds the block that starts at start, reserved at reservedAt (in ms).
func (it shardItem) isBlock(start int64, reservedAt time.Time) bool {
	return it.Start == start && it.ReservedAtMs == reservedAt.UnixMilli()
}

func shardKey(programID string, i int) map[string]types.AttributeValue {
	return itemKey("SHARD#"+programID+"#"+strconv.Itoa(i), "SHARD")
}

var (
	shNext, shEnd, shStart = expression.Name("next"), expression.Name("end"), expression.Name("start")
	shReserved, shTakes    = expression.Name("reservedAtMs"), expression.Name("takes")
	shClaimID, shClaimMs   = expression.Name("claimId"), expression.Name("claimMs")
	shTakeID, shTakeFrom   = expression.Name("takeId"), expression.Name("takeFrom")
	shTrimID, shTrimEnd    = expression.Name("trimId"), expression.Name("trimEnd")
)

// errOutcomeUnknown: a retry failed its condition after a lost answer the item no longer shows.
var errOutcomeUnknown = errors.New("an earlier attempt may have been applied: outcome unknown")

// notMine: the item does not carry id under name.
func notMine(name expression.NameBuilder, id string) expression.ConditionBuilder {
	return expression.Or(expression.AttributeNotExists(name), name.NotEqual(expression.Value(id)))
}

// shardUpdate runs one UpdateItem on shard i and decodes the item it answers or failed on.
func (s *Store) shardUpdate(ctx context.Context, op, programID string, i int, cond expression.ConditionBuilder, upd expression.UpdateBuilder, ret types.ReturnValue) (shardItem, written, error) {
	w, err := s.update(ctx, shardKey(programID, i), cond, upd, ret)
	item := w.item
	if !w.ok {
		item = w.old
	}
	it, err := decoded(fmt.Sprintf("%s %s shard %d", op, programID, i), unmarshal[shardItem], item, err)
	return it, w, err
}

// lost logs that a shard write whose answer was lost may have cost numbers (gaps).
func (s *Store) lost(ctx context.Context, op, programID string, i int) {
	s.log.LogAttrs(ctx, slog.LevelWarn, "shard write retried after a lost answer: its numbers may be gaps",
		slog.String("op", op), slog.String("programId", programID), slog.Int("shard", i))
}

// TakeShardTickets implements tickets.Store: SET next = next + m if the block
// is fresh and not used up; a retry finds its numbers by the take's id.
func (s *Store) TakeShardTickets(ctx context.Context, programID string, i int, notBefore time.Time, m int64) (tickets.Run, bool, error) {
	id := queue.NewTokenID()
	cond := all(shNext.LessThanEqual(shEnd), shReserved.GreaterThanEqual(expression.Value(notBefore.UnixMilli())), notMine(shTakeID, id))
	// takeFrom is set before next for servers that apply SETs in order.
	upd := expression.Set(shTakeFrom, shNext).Set(shTakeID, expression.Value(id)).
		Set(shNext, shNext.Plus(expression.Value(m))).Set(shTakes, shTakes.Plus(expression.Value(1)))
	it, w, err := s.shardUpdate(ctx, "take shard tickets", programID, i, cond, upd, types.ReturnValueAllNew)
	if err != nil {
		return tickets.Run{}, false, err
	}
	if w.retried && (w.ok || it.TakeID != id) {
		// The earlier attempt took nothing, or numbers nobody holds.
		s.lost(ctx, "take shard tickets", programID, i)
	}
	if !w.ok && it.TakeID != id {
		return tickets.Run{}, false, nil
	}
	return tickets.Run{First: it.TakeFrom, Last: min(it.TakeFrom+m-1, it.End), ReservedAt: pace.FromUnixMs(it.ReservedAtMs), Block: it.Start, After: it.TakeFrom + m}, true, nil
}

// ClaimShard implements tickets.Store: one UpdateItem that sets the claim
// (creating the item) and answers the item as it was; a retry claims again.
func (s *Store) ClaimShard(ctx context.Context, programID string, i int, claim string, now, notBefore, claimNotBefore time.Time) (tickets.Shard, bool, error) {
	unusable := expression.Or(expression.AttributeNotExists(shEnd), shNext.GreaterThan(shEnd), shReserved.LessThan(expression.Value(notBefore.UnixMilli())))
	free := expression.Or(expression.AttributeNotExists(shClaimMs), shClaimMs.LessThan(expression.Value(claimNotBefore.UnixMilli())), shClaimID.Equal(expression.Value(claim)))
	upd := expression.Set(shClaimID, expression.Value(claim)).
		Set(shClaimMs, expression.Value(now.UnixMilli())).
		Set(expression.Name("programId"), expression.Value(programID)).
		Set(expression.Name("shard"), expression.Value(i))
	it, w, err := s.shardUpdate(ctx, "claim shard", programID, i, unusable.And(free), upd, types.ReturnValueAllOld)
	if err != nil || !w.ok {
		return tickets.Shard{}, false, err
	}
	return it.shard(), true, nil
}

// FillShard implements tickets.Store: one UpdateItem on the claim, which it
// clears, forgetting the last take (whose retry must not find the new block).
func (s *Store) FillShard(ctx context.Context, programID string, i int, claim string, claimedAt time.Time, b tickets.Shard) (bool, error) {
	cond := shClaimID.Equal(expression.Value(claim)).And(shClaimMs.Equal(expression.Value(claimedAt.UnixMilli())))
	upd := expression.Set(shStart, expression.Value(b.Start)).
		Set(shNext, expression.Value(b.Next)).
		Set(shEnd, expression.Value(b.End)).
		Set(shReserved, expression.Value(b.ReservedAt.UnixMilli())).
		Set(shTakes, expression.Value(0)).
		Set(shClaimMs, expression.Value(0)).
		Remove(shTakeID).Remove(shTakeFrom)
	it, w, err := s.shardUpdate(ctx, "fill shard", programID, i, cond, upd, types.ReturnValueNone)
	switch {
	case err != nil || w.ok:
		return w.ok, err
	case it.ClaimID == claim && it.ClaimMs == 0 && it.isBlock(b.Start, b.ReservedAt):
		return true, nil // filled by an earlier attempt
	case w.retried:
		return false, opErr(errOutcomeUnknown, "fill shard %s shard %d", programID, i)
	}
	return false, nil
}

// TrimShard implements tickets.Store: one UpdateItem that takes back's numbers
// if next is still back.After, else one that ends the block at next - 1.
func (s *Store) TrimShard(ctx context.Context, programID string, i int, start int64, reservedAt time.Time, back tickets.Run) (tickets.Run, bool, error) {
	startIs, reservedIs := shStart.Equal(expression.Value(start)), shReserved.Equal(expression.Value(reservedAt.UnixMilli()))
	trim := func(nextIs expression.ConditionBuilder, next expression.OperandBuilder) (tickets.Run, bool, error) {
		id := queue.NewTokenID()
		// trimEnd is set before end for servers that apply SETs in order.
		upd := expression.Set(shTrimEnd, shEnd).Set(shTrimID, expression.Value(id)).Set(shEnd, next)
		if back.First > 0 {
			upd = upd.Set(shNext, expression.Value(back.First))
		}
		it, w, err := s.shardUpdate(ctx, "trim shard", programID, i, all(startIs, reservedIs, nextIs, notMine(shTrimID, id)), upd, types.ReturnValueAllNew)
		switch {
		case err != nil:
			return tickets.Run{}, false, err
		case !w.ok && (it.TrimID != id || !it.isBlock(start, reservedAt)):
			if w.retried {
				s.lost(ctx, "trim shard", programID, i)
			}
			return tickets.Run{}, false, nil
		}
		return tickets.Run{First: it.Next, Last: it.TrimEnd, ReservedAt: pace.FromUnixMs(it.ReservedAtMs)}, true, nil
	}
	if back.First > 0 && back.First <= back.Last {
		r, ok, err := trim(shNext.Equal(expression.Value(back.After)), expression.Value(back.First-1))
		if err != nil || ok {
			return r, ok, err
		}
	}
	back = tickets.Run{}
	return trim(shNext.LessThanEqual(shEnd), shNext.Minus(expression.Value(1)))
}

// ReturnTickets implements tickets.Store: one UpdateItem of the program on its
// version, issued and pre-queue, bumping the version; a retry finds its returnId.
func (s *Store) ReturnTickets(ctx context.Context, p admission.Program, from int64) (bool, error) {
	if from < 1 || from > p.Issued {
		return false, nil
	}
	q := p.WithTicketsReturned(from)
	id := queue.NewTokenID()
	fixed := expression.AttributeNotExists(nameOf("prequeueFixed"))
	if p.PrequeueFixed {
		fixed = nameOf("prequeueFixed").Equal(expression.Value(true))
	}
	cond := all(nameOf("version").Equal(expression.Value(p.Version)), nameOf("issued").Equal(expression.Value(p.Issued)), fixed)
	upd := expression.Set(nameOf("issued"), expression.Value(q.Issued)).
		Set(nameOf("drainAtNs"), expression.Value(q.DrainAtNs)).
		Set(nameOf("version"), expression.Value(q.Version)).
		Set(expression.Name("returnId"), expression.Value(id))
	w, err := s.update(ctx, programKey(p.ID), cond, upd, types.ReturnValueNone)
	rid, _ := w.old["returnId"].(*types.AttributeValueMemberS)
	switch {
	case err != nil || w.ok:
		return w.ok, opErr(err, "return tickets %s", p.ID)
	case rid != nil && rid.Value == id:
		return true, nil // applied by an earlier attempt
	case w.retried:
		return false, opErr(errOutcomeUnknown, "return tickets %s", p.ID)
	}
	return false, nil
}

// SetShards implements tickets.Store: one UpdateItem of shards (absent: 0);
// when it fails, true if the count is k already.
func (s *Store) SetShards(ctx context.Context, programID string, from, k int) (bool, error) {
	shards := nameOf("shards")
	was := shards.Equal(expression.Value(from))
	if from == 0 {
		was = expression.Or(was, expression.AttributeNotExists(shards))
	}
	w, err := s.update(ctx, programKey(programID), expression.AttributeExists(expression.Name("pk")).And(was), expression.Set(shards, expression.Value(k)), types.ReturnValueNone)
	if err != nil || w.ok || w.old == nil {
		return w.ok, opErr(err, "set shards %s", programID)
	}
	var old struct {
		Shards int `dynamodbav:"shards"`
	}
	err = attributevalue.UnmarshalMap(w.old, &old)
	return err == nil && old.Shards == k, opErr(err, "set shards %s", programID) // k already: an earlier attempt, or another instance
}
