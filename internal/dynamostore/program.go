package dynamostore

import (
	"fmt"
	"maps"
	"math"
	"reflect"
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

// programItem is the program item. Its write tags say which write sets
// each attribute besides CreateProgram (untagged: UpdateProgram's state);
// see docs/design.md, "The data model (DynamoDB)".
type programItem struct {
	PK        string `dynamodbav:"pk" write:"created"`
	SK        string `dynamodbav:"sk" write:"created"`
	ProgramID string `dynamodbav:"programId" write:"created"`
	CreatedAt int64  `dynamodbav:"createdAt" write:"created"` // Unix ms
	Version   int64  `dynamodbav:"version"`
	Issued    int64  `dynamodbav:"issued" write:"tickets"`

	// The current segment, then the next (all zero when none is scheduled).
	AnchorMs      int64      `dynamodbav:"anchorMs"`
	Base          int64      `dynamodbav:"base"`
	RateMilli     queue.Rate `dynamodbav:"rateMilli"`
	Paused        bool       `dynamodbav:"paused"`
	StartMs       int64      `dynamodbav:"startMs,omitempty"`
	NextAnchorMs  int64      `dynamodbav:"nextAnchorMs"`
	NextBase      int64      `dynamodbav:"nextBase"`
	NextRateMilli queue.Rate `dynamodbav:"nextRateMilli"`
	NextPaused    bool       `dynamodbav:"nextPaused"`
	NextStartMs   int64      `dynamodbav:"nextStartMs,omitempty"`

	Advancing   bool  `dynamodbav:"advancing" write:"derived"`   // the settled segment advances
	NsPerTicket int64 `dynamodbav:"nsPerTicket" write:"derived"` // its StepNs
	DrainAtNs   int64 `dynamodbav:"drainAtNs"`

	// The options and profile carry their own attribute names; the
	// window and the opening are stored in ms here.
	queue.Options
	AdmissionWindowMs int64 `dynamodbav:"admissionWindowMs"`
	OpensAtMs         int64 `dynamodbav:"opensAtMs,omitempty"`
	ClosesAtMs        int64 `dynamodbav:"closesAtMs,omitempty"`
	queue.Profile

	ManualRateMilli queue.Rate `dynamodbav:"manualRateMilli"`
	LastAdmitAtMs   int64      `dynamodbav:"lastAdmitAtMs"`
	LastAdmitGapMs  int64      `dynamodbav:"lastAdmitGapMs"`
	ChangeIDs       []string   `dynamodbav:"changeIds,omitempty"`
	Shards          int        `dynamodbav:"shards,omitempty" write:"shards"`
	ShuffleNonce    string     `dynamodbav:"shuffleNonce,omitempty"`
	Prequeue        int64      `dynamodbav:"prequeue,omitempty" write:"tickets"`
	PrequeueFixed   bool       `dynamodbav:"prequeueFixed,omitempty" write:"tickets"`
	ExtraGiven      int64      `dynamodbav:"extraGiven,omitempty"`
	CapFrom         int64      `dynamodbav:"capFrom,omitempty"`
	CapRaiseAtMs    int64      `dynamodbav:"capRaiseAtMs,omitempty"`
	// The slots bypass passes hold: a list of maps of
	// queue.Reservation's attributes.
	Reserved []queue.Reservation `dynamodbav:"bypass,omitempty"`

	// The instants (Unix ms) of the last single tickets, newest first.
	Recent1 int64 `dynamodbav:"recent1,omitempty" write:"tickets"`
	Recent2 int64 `dynamodbav:"recent2,omitempty" write:"tickets"`
	Recent3 int64 `dynamodbav:"recent3,omitempty" write:"tickets"`
	Recent4 int64 `dynamodbav:"recent4,omitempty" write:"tickets"`
	Recent5 int64 `dynamodbav:"recent5,omitempty" write:"tickets"`
	Recent6 int64 `dynamodbav:"recent6,omitempty" write:"tickets"`
	Recent7 int64 `dynamodbav:"recent7,omitempty" write:"tickets"`
	Recent8 int64 `dynamodbav:"recent8,omitempty" write:"tickets"`

	// Capacity is the fold's state, which only CapacityStore.ApplyFold
	// writes (absent until the first fold): a map of queue.Capacity's
	// attributes.
	Capacity *queue.Capacity `dynamodbav:"capacity,omitempty" write:"fold"`
}

// itemOf is p's program item.
func itemOf(p queue.Program) programItem {
	it := programItem{
		PK: "PROGRAM#" + p.ID, SK: programSK,
		ProgramID: p.ID, CreatedAt: queue.UnixMs(p.CreatedAt), Version: p.Version, Issued: p.Issued,
		AnchorMs: p.Current.AnchorMs, Base: p.Current.Base, RateMilli: p.Current.Rate, Paused: p.Current.Paused, StartMs: p.Current.StartMs,
		NextAnchorMs: p.Next.AnchorMs, NextBase: p.Next.Base, NextRateMilli: p.Next.Rate, NextPaused: p.Next.Paused, NextStartMs: p.Next.StartMs,
		Advancing: p.Settled().Advancing(), NsPerTicket: p.StepNs(), DrainAtNs: p.DrainAtNs,
		Options:           p.Options,
		AdmissionWindowMs: p.AdmissionWindow.Milliseconds(),
		OpensAtMs:         queue.UnixMs(p.OpensAt),
		ClosesAtMs:        queue.UnixMs(p.ClosesAt),
		Profile:           p.Profile,
		ManualRateMilli:   p.ManualRate, LastAdmitAtMs: queue.UnixMs(p.LastAdmitAt), LastAdmitGapMs: p.LastAdmitGap.Milliseconds(),
		ChangeIDs: p.Changes, Shards: p.Shards, ShuffleNonce: p.ShuffleNonce, Prequeue: p.Prequeue, PrequeueFixed: p.PrequeueFixed,
		ExtraGiven: p.ExtraGiven, CapFrom: p.CapFrom, CapRaiseAtMs: p.CapRaiseAtMs,
		Reserved: p.Reserved,
	}
	it.Recent1, it.Recent2, it.Recent3, it.Recent4 = p.Recent[0], p.Recent[1], p.Recent[2], p.Recent[3]
	it.Recent5, it.Recent6, it.Recent7, it.Recent8 = p.Recent[4], p.Recent[5], p.Recent[6], p.Recent[7]
	if !reflect.ValueOf(p.Capacity).IsZero() {
		c := p.Capacity
		it.Capacity = &c
	}
	return it
}

// program is the queue.Program the item holds.
func (it programItem) program() queue.Program {
	p := queue.Program{
		ID: it.ProgramID, CreatedAt: queue.FromUnixMs(it.CreatedAt), Version: it.Version, Issued: it.Issued,
		Current:    queue.Segment{AnchorMs: it.AnchorMs, Base: it.Base, Rate: it.RateMilli, Paused: it.Paused, StartMs: it.StartMs},
		Next:       queue.Segment{AnchorMs: it.NextAnchorMs, Base: it.NextBase, Rate: it.NextRateMilli, Paused: it.NextPaused, StartMs: it.NextStartMs},
		DrainAtNs:  it.DrainAtNs,
		Options:    it.Options,
		ManualRate: it.ManualRateMilli, LastAdmitAt: queue.FromUnixMs(it.LastAdmitAtMs), LastAdmitGap: time.Duration(it.LastAdmitGapMs) * time.Millisecond,
		Changes: it.ChangeIDs, Shards: it.Shards, ShuffleNonce: it.ShuffleNonce, Prequeue: it.Prequeue, PrequeueFixed: it.PrequeueFixed, ExtraGiven: it.ExtraGiven, CapFrom: it.CapFrom, CapRaiseAtMs: it.CapRaiseAtMs,
		Reserved: it.Reserved,
		Recent:   [queue.RecentTickets]int64{it.Recent1, it.Recent2, it.Recent3, it.Recent4, it.Recent5, it.Recent6, it.Recent7, it.Recent8},
	}
	p.AdmissionWindow = time.Duration(it.AdmissionWindowMs) * time.Millisecond
	p.OpensAt = queue.FromUnixMs(it.OpensAtMs)
	p.ClosesAt = queue.FromUnixMs(it.ClosesAtMs)
	p.Profile = it.Profile
	if it.Capacity != nil {
		p.Capacity = *it.Capacity
	}
	return p
}

// writers maps each write tag ("" for state) to the attributes it names,
// read from programItem's tags.
var writers = func() map[string][]string {
	w := map[string][]string{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("dynamodbav"), ",")
			switch {
			case f.Anonymous:
				walk(f.Type)
			case name != "-":
				w[f.Tag.Get("write")] = append(w[f.Tag.Get("write")], name)
			}
		}
	}
	walk(reflect.TypeFor[programItem]())
	return w
}()

// Who writes an attribute (programItem's write tags).
const (
	state   = ""
	created = "created"
	issuing = "tickets"
	derived = "derived"
	// "fold": the capacity, which only ApplyFold writes.
)

// nameOf is the expression name of the program attribute called name; it
// panics if there is none, so that a misspelt name fails at start-up.
func nameOf(name string) expression.NameBuilder {
	for _, names := range writers {
		if slices.Contains(names, name) {
			return expression.Name(name)
		}
	}
	panic("dynamostore: no program attribute " + name)
}

// encodeProgram returns p's item.
func encodeProgram(p queue.Program) (map[string]types.AttributeValue, error) {
	return attributevalue.MarshalMap(itemOf(p))
}

// ProgramItem is p's program item as CreateProgram writes it, for models
// of DynamoDB's capacity that need its size.
func ProgramItem(p queue.Program) (map[string]types.AttributeValue, error) { return encodeProgram(p) }

// decodeProgram reads a program item; absent attributes are zero.
func decodeProgram(item map[string]types.AttributeValue) (queue.Program, error) {
	var it programItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return queue.Program{}, err
	}
	return it.program(), nil
}

// updateOf is UpdateProgram's update: every state and derived attribute
// set to p's value, or removed when absent.
func updateOf(p queue.Program) (expression.UpdateBuilder, error) {
	return writeOf(p, state, derived)
}

// writeOf SETs (or REMOVEs, when absent) the attributes of p that the
// writers named write.
func writeOf(p queue.Program, who ...string) (expression.UpdateBuilder, error) {
	var upd expression.UpdateBuilder
	item, err := encodeProgram(p)
	if err != nil {
		return upd, err
	}
	for _, w := range who {
		for _, name := range writers[w] {
			if av, ok := item[name]; ok {
				upd = upd.Set(expression.Name(name), expression.Value(av))
			} else {
				upd = upd.Remove(expression.Name(name))
			}
		}
	}
	return upd, nil
}

// nextAttrs are the attributes of the next segment.
var nextAttrs = []string{"nextAnchorMs", "nextBase", "nextRateMilli", "nextPaused", "nextStartMs"}

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
	return math.MaxInt64 - queue.MulSat(n, stepNs)
}

// issueSteps apply queue.Program.WithTicketIssued in one UpdateItem each,
// without reading the program first; exactly one step's condition holds
// for an open program. See docs/design.md, "The data model (DynamoDB)".
var issueSteps = newIssueSteps(false)

// blockSteps apply queue.Program.WithTicketsIssued for a block of n > 1
// tickets. DynamoDB cannot multiply, so the caller passes n times the time
// per ticket it knows, and each write is conditioned on that time.
var blockSteps = newIssueSteps(true)

func newIssueSteps(block bool) [3]issueStep {
	nowMs, nowNs := expression.Value(nowMsStandIn), expression.Value(nowNsStandIn)
	one, zero := expression.Value(1), expression.Value(0)
	issued, drain, step := nameOf("issued"), nameOf("drainAtNs"), nameOf("nsPerTicket")
	advancing, version := nameOf("advancing"), nameOf("version")
	nextAnchor := nameOf("nextAnchorMs")
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
		return expression.Set(nameOf("base"), issued).
			Set(issued, count).
			Set(nameOf("anchorMs"), nowMs).
			Set(drain, fromNow).
			Set(version, version.Plus(one))
	}
	// Drained under a change that has taken effect: make it current (its
	// rate and pause; base and anchor come from the re-anchoring), then
	// clear it.
	fold := reanchor()
	for _, part := range []string{"rateMilli", "paused", "startMs"} {
		fold = fold.Set(nameOf(part), expression.IfNotExists(nameOf("next"+strings.ToUpper(part[:1])+part[1:]), zero))
	}
	none, err := encodeProgram(queue.Program{})
	if err != nil {
		panic(err)
	}
	for _, name := range nextAttrs {
		if z, ok := none[name]; ok {
			fold = fold.Set(nameOf(name), expression.Value(z))
		} else {
			fold = fold.Remove(nameOf(name))
		}
	}
	// A single ticket shifts the instants of the last ones (the oldest
	// first: servers that apply the actions in order then read each value
	// before it is overwritten) and records now.
	recent := func(u expression.UpdateBuilder) expression.UpdateBuilder {
		if block {
			return u
		}
		recentName := func(i int) string { return "recent" + strconv.Itoa(i+1) }
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
		{st.n, n}, {st.nStep, queue.MulSat(n, stepNs)}, {st.step, stepNs}, {st.limit, drainLimit(n, stepNs)},
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

// conditionOf is UpdateProgram's condition: p's previous version and
// expectIssued tickets.
func conditionOf(p queue.Program, expectIssued int64) expression.ConditionBuilder {
	return nameOf("version").Equal(expression.Value(p.Version - 1)).
		And(nameOf("issued").Equal(expression.Value(expectIssued)))
}
