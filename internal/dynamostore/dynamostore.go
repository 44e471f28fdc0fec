// Package dynamostore is the DynamoDB queue.Store on one table, every
// invariant kept by a conditional write (docs/design.md, "The data model").
package dynamostore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tickets"
)

// Store is a queue.Store on one DynamoDB table, safe for concurrent use.
type Store struct {
	client *dynamodb.Client
	table  string
	steps  sync.Map // program id → its time per ticket as last seen (int64), for issueSteps
	log    *slog.Logger
}

// Option configures New.
type Option func(*Store)

// WithLogger logs to l (nil: slog.Default()) the writes whose lost answer may have left ticket gaps.
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.log = cmp.Or(l, s.log) } }

var (
	_ queue.Store         = (*Store)(nil)
	_ tickets.Store       = (*Store)(nil)
	_ queue.PrequeueStore = (*Store)(nil)
	_ queue.ScheduleStore = (*Store)(nil)
)

// New returns a Store on table, which must exist (see CreateTable).
func New(client *dynamodb.Client, table string, opts ...Option) *Store {
	s := &Store{client: client, table: table, log: slog.Default()}
	for _, o := range opts {
		o(s)
	}
	return s
}

const (
	programSK      = "PROGRAM"
	maxIssueTrials = 5 // IssueTickets' tries while the program changes under it
)

func itemKey(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: pk},
		"sk": &types.AttributeValueMemberS{Value: sk},
	}
}

func programKey(id string) map[string]types.AttributeValue { return itemKey("PROGRAM#"+id, programSK) }

// throttled marks err as queue.ErrThrottled when it is DynamoDB's throughput limit.
func throttled(err error) error {
	var pte *types.ProvisionedThroughputExceededException
	var rle *types.RequestLimitExceeded
	var ae smithy.APIError
	if errors.As(err, &pte) || errors.As(err, &rle) || errors.As(err, &ae) && ae.ErrorCode() == "ThrottlingException" {
		return fmt.Errorf("%w: %w", queue.ErrThrottled, err)
	}
	return err
}

// conditionFailed reports whether err is a failed condition, and the item it failed on if returned.
func conditionFailed(err error) (old map[string]types.AttributeValue, ok bool) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ccf.Item, true
	}
	return nil, false
}

// failedOn is the item a write failed on: old, or a read for servers that return none (dynalite).
func (s *Store) failedOn(ctx context.Context, key, old map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	if len(old) > 0 {
		return old, nil
	}
	return s.getItem(ctx, key)
}

// getItem reads an item with a strongly consistent read; nil if absent.
func (s *Store) getItem(ctx context.Context, key map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil || len(out.Item) == 0 {
		return nil, err
	}
	return out.Item, nil
}

// opErr wraps a non-nil err as a failure of the operation format names.
func opErr(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("dynamostore: "+format+": %w", append(args, err)...)
}

// decoded is decode(item), unless the call of op that read item failed with err.
func decoded[T any](op string, decode func(map[string]types.AttributeValue) (T, error), item map[string]types.AttributeValue, err error) (T, error) {
	var v T
	if err == nil {
		v, err = decode(item)
	}
	if err != nil {
		return *new(T), opErr(err, "%s", op)
	}
	return v, nil
}

func unmarshal[T any](item map[string]types.AttributeValue) (T, error) {
	var v T
	err := attributevalue.UnmarshalMap(item, &v)
	return v, err
}

// all is the flat conjunction of two or more conds: a chain of And nests,
// which dynalite parses in time exponential in the depth.
func all(conds ...expression.ConditionBuilder) expression.ConditionBuilder {
	return expression.And(conds[0], conds[1], conds[2:]...)
}

// build is the expression of cond and upd, each if set, and with a condition the ask for the item it fails on.
func build(cond expression.ConditionBuilder, upd *expression.UpdateBuilder) (e expression.Expression, old types.ReturnValuesOnConditionCheckFailure, err error) {
	b := expression.NewBuilder()
	if upd != nil {
		b = b.WithUpdate(*upd)
	}
	if cond.IsSet() {
		b, old = b.WithCondition(cond), types.ReturnValuesOnConditionCheckFailureAllOld
	} else if upd == nil {
		return e, "", nil
	}
	e, err = b.Build()
	return e, old, err
}

// setOrRemove adds to upd the SET of each named attribute of item, or its REMOVE when item lacks it.
func setOrRemove(upd expression.UpdateBuilder, item map[string]types.AttributeValue, names ...string) expression.UpdateBuilder {
	for _, name := range names {
		if av, ok := item[name]; ok {
			upd = upd.Set(expression.Name(name), expression.Value(av))
		} else {
			upd = upd.Remove(expression.Name(name))
		}
	}
	return upd
}

// updateItem runs one UpdateItem of the item at key: upd if cond holds (or is unset), answering ret.
func (s *Store) updateItem(ctx context.Context, key map[string]types.AttributeValue, cond expression.ConditionBuilder, upd expression.UpdateBuilder, ret types.ReturnValue, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	expr, old, err := build(cond, &upd)
	if err != nil {
		return nil, err
	}
	return s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key, ReturnValues: ret, ReturnValuesOnConditionCheckFailure: old,
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	}, opts...)
}

// written is the outcome of one conditional UpdateItem: ok and the item as
// asked, or the item old it failed on; retried: an earlier attempt may have been applied.
type written struct {
	item, old   map[string]types.AttributeValue
	ok, retried bool
}

// update runs updateItem, answering what it wrote.
func (s *Store) update(ctx context.Context, key map[string]types.AttributeValue, cond expression.ConditionBuilder, upd expression.UpdateBuilder, ret types.ReturnValue, opts ...func(*dynamodb.Options)) (written, error) {
	var att attempts
	out, err := s.updateItem(ctx, key, cond, upd, ret, append(opts, att.record)...)
	w := written{retried: att.retried.Load()}
	if old, failed := conditionFailed(err); failed {
		w.old, err = s.failedOn(ctx, key, old)
		return w, err
	} else if err != nil {
		return w, throttled(err)
	}
	w.item, w.ok = out.Attributes, true
	return w, nil
}

// putItem stores item if cond holds (always when cond is not set).
func (s *Store) putItem(ctx context.Context, item map[string]types.AttributeValue, cond expression.ConditionBuilder) error {
	expr, old, err := build(cond, nil)
	if err == nil {
		_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: &s.table, Item: item, ReturnValuesOnConditionCheckFailure: old,
			ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		})
	}
	return err
}

// deleteItem deletes the item at key if cond holds (always when cond is not set).
func (s *Store) deleteItem(ctx context.Context, key map[string]types.AttributeValue, cond expression.ConditionBuilder) error {
	expr, old, err := build(cond, nil)
	if err == nil {
		_, err = s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: &s.table, Key: key, ReturnValuesOnConditionCheckFailure: old,
			ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		})
	}
	return err
}

// CreateProgram implements queue.Store.
func (s *Store) CreateProgram(ctx context.Context, p admission.Program) error {
	item, err := ProgramItem(p)
	if err == nil {
		err = s.errDeletedIfTombstoned(ctx, p)
	}
	if err == nil {
		err = s.putNew(ctx, item)
	}
	return opErr(err, "create program %s", p.ID)
}

// putNew stores item unless an item with its key exists (queue.ErrConflict).
func (s *Store) putNew(ctx context.Context, av map[string]types.AttributeValue) error {
	err := s.putItem(ctx, av, expression.AttributeNotExists(expression.Name("pk")))
	if _, ok := conditionFailed(err); ok {
		return queue.ErrConflict
	}
	return err
}

// GetProgram implements queue.Store with a strongly consistent read.
func (s *Store) GetProgram(ctx context.Context, id string) (admission.Program, error) {
	item, err := s.getItem(ctx, programKey(id))
	if err == nil && item == nil {
		return admission.Program{}, queue.ErrNotFound
	}
	return decoded("get program "+id, DecodeProgram, item, err)
}

// UpdateProgram implements queue.Store: one UpdateItem on p's previous version and expectIssued.
func (s *Store) UpdateProgram(ctx context.Context, p admission.Program, expectIssued int64) error {
	upd, err := writeOf(p, state, derived)
	if err == nil {
		cond := all(nameOf("version").Equal(expression.Value(p.Version-1)), nameOf("issued").Equal(expression.Value(expectIssued)))
		_, err = s.updateItem(ctx, programKey(p.ID), cond, upd, types.ReturnValueNone)
	}
	if _, ok := conditionFailed(err); ok {
		return queue.ErrConflict // a missing program too: deleted since the caller read it
	}
	return opErr(err, "update program %s", p.ID)
}

// changeIssued holds the tickets issued when UpdateScheduled's change landed, until MoveDrain.
const changeIssued = "changeIssued"

// UpdateScheduled implements queue.ScheduleStore: one UpdateItem on the
// version, which copies issued into changeIssued, and returns that count.
func (s *Store) UpdateScheduled(ctx context.Context, p admission.Program) (int64, error) {
	upd, err := writeOf(p, state, derived)
	var out *dynamodb.UpdateItemOutput
	if err == nil {
		upd = upd.Set(expression.Name(changeIssued), nameOf("issued"))
		out, err = s.updateItem(ctx, programKey(p.ID), nameOf("version").Equal(expression.Value(p.Version-1)), upd, types.ReturnValueAllNew)
	}
	var item map[string]types.AttributeValue
	if _, failed := conditionFailed(err); failed {
		// A conflict, or this write applied by an attempt whose answer was lost.
		if item, err = s.getItem(ctx, programKey(p.ID)); err == nil {
			if q, derr := DecodeProgram(item); item == nil || derr != nil || q.Version != p.Version || len(q.Changes) == 0 || len(p.Changes) == 0 || q.Changes[0] != p.Changes[0] {
				return 0, queue.ErrConflict
			}
		}
	} else if err == nil {
		item = out.Attributes
	}
	if err != nil {
		return 0, opErr(err, "update program %s", p.ID)
	}
	av, ok := item[changeIssued]
	if !ok {
		return p.Issued, nil // the drain instant is moved already
	}
	var issued int64
	err = attributevalue.Unmarshal(av, &issued)
	return issued, opErr(err, "update program %s: attribute %s", p.ID, changeIssued)
}

// MoveDrain implements queue.ScheduleStore: an UpdateItem conditioned on the
// version and changeIssued, which it removes; past int64 it sets math.MaxInt64.
func (s *Store) MoveDrain(ctx context.Context, p admission.Program, issued int64) error {
	drain := nameOf("drainAtNs")
	move := p.DrainMoveNs(issued)
	limit := math.MaxInt64 - max(move, 0) // the latest drain instant the move keeps within int64
	version, changed := nameOf("version").Equal(expression.Value(p.Version)), expression.Name(changeIssued).Equal(expression.Value(issued))
	moveTo := func(cond expression.ConditionBuilder, to expression.OperandBuilder) (bool, error) {
		upd := expression.Set(drain, to).Remove(expression.Name(changeIssued))
		w, err := s.update(ctx, programKey(p.ID), all(version, changed, cond), upd, types.ReturnValueNone)
		return w.ok, opErr(err, "move the drain instant %s", p.ID)
	}
	ok, err := moveTo(drain.LessThanEqual(expression.Value(limit)), drain.Plus(expression.Value(move)))
	if err == nil && !ok {
		_, err = moveTo(drain.GreaterThan(expression.Value(limit)), expression.Value(int64(math.MaxInt64)))
	}
	return err // neither held: moved by an attempt whose answer was lost, or superseded by a later change
}

// IssueTicket implements queue.Store: IssueTickets for one ticket.
func (s *Store) IssueTicket(ctx context.Context, programID string, now time.Time) (admission.Program, error) {
	return s.IssueTickets(ctx, programID, now, 1)
}

// IssueTickets implements tickets.Store: whichever of issueSteps holds,
// without reading the program, at most maxIssueTrials times while it changes.
func (s *Store) IssueTickets(ctx context.Context, programID string, now time.Time, n int64) (admission.Program, error) {
	stepNs := int64(0)
	if n > 1 {
		stepNs = -1
		if v, ok := s.steps.Load(programID); ok {
			stepNs = v.(int64)
		}
	}
	for range maxIssueTrials {
		if stepNs < 0 {
			p, err := s.GetProgram(ctx, programID)
			if err != nil {
				return admission.Program{}, err
			}
			stepNs = p.StepNs()
		}
		for _, st := range issueSteps(now, n, stepNs) {
			p, then, err := s.tryStep(ctx, st, programID, now, n, &stepNs)
			if then == stepDone {
				return p, err
			} else if then == stepsAgain {
				break
			}
		}
	}
	return admission.Program{}, fmt.Errorf("dynamostore: issue ticket %s: program still changing after %d trials", programID, maxIssueTrials)
}

// stepThen is what IssueTickets does after one of its steps.
type stepThen int

const (
	stepDone   stepThen = iota // return the step's program or error
	stepNext                   // the step's condition failed: the next step
	stepsAgain                 // the program changed: the steps again
)

// tryStep writes step st and, when its condition fails, reads why from the
// program it failed on (updating *stepNs if a block assumed another).
func (s *Store) tryStep(ctx context.Context, st issueStep, programID string, now time.Time, n int64, stepNs *int64) (admission.Program, stepThen, error) {
	out, err := s.updateItem(ctx, programKey(programID), st.cond, st.upd, types.ReturnValueAllNew, notRepeated)
	if err == nil {
		p, err := decoded("issue ticket "+programID, DecodeProgram, out.Attributes, nil)
		if err == nil {
			s.steps.Store(programID, p.StepNs())
		}
		return p, stepDone, err
	}
	old, ok := conditionFailed(err)
	if !ok {
		return admission.Program{}, stepDone, opErr(throttled(err), "issue ticket %s", programID)
	}
	if old, err = s.failedOn(ctx, programKey(programID), old); err != nil {
		return admission.Program{}, stepDone, opErr(err, "issue ticket %s", programID)
	} else if old == nil {
		return admission.Program{}, stepDone, queue.ErrNotFound
	}
	p, err := DecodeProgram(old)
	switch {
	case err != nil: // not a program as this version reads it: the next step
	case p.Closed:
		return admission.Program{}, stepDone, queue.ErrClosed
	case p.WithPrequeueFixed(now).PrequeueFixed != p.PrequeueFixed:
		if _, err := s.FixPrequeue(ctx, programID, now); err != nil {
			return admission.Program{}, stepDone, err
		}
		return admission.Program{}, stepsAgain, nil
	case n > 1 && p.StepNs() != *stepNs:
		*stepNs = p.StepNs()
		s.steps.Store(programID, *stepNs) // the other steps assumed the old time per ticket too
		return admission.Program{}, stepsAgain, nil
	case p.DrainAtNs > drainLimit(n, p.StepNs()):
		q, ok, err := s.issueSaturated(ctx, p, now, n)
		if err != nil || ok {
			return q, stepDone, err
		}
		return admission.Program{}, stepsAgain, nil
	}
	return admission.Program{}, stepNext, nil
}

// issueSaturated writes p.WithTicketsIssued computed in Go, for a drain
// instant past int64, if the program is still p; false when it changed.
func (s *Store) issueSaturated(ctx context.Context, p admission.Program, now time.Time, n int64) (admission.Program, bool, error) {
	q := p.WithTicketsIssued(now, n)
	cond := all(nameOf("version").Equal(expression.Value(p.Version)),
		nameOf("issued").Equal(expression.Value(p.Issued)),
		nameOf("drainAtNs").Equal(expression.Value(p.DrainAtNs)))
	upd, err := writeOf(q, state, derived, issuing)
	var w written
	if err == nil {
		w, err = s.update(ctx, programKey(p.ID), cond, upd, types.ReturnValueNone, notRepeated)
	}
	if err != nil || !w.ok {
		return admission.Program{}, false, opErr(err, "issue ticket %s", p.ID)
	}
	s.steps.Store(p.ID, q.StepNs())
	return q, true, nil
}

// FixPrequeue implements queue.PrequeueStore: SET prequeue = issued if the
// program shuffles, has opened and has not fixed it; else the program as it is.
func (s *Store) FixPrequeue(ctx context.Context, programID string, now time.Time) (admission.Program, error) {
	cond := all(nameOf("shuffle").Equal(expression.Value(true)),
		expression.AttributeNotExists(nameOf("prequeueFixed")),
		nameOf("opensAtMs").LessThanEqual(expression.Value(now.UnixMilli())))
	upd := expression.Set(nameOf("prequeue"), nameOf("issued")).Set(nameOf("prequeueFixed"), expression.Value(true))
	out, err := s.updateItem(ctx, programKey(programID), cond, upd, types.ReturnValueAllNew)
	if _, failed := conditionFailed(err); failed {
		return s.GetProgram(ctx, programID)
	} else if err != nil {
		return admission.Program{}, opErr(throttled(err), "fix pre-queue %s", programID)
	}
	return decoded("fix pre-queue "+programID, DecodeProgram, out.Attributes, nil)
}
