package dynamostore

import (
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/settings"
)

// programItem is the program item; write tags say which write sets each
// attribute besides CreateProgram (untagged: UpdateProgram's state).
type programItem struct {
	PK        string `dynamodbav:"pk" write:"created"`
	SK        string `dynamodbav:"sk" write:"created"`
	ProgramID string `dynamodbav:"programId" write:"created"`
	CreatedAt int64  `dynamodbav:"createdAt" write:"created"` // Unix ms
	Version   int64  `dynamodbav:"version"`
	Issued    int64  `dynamodbav:"issued" write:"tickets"`

	// The current segment, then the next (all zero when none is scheduled).
	AnchorMs      int64     `dynamodbav:"anchorMs"`
	Base          int64     `dynamodbav:"base"`
	RateMilli     pace.Rate `dynamodbav:"rateMilli"`
	Paused        bool      `dynamodbav:"paused"`
	StartMs       int64     `dynamodbav:"startMs,omitempty"`
	NextAnchorMs  int64     `dynamodbav:"nextAnchorMs"`
	NextBase      int64     `dynamodbav:"nextBase"`
	NextRateMilli pace.Rate `dynamodbav:"nextRateMilli"`
	NextPaused    bool      `dynamodbav:"nextPaused"`
	NextStartMs   int64     `dynamodbav:"nextStartMs,omitempty"`

	Advancing   bool  `dynamodbav:"advancing" write:"derived"`   // the settled segment advances
	NsPerTicket int64 `dynamodbav:"nsPerTicket" write:"derived"` // its StepNs
	DrainAtNs   int64 `dynamodbav:"drainAtNs"`

	settings.Options        // and Profile: with their own attribute names
	AdmissionWindowMs int64 `dynamodbav:"admissionWindowMs"`
	OpensAtMs         int64 `dynamodbav:"opensAtMs,omitempty"`
	ClosesAtMs        int64 `dynamodbav:"closesAtMs,omitempty"`
	settings.Profile
	settings.Edge
	FailOpenUntilMs int64 `dynamodbav:"failOpenUntilMs,omitempty"`

	ManualRateMilli pace.Rate              `dynamodbav:"manualRateMilli"`
	LastAdmitAtMs   int64                  `dynamodbav:"lastAdmitAtMs"`
	LastAdmitGapMs  int64                  `dynamodbav:"lastAdmitGapMs"`
	ChangeIDs       []string               `dynamodbav:"changeIds,omitempty"`
	Shards          int                    `dynamodbav:"shards,omitempty" write:"shards"`
	ShuffleNonce    string                 `dynamodbav:"shuffleNonce,omitempty"`
	Prequeue        int64                  `dynamodbav:"prequeue,omitempty" write:"tickets"`
	PrequeueFixed   bool                   `dynamodbav:"prequeueFixed,omitempty" write:"tickets"`
	ExtraGiven      int64                  `dynamodbav:"extraGiven,omitempty"`
	CapRaised       int64                  `dynamodbav:"capRaised,omitempty"`
	Reserved        []capacity.Reservation `dynamodbav:"bypass,omitempty"` // the slots bypass passes hold

	// The instants (Unix ms) of the last single tickets, newest first.
	Recent1 int64 `dynamodbav:"recent1,omitempty" write:"tickets"`
	Recent2 int64 `dynamodbav:"recent2,omitempty" write:"tickets"`
	Recent3 int64 `dynamodbav:"recent3,omitempty" write:"tickets"`
	Recent4 int64 `dynamodbav:"recent4,omitempty" write:"tickets"`
	Recent5 int64 `dynamodbav:"recent5,omitempty" write:"tickets"`
	Recent6 int64 `dynamodbav:"recent6,omitempty" write:"tickets"`
	Recent7 int64 `dynamodbav:"recent7,omitempty" write:"tickets"`
	Recent8 int64 `dynamodbav:"recent8,omitempty" write:"tickets"`

	// Enqueue is the site's enqueue tokens (absent: none).
	Enqueue *settings.Enqueue `dynamodbav:"enqueue,omitempty"`

	// Capacity is the fold's state (absent until the first), written by ApplyFold.
	Capacity *capacity.Capacity `dynamodbav:"capacity,omitempty" write:"fold"`
}

// ProgramItem is p's program item as CreateProgram writes it.
func ProgramItem(p admission.Program) (map[string]types.AttributeValue, error) {
	it := programItem{
		PK: "PROGRAM#" + p.ID, SK: programSK,
		ProgramID: p.ID, CreatedAt: pace.UnixMs(p.CreatedAt), Version: p.Version, Issued: p.Issued,
		AnchorMs: p.Current.AnchorMs, Base: p.Current.Base, RateMilli: p.Current.Rate, Paused: p.Current.Paused, StartMs: p.Current.StartMs,
		NextAnchorMs: p.Next.AnchorMs, NextBase: p.Next.Base, NextRateMilli: p.Next.Rate, NextPaused: p.Next.Paused, NextStartMs: p.Next.StartMs,
		Advancing: p.Settled().Advancing(), NsPerTicket: p.StepNs(), DrainAtNs: p.DrainAtNs,
		Options: p.Options, AdmissionWindowMs: p.AdmissionWindow.Milliseconds(), Profile: p.Profile,
		OpensAtMs: pace.UnixMs(p.OpensAt), ClosesAtMs: pace.UnixMs(p.ClosesAt),
		Edge: p.Edge, FailOpenUntilMs: pace.UnixMs(p.Edge.FailOpenUntil),
		ManualRateMilli: p.ManualRate, LastAdmitAtMs: pace.UnixMs(p.LastAdmitAt), LastAdmitGapMs: p.LastAdmitGap.Milliseconds(),
		ChangeIDs: p.Changes, Shards: p.Shards, ShuffleNonce: p.ShuffleNonce, Prequeue: p.Prequeue, PrequeueFixed: p.PrequeueFixed,
		ExtraGiven: p.ExtraGiven, CapRaised: p.CapRaised,
		Reserved: p.Reserved,
	}
	it.Recent1, it.Recent2, it.Recent3, it.Recent4 = p.Recent[0], p.Recent[1], p.Recent[2], p.Recent[3]
	it.Recent5, it.Recent6, it.Recent7, it.Recent8 = p.Recent[4], p.Recent[5], p.Recent[6], p.Recent[7]
	if !reflect.ValueOf(p.Capacity).IsZero() {
		c := p.Capacity
		it.Capacity = &c
	}
	if p.Enqueue != (settings.Enqueue{}) {
		e := p.Enqueue
		it.Enqueue = &e
	}
	return attributevalue.MarshalMap(it)
}

// DecodeProgram reads a program item (also for cmd/audit); absent attributes are zero.
func DecodeProgram(item map[string]types.AttributeValue) (admission.Program, error) {
	it, err := unmarshal[programItem](item)
	if err != nil {
		return admission.Program{}, err
	}
	p := admission.Program{
		ID: it.ProgramID, CreatedAt: pace.FromUnixMs(it.CreatedAt), Version: it.Version, Issued: it.Issued,
		Current:    pace.Segment{AnchorMs: it.AnchorMs, Base: it.Base, Rate: it.RateMilli, Paused: it.Paused, StartMs: it.StartMs},
		Next:       pace.Segment{AnchorMs: it.NextAnchorMs, Base: it.NextBase, Rate: it.NextRateMilli, Paused: it.NextPaused, StartMs: it.NextStartMs},
		DrainAtNs:  it.DrainAtNs,
		Options:    it.Options,
		ManualRate: it.ManualRateMilli, LastAdmitAt: pace.FromUnixMs(it.LastAdmitAtMs), LastAdmitGap: time.Duration(it.LastAdmitGapMs) * time.Millisecond,
		Changes: it.ChangeIDs, Shards: it.Shards, ShuffleNonce: it.ShuffleNonce, Prequeue: it.Prequeue, PrequeueFixed: it.PrequeueFixed, ExtraGiven: it.ExtraGiven, CapRaised: it.CapRaised,
		Reserved: it.Reserved,
		Recent:   [admission.RecentTickets]int64{it.Recent1, it.Recent2, it.Recent3, it.Recent4, it.Recent5, it.Recent6, it.Recent7, it.Recent8},
	}
	p.AdmissionWindow = time.Duration(it.AdmissionWindowMs) * time.Millisecond
	p.OpensAt = pace.FromUnixMs(it.OpensAtMs)
	p.ClosesAt = pace.FromUnixMs(it.ClosesAtMs)
	p.Profile = it.Profile
	p.Edge = it.Edge
	p.Edge.FailOpenUntil = pace.FromUnixMs(it.FailOpenUntilMs)
	if it.Capacity != nil {
		p.Capacity = *it.Capacity
	}
	if it.Enqueue != nil {
		p.Enqueue = *it.Enqueue
	}
	return p, nil
}

// writers maps each write tag to the attributes programItem tags with it.
var writers = func() map[string][]string {
	w := map[string][]string{}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[programItem]()) {
		name, _, _ := strings.Cut(f.Tag.Get("dynamodbav"), ",")
		if !f.Anonymous && name != "-" {
			w[f.Tag.Get("write")] = append(w[f.Tag.Get("write")], name)
		}
	}
	return w
}()

// Who writes an attribute (programItem's write tags; also "created",
// "shards" and "fold", set by their own writes only).
const (
	state   = ""
	issuing = "tickets"
	derived = "derived"
)

// nameOf is the expression name of the program attribute name; it panics if there is none.
func nameOf(name string) expression.NameBuilder {
	for _, names := range writers {
		if slices.Contains(names, name) {
			return expression.Name(name)
		}
	}
	panic("dynamostore: no program attribute " + name)
}

// writeOf SETs (REMOVEs when absent) the attributes of p that who write.
func writeOf(p admission.Program, who ...string) (expression.UpdateBuilder, error) {
	var upd expression.UpdateBuilder
	item, err := ProgramItem(p)
	for _, w := range who {
		upd = setOrRemove(upd, item, writers[w]...)
	}
	return upd, err
}

// noProgram is the item of the zero program, whose next segment is none.
var noProgram = func() map[string]types.AttributeValue {
	item, err := ProgramItem(admission.Program{})
	if err != nil {
		panic(err)
	}
	return item
}()

// maxStepNs is the longest time per ticket, that of the slowest rate.
var maxStepNs = pace.Segment{Rate: 1}.StepNs()

// drainLimit is the latest drain instant n tickets of stepNs (one: any) push back within int64.
func drainLimit(n, stepNs int64) int64 {
	if n == 1 {
		stepNs = maxStepNs
	}
	return math.MaxInt64 - pace.MulSat(n, stepNs)
}

// issueStep is one of IssueTickets' conditional writes of the program.
type issueStep struct {
	cond expression.ConditionBuilder
	upd  expression.UpdateBuilder
}

// issueSteps apply Program.WithTicketsIssued for n tickets at now, one
// UpdateItem each, exactly one holding for an open program; a block (n > 1)
// is conditioned on the time per ticket stepNs.
func issueSteps(now time.Time, n, stepNs int64) [3]issueStep {
	ms := now.UnixMilli()
	nowMs, nowNs := expression.Value(ms), expression.Value(ms*int64(time.Millisecond))
	one, zero := expression.Value(1), expression.Value(0)
	issued, drain, step := nameOf("issued"), nameOf("drainAtNs"), nameOf("nsPerTicket")
	advancing, version := nameOf("advancing"), nameOf("version")
	nextAnchor := nameOf("nextAnchorMs")
	// Exists, open, and not a shuffle past its opening with its pre-queue not fixed.
	open := []expression.ConditionBuilder{expression.AttributeExists(expression.Name("pk")), nameOf("closed").Equal(expression.Value(false)),
		expression.Or(expression.AttributeNotExists(nameOf("shuffle")), nameOf("prequeueFixed").Equal(expression.Value(true)), nameOf("opensAtMs").GreaterThan(nowMs))}
	count, stepped := issued.Plus(one), drain.Plus(step) // one ticket
	fromNow := nowNs.Plus(step)
	if n > 1 {
		open = append(open, step.Equal(expression.Value(stepNs)))
		count, stepped = issued.Plus(expression.Value(n)), drain.Plus(expression.Value(pace.MulSat(n, stepNs)))
		fromNow = nowNs.Plus(expression.Value(pace.MulSat(n, stepNs)))
	}
	// Drained: the settled segment advances and the counter has caught up.
	drained := []expression.ConditionBuilder{advancing.Equal(expression.Value(true)), drain.LessThanEqual(nowNs)}

	// Not drained, admission stopped, or a change pending: push the drain
	// instant back (up to the limit: issueSaturated).
	busy := all(slices.Concat(open, []expression.ConditionBuilder{
		expression.Or(nextAnchor.GreaterThan(nowMs), drain.GreaterThan(nowNs), advancing.Equal(expression.Value(false))),
		drain.LessThanEqual(expression.Value(drainLimit(n, stepNs)))})...)
	extend := expression.Set(issued, count).Set(drain, stepped)

	// Drained: re-anchor at now on the old issued (base first for servers
	// that apply SETs in order).
	reanchor := func() expression.UpdateBuilder {
		return expression.Set(nameOf("base"), issued).
			Set(issued, count).
			Set(nameOf("anchorMs"), nowMs).
			Set(drain, fromNow).
			Set(version, version.Plus(one))
	}
	return [3]issueStep{
		{busy, withRecent(extend, nowMs, n)},
		{all(slices.Concat(open, []expression.ConditionBuilder{nextAnchor.Equal(zero)}, drained)...), withRecent(reanchor(), nowMs, n)},
		{all(slices.Concat(open, []expression.ConditionBuilder{nextAnchor.NotEqual(zero), nextAnchor.LessThanEqual(nowMs)}, drained)...),
			withRecent(promoteNext(reanchor()), nowMs, n)},
	}
}

// promoteNext adds to u making the next segment current, and its clearing.
func promoteNext(u expression.UpdateBuilder) expression.UpdateBuilder {
	for _, part := range []string{"rateMilli", "paused", "startMs"} {
		u = u.Set(nameOf(part), expression.IfNotExists(nameOf("next"+strings.ToUpper(part[:1])+part[1:]), expression.Value(0)))
	}
	return setOrRemove(u, noProgram, "nextAnchorMs", "nextBase", "nextRateMilli", "nextPaused", "nextStartMs")
}

// withRecent adds to u, for a single ticket (n = 1), the shift of the last
// ones' instants (oldest first, for servers that apply SETs in order) and now.
func withRecent(u expression.UpdateBuilder, nowMs expression.ValueBuilder, n int64) expression.UpdateBuilder {
	if n > 1 {
		return u
	}
	recentName := func(i int) string { return "recent" + strconv.Itoa(i+1) }
	for i := admission.RecentTickets - 1; i > 0; i-- {
		u = u.Set(nameOf(recentName(i)), expression.IfNotExists(nameOf(recentName(i-1)), expression.Value(0)))
	}
	return u.Set(nameOf(recentName(0)), nowMs)
}
