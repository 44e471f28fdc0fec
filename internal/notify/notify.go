// Package notify is the push sender: each second it finds, in every
// program, the subscribed people whose turn is near or has come, claims
// each message with a conditional write so that no sender tells it twice,
// and sends it by Web Push (docs/design.md, "Your turn by push").
package notify

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/catalog"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/webpush"
)

// Bounds of a sender's work.
const (
	// Refill is how often a program's list of subscribers is read again
	// (also on any change of the program), covering the next Refill.
	Refill = time.Minute
	// MaxListed bounds the subscribers one program's list holds (the
	// first by ticket; the list is read again once its last is due).
	MaxListed = 250_000
	// Senders bounds the pushes in flight at once.
	Senders = 64
	// RunFor is how long one scheduled run sends: its minute.
	RunFor = time.Minute
)

// Store is what a sender needs of the store: the programs and their
// subscribers.
type Store interface {
	queue.PushStore
	ListPrograms(ctx context.Context, after string, limit int) (ids []string, more bool, err error)
}

// Pusher sends one push (webpush.Client).
type Pusher interface {
	Send(ctx context.Context, sub webpush.Subscription, m webpush.Message) (webpush.Outcome, time.Duration, error)
}

// Sender tells subscribers their stage; one per process, its Tick called
// by one goroutine at a time. Any number of senders may run at once.
type Sender struct {
	svc    *queue.Service
	store  Store
	push   Pusher
	clock  clock.Clock
	log    *slog.Logger
	owner  string // names this sender's claims
	lists  map[string]*list
	listed time.Time // when the programs were last listed
	Counts Counts
}

// Counts are what a sender did, for its log and the tests: pushes sent
// (Ready, Turn), subscriptions dropped on a 404 or 410 (Gone), pushes to
// send again (Retried) or refused as our fault (Rejected), claims another
// sender had made (TakenFirst), turns not told to a no-show (NoShows).
type Counts struct{ Ready, Turn, Gone, Retried, Rejected, TakenFirst, NoShows int }

// minus is c less b, field by field.
func (c Counts) minus(b Counts) Counts {
	return Counts{c.Ready - b.Ready, c.Turn - b.Turn, c.Gone - b.Gone, c.Retried - b.Retried,
		c.Rejected - b.Rejected, c.TakenFirst - b.TakenFirst, c.NoShows - b.NoShows}
}

// list is one program's subscribers still to tell their turn, as read.
type list struct {
	version int64
	through int64
	readAt  time.Time
	entries []queue.PushEntry
	told    map[string]queue.PushStage // what this sender told, by token
	retryAt map[string]time.Time       // pushes to send again, not before
}

// New returns a sender over svc and store that pushes with push.
func New(svc *queue.Service, store Store, push Pusher, c clock.Clock, log *slog.Logger) *Sender {
	return &Sender{svc: svc, store: store, push: push, clock: c, log: log, owner: queue.NewTokenID(), lists: map[string]*list{}}
}

// Run ticks every second, on the second, until until or ctx's end, and
// logs what it sent; its error is its last tick's.
func (s *Sender) Run(ctx context.Context, until time.Time) error {
	before := s.Counts
	defer func() { s.log.InfoContext(ctx, "push run", "counts", s.Counts.minus(before)) }()
	for {
		err := s.Tick(ctx)
		if err != nil {
			s.log.WarnContext(ctx, "push sender", "err", err)
		}
		next := s.clock.Now().Truncate(time.Second).Add(time.Second)
		if !next.Before(until) {
			return err
		}
		if err := s.clock.Sleep(ctx, next.Sub(s.clock.Now())); err != nil {
			return err
		}
	}
}

// Tick sends, at the clock's now, every push due in every program; its
// error joins the store's failures (push services' are counted and logged).
func (s *Sender) Tick(ctx context.Context) error {
	now := s.clock.Now()
	if now.Sub(s.listed) >= Refill {
		if err := s.listPrograms(ctx); err != nil {
			return err
		}
		s.listed = now
	}
	var errs []error
	for id, l := range s.lists {
		if err := s.tickProgram(ctx, id, l, now); err != nil {
			errs = append(errs, fmt.Errorf("program %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// listPrograms keeps a list for every program there is.
func (s *Sender) listPrograms(ctx context.Context) error {
	seen := map[string]bool{}
	for after, more := "", true; more; {
		var ids []string
		var err error
		if ids, more, err = s.store.ListPrograms(ctx, after, catalog.MaxLimit); err != nil {
			return fmt.Errorf("notify: list programs: %w", err)
		}
		for _, id := range ids {
			seen[id] = true
			if s.lists[id] == nil {
				s.lists[id] = &list{version: -1, told: map[string]queue.PushStage{}, retryAt: map[string]time.Time{}}
			}
			after = id
		}
	}
	for id := range s.lists {
		if !seen[id] {
			delete(s.lists, id)
		}
	}
	return nil
}

// tickProgram tells program id's subscribers what is due at now.
func (s *Sender) tickProgram(ctx context.Context, id string, l *list, now time.Time) error {
	if len(l.entries) == 0 && now.Sub(l.readAt) < Refill && l.version >= 0 {
		return nil // nobody to tell until the next read
	}
	p, err := s.svc.PushProgram(ctx, id, now)
	if errors.Is(err, queue.ErrNotFound) || queue.ErrorKind(err) == queue.KindNotFound {
		delete(s.lists, id)
		return nil
	} else if err != nil {
		return err
	}
	if l.version != p.Version || now.Sub(l.readAt) >= Refill || queue.PushThrough(p, now) > l.through {
		through := queue.PushThrough(p, now.Add(Refill))
		entries, err := s.store.Subscribed(ctx, id, 0, through, MaxListed)
		if err != nil {
			return err
		}
		if len(entries) == MaxListed {
			through = entries[len(entries)-1].Ticket
		}
		l.version, l.through, l.readAt, l.entries = p.Version, through, now, entries
	}
	type due struct {
		e     queue.PushEntry
		stage queue.PushStage
	}
	var dues []due
	for _, e := range l.entries {
		st := queue.StageAt(p, e.Ticket, now)
		if st > l.told[e.TokenID] && !now.Before(l.retryAt[e.TokenID]) {
			dues = append(dues, due{e, st})
		}
	}
	results := make([]result, len(dues))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(Senders)
	for i, d := range dues {
		g.Go(func() error {
			results[i] = s.tell(gctx, p, d.e, d.stage, now)
			return nil
		})
	}
	_ = g.Wait()
	var errs []error
	for i, r := range results {
		errs = append(errs, s.record(l, dues[i].e.TokenID, dues[i].stage, r, now))
	}
	l.entries = dropTold(l)
	return errors.Join(errs...)
}

// result is what telling one token came to.
type result struct {
	outcome    webpush.Outcome
	retryAfter time.Duration
	told       queue.PushStage // what the token was told, by this sender or another
	drop       bool            // unlisted: gone, left, or a no-show
	takenFirst bool
	noShow     bool
	err        error
}

// record notes r, telling tokenID stage, in l and the counts.
func (s *Sender) record(l *list, tokenID string, stage queue.PushStage, r result, now time.Time) error {
	switch {
	case r.drop:
		l.told[tokenID] = queue.PushTurn
		if r.noShow {
			s.Counts.NoShows++
		}
		if r.outcome == webpush.Gone {
			s.Counts.Gone++
		}
		return r.err
	case r.err != nil && r.outcome != webpush.Retry && r.outcome != webpush.Rejected:
		return r.err // the claim failed: tried again next tick
	case r.takenFirst:
		s.Counts.TakenFirst++
		l.told[tokenID] = r.told
	case r.outcome == webpush.Retry:
		s.Counts.Retried++
		l.retryAt[tokenID] = now.Add(max(r.retryAfter, time.Second))
		s.log.Warn("push to send again", "err", r.err)
	case r.outcome == webpush.Rejected:
		s.Counts.Rejected++
		l.told[tokenID] = stage
		s.log.Warn("push refused", "err", r.err)
	case stage == queue.PushTurn:
		s.Counts.Turn++
		l.told[tokenID] = stage
	default:
		s.Counts.Ready++
		l.told[tokenID] = stage
	}
	return nil
}

// dropTold is l's entries without those told their turn.
func dropTold(l *list) []queue.PushEntry {
	kept := l.entries[:0]
	for _, e := range l.entries {
		if l.told[e.TokenID] < queue.PushTurn {
			kept = append(kept, e)
		} else {
			delete(l.told, e.TokenID)
			delete(l.retryAt, e.TokenID)
		}
	}
	return kept
}

// tell claims stage for e's token and, claimed, pushes it.
func (s *Sender) tell(ctx context.Context, p admission.Program, e queue.PushEntry, stage queue.PushStage, now time.Time) result {
	t, err := s.store.ClaimPush(ctx, e.TokenID, stage, s.owner, now)
	if err != nil && !errors.Is(err, queue.ErrNotFound) {
		// The answer may be lost with the claim made: this owner's retry wins again.
		t, err = s.store.ClaimPush(ctx, e.TokenID, stage, s.owner, now)
	}
	switch {
	case errors.Is(err, queue.ErrNotFound):
		return result{drop: true}
	case err != nil:
		return result{err: fmt.Errorf("claim %s: %w", stage, err)}
	case t.PushOwner != s.owner || t.PushStage != stage:
		if !t.Pending() || t.Push.Endpoint == "" {
			return result{drop: true, err: s.store.Unsubscribe(ctx, e.TokenID)}
		}
		return result{takenFirst: true, told: t.PushStage}
	}
	if stage == queue.PushTurn {
		// The push is the sighting: the time to show counts from it.
		if err := s.svc.SightPush(ctx, p, e.Ticket); errors.Is(err, queue.ErrNoShow) {
			return result{drop: true, noShow: true}
		} else if err != nil {
			return result{outcome: webpush.Retry, err: fmt.Errorf("sight: %w", err)}
		}
	}
	sub, err := subscription(t.Push)
	if err != nil {
		return result{drop: true, err: errors.Join(err, s.store.Unsubscribe(ctx, e.TokenID))}
	}
	out, after, err := s.push.Send(ctx, sub, message(p, stage))
	if out == webpush.Gone {
		return result{outcome: out, drop: true, err: s.store.Unsubscribe(ctx, e.TokenID)}
	}
	return result{outcome: out, retryAfter: after, err: err}
}

// Payload is a push's plaintext: the program's display name and the stage.
type Payload struct {
	Program string `json:"program"`
	Stage   string `json:"stage"`
}

// message is the push that tells stage in p: a "ready" lives as long as
// the lead, a turn as long as the admission window, and replaces an
// undelivered push of its stage (Topic).
func message(p admission.Program, stage queue.PushStage) webpush.Message {
	name := p.Profile.DisplayName
	if name == "" {
		name = p.ID
	}
	body, _ := json.Marshal(Payload{Program: name, Stage: stage.String()})
	m := webpush.Message{Payload: body, TTL: p.PushLead(), Urgency: "normal", Topic: stage.String()}
	if stage == queue.PushTurn {
		m.TTL, m.Urgency = p.Window(), "high"
	}
	return m
}

// subscription decodes a stored subscription.
func subscription(sub queue.Subscription) (webpush.Subscription, error) {
	p256dh, err := base64.RawURLEncoding.DecodeString(sub.P256DH)
	auth, aerr := base64.RawURLEncoding.DecodeString(sub.Auth)
	if err = errors.Join(err, aerr); err != nil {
		return webpush.Subscription{}, fmt.Errorf("notify: stored subscription: %w", err)
	}
	return webpush.Subscription{Endpoint: sub.Endpoint, P256DH: p256dh, Auth: auth}, nil
}
