// Package dynamostore is the DynamoDB queue.Store: one table, on-demand
// capacity, every invariant kept by a conditional write so that any number
// of Lambda instances can share it without a lock.
//
// # Table
//
// Key attributes pk (S, partition key) and sk (S, sort key); billing mode
// PAY_PER_REQUEST; TTL enabled on ttl. CreateTable creates it.
//
// # Program item
//
// pk = "PROGRAM#<programId>", sk = "PROGRAM".
//
//	programId          S     the program id
//	createdAt          N     creation time, Unix ms
//	version            N     bumped by every settings or admission change
//	issued             N     tickets handed out (1..issued)
//	rate               N     admission rate, people per second
//	paused             BOOL  admission stopped by the admin
//	advancing          BOOL  !paused && rate > 0: the serving counter grows by itself
//	base               N     serving counter at anchorMs
//	anchorMs           N     instant the counter last re-anchored, Unix ms
//	nextAtMs           N     instant a scheduled admin change takes effect, Unix ms; 0 when none
//	nextBase           N     serving counter at nextAtMs
//	nextRate           N     admission rate from nextAtMs
//	nextPaused         BOOL  paused from nextAtMs
//	nextAdvancing      BOOL  !nextPaused && nextRate > 0
//	msPerTicket        N     1000/rate of the settled segment (the next one if scheduled) while it advances, 0 otherwise
//	drainAtMs          N     instant the counter reaches issued, Unix ms (fractional)
//	admissionWindowMs  N     how long an admitted token stays valid, ms
//	policy             S     the program's polling policy; absent for the service's default
//	closed             BOOL  no new entries
//	manualRate         N     measured pace of manual admissions, people per second; 0 when none
//	lastAdmitAtMs      N     last manual admission, Unix ms; 0 when none
//	lastAdmitGapMs     N     gap between the last two manual admissions, ms
//
// advancing, nextAdvancing and msPerTicket are derived from the rates and
// pauses; they are stored so that IssueTicket can apply
// queue.Program.WithTicketIssued inside a single UpdateItem, without reading
// the program first.
//
// # Token item
//
// pk = "TOKEN#<tokenId>", sk = "TOKEN".
//
//	tokenId             S  the token id
//	programId           S  the program whose queue the token is in
//	ticket              N  the token's ticket number
//	issuedAt            N  Unix ms
//	admittedAt          N  Unix ms; absent while not admitted
//	admissionExpiresAt  N  Unix ms; absent while not admitted
//	leftAt              N  Unix ms; absent unless the person left
//	ttl                 N  Unix seconds (Token.ExpiresAt rounded up): DynamoDB deletes the item after it
//
// Times are kept to the millisecond (ExpiresAt to the second, rounded up so
// an item never goes before its time); a zero time.Time is stored as an
// absent attribute, or 0 for the program's times, and read back as zero.
package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"maps"
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

// Store is a queue.Store on one DynamoDB table, safe for concurrent use.
type Store struct {
	client *dynamodb.Client
	table  string
}

var _ queue.Store = (*Store)(nil)

// New returns a Store on table, which must exist (see CreateTable).
func New(client *dynamodb.Client, table string) *Store {
	return &Store{client: client, table: table}
}

const (
	programSK = "PROGRAM"
	tokenSK   = "TOKEN"
	// maxIssueTrials bounds IssueTicket's optimistic loop. A trial only
	// fails when the program changes between its two conditional writes
	// (another caller re-anchored it, or an admin change), so a couple of
	// trials are almost always enough.
	maxIssueTrials = 5
)

type programItem struct {
	PK                string  `dynamodbav:"pk"`
	SK                string  `dynamodbav:"sk"`
	ProgramID         string  `dynamodbav:"programId"`
	CreatedAt         int64   `dynamodbav:"createdAt"`
	Version           int64   `dynamodbav:"version"`
	Issued            int64   `dynamodbav:"issued"`
	Rate              float64 `dynamodbav:"rate"`
	Paused            bool    `dynamodbav:"paused"`
	Advancing         bool    `dynamodbav:"advancing"`
	MsPerTicket       float64 `dynamodbav:"msPerTicket"`
	Base              int64   `dynamodbav:"base"`
	AnchorMs          int64   `dynamodbav:"anchorMs"`
	NextAtMs          int64   `dynamodbav:"nextAtMs"`
	NextBase          int64   `dynamodbav:"nextBase"`
	NextRate          float64 `dynamodbav:"nextRate"`
	NextPaused        bool    `dynamodbav:"nextPaused"`
	NextAdvancing     bool    `dynamodbav:"nextAdvancing"`
	Policy            string  `dynamodbav:"policy,omitempty"`
	Closed            bool    `dynamodbav:"closed"`
	ManualRate        float64 `dynamodbav:"manualRate"`
	LastAdmitAtMs     int64   `dynamodbav:"lastAdmitAtMs"`
	LastAdmitGapMs    int64   `dynamodbav:"lastAdmitGapMs"`
	DrainAtMs         float64 `dynamodbav:"drainAtMs"`
	AdmissionWindowMs int64   `dynamodbav:"admissionWindowMs"`
}

type tokenItem struct {
	PK                 string `dynamodbav:"pk"`
	SK                 string `dynamodbav:"sk"`
	TokenID            string `dynamodbav:"tokenId"`
	ProgramID          string `dynamodbav:"programId"`
	Ticket             int64  `dynamodbav:"ticket"`
	IssuedAt           int64  `dynamodbav:"issuedAt,omitempty"`
	AdmittedAt         int64  `dynamodbav:"admittedAt,omitempty"`
	AdmissionExpiresAt int64  `dynamodbav:"admissionExpiresAt,omitempty"`
	LeftAt             int64  `dynamodbav:"leftAt,omitempty"`
	TTL                int64  `dynamodbav:"ttl,omitempty"`
}

func programKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "PROGRAM#" + id},
		"sk": &types.AttributeValueMemberS{Value: programSK},
	}
}

func tokenKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "TOKEN#" + id},
		"sk": &types.AttributeValueMemberS{Value: tokenSK},
	}
}

// unixMs is t in Unix milliseconds, 0 for the zero time.
func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// fromUnixMs is the inverse of unixMs, in UTC.
func fromUnixMs(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// ttlSeconds is t in Unix seconds rounded up (0 for the zero time), so that
// TTL never deletes an item before t.
func ttlSeconds(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	s := t.Unix()
	if t.After(time.Unix(s, 0)) {
		s++
	}
	return s
}

func fromTTL(s int64) time.Time {
	if s == 0 {
		return time.Time{}
	}
	return time.Unix(s, 0).UTC()
}

func toProgramItem(p queue.Program) programItem {
	return programItem{
		PK:                "PROGRAM#" + p.ID,
		SK:                programSK,
		ProgramID:         p.ID,
		CreatedAt:         unixMs(p.CreatedAt),
		Version:           p.Version,
		Issued:            p.Issued,
		Rate:              p.Rate,
		Paused:            p.Paused,
		Advancing:         queue.Segment{Rate: p.Rate, Paused: p.Paused}.Advancing(),
		MsPerTicket:       p.StepMs(),
		Base:              p.Base,
		AnchorMs:          unixMs(p.Anchor),
		NextAtMs:          unixMs(p.NextAt),
		NextBase:          p.NextBase,
		NextRate:          p.NextRate,
		NextPaused:        p.NextPaused,
		NextAdvancing:     !p.NextAt.IsZero() && queue.Segment{Rate: p.NextRate, Paused: p.NextPaused}.Advancing(),
		Policy:            p.Policy,
		Closed:            p.Closed,
		ManualRate:        p.ManualRate,
		LastAdmitAtMs:     unixMs(p.LastAdmitAt),
		LastAdmitGapMs:    p.LastAdmitGap.Milliseconds(),
		DrainAtMs:         p.DrainAtMs,
		AdmissionWindowMs: p.AdmissionWindow.Milliseconds(),
	}
}

func (it programItem) program() queue.Program {
	return queue.Program{
		ID:              it.ProgramID,
		CreatedAt:       fromUnixMs(it.CreatedAt),
		Version:         it.Version,
		Issued:          it.Issued,
		Rate:            it.Rate,
		Paused:          it.Paused,
		Base:            it.Base,
		Anchor:          fromUnixMs(it.AnchorMs),
		NextAt:          fromUnixMs(it.NextAtMs),
		NextBase:        it.NextBase,
		NextRate:        it.NextRate,
		NextPaused:      it.NextPaused,
		Policy:          it.Policy,
		Closed:          it.Closed,
		ManualRate:      it.ManualRate,
		LastAdmitAt:     fromUnixMs(it.LastAdmitAtMs),
		LastAdmitGap:    time.Duration(it.LastAdmitGapMs) * time.Millisecond,
		DrainAtMs:       it.DrainAtMs,
		AdmissionWindow: time.Duration(it.AdmissionWindowMs) * time.Millisecond,
	}
}

func toTokenItem(t queue.Token) tokenItem {
	return tokenItem{
		PK:                 "TOKEN#" + t.ID,
		SK:                 tokenSK,
		TokenID:            t.ID,
		ProgramID:          t.ProgramID,
		Ticket:             t.Ticket,
		IssuedAt:           unixMs(t.IssuedAt),
		AdmittedAt:         unixMs(t.AdmittedAt),
		AdmissionExpiresAt: unixMs(t.AdmissionExpiresAt),
		LeftAt:             unixMs(t.LeftAt),
		TTL:                ttlSeconds(t.ExpiresAt),
	}
}

func (it tokenItem) token() queue.Token {
	return queue.Token{
		ID:                 it.TokenID,
		ProgramID:          it.ProgramID,
		Ticket:             it.Ticket,
		IssuedAt:           fromUnixMs(it.IssuedAt),
		AdmittedAt:         fromUnixMs(it.AdmittedAt),
		AdmissionExpiresAt: fromUnixMs(it.AdmissionExpiresAt),
		LeftAt:             fromUnixMs(it.LeftAt),
		ExpiresAt:          fromTTL(it.TTL),
	}
}

func decodeProgram(av map[string]types.AttributeValue) (queue.Program, error) {
	var it programItem
	if err := attributevalue.UnmarshalMap(av, &it); err != nil {
		return queue.Program{}, err
	}
	return it.program(), nil
}

func decodeToken(av map[string]types.AttributeValue) (queue.Token, error) {
	var it tokenItem
	if err := attributevalue.UnmarshalMap(av, &it); err != nil {
		return queue.Token{}, err
	}
	return it.token(), nil
}

// conditionFailed reports whether err is a failed condition and, if so,
// returns the item as it stood if the request asked for it with
// ReturnValuesOnConditionCheckFailure ALL_OLD (nil when it did not exist).
func conditionFailed(err error) (old map[string]types.AttributeValue, ok bool) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ccf.Item, true
	}
	return nil, false
}

// failedOn returns the item a conditional write failed on, nil if there was
// none: the one DynamoDB returned with the failure, or else a strongly
// consistent read of it. On DynamoDB the read only happens when the item is
// absent (a not-found answer, never the hot path); it keeps the store
// correct on servers that ignore ReturnValuesOnConditionCheckFailure
// (dynalite, older DynamoDB Local), which would otherwise make every failed
// condition look like a missing item.
func (s *Store) failedOn(ctx context.Context, key, old map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	if len(old) > 0 {
		return old, nil
	}
	return s.getItem(ctx, key)
}

// getItem reads an item with a strongly consistent read; nil if absent.
func (s *Store) getItem(ctx context.Context, key map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.table,
		Key:            key,
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return out.Item, nil
}

// CreateProgram implements queue.Store.
func (s *Store) CreateProgram(ctx context.Context, p queue.Program) error {
	if err := s.putNew(ctx, toProgramItem(p)); err != nil {
		return fmt.Errorf("dynamostore: create program %s: %w", p.ID, err)
	}
	return nil
}

// putNew stores item unless an item with its key exists (queue.ErrConflict).
func (s *Store) putNew(ctx context.Context, item any) error {
	av, err := attributevalue.MarshalMap(item)
	if err != nil {
		return err
	}
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           &s.table,
		Item:                av,
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	if _, ok := conditionFailed(err); ok {
		return queue.ErrConflict
	}
	return err
}

// GetProgram implements queue.Store with a strongly consistent read: the
// admin reads its own writes, and a ticket just issued is counted.
func (s *Store) GetProgram(ctx context.Context, id string) (queue.Program, error) {
	item, err := s.getItem(ctx, programKey(id))
	if err != nil {
		return queue.Program{}, fmt.Errorf("dynamostore: get program %s: %w", id, err)
	}
	if item == nil {
		return queue.Program{}, queue.ErrNotFound
	}
	p, err := decodeProgram(item)
	if err != nil {
		return queue.Program{}, fmt.Errorf("dynamostore: get program %s: %w", id, err)
	}
	return p, nil
}

// UpdateProgram implements queue.Store: one conditional UpdateItem that
// writes every settings and admission attribute but never issued or
// createdAt, which only IssueTicket and CreateProgram write.
func (s *Store) UpdateProgram(ctx context.Context, p queue.Program, expectIssued int64) error {
	it := toProgramItem(p)
	cond := expression.Name("version").Equal(expression.Value(p.Version - 1)).
		And(expression.Name("issued").Equal(expression.Value(expectIssued)))
	upd := expression.Set(expression.Name("version"), expression.Value(it.Version)).
		Set(expression.Name("rate"), expression.Value(it.Rate)).
		Set(expression.Name("paused"), expression.Value(it.Paused)).
		Set(expression.Name("advancing"), expression.Value(it.Advancing)).
		Set(expression.Name("msPerTicket"), expression.Value(it.MsPerTicket)).
		Set(expression.Name("base"), expression.Value(it.Base)).
		Set(expression.Name("anchorMs"), expression.Value(it.AnchorMs)).
		Set(expression.Name("nextAtMs"), expression.Value(it.NextAtMs)).
		Set(expression.Name("nextBase"), expression.Value(it.NextBase)).
		Set(expression.Name("nextRate"), expression.Value(it.NextRate)).
		Set(expression.Name("nextPaused"), expression.Value(it.NextPaused)).
		Set(expression.Name("nextAdvancing"), expression.Value(it.NextAdvancing)).
		Set(expression.Name("manualRate"), expression.Value(it.ManualRate)).
		Set(expression.Name("closed"), expression.Value(it.Closed)).
		Set(expression.Name("lastAdmitAtMs"), expression.Value(it.LastAdmitAtMs)).
		Set(expression.Name("lastAdmitGapMs"), expression.Value(it.LastAdmitGapMs)).
		Set(expression.Name("drainAtMs"), expression.Value(it.DrainAtMs)).
		Set(expression.Name("admissionWindowMs"), expression.Value(it.AdmissionWindowMs))
	if it.Policy != "" {
		upd = upd.Set(expression.Name("policy"), expression.Value(it.Policy))
	} else {
		upd = upd.Remove(expression.Name("policy"))
	}
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return fmt.Errorf("dynamostore: update program %s: %w", p.ID, err)
	}
	_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       programKey(p.ID),
		ConditionExpression:       expr.Condition(),
		UpdateExpression:          expr.Update(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	})
	if _, ok := conditionFailed(err); ok {
		// A missing program fails the condition too: a conflict, as in
		// memstore (the caller read it, so it was deleted meanwhile).
		return queue.ErrConflict
	} else if err != nil {
		return fmt.Errorf("dynamostore: update program %s: %w", p.ID, err)
	}
	return nil
}

// The three writes of IssueTicket. DynamoDB evaluates every right-hand side
// against the item as it was before the update, so a re-anchor's base gets
// the old issued whatever the order; dynalite applies the actions one after
// the other, so base is set before issued is incremented, and issued is
// incremented with SET rather than with an ADD clause it would run first.
// Every attribute goes through a #name: base and ttl are reserved words.
const (
	// Open to entries (items written before closed existed lack it).
	open = "(attribute_not_exists(#closed) OR #closed = :false)"
	// Not drained, admission stopped, or a change pending: the ticket only
	// extends drainAtMs.
	issueCondition = "attribute_exists(#pk) AND " + open + " AND (#nextAtMs > :nowMs OR #drainAtMs > :nowMs" +
		" OR (#nextAtMs = :zero AND #advancing = :false) OR (#nextAtMs <> :zero AND #nextAdvancing = :false))"
	issueUpdate = "SET #issued = #issued + :one, #drainAtMs = #drainAtMs + #msPerTicket"
	// Drained, no change scheduled: re-anchor the counter at now on the old issued.
	reanchorCondition = "attribute_exists(#pk) AND " + open + " AND #nextAtMs = :zero AND #advancing = :true AND #drainAtMs <= :nowMs"
	reanchorUpdate    = "SET #base = #issued, #issued = #issued + :one, #anchorMs = :nowMs, #drainAtMs = :nowMs + #msPerTicket, #version = #version + :one"
	// Drained under a change that has taken effect: make it current, then re-anchor.
	foldCondition = "attribute_exists(#pk) AND " + open + " AND #nextAtMs <> :zero AND #nextAtMs <= :nowMs AND #nextAdvancing = :true AND #drainAtMs <= :nowMs"
	foldUpdate    = "SET #base = #issued, #issued = #issued + :one, #anchorMs = :nowMs, #drainAtMs = :nowMs + #msPerTicket, #version = #version + :one," +
		" #rate = #nextRate, #paused = #nextPaused, #advancing = #nextAdvancing," +
		" #nextAtMs = :zero, #nextBase = :zero, #nextRate = :zero, #nextPaused = :false, #nextAdvancing = :false"
)

// issueStep is one of IssueTicket's conditional writes, with the names and
// constant values its expressions use worked out once: DynamoDB rejects
// names and values an expression does not use.
type issueStep struct {
	cond, update string
	names        map[string]string
	values       map[string]types.AttributeValue // without :nowMs
	usesNow      bool
}

var issueSteps = [...]issueStep{
	newIssueStep(issueCondition, issueUpdate),
	newIssueStep(reanchorCondition, reanchorUpdate),
	newIssueStep(foldCondition, foldUpdate),
}

func newIssueStep(cond, update string) issueStep {
	expr := cond + " " + update
	st := issueStep{cond: cond, update: update, names: map[string]string{}, values: map[string]types.AttributeValue{}}
	for _, n := range []string{"pk", "advancing", "drainAtMs", "msPerTicket", "issued", "base", "anchorMs", "version",
		"nextAtMs", "nextBase", "nextRate", "nextPaused", "nextAdvancing", "rate", "paused", "closed"} {
		if containsName(expr, "#"+n) {
			st.names["#"+n] = n
		}
	}
	for k, v := range map[string]types.AttributeValue{
		":false": &types.AttributeValueMemberBOOL{Value: false},
		":true":  &types.AttributeValueMemberBOOL{Value: true},
		":zero":  &types.AttributeValueMemberN{Value: "0"},
		":one":   &types.AttributeValueMemberN{Value: "1"},
	} {
		if containsName(expr, k) {
			st.values[k] = v
		}
	}
	st.usesNow = containsName(expr, ":nowMs")
	return st
}

// input is the step's UpdateItem on programID at nowMs.
func (st issueStep) input(table, programID string, nowMs types.AttributeValue) *dynamodb.UpdateItemInput {
	values := maps.Clone(st.values)
	if st.usesNow {
		values[":nowMs"] = nowMs
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           &table,
		Key:                                 programKey(programID),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ConditionExpression:                 aws.String(st.cond),
		UpdateExpression:                    aws.String(st.update),
		ExpressionAttributeNames:            st.names,
		ExpressionAttributeValues:           values,
	}
}

// IssueTicket implements queue.Store. It applies Program.WithTicketIssued
// without reading the program: a conditional UpdateItem for the usual case
// (the queue is not drained), and when that condition fails on an existing
// program, one of two that re-anchor the drained counter. If the program
// changed in between (another caller re-anchored it first), it starts over,
// at most maxIssueTrials times.
func (s *Store) IssueTicket(ctx context.Context, programID string, now time.Time) (queue.Program, error) {
	nowMs := &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Truncate(time.Millisecond).UnixMilli(), 10)}
	for range maxIssueTrials {
		for _, st := range issueSteps {
			in := st.input(s.table, programID, nowMs)
			out, err := s.client.UpdateItem(ctx, in)
			if err == nil {
				p, err := decodeProgram(out.Attributes)
				if err != nil {
					return queue.Program{}, fmt.Errorf("dynamostore: issue ticket %s: %w", programID, err)
				}
				return p, nil
			}
			old, ok := conditionFailed(err)
			if !ok {
				return queue.Program{}, fmt.Errorf("dynamostore: issue ticket %s: %w", programID, err)
			}
			if old, err = s.failedOn(ctx, in.Key, old); err != nil {
				return queue.Program{}, fmt.Errorf("dynamostore: issue ticket %s: %w", programID, err)
			} else if old == nil {
				return queue.Program{}, queue.ErrNotFound
			}
			if p, err := decodeProgram(old); err == nil && p.Closed {
				return queue.Program{}, queue.ErrClosed
			}
		}
	}
	return queue.Program{}, fmt.Errorf("dynamostore: issue ticket %s: program still changing after %d trials", programID, maxIssueTrials)
}

// containsName reports whether expr uses the placeholder name as a whole
// token (so "#next" does not match "#nextAtMs").
func containsName(expr, name string) bool {
	for i := 0; ; {
		j := strings.Index(expr[i:], name)
		if j < 0 {
			return false
		}
		end := i + j + len(name)
		if end == len(expr) || !isNameByte(expr[end]) {
			return true
		}
		i = end
	}
}

func isNameByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// PutToken implements queue.Store.
func (s *Store) PutToken(ctx context.Context, t queue.Token) error {
	if err := s.putNew(ctx, toTokenItem(t)); err != nil {
		return fmt.Errorf("dynamostore: put token: %w", err)
	}
	return nil
}

// GetToken implements queue.Store. The read is strongly consistent too: a
// token written by Enter must be found by the very next poll, which may
// land on another instance a few milliseconds later.
func (s *Store) GetToken(ctx context.Context, id string) (queue.Token, error) {
	item, err := s.getItem(ctx, tokenKey(id))
	if err != nil {
		return queue.Token{}, fmt.Errorf("dynamostore: get token: %w", err)
	}
	if item == nil {
		return queue.Token{}, queue.ErrNotFound
	}
	t, err := decodeToken(item)
	if err != nil {
		return queue.Token{}, fmt.Errorf("dynamostore: get token: %w", err)
	}
	return t, nil
}

// MarkAdmitted implements queue.Store.
func (s *Store) MarkAdmitted(ctx context.Context, t queue.Token) (queue.Token, error) {
	it := toTokenItem(t)
	upd := setOrRemove(expression.UpdateBuilder{}, "admittedAt", it.AdmittedAt)
	upd = setOrRemove(upd, "admissionExpiresAt", it.AdmissionExpiresAt)
	upd = setOrRemove(upd, "ttl", it.TTL)
	return s.mark(ctx, "mark admitted", t.ID, upd)
}

// MarkLeft implements queue.Store.
func (s *Store) MarkLeft(ctx context.Context, t queue.Token) (queue.Token, error) {
	it := toTokenItem(t)
	upd := setOrRemove(expression.UpdateBuilder{}, "leftAt", it.LeftAt)
	upd = setOrRemove(upd, "ttl", it.TTL)
	return s.mark(ctx, "mark left", t.ID, upd)
}

// setOrRemove sets a number attribute, or removes it for 0, keeping "absent
// when zero".
func setOrRemove(upd expression.UpdateBuilder, name string, v int64) expression.UpdateBuilder {
	if v == 0 {
		return upd.Remove(expression.Name(name))
	}
	return upd.Set(expression.Name(name), expression.Value(v))
}

// mark applies upd to a token that is neither admitted nor left: the first
// writer wins, and every caller gets the token as stored afterwards.
func (s *Store) mark(ctx context.Context, op, id string, upd expression.UpdateBuilder) (queue.Token, error) {
	cond := expression.AttributeExists(expression.Name("pk")).
		And(expression.AttributeNotExists(expression.Name("admittedAt"))).
		And(expression.AttributeNotExists(expression.Name("leftAt")))
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return queue.Token{}, fmt.Errorf("dynamostore: %s: %w", op, err)
	}
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           &s.table,
		Key:                                 tokenKey(id),
		ConditionExpression:                 expr.Condition(),
		UpdateExpression:                    expr.Update(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var item map[string]types.AttributeValue
	old, failed := conditionFailed(err)
	switch {
	case failed:
		// Already admitted or left: the stored token wins. It cannot change
		// any more, so reading it after the failure is as good.
		if item, err = s.failedOn(ctx, tokenKey(id), old); err != nil {
			return queue.Token{}, fmt.Errorf("dynamostore: %s: %w", op, err)
		} else if item == nil {
			return queue.Token{}, queue.ErrNotFound
		}
	case err != nil:
		return queue.Token{}, fmt.Errorf("dynamostore: %s: %w", op, err)
	default:
		item = out.Attributes
	}
	t, err := decodeToken(item)
	if err != nil {
		return queue.Token{}, fmt.Errorf("dynamostore: %s: %w", op, err)
	}
	return t, nil
}
