package queue

// Push: a waiting token's subscription, and what a sender needs to tell
// its holder "get ready" and "it's your turn" (docs/design.md, "Your turn
// by push").

import (
	"context"
	"encoding/base64"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/webpush"
)

// Subscription is a token's push subscription: an endpoint checked
// against the push services' hosts, and its keys in base64url.
type Subscription struct{ Endpoint, P256DH, Auth string }

// PushStage is what a sender told a token: nothing, "get ready", or "it's
// your turn"; it only moves forward.
type PushStage int8

// Push stages, in order.
const (
	PushNone PushStage = iota
	PushReady
	PushTurn
)

func (st PushStage) String() string {
	return [...]string{"none", "ready", "turn"}[st]
}

// PushEntry is one subscribed token as a program lists them, by ticket.
type PushEntry struct {
	TokenID string
	Ticket  int64
}

// MaxPushTries bounds the claims of one stage of one token: its sends.
const MaxPushTries = 5

// PushStore keeps push subscriptions on their tokens, listed by program and
// ticket until told their turn (storetest.Push holds the contract).
type PushStore interface {
	// Subscribe stores sub on token t.ID, still pending with ticket
	// t.Ticket and not told its turn, and lists it (a new sub replaces the
	// old, its tries start again; what was told stays); it returns the
	// token as stored.
	Subscribe(ctx context.Context, t Token, sub Subscription) (Token, error)
	// Unsubscribe removes id's subscription and its listing, if its endpoint
	// is endpoint ("": whatever it is); no error if there is none.
	Unsubscribe(ctx context.Context, id, endpoint string) error
	// Subscribed lists tokens of programID with tickets in (after,
	// through], by ticket, eventually consistent: all of them (complete;
	// limit ≤ 0 asks for all), or about limit or more, every one up to the
	// last listed.
	Subscribed(ctx context.Context, programID string, after, through int64, limit int) (entries []PushEntry, complete bool, err error)
	// ClaimPush records that owner tells stage to token id at at, if it is
	// pending, subscribed, not told stage, claimed for it fewer than
	// MaxPushTries times, and not by another owner at or after staleBefore
	// (zero: ever); it returns the token as stored.
	ClaimPush(ctx context.Context, id string, stage PushStage, owner string, at, staleBefore time.Time) (Token, error)
	// PushTold records that owner's claim of stage on id was told (the turn
	// unlists it); no error when the claim is no longer owner's.
	PushTold(ctx context.Context, id string, stage PushStage, owner string) error
}

// WithPush lets waiting tokens subscribe to push, with endpoints on hosts.
func WithPush(hosts webpush.Hosts) Option { return func(s *Service) { s.pushHosts = hosts } }

var (
	errPushUnavailable = Errorf(KindNotFound, api.CodePushUnavailable, "This waiting room sends no push notifications.")
	errNotWaiting      = Errorf(KindConflict, api.CodeNotWaiting, "The token is no longer waiting: there is no turn to tell.")
)

// pushStore is the store as a PushStore, when push is on.
func (s *Service) pushStore() (PushStore, bool) {
	ps, ok := s.store.(PushStore)
	return ps, ok && s.pushHosts != nil
}

// subscription validates sub: INVALID_SUBSCRIPTION, or PUSH_UNAVAILABLE.
func (s *Service) subscription(sub api.PushSubscription) (Subscription, error) {
	if _, ok := s.pushStore(); !ok {
		return Subscription{}, errPushUnavailable
	}
	parsed, err := webpush.ParseSubscription(sub.Endpoint, sub.Keys.P256DH, sub.Keys.Auth, s.pushHosts)
	if err != nil {
		why := strings.TrimPrefix(err.Error(), webpush.ErrInvalidSubscription.Error()+": ")
		return Subscription{}, Errorf(KindInvalid, api.CodeInvalidSubscription, "The push subscription cannot be used: %s.", why)
	}
	return subscriptionOf(parsed), nil
}

// subscriptionOf is sub as a token stores it.
func subscriptionOf(sub webpush.Subscription) Subscription {
	return Subscription{Endpoint: sub.Endpoint, P256DH: base64.RawURLEncoding.EncodeToString(sub.P256DH), Auth: base64.RawURLEncoding.EncodeToString(sub.Auth)}
}

// Subscribe makes tokenID, waiting in programID, a subscriber of push to sub.
func (s *Service) Subscribe(ctx context.Context, programID, tokenID string, sub api.PushSubscription) error {
	parsed, err := s.subscription(sub)
	if err != nil {
		return err
	}
	t, err := s.token(ctx, programID, tokenID)
	if err != nil {
		return err
	}
	_, err = s.subscribe(ctx, t, parsed)
	return err
}

// subscribe stores sub on t, read just now, and returns the token as stored.
func (s *Service) subscribe(ctx context.Context, t Token, sub Subscription) (Token, error) {
	ps, _ := s.pushStore()
	if !t.Pending() {
		return t, errNotWaiting
	}
	stored, err := ps.Subscribe(ctx, t, sub)
	switch {
	case errors.Is(err, ErrNotFound):
		return t, errTokenNotFound
	case err != nil:
		return t, storeError("subscribe", err)
	case stored.Push != sub:
		return stored, errNotWaiting
	}
	return stored, nil
}

// Unsubscribe ends tokenID's push subscription; none is not an error.
func (s *Service) Unsubscribe(ctx context.Context, programID, tokenID string) error {
	ps, ok := s.pushStore()
	if !ok {
		return errPushUnavailable
	}
	if _, err := s.token(ctx, programID, tokenID); err != nil {
		return err
	}
	if err := ps.Unsubscribe(ctx, tokenID, ""); err != nil {
		return storeError("unsubscribe", err)
	}
	return nil
}

// PushProgram returns programID as a poll at now reads it, for a sender.
func (s *Service) PushProgram(ctx context.Context, programID string, now time.Time) (admission.Program, error) {
	p, err := s.program(ctx, programID, now)
	if err == nil {
		p, err = s.withOpening(ctx, p, now)
	}
	return p, err
}

// StageAt is what a subscriber with ticket should have been told at now in
// p: PushTurn once admitted, PushReady once the earliest admission is
// within p's lead (not while paused, nor without a pace), else PushNone.
func StageAt(p admission.Program, ticket int64, now time.Time) PushStage {
	place, ok := p.Place(ticket)
	if !ok {
		return PushNone
	}
	return stageOfPlace(p, place, now)
}

// stageOfPlace is StageAt by place.
func stageOfPlace(p admission.Program, place int64, now time.Time) PushStage {
	if p.Admits(place, now) {
		return PushTurn
	}
	sit := p.Situation(place, now, 0)
	earliest := max(sit.Earliest, sit.HeldEarliest)
	if sit.Paused || earliest <= 0 || earliest > p.PushLead() {
		return PushNone
	}
	return PushReady
}

// PushThrough is the last ticket of p that StageAt tells anything at at:
// the tickets a sender lists (a shuffled pre-queue whole).
func PushThrough(p admission.Program, at time.Time) int64 {
	if p.Shuffle && !p.PrequeueFixed {
		return 0 // no places yet
	}
	n := int(min(p.Issued, 1<<31))
	last := int64(sort.Search(n, func(i int) bool { return stageOfPlace(p, int64(i+1), at) == PushNone }))
	if last > 0 && p.Shuffle {
		return max(last, p.Prequeue)
	}
	return last
}

// ErrNoShow is SightPush's error for a place counted a no-show already.
var ErrNoShow = errNoShow

// SightPush records, before its turn is told, that the holder of ticket in
// p was reached, so that their time to show counts from the push; a place
// counted a no-show first is ErrNoShow.
func (s *Service) SightPush(ctx context.Context, p admission.Program, ticket int64) error {
	place, ok := p.Place(ticket)
	if !ok {
		return nil
	}
	_, err := s.sight(ctx, p, place)
	return err
}
