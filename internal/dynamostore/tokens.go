package dynamostore

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/queue"
)

const tokenSK = "TOKEN"

// tokenItem is a token item (TOKEN#<tokenId>); a claim has no ticket.
type tokenItem struct {
	PK                 string `dynamodbav:"pk"`
	SK                 string `dynamodbav:"sk"`
	TokenID            string `dynamodbav:"tokenId"`
	ProgramID          string `dynamodbav:"programId"`
	Ticket             int64  `dynamodbav:"ticket,omitempty"` // absent in a claim
	IssuedAt           int64  `dynamodbav:"issuedAt,omitempty"`
	AdmittedAt         int64  `dynamodbav:"admittedAt,omitempty"`
	AdmissionExpiresAt int64  `dynamodbav:"admissionExpiresAt,omitempty"`
	LeftAt             int64  `dynamodbav:"leftAt,omitempty"`
	RevokedAt          int64  `dynamodbav:"revokedAt,omitempty"`
	AdmissionPass      string `dynamodbav:"admissionPass,omitempty"`
	TTL                int64  `dynamodbav:"ttl,omitempty"`
	ClaimID            string `dynamodbav:"claimId,omitempty"`
	ClaimMs            int64  `dynamodbav:"claimMs,omitempty"`
	// The push subscription, and its listing in PushIndex while a turn is
	// still to tell (pushList "PUSH#<programId>#<ticket mod 32>", pushTicket the ticket).
	PushEndpoint string `dynamodbav:"pushEndpoint,omitempty"`
	PushP256DH   string `dynamodbav:"pushP256dh,omitempty"`
	PushAuth     string `dynamodbav:"pushAuth,omitempty"`
	PushList     string `dynamodbav:"pushList,omitempty"`
	PushTicket   int64  `dynamodbav:"pushTicket,omitempty"`
	PushStage    int8   `dynamodbav:"pushStage,omitempty"`
	PushOwner    string `dynamodbav:"pushOwner,omitempty"`
	PushedMs     int64  `dynamodbav:"pushedMs,omitempty"`
	PushTold     int8   `dynamodbav:"pushTold,omitempty"`
	PushTries1   int8   `dynamodbav:"pushTries1,omitempty"`
	PushTries2   int8   `dynamodbav:"pushTries2,omitempty"`
	Account      string `dynamodbav:"account,omitempty"`
	Handoff      string `dynamodbav:"handoff,omitempty"` // the hash of the last handoff code, made at handoffMs
	HandoffMs    int64  `dynamodbav:"handoffMs,omitempty"`
	MovedTo      string `dynamodbav:"movedTo,omitempty"`
	MovedMs      int64  `dynamodbav:"movedMs,omitempty"`
	Moves        int8   `dynamodbav:"moves,omitempty"`
	// What the enter answered, and what a poll would have when the person
	// left while waiting (MarkLeft): the report's.
	EnterPos   int64 `dynamodbav:"enterPos,omitempty"`
	EnterEstMs int64 `dynamodbav:"enterEstMs,omitempty"`
	LeftPos    int64 `dynamodbav:"leftPos,omitempty"`
	LeftEstMs  int64 `dynamodbav:"leftEstMs,omitempty"`
}

func tokenKey(id string) map[string]types.AttributeValue { return itemKey("TOKEN#"+id, tokenSK) }

// ttlSeconds is t in Unix seconds rounded up (0 for the zero time): TTL never deletes before t.
func ttlSeconds(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Add(time.Second - 1).Unix()
}

func fromTTL(s int64) time.Time { return pace.FromUnixMs(s * 1000) }

func toTokenItem(t queue.Token) tokenItem {
	it := tokenItem{
		PK: "TOKEN#" + t.ID, SK: tokenSK, TokenID: t.ID, ProgramID: t.ProgramID, Ticket: t.Ticket,
		IssuedAt: pace.UnixMs(t.IssuedAt), AdmittedAt: pace.UnixMs(t.AdmittedAt), AdmissionExpiresAt: pace.UnixMs(t.AdmissionExpiresAt),
		LeftAt: pace.UnixMs(t.LeftAt), RevokedAt: pace.UnixMs(t.RevokedAt), AdmissionPass: t.AdmissionPass,
		TTL: ttlSeconds(t.ExpiresAt), ClaimID: t.Claim, ClaimMs: pace.UnixMs(t.ClaimedAt),
		PushEndpoint: t.Push.Endpoint, PushP256DH: t.Push.P256DH, PushAuth: t.Push.Auth,
		PushStage: int8(t.PushStage), PushOwner: t.PushOwner, PushedMs: pace.UnixMs(t.PushedAt),
		PushTold: int8(t.PushTold), PushTries1: t.PushTries[queue.PushReady], PushTries2: t.PushTries[queue.PushTurn],
		Account: t.Account, Handoff: t.Handoff, HandoffMs: pace.UnixMs(t.HandoffAt), MovedTo: t.MovedTo, MovedMs: pace.UnixMs(t.MovedAt), Moves: t.Moves,
		EnterPos: t.EnterPosition, EnterEstMs: t.EnterEstimate.Milliseconds(), LeftPos: t.LeftPosition, LeftEstMs: t.LeftEstimate.Milliseconds(),
	}
	if t.Push.Endpoint != "" && t.PushTold < queue.PushTurn && t.MovedTo == "" {
		it.PushList, it.PushTicket = pushList(t.ProgramID, t.Ticket), t.Ticket
	}
	return it
}

// DecodeToken reads a token item or a claim (also for cmd/audit); absent attributes are zero.
func DecodeToken(item map[string]types.AttributeValue) (queue.Token, error) {
	it, err := unmarshal[tokenItem](item)
	if err != nil {
		return queue.Token{}, err
	}
	return queue.Token{
		ID: it.TokenID, ProgramID: it.ProgramID, Ticket: it.Ticket,
		IssuedAt: pace.FromUnixMs(it.IssuedAt), AdmittedAt: pace.FromUnixMs(it.AdmittedAt), AdmissionExpiresAt: pace.FromUnixMs(it.AdmissionExpiresAt),
		LeftAt: pace.FromUnixMs(it.LeftAt), RevokedAt: pace.FromUnixMs(it.RevokedAt), AdmissionPass: it.AdmissionPass,
		ExpiresAt: fromTTL(it.TTL), Claim: it.ClaimID, ClaimedAt: pace.FromUnixMs(it.ClaimMs),
		Push:      queue.Subscription{Endpoint: it.PushEndpoint, P256DH: it.PushP256DH, Auth: it.PushAuth},
		PushStage: queue.PushStage(it.PushStage), PushOwner: it.PushOwner, PushedAt: pace.FromUnixMs(it.PushedMs),
		PushTold: queue.PushStage(it.PushTold), PushTries: [3]int8{queue.PushReady: it.PushTries1, queue.PushTurn: it.PushTries2},
		Account: it.Account, Handoff: it.Handoff, HandoffAt: pace.FromUnixMs(it.HandoffMs), MovedTo: it.MovedTo, MovedAt: pace.FromUnixMs(it.MovedMs), Moves: it.Moves,
		EnterPosition: it.EnterPos, EnterEstimate: time.Duration(it.EnterEstMs) * time.Millisecond,
		LeftPosition: it.LeftPos, LeftEstimate: time.Duration(it.LeftEstMs) * time.Millisecond,
	}, nil
}

// PutToken implements queue.Store.
func (s *Store) PutToken(ctx context.Context, t queue.Token) error {
	av, err := attributevalue.MarshalMap(toTokenItem(t))
	if err == nil {
		err = s.putNew(ctx, av)
	}
	return opErr(err, "put token")
}

// GetToken implements queue.Store with a strongly consistent read.
func (s *Store) GetToken(ctx context.Context, id string) (queue.Token, error) {
	item, err := s.getItem(ctx, tokenKey(id))
	if err == nil && item == nil {
		return queue.Token{}, queue.ErrNotFound
	}
	return decoded("get token", DecodeToken, item, err)
}

// MarkAdmitted implements queue.Store.
func (s *Store) MarkAdmitted(ctx context.Context, t queue.Token) (queue.Token, error) {
	names := []string{"admittedAt", "admissionExpiresAt", "ttl"}
	if t.AdmissionPass != "" {
		names = append(names, "admissionPass")
	}
	return s.mark(ctx, "mark admitted", t, waiting(), names...)
}

// MarkLeft implements queue.Store: leftAt, with where the person stood
// (leftPos, leftEstMs), and the TTL in one conditional write.
func (s *Store) MarkLeft(ctx context.Context, t queue.Token) (queue.Token, error) {
	return s.mark(ctx, "mark left", t, waiting(), "leftAt", "leftPos", "leftEstMs", "ttl")
}

// EndAdmission implements queue.Store.
func (s *Store) EndAdmission(ctx context.Context, t queue.Token) (queue.Token, error) {
	admitted := all(expression.AttributeExists(expression.Name("pk")),
		expression.AttributeExists(expression.Name("admittedAt")),
		expression.AttributeNotExists(expression.Name("leftAt")),
		expression.Name("admissionExpiresAt").GreaterThan(expression.Value(pace.UnixMs(t.LeftAt))))
	return s.mark(ctx, "end admission", t, admitted, "leftAt", "ttl")
}

// RevokeToken implements queue.Store.
func (s *Store) RevokeToken(ctx context.Context, t queue.Token) (queue.Token, error) {
	live := expression.AttributeExists(expression.Name("ticket")).
		And(expression.AttributeNotExists(expression.Name("revokedAt")))
	got, err := s.mark(ctx, "revoke token", t, live, "revokedAt", "ttl")
	if err == nil && got.Claim != "" {
		return queue.Token{}, queue.ErrNotFound
	}
	return got, err
}

// waiting is the condition of a token neither admitted, left, revoked nor moved.
func waiting() expression.ConditionBuilder {
	return all(expression.AttributeExists(expression.Name("pk")),
		expression.AttributeNotExists(expression.Name("admittedAt")),
		expression.AttributeNotExists(expression.Name("leftAt")),
		expression.AttributeNotExists(expression.Name("revokedAt")),
		expression.AttributeNotExists(expression.Name("movedMs")))
}

// mark writes the named attributes of t's item (removing those it lacks) if
// cond holds, and answers the token as stored afterwards: the first writer wins.
func (s *Store) mark(ctx context.Context, op string, t queue.Token, cond expression.ConditionBuilder, names ...string) (queue.Token, error) {
	item, err := attributevalue.MarshalMap(toTokenItem(t))
	if err != nil {
		return queue.Token{}, opErr(err, "%s", op)
	}
	out, err := s.updateItem(ctx, tokenKey(t.ID), cond, setOrRemove(expression.UpdateBuilder{}, item, names...), types.ReturnValueAllNew)
	if err == nil {
		return decoded(op, DecodeToken, out.Attributes, nil)
	}
	return s.tokenFailedOn(ctx, op, t.ID, err)
}

// tokenFailedOn answers a write that failed with err: the token it failed on (or queue.ErrNotFound), or err.
func (s *Store) tokenFailedOn(ctx context.Context, op, id string, err error) (queue.Token, error) {
	old, failed := conditionFailed(err)
	if !failed {
		return queue.Token{}, opErr(err, "%s", op)
	}
	item, err := s.failedOn(ctx, tokenKey(id), old)
	if err == nil && item == nil {
		return queue.Token{}, queue.ErrNotFound
	}
	return decoded(op, DecodeToken, item, err)
}

// ClaimToken implements queue.Store: one PutItem of the claim (no ticket) on
// no item or a claim older than staleBefore; a retry fails on its own claim.
func (s *Store) ClaimToken(ctx context.Context, c queue.Token, staleBefore time.Time) (queue.Token, error) {
	cond := expression.AttributeNotExists(expression.Name("pk")).Or(
		expression.AttributeNotExists(expression.Name("ticket")).And(
			expression.Name("claimMs").LessThan(expression.Value(pace.UnixMs(staleBefore)))))
	return s.putTokenIf(ctx, "claim token", c, cond)
}

// FillToken implements queue.Store: one PutItem of the token on the claim;
// a retry after an applied attempt finds t.
func (s *Store) FillToken(ctx context.Context, t queue.Token, claim string) (queue.Token, error) {
	return s.putTokenIf(ctx, "fill token", t, isClaim(claim))
}

// isClaim is the condition of a token item that is still claim, without ticket.
func isClaim(claim string) expression.ConditionBuilder {
	return expression.Name("claimId").Equal(expression.Value(claim)).And(expression.AttributeNotExists(expression.Name("ticket")))
}

// ReleaseClaim implements queue.Store: SET claimMs = 0 if the item is
// still that claim (an UpdateItem: the queue function may not delete).
func (s *Store) ReleaseClaim(ctx context.Context, id, claim string) error {
	upd := expression.Set(expression.Name("claimMs"), expression.Value(0))
	_, err := s.updateItem(ctx, tokenKey(id), isClaim(claim), upd, types.ReturnValueNone)
	if _, failed := conditionFailed(err); failed {
		return nil
	}
	return opErr(throttled(err), "release claim")
}

// putTokenIf stores t's item if cond holds and answers the token stored afterwards.
func (s *Store) putTokenIf(ctx context.Context, op string, t queue.Token, cond expression.ConditionBuilder) (queue.Token, error) {
	av, err := attributevalue.MarshalMap(toTokenItem(t))
	if err == nil {
		err = s.putItem(ctx, av, cond)
	}
	if err == nil {
		return t, nil
	}
	return s.tokenFailedOn(ctx, op, t.ID, throttled(err))
}

// UseChallenge implements queue.Store: one PutItem of CHALLENGE#<key>, on
// no item or one of the same owner (a retry).
func (s *Store) UseChallenge(ctx context.Context, key, owner string, expires time.Time) error {
	cond := expression.AttributeNotExists(expression.Name("pk")).Or(
		expression.Name("owner").Equal(expression.Value(owner)))
	item := itemKey("CHALLENGE#"+key, "CHALLENGE")
	item["owner"] = &types.AttributeValueMemberS{Value: owner}
	item["ttl"] = &types.AttributeValueMemberN{Value: fmt.Sprint(ttlSeconds(expires))}
	err := s.putItem(ctx, item, cond)
	if _, failed := conditionFailed(err); failed {
		return queue.ErrConflict
	}
	return opErr(throttled(err), "use challenge")
}
