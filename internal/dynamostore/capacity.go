package dynamostore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/waitingroom/internal/queue"
)

// The capacity records of a program (queue.CapacityStore), each in its own
// partition: its groups CAPGROUP#<programId>#<g>, its end indexes
// CAPENDS#<programId>#<q>#<k>, and its marks under CAPMARKS#<programId>,
// one item per mark. The capacity the folds make is the program item's
// capacity map. See docs/design.md, "The data model (DynamoDB)".

var _ queue.CapacityStore = (*Store)(nil)

const (
	capGroupSK = "CAPGROUP"
	capEndsSK  = "CAPENDS"
	// endPrefix starts the attribute of a group that holds a place's end
	// quantum: end_<place>, one top-level attribute each (SET of a map's
	// entry fails while the map does not exist).
	endPrefix = "end_"
	// How long the records stay after their last creating write: TTL
	// removes them once no fold can read them.
	capGroupTTL = 3 * 24 * time.Hour
	capMarkTTL  = 3 * 24 * time.Hour
	capEndsTTL  = 24 * time.Hour
	// markWidth is the digits of a mark's sort key, zero-padded so that
	// the keys sort as the instants (any non-negative int64 fits).
	markWidth = 19
)

// The capacity records' attributes in expressions.
var (
	cgSighted, cgSealed, cgSeals  = expression.Name("sighted"), expression.Name("sealedThrough"), expression.Name("seals")
	cgExpired, ceSealed, cePlaces = expression.Name("expiredThrough"), expression.Name("sealed"), expression.Name("places")
	capTTLName                    = expression.Name("ttl")
)

// groupItem is a capacity group item but its end_<place> attributes.
type groupItem struct {
	Sighted        []int64    `dynamodbav:"sighted,numberset"` // absent when empty
	SealedThrough  int64      `dynamodbav:"sealedThrough"`
	Seals          []sealItem `dynamodbav:"seals"`
	ExpiredThrough int64      `dynamodbav:"expiredThrough"`
}

// sealItem is one move of a group's no-show seal.
type sealItem struct {
	Through int64 `dynamodbav:"t"`
	AtMs    int64 `dynamodbav:"at"`
}

// endsItem is an end index item.
type endsItem struct {
	Places []int64 `dynamodbav:"places,numberset"` // absent when empty
	Sealed bool    `dynamodbav:"sealed"`
}

// markItem is a mark item; its sort key is the mark's instant.
type markItem struct {
	PK            string `dynamodbav:"pk"`
	SK            string `dynamodbav:"sk"`
	Counter       int64  `dynamodbav:"counter"`
	NoShowThrough int64  `dynamodbav:"noShowThrough"`
	TTL           int64  `dynamodbav:"ttl"`
}

func capKey(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: pk},
		"sk": &types.AttributeValueMemberS{Value: sk},
	}
}

func groupKey(programID string, g int64) map[string]types.AttributeValue {
	return capKey("CAPGROUP#"+programID+"#"+strconv.FormatInt(g, 10), capGroupSK)
}

func endsKey(programID string, q int64, k int) map[string]types.AttributeValue {
	return capKey("CAPENDS#"+programID+"#"+strconv.FormatInt(q, 10)+"#"+strconv.Itoa(k), capEndsSK)
}

func marksPK(programID string) string { return "CAPMARKS#" + programID }

// markSK is the sort key of the mark at Unix ms ≥ 0.
func markSK(ms int64) string { return fmt.Sprintf("%0*d", markWidth, ms) }

// placeSet is the number set of one place.
func placeSet(place int64) expression.ValueBuilder {
	return expression.Value(&types.AttributeValueMemberNS{Value: []string{strconv.FormatInt(place, 10)}})
}

// endName is the group attribute that holds place's end quantum.
func endName(place int64) expression.NameBuilder {
	return expression.Name(endPrefix + strconv.FormatInt(place, 10))
}

// withTTL sets the record's ttl, unless it has one, to d from now.
func withTTL(upd expression.UpdateBuilder, d time.Duration) expression.UpdateBuilder {
	return upd.Set(capTTLName, expression.IfNotExists(capTTLName, expression.Value(ttlSeconds(time.Now().Add(d)))))
}

// DecodeGroup reads a capacity group item (for tools that scan the table,
// such as cmd/audit); nil is the empty group.
func DecodeGroup(item map[string]types.AttributeValue) (queue.Group, error) {
	var it groupItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return queue.Group{}, err
	}
	slices.Sort(it.Sighted)
	g := queue.Group{Sighted: it.Sighted, SealedThrough: it.SealedThrough, ExpiredThrough: it.ExpiredThrough}
	for _, s := range it.Seals {
		g.Seals = append(g.Seals, queue.Seal{Through: s.Through, At: queue.FromUnixMs(s.AtMs)})
	}
	for name, av := range item {
		p, ok := strings.CutPrefix(name, endPrefix)
		if !ok {
			continue
		}
		place, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return queue.Group{}, fmt.Errorf("attribute %s: %w", name, err)
		}
		var q int64
		if err := attributevalue.Unmarshal(av, &q); err != nil {
			return queue.Group{}, fmt.Errorf("attribute %s: %w", name, err)
		}
		if g.Ended == nil {
			g.Ended = map[int64]int64{}
		}
		g.Ended[place] = q
	}
	return g, nil
}

// capUpdate runs one UpdateItem of a capacity record on cond (none when
// nil), answering the item after it (ALL_NEW), or ok false if cond failed.
func (s *Store) capUpdate(ctx context.Context, key map[string]types.AttributeValue, cond *expression.ConditionBuilder, upd expression.UpdateBuilder) (item map[string]types.AttributeValue, ok bool, err error) {
	b := expression.NewBuilder().WithUpdate(upd)
	if cond != nil {
		b = b.WithCondition(*cond)
	}
	expr, err := b.Build()
	if err != nil {
		return nil, false, err
	}
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       key,
		ConditionExpression:       expr.Condition(),
		UpdateExpression:          expr.Update(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ReturnValues:              types.ReturnValueAllNew,
	})
	if _, failed := conditionFailed(err); failed {
		return nil, false, nil
	} else if err != nil {
		return nil, false, throttled(err)
	}
	return out.Attributes, true, nil
}

// groupUpdate runs one UpdateItem of group g of programID on cond and
// returns the group after it. When cond fails: sealed if not nil, else the
// group as a strongly consistent read finds it (the write's effect is
// there already, or it must not be made).
func (s *Store) groupUpdate(ctx context.Context, op, programID string, g int64, cond *expression.ConditionBuilder, upd expression.UpdateBuilder, sealed error) (queue.Group, error) {
	key := groupKey(programID, g)
	item, ok, err := s.capUpdate(ctx, key, cond, withTTL(upd, capGroupTTL))
	if err == nil && !ok {
		if sealed != nil {
			return queue.Group{}, sealed
		}
		item, err = s.getItem(ctx, key)
	}
	var grp queue.Group
	if err == nil {
		grp, err = DecodeGroup(item)
	}
	if err != nil {
		return queue.Group{}, fmt.Errorf("dynamostore: %s %s group %d: %w", op, programID, g, err)
	}
	return grp, nil
}

// Sight implements queue.CapacityStore: ADD sighted :p, on the condition
// that the group is not sealed through place, or has place already (a
// retry whose first attempt was applied).
func (s *Store) Sight(ctx context.Context, programID string, place int64) (queue.Group, error) {
	cond := expression.Or(expression.AttributeNotExists(cgSealed), cgSealed.LessThan(expression.Value(place)), expression.Contains(cgSighted, place))
	return s.groupUpdate(ctx, "sight", programID, queue.GroupOf(place), &cond, expression.Add(cgSighted, placeSet(place)), queue.ErrSealed)
}

// SealSightings implements queue.CapacityStore: SET sealedThrough and
// append the move to seals if it moves up; else the group as it is.
func (s *Store) SealSightings(ctx context.Context, programID string, g, through int64, now time.Time) (queue.Group, error) {
	cond := expression.Or(expression.AttributeNotExists(cgSealed), cgSealed.LessThan(expression.Value(through)))
	move, err := attributevalue.Marshal([]sealItem{{Through: through, AtMs: queue.UnixMs(now)}})
	if err != nil {
		return queue.Group{}, fmt.Errorf("dynamostore: seal sightings: %w", err)
	}
	none := &types.AttributeValueMemberL{Value: []types.AttributeValue{}}
	upd := expression.Set(cgSealed, expression.Value(through)).
		Set(cgSeals, expression.ListAppend(expression.IfNotExists(cgSeals, expression.Value(none)), expression.Value(move)))
	return s.groupUpdate(ctx, "seal sightings", programID, g, &cond, upd, nil)
}

// EndPlace implements queue.CapacityStore: SET end_<place> unless set, on
// the condition that place has not expired, or has an end already.
func (s *Store) EndPlace(ctx context.Context, programID string, place, q int64) (queue.Group, error) {
	e := endName(place)
	cond := expression.Or(expression.AttributeNotExists(cgExpired), cgExpired.LessThan(expression.Value(place)), expression.AttributeExists(e))
	upd := expression.Set(e, expression.IfNotExists(e, expression.Value(q)))
	return s.groupUpdate(ctx, "end place", programID, queue.GroupOf(place), &cond, upd, queue.ErrSealed)
}

// MoveEnd implements queue.CapacityStore: SET end_<place> = :to if it is
// :from; else the group as it is.
func (s *Store) MoveEnd(ctx context.Context, programID string, place, from, to int64) (queue.Group, error) {
	e := endName(place)
	cond := e.Equal(expression.Value(from))
	return s.groupUpdate(ctx, "move end", programID, queue.GroupOf(place), &cond, expression.Set(e, expression.Value(to)), nil)
}

// ExpireGroup implements queue.CapacityStore: SET expiredThrough if it
// moves up; else the group as it is.
func (s *Store) ExpireGroup(ctx context.Context, programID string, g, through int64) (queue.Group, error) {
	cond := expression.Or(expression.AttributeNotExists(cgExpired), cgExpired.LessThan(expression.Value(through)))
	return s.groupUpdate(ctx, "expire group", programID, g, &cond, expression.Set(cgExpired, expression.Value(through)), nil)
}

// AddEnd implements queue.CapacityStore: ADD places :p unless sealed.
func (s *Store) AddEnd(ctx context.Context, programID string, q int64, k int, place int64) error {
	cond := expression.Or(expression.AttributeNotExists(ceSealed), expression.Contains(cePlaces, place))
	_, ok, err := s.capUpdate(ctx, endsKey(programID, q, k), &cond, withTTL(expression.Add(cePlaces, placeSet(place)), capEndsTTL))
	switch {
	case err != nil:
		return fmt.Errorf("dynamostore: add end %s quantum %d shard %d: %w", programID, q, k, err)
	case !ok:
		return queue.ErrSealed
	}
	return nil
}

// SealEnds implements queue.CapacityStore: SET sealed = true, answering
// the places.
func (s *Store) SealEnds(ctx context.Context, programID string, q int64, k int) ([]int64, error) {
	item, _, err := s.capUpdate(ctx, endsKey(programID, q, k), nil, withTTL(expression.Set(ceSealed, expression.Value(true)), capEndsTTL))
	var it endsItem
	if err == nil {
		err = attributevalue.UnmarshalMap(item, &it)
	}
	if err != nil {
		return nil, fmt.Errorf("dynamostore: seal ends %s quantum %d shard %d: %w", programID, q, k, err)
	}
	slices.Sort(it.Places)
	return it.Places, nil
}

// PutMark implements queue.CapacityStore: one PutItem.
func (s *Store) PutMark(ctx context.Context, programID string, m queue.Mark) error {
	if m.AtMs < 0 {
		return fmt.Errorf("dynamostore: put mark %s: instant %d ms before 1970", programID, m.AtMs)
	}
	av, err := attributevalue.MarshalMap(markItem{
		PK: marksPK(programID), SK: markSK(m.AtMs),
		Counter: m.Counter, NoShowThrough: m.NoShowThrough,
		TTL: ttlSeconds(time.Now().Add(capMarkTTL)),
	})
	if err == nil {
		_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: av})
	}
	if err != nil {
		return fmt.Errorf("dynamostore: put mark %s: %w", programID, throttled(err))
	}
	return nil
}

// MarkBefore implements queue.CapacityStore: a strongly consistent Query
// of the program's marks, backwards from ms, for one.
func (s *Store) MarkBefore(ctx context.Context, programID string, ms int64) (queue.Mark, error) {
	if ms < 0 {
		return queue.Mark{}, queue.ErrNotFound
	}
	key := expression.Key("pk").Equal(expression.Value(marksPK(programID))).
		And(expression.Key("sk").LessThanEqual(expression.Value(markSK(ms))))
	expr, err := expression.NewBuilder().WithKeyCondition(key).Build()
	if err != nil {
		return queue.Mark{}, fmt.Errorf("dynamostore: mark before %s: %w", programID, err)
	}
	out, err := s.client.Query(ctx, &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ScanIndexForward:          aws.Bool(false),
		Limit:                     aws.Int32(1),
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return queue.Mark{}, fmt.Errorf("dynamostore: mark before %s: %w", programID, throttled(err))
	}
	if len(out.Items) == 0 {
		return queue.Mark{}, queue.ErrNotFound
	}
	var it markItem
	err = attributevalue.UnmarshalMap(out.Items[0], &it)
	var at int64
	if err == nil {
		at, err = strconv.ParseInt(it.SK, 10, 64)
	}
	if err != nil {
		return queue.Mark{}, fmt.Errorf("dynamostore: mark before %s: %w", programID, err)
	}
	return queue.Mark{AtMs: at, Counter: it.Counter, NoShowThrough: it.NoShowThrough}, nil
}

// ApplyFold implements queue.CapacityStore: SET capacity = :next on the
// condition that the program exists and its capacity is from the fold made
// at prevFoldedAtMs (or, for 0, that it has none). A retry whose first
// attempt was applied answers queue.ErrConflict: the caller reads again.
func (s *Store) ApplyFold(ctx context.Context, programID string, prevFoldedAtMs int64, next queue.Capacity) error {
	av, err := attributevalue.Marshal(next)
	if err != nil {
		return fmt.Errorf("dynamostore: apply fold %s: %w", programID, err)
	}
	capacity := nameOf("capacity")
	was := capacity.AppendName(expression.Name("foldedAtMs")).Equal(expression.Value(prevFoldedAtMs))
	if prevFoldedAtMs == 0 {
		was = expression.Or(was, expression.AttributeNotExists(capacity))
	}
	cond := expression.AttributeExists(expression.Name("pk")).And(was)
	w, err := s.update(ctx, programKey(programID), cond, expression.Set(capacity, expression.Value(av)), types.ReturnValueNone)
	switch {
	case err != nil:
		return fmt.Errorf("dynamostore: apply fold %s: %w", programID, err)
	case w.ok:
		return nil
	case w.old == nil:
		return queue.ErrNotFound
	}
	return queue.ErrConflict
}
