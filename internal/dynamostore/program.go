package dynamostore

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/waitingroom/internal/queue"
)

// role says who writes an attribute of the program item.
type role int

const (
	// created: written once, by CreateProgram.
	created role = iota
	// counted: written by CreateProgram and IssueTicket only.
	counted
	// state: written by CreateProgram and UpdateProgram (and, for the
	// admission state, IssueTicket's re-anchoring).
	state
	// derived: computed from other fields, stored so that IssueTicket's
	// conditional writes can use it; written with state, never read back.
	derived
	// sharding: written by CreateProgram and SetShards only.
	sharding
)

// segment says which of the program's segments an attribute belongs to.
type segment int

const (
	noSegment segment = iota
	currentSegment
	nextSegment
)

// attr is one attribute of the program item: its name, who writes it, and
// how it is encoded from and decoded into a queue.Program.
type attr struct {
	name string
	role role
	seg  segment
	part string // the Segment field, for segment attributes
	// enc returns the attribute's value, nil when the attribute is absent.
	enc func(p queue.Program) (types.AttributeValue, error)
	// dec sets the field from the stored value; nil for derived attributes.
	dec func(p *queue.Program, av types.AttributeValue) error
}

// programAttrs is the program item, one attribute a line: the item
// (CreateProgram, GetProgram), UpdateProgram's SET list and IssueTicket's
// conditional writes all come from it. The README's "Data model
// (DynamoDB)" describes each attribute.
var programAttrs = slices.Concat(
	[]attr{
		field("programId", created, func(p *queue.Program) *string { return &p.ID }),
		unixMsField("createdAt", created, func(p *queue.Program) *time.Time { return &p.CreatedAt }),
		field("version", state, func(p *queue.Program) *int64 { return &p.Version }),
		field("issued", counted, func(p *queue.Program) *int64 { return &p.Issued }),
	},
	segmentAttrs(currentSegment, func(p *queue.Program) *queue.Segment { return &p.Current }),
	segmentAttrs(nextSegment, func(p *queue.Program) *queue.Segment { return &p.Next }),
	[]attr{
		derivedField("advancing", func(p queue.Program) bool { return p.Settled().Advancing() }),
		derivedField("nsPerTicket", func(p queue.Program) int64 { return p.StepNs() }),
		field("drainAtNs", state, func(p *queue.Program) *int64 { return &p.DrainAtNs }),
		msField("admissionWindowMs", state, func(p *queue.Program) *time.Duration { return &p.AdmissionWindow }),
		omitEmpty(field("policy", state, func(p *queue.Program) *string { return &p.Policy })),
		field("closed", state, func(p *queue.Program) *bool { return &p.Closed }),
		field("manualRateMilli", state, func(p *queue.Program) *queue.Rate { return &p.ManualRate }),
		unixMsField("lastAdmitAtMs", state, func(p *queue.Program) *time.Time { return &p.LastAdmitAt }),
		msField("lastAdmitGapMs", state, func(p *queue.Program) *time.Duration { return &p.LastAdmitGap }),
		omitEmpty(field("changeIds", state, func(p *queue.Program) *[]string { return &p.Changes })),
		omitEmpty(field("shards", sharding, func(p *queue.Program) *int { return &p.Shards })),
		omitEmpty(unixMsField("opensAtMs", state, func(p *queue.Program) *time.Time { return &p.OpensAt })),
		omitEmpty(field("shuffle", state, func(p *queue.Program) *bool { return &p.Shuffle })),
		omitEmpty(field("shuffleNonce", state, func(p *queue.Program) *string { return &p.ShuffleNonce })),
		omitEmpty(field("prequeue", counted, func(p *queue.Program) *int64 { return &p.Prequeue })),
		omitEmpty(field("prequeueFixed", counted, func(p *queue.Program) *bool { return &p.PrequeueFixed })),
	},
	recentAttrs(),
	profileAttrs(),
)

// recentAttrs are the instants of the last single tickets, recent1 the
// newest, each absent while 0.
func recentAttrs() []attr {
	var attrs []attr
	for i := range queue.RecentTickets {
		attrs = append(attrs, omitEmpty(field(recentName(i), counted, func(p *queue.Program) *int64 { return &p.Recent[i] })))
	}
	return attrs
}

func recentName(i int) string { return "recent" + strconv.Itoa(i+1) }

// profileAttrs are the program's Profile fields, one attribute each, named
// as in queue.ProfileFields and absent when empty.
func profileAttrs() []attr {
	var attrs []attr
	for _, f := range queue.ProfileFields {
		attrs = append(attrs, omitEmpty(field(f.Name, state, func(p *queue.Program) *string { return f.Field(&p.Profile) })))
	}
	return attrs
}

// segmentAttrs are the attributes of one segment: anchorMs, base,
// rateMilli and paused for the current one, nextAnchorMs… for the next.
func segmentAttrs(seg segment, of func(p *queue.Program) *queue.Segment) []attr {
	name := func(part string) string {
		if seg == nextSegment {
			return "next" + strings.ToUpper(part[:1]) + part[1:]
		}
		return part
	}
	attrs := []attr{
		field(name("anchorMs"), state, func(p *queue.Program) *int64 { return &of(p).AnchorMs }),
		field(name("base"), state, func(p *queue.Program) *int64 { return &of(p).Base }),
		field(name("rateMilli"), state, func(p *queue.Program) *queue.Rate { return &of(p).Rate }),
		field(name("paused"), state, func(p *queue.Program) *bool { return &of(p).Paused }),
		omitEmpty(field(name("startMs"), state, func(p *queue.Program) *int64 { return &of(p).StartMs })),
	}
	for i, part := range []string{"anchorMs", "base", "rateMilli", "paused", "startMs"} {
		attrs[i].seg, attrs[i].part = seg, part
	}
	return attrs
}

// field is an attribute holding a field as attributevalue encodes it.
func field[T any](name string, r role, f func(p *queue.Program) *T) attr {
	return attr{
		name: name,
		role: r,
		enc:  func(p queue.Program) (types.AttributeValue, error) { return attributevalue.Marshal(*f(&p)) },
		dec:  func(p *queue.Program, av types.AttributeValue) error { return attributevalue.Unmarshal(av, f(p)) },
	}
}

// unixMsField is an attribute holding a time as Unix ms, 0 for the zero
// time.
func unixMsField(name string, r role, f func(p *queue.Program) *time.Time) attr {
	return attr{
		name: name,
		role: r,
		enc: func(p queue.Program) (types.AttributeValue, error) {
			return attributevalue.Marshal(queue.UnixMs(*f(&p)))
		},
		dec: func(p *queue.Program, av types.AttributeValue) error {
			var ms int64
			err := attributevalue.Unmarshal(av, &ms)
			*f(p) = queue.FromUnixMs(ms)
			return err
		},
	}
}

// msField is an attribute holding a duration in whole ms.
func msField(name string, r role, f func(p *queue.Program) *time.Duration) attr {
	return attr{
		name: name,
		role: r,
		enc: func(p queue.Program) (types.AttributeValue, error) {
			return attributevalue.Marshal(f(&p).Milliseconds())
		},
		dec: func(p *queue.Program, av types.AttributeValue) error {
			var ms int64
			err := attributevalue.Unmarshal(av, &ms)
			*f(p) = time.Duration(ms) * time.Millisecond
			return err
		},
	}
}

// derivedField is a derived attribute.
func derivedField[T any](name string, f func(p queue.Program) T) attr {
	return attr{
		name: name,
		role: derived,
		enc:  func(p queue.Program) (types.AttributeValue, error) { return attributevalue.Marshal(f(p)) },
	}
}

// omitEmpty makes a absent when its value is empty ("", an empty list, 0,
// false).
func omitEmpty(a attr) attr {
	enc := a.enc
	a.enc = func(p queue.Program) (types.AttributeValue, error) {
		av, err := enc(p)
		switch v := av.(type) {
		case *types.AttributeValueMemberS:
			if v.Value == "" {
				return nil, err
			}
		case *types.AttributeValueMemberL:
			if len(v.Value) == 0 {
				return nil, err
			}
		case *types.AttributeValueMemberN:
			if v.Value == "0" {
				return nil, err
			}
		case *types.AttributeValueMemberBOOL:
			if !v.Value {
				return nil, err
			}
		case *types.AttributeValueMemberNULL:
			return nil, err
		}
		return av, err
	}
	return a
}

// attrNamed returns the program attribute called name; it panics if there
// is none, so that a misspelt name fails at start-up.
func attrNamed(name string) attr {
	i := slices.IndexFunc(programAttrs, func(a attr) bool { return a.name == name })
	if i < 0 {
		panic("dynamostore: no program attribute " + name)
	}
	return programAttrs[i]
}

// nameOf is the expression name of the program attribute called name.
func nameOf(name string) expression.NameBuilder { return expression.Name(attrNamed(name).name) }

// segmentAttr returns the attribute of part of segment seg.
func segmentAttr(seg segment, part string) attr {
	i := slices.IndexFunc(programAttrs, func(a attr) bool { return a.seg == seg && a.part == part })
	if i < 0 {
		panic("dynamostore: no segment attribute " + part)
	}
	return programAttrs[i]
}

// encodeProgram returns p's item.
func encodeProgram(p queue.Program) (map[string]types.AttributeValue, error) {
	item := programKey(p.ID)
	for _, a := range programAttrs {
		av, err := a.enc(p)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", a.name, err)
		}
		if av != nil {
			item[a.name] = av
		}
	}
	return item, nil
}

// ProgramItem is p's program item as CreateProgram writes it, for models
// of DynamoDB's capacity that need its size.
func ProgramItem(p queue.Program) (map[string]types.AttributeValue, error) { return encodeProgram(p) }

// decodeProgram reads a program item; absent attributes are zero.
func decodeProgram(item map[string]types.AttributeValue) (queue.Program, error) {
	var p queue.Program
	for _, a := range programAttrs {
		if av, ok := item[a.name]; ok && a.dec != nil {
			if err := a.dec(&p, av); err != nil {
				return queue.Program{}, fmt.Errorf("attribute %s: %w", a.name, err)
			}
		}
	}
	return p, nil
}

// updateOf is UpdateProgram's update: every state and derived attribute
// set to p's value, or removed when absent.
func updateOf(p queue.Program) (expression.UpdateBuilder, error) {
	return writeOf(p, state, derived)
}

// writeOf SETs (or REMOVEs, when absent) the attributes of p that roles
// write.
func writeOf(p queue.Program, roles ...role) (expression.UpdateBuilder, error) {
	var upd expression.UpdateBuilder
	for _, a := range programAttrs {
		if !slices.Contains(roles, a.role) {
			continue
		}
		av, err := a.enc(p)
		switch {
		case err != nil:
			return upd, fmt.Errorf("attribute %s: %w", a.name, err)
		case av == nil:
			upd = upd.Remove(expression.Name(a.name))
		default:
			upd = upd.Set(expression.Name(a.name), expression.Value(av))
		}
	}
	return upd, nil
}

// issueStep is one of IssueTicket's conditional writes, built once; only
// the values of now (and, for a block, its size) change from call to call.
type issueStep struct {
	expr         expression.Expression
	nowMs, nowNs []string // the value placeholders that stand for now
	// For a block of tickets: the placeholders of its size, of its size
	// times the time per ticket, and of the time per ticket it assumes.
	n, nStep, step []string
	// limit: the latest drain instant the write may push back without
	// passing int64.
	limit []string
}

// Stand-ins for the values of a call while the steps are built: the
// builder keeps a value given as an AttributeValue, so its placeholders are
// found by identity.
var (
	nowMsStandIn = &types.AttributeValueMemberN{Value: "0"}
	nowNsStandIn = &types.AttributeValueMemberN{Value: "0"}
	nStandIn     = &types.AttributeValueMemberN{Value: "0"}
	nStepStandIn = &types.AttributeValueMemberN{Value: "0"}
	stepStandIn  = &types.AttributeValueMemberN{Value: "0"}
	limitStandIn = &types.AttributeValueMemberN{Value: "0"}
)

// maxStepNs is the longest time per ticket, that of the slowest rate.
var maxStepNs = queue.Segment{Rate: 1}.StepNs()

// drainLimit is the latest drain instant that n tickets of stepNs each
// push back without passing int64 (DynamoDB's numbers do not saturate as
// WithTicketsIssued does): for a single ticket, whatever its time.
func drainLimit(n, stepNs int64) int64 {
	if n == 1 {
		stepNs = maxStepNs
	}
	return math.MaxInt64 - mulSat(n, stepNs)
}

// issueSteps apply queue.Program.WithTicketIssued in one UpdateItem each,
// without reading the program first; exactly one step's condition holds
// for an open program. See the README, "Data model (DynamoDB)".
var issueSteps = newIssueSteps(false)

// blockSteps apply queue.Program.WithTicketsIssued for a block of n > 1
// tickets: the same three writes, adding n tickets and n times the time
// per ticket to the drain instant. DynamoDB cannot multiply, so the caller
// computes that product from the time per ticket it knows, and each write
// is conditioned on the stored one being the same.
var blockSteps = newIssueSteps(true)

func newIssueSteps(block bool) [3]issueStep {
	nowMs, nowNs := expression.Value(nowMsStandIn), expression.Value(nowNsStandIn)
	one, zero := expression.Value(1), expression.Value(0)
	issued, drain, step := nameOf("issued"), nameOf("drainAtNs"), nameOf("nsPerTicket")
	advancing, version := nameOf("advancing"), nameOf("version")
	nextAnchor := expression.Name(segmentAttr(nextSegment, "anchorMs").name)
	// The program exists and is open, and is not a shuffle past its
	// opening whose pre-queue is not fixed yet (IssueTickets fixes it
	// first: Program.WithPrequeueFixed).
	open := expression.AttributeExists(expression.Name("pk")).And(nameOf("closed").Equal(expression.Value(false))).
		And(expression.Or(expression.AttributeNotExists(nameOf("shuffle")), nameOf("prequeueFixed").Equal(expression.Value(true)), nameOf("opensAtMs").GreaterThan(nowMs)))
	count, stepped := issued.Plus(one), drain.Plus(step) // one ticket
	fromNow := nowNs.Plus(step)
	if block {
		open = open.And(step.Equal(expression.Value(stepStandIn)))
		count, stepped = issued.Plus(expression.Value(nStandIn)), drain.Plus(expression.Value(nStepStandIn))
		fromNow = nowNs.Plus(expression.Value(nStepStandIn))
	}
	// Drained: the settled segment advances and the counter has caught up.
	drained := advancing.Equal(expression.Value(true)).And(drain.LessThanEqual(nowNs))

	// Not drained, admission stopped, or a change pending: the tickets only
	// push the drain instant back.
	// Past the limit, none of the steps applies: IssueTickets saturates
	// the drain instant in Go (issueSaturated).
	busy := open.And(expression.Or(nextAnchor.GreaterThan(nowMs), drain.GreaterThan(nowNs), advancing.Equal(expression.Value(false)))).
		And(drain.LessThanEqual(expression.Value(limitStandIn)))
	extend := expression.Set(issued, count).Set(drain, stepped)

	// Drained: re-anchor the counter at now on the old issued. DynamoDB
	// evaluates every right-hand side on the item as it was; servers that
	// apply the actions in order (dynalite, moto) see base set first.
	reanchor := func() expression.UpdateBuilder {
		return expression.Set(nameOf(segmentAttr(currentSegment, "base").name), issued).
			Set(issued, count).
			Set(nameOf(segmentAttr(currentSegment, "anchorMs").name), nowMs).
			Set(drain, fromNow).
			Set(version, version.Plus(one))
	}
	// Drained under a change that has taken effect: make it current (its
	// rate and pause; base and anchor come from the re-anchoring), then
	// clear it.
	fold := reanchor()
	for _, part := range []string{"rateMilli", "paused", "startMs"} {
		fold = fold.Set(expression.Name(segmentAttr(currentSegment, part).name), expression.IfNotExists(expression.Name(segmentAttr(nextSegment, part).name), zero))
	}
	for _, a := range programAttrs {
		if a.seg == nextSegment {
			z, err := a.enc(queue.Program{})
			switch {
			case err != nil:
				panic(err)
			case z == nil:
				fold = fold.Remove(expression.Name(a.name))
			default:
				fold = fold.Set(expression.Name(a.name), expression.Value(z))
			}
		}
	}
	// A single ticket shifts the instants of the last ones (the oldest
	// first: servers that apply the actions in order then read each value
	// before it is overwritten) and records now.
	recent := func(u expression.UpdateBuilder) expression.UpdateBuilder {
		if block {
			return u
		}
		for i := queue.RecentTickets - 1; i > 0; i-- {
			u = u.Set(nameOf(recentName(i)), expression.IfNotExists(nameOf(recentName(i-1)), zero))
		}
		return u.Set(nameOf(recentName(0)), nowMs)
	}
	return [3]issueStep{
		newIssueStep(busy, recent(extend)),
		newIssueStep(open.And(nextAnchor.Equal(zero)).And(drained), recent(reanchor())),
		newIssueStep(open.And(nextAnchor.NotEqual(zero)).And(nextAnchor.LessThanEqual(nowMs)).And(drained), recent(fold)),
	}
}

func newIssueStep(cond expression.ConditionBuilder, upd expression.UpdateBuilder) issueStep {
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		panic(fmt.Sprintf("dynamostore: issue step: %v", err))
	}
	st := issueStep{expr: expr}
	for k, v := range expr.Values() {
		switch v {
		case types.AttributeValue(nowMsStandIn):
			st.nowMs = append(st.nowMs, k)
		case types.AttributeValue(nowNsStandIn):
			st.nowNs = append(st.nowNs, k)
		case types.AttributeValue(nStandIn):
			st.n = append(st.n, k)
		case types.AttributeValue(nStepStandIn):
			st.nStep = append(st.nStep, k)
		case types.AttributeValue(stepStandIn):
			st.step = append(st.step, k)
		case types.AttributeValue(limitStandIn):
			st.limit = append(st.limit, k)
		}
	}
	return st
}

// input is the step's UpdateItem on programID at now, for a block of n
// tickets of stepNs each (ignored by the single-ticket steps).
func (st issueStep) input(table, programID string, now time.Time, n, stepNs int64) *dynamodb.UpdateItemInput {
	values := maps.Clone(st.expr.Values())
	num := func(v int64) types.AttributeValue {
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
	}
	ms := now.UnixMilli()
	for _, set := range []struct {
		keys []string
		v    int64
	}{
		{st.nowMs, ms}, {st.nowNs, ms * int64(time.Millisecond)},
		{st.n, n}, {st.nStep, mulSat(n, stepNs)}, {st.step, stepNs}, {st.limit, drainLimit(n, stepNs)},
	} {
		for _, k := range set.keys {
			values[k] = num(set.v)
		}
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           &table,
		Key:                                 programKey(programID),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ConditionExpression:                 st.expr.Condition(),
		UpdateExpression:                    st.expr.Update(),
		ExpressionAttributeNames:            st.expr.Names(),
		ExpressionAttributeValues:           values,
	}
}

// mulSat is a×b for a, b ≥ 0, saturating at math.MaxInt64.
func mulSat(a, b int64) int64 {
	if b != 0 && a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// conditionOf is UpdateProgram's condition: p's previous version and
// expectIssued tickets.
func conditionOf(p queue.Program, expectIssued int64) expression.ConditionBuilder {
	return nameOf("version").Equal(expression.Value(p.Version - 1)).
		And(nameOf("issued").Equal(expression.Value(expectIssued)))
}
