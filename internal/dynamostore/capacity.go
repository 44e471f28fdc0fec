package dynamostore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/queue"
)

// The capacity records of a program (capacity.Store), each in its own partition.
var _ capacity.Store = (*Store)(nil)

const (
	endPrefix = "end_" // end_<place>: a group's top-level attribute of a place's end quantum
	markWidth = 19     // a mark's sort key, zero-padded so that the keys sort as the instants
)

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

func groupKey(programID string, g int64) map[string]types.AttributeValue {
	return itemKey("CAPGROUP#"+programID+"#"+strconv.FormatInt(g, 10), "CAPGROUP")
}

func endsKey(programID string, q int64, k int) map[string]types.AttributeValue {
	return itemKey("CAPENDS#"+programID+"#"+strconv.FormatInt(q, 10)+"#"+strconv.Itoa(k), "CAPENDS")
}

func marksPK(programID string) string { return "CAPMARKS#" + programID }

// markSK is the sort key of the mark at Unix ms ≥ 0.
func markSK(ms int64) string { return fmt.Sprintf("%0*d", markWidth, ms) }

func placeSet(place int64) expression.ValueBuilder {
	return expression.Value(&types.AttributeValueMemberNS{Value: []string{strconv.FormatInt(place, 10)}})
}

func endName(place int64) expression.NameBuilder {
	return expression.Name(endPrefix + strconv.FormatInt(place, 10))
}

// withTTL sets the record's ttl, unless it has one, to d from now.
func withTTL(upd expression.UpdateBuilder, d time.Duration) expression.UpdateBuilder {
	return upd.Set(capTTLName, expression.IfNotExists(capTTLName, expression.Value(ttlSeconds(time.Now().Add(d)))))
}

// DecodeGroup reads a capacity group item (also for cmd/audit); nil is the empty group.
func DecodeGroup(item map[string]types.AttributeValue) (capacity.Group, error) {
	it, err := unmarshal[groupItem](item)
	if err != nil {
		return capacity.Group{}, err
	}
	slices.Sort(it.Sighted)
	g := capacity.Group{Sighted: it.Sighted, SealedThrough: it.SealedThrough, ExpiredThrough: it.ExpiredThrough}
	for _, s := range it.Seals {
		g.Seals = append(g.Seals, capacity.Seal{Through: s.Through, At: pace.FromUnixMs(s.AtMs)})
	}
	for name, av := range item {
		p, ok := strings.CutPrefix(name, endPrefix)
		if !ok {
			continue
		}
		place, err := strconv.ParseInt(p, 10, 64)
		var q int64
		if err == nil {
			err = attributevalue.Unmarshal(av, &q)
		}
		if err != nil {
			return capacity.Group{}, fmt.Errorf("attribute %s: %w", name, err)
		}
		if g.Ended == nil {
			g.Ended = map[int64]int64{}
		}
		g.Ended[place] = q
	}
	return g, nil
}

// groupUpdate runs one UpdateItem of group g on cond and answers the group
// after it, or when cond fails sealed if not nil, else the group as it is.
func (s *Store) groupUpdate(ctx context.Context, op, programID string, g int64, cond expression.ConditionBuilder, upd expression.UpdateBuilder, sealed error) (capacity.Group, error) {
	w, err := s.update(ctx, groupKey(programID, g), cond, withTTL(upd, capacity.GroupTTL), types.ReturnValueAllNew)
	item := w.item
	if err == nil && !w.ok {
		if sealed != nil {
			return capacity.Group{}, sealed
		}
		item = w.old
	}
	return decoded(fmt.Sprintf("%s %s group %d", op, programID, g), DecodeGroup, item, err)
}

// Sight implements capacity.Store: ADD sighted :p unless sealed through place (or a retry).
func (s *Store) Sight(ctx context.Context, programID string, place int64) (capacity.Group, error) {
	cond := expression.Or(expression.AttributeNotExists(cgSealed), cgSealed.LessThan(expression.Value(place)), expression.Contains(cgSighted, place))
	return s.groupUpdate(ctx, "sight", programID, capacity.GroupOf(place), cond, expression.Add(cgSighted, placeSet(place)), capacity.ErrSealed)
}

// SealSightings implements capacity.Store: SET sealedThrough, appending to seals, if it moves up.
func (s *Store) SealSightings(ctx context.Context, programID string, g, through int64, now time.Time) (capacity.Group, error) {
	cond := expression.Or(expression.AttributeNotExists(cgSealed), cgSealed.LessThan(expression.Value(through)))
	move := expression.Value([]sealItem{{Through: through, AtMs: pace.UnixMs(now)}})
	none := &types.AttributeValueMemberL{Value: []types.AttributeValue{}}
	upd := expression.Set(cgSealed, expression.Value(through)).
		Set(cgSeals, expression.ListAppend(expression.IfNotExists(cgSeals, expression.Value(none)), move))
	return s.groupUpdate(ctx, "seal sightings", programID, g, cond, upd, nil)
}

// EndPlace implements capacity.Store: SET end_<place> unless set, if place has not expired.
func (s *Store) EndPlace(ctx context.Context, programID string, place, q int64) (capacity.Group, error) {
	e := endName(place)
	cond := expression.Or(expression.AttributeNotExists(cgExpired), cgExpired.LessThan(expression.Value(place)), expression.AttributeExists(e))
	upd := expression.Set(e, expression.IfNotExists(e, expression.Value(q)))
	return s.groupUpdate(ctx, "end place", programID, capacity.GroupOf(place), cond, upd, capacity.ErrSealed)
}

// MoveEnd implements capacity.Store: SET end_<place> = :to if it is :from.
func (s *Store) MoveEnd(ctx context.Context, programID string, place, from, to int64) (capacity.Group, error) {
	e := endName(place)
	cond := e.Equal(expression.Value(from))
	return s.groupUpdate(ctx, "move end", programID, capacity.GroupOf(place), cond, expression.Set(e, expression.Value(to)), nil)
}

// ExpireGroup implements capacity.Store: SET expiredThrough if it moves up.
func (s *Store) ExpireGroup(ctx context.Context, programID string, g, through int64) (capacity.Group, error) {
	cond := expression.Or(expression.AttributeNotExists(cgExpired), cgExpired.LessThan(expression.Value(through)))
	return s.groupUpdate(ctx, "expire group", programID, g, cond, expression.Set(cgExpired, expression.Value(through)), nil)
}

// AddEnd implements capacity.Store: ADD places :p unless sealed.
func (s *Store) AddEnd(ctx context.Context, programID string, q int64, k int, place int64) error {
	cond := expression.Or(expression.AttributeNotExists(ceSealed), expression.Contains(cePlaces, place))
	upd := withTTL(expression.Add(cePlaces, placeSet(place)), capacity.EndsTTL)
	w, err := s.update(ctx, endsKey(programID, q, k), cond, upd, types.ReturnValueNone)
	if err == nil && !w.ok {
		return capacity.ErrSealed
	}
	return opErr(err, "add end %s quantum %d shard %d", programID, q, k)
}

// SealEnds implements capacity.Store: SET sealed = true, answering the places.
func (s *Store) SealEnds(ctx context.Context, programID string, q int64, k int) ([]int64, error) {
	upd := withTTL(expression.Set(ceSealed, expression.Value(true)), capacity.EndsTTL)
	w, err := s.update(ctx, endsKey(programID, q, k), expression.ConditionBuilder{}, upd, types.ReturnValueAllNew)
	it, err := decoded(fmt.Sprintf("seal ends %s quantum %d shard %d", programID, q, k), unmarshal[endsItem], w.item, err)
	slices.Sort(it.Places)
	return it.Places, err
}

// PutMark implements capacity.Store: one PutItem.
func (s *Store) PutMark(ctx context.Context, programID string, m capacity.Mark) error {
	if m.AtMs < 0 {
		return fmt.Errorf("dynamostore: put mark %s: instant %d ms before 1970", programID, m.AtMs)
	}
	av, err := attributevalue.MarshalMap(markItem{
		PK: marksPK(programID), SK: markSK(m.AtMs),
		Counter: m.Counter, NoShowThrough: m.NoShowThrough,
		TTL: ttlSeconds(time.Now().Add(capacity.MarkTTL)),
	})
	if err == nil {
		err = s.putItem(ctx, av, expression.ConditionBuilder{})
	}
	return opErr(throttled(err), "put mark %s", programID)
}

// MarkBefore implements capacity.Store: a strongly consistent Query backwards from ms, for one.
func (s *Store) MarkBefore(ctx context.Context, programID string, ms int64) (capacity.Mark, error) {
	if ms < 0 {
		return capacity.Mark{}, queue.ErrNotFound
	}
	key := expression.Key("pk").Equal(expression.Value(marksPK(programID))).
		And(expression.Key("sk").LessThanEqual(expression.Value(markSK(ms))))
	items, err := query[markItem](ctx, s, key, false, 1)
	if err == nil && len(items) == 0 {
		return capacity.Mark{}, queue.ErrNotFound
	}
	var at int64
	if err == nil {
		at, err = strconv.ParseInt(items[0].SK, 10, 64)
	}
	if err != nil {
		return capacity.Mark{}, opErr(err, "mark before %s", programID)
	}
	return capacity.Mark{AtMs: at, Counter: items[0].Counter, NoShowThrough: items[0].NoShowThrough}, nil
}

// ApplyFold implements capacity.Store: SET capacity = :next if the program's
// is from the fold at prevFoldedAtMs (0: none); a retry answers queue.ErrConflict.
func (s *Store) ApplyFold(ctx context.Context, programID string, prevFoldedAtMs int64, next capacity.Capacity) error {
	capacity := nameOf("capacity")
	was := capacity.AppendName(expression.Name("foldedAtMs")).Equal(expression.Value(prevFoldedAtMs))
	if prevFoldedAtMs == 0 {
		was = expression.Or(was, expression.AttributeNotExists(capacity))
	}
	cond := expression.AttributeExists(expression.Name("pk")).And(was)
	w, err := s.update(ctx, programKey(programID), cond, expression.Set(capacity, expression.Value(next)), types.ReturnValueNone)
	switch {
	case err != nil || w.ok:
		return opErr(err, "apply fold %s", programID)
	case w.old == nil:
		return queue.ErrNotFound
	}
	return queue.ErrConflict
}
