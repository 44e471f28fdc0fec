// Package notify is the push sender: each second it finds, in every
// program, the subscribed people whose turn is near or has come, claims
// each message with a conditional write so that no sender tells it twice,
// and sends it by Web Push (docs/design.md, "Your turn by push").
package notify

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
	"sync"
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
	// (also on any change of the program, and once its end is due): a
	// new subscriber is seen within it.
	Refill = 15 * time.Second
	// MaxListed bounds the subscribers one program's list holds (the
	// first by ticket; the list is read again once its last is due).
	MaxListed = 250_000
	// Senders bounds the pushes in flight at once.
	Senders = 64
	// RunFor is how long one scheduled run sends: its minute.
	RunFor = time.Minute
	// Lease is how long a turn's claim is its sender's alone: a turn not
	// told by then may be claimed and sent by another sender.
	Lease = 20 * time.Second
	// MaxBackoff bounds the wait before a push is sent again.
	MaxBackoff = time.Minute
	// MaxReadies bounds the "ready" pushes a tick starts, so that a wave
	// of them (a resume, an opening) does not hold back the next tick's turns.
	MaxReadies = 4 * Senders
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
	listed time.Time       // when the programs were last listed
	mu     sync.Mutex      // Counts, sent and the lists' maps, which the sends write
	sent   map[string]bool // turns sent whose record failed: only the record is retried
	Counts Counts
}

// Counts are what a sender did, for its log and the tests: pushes sent
// (Ready, Turn), subscriptions dropped as their push service asked (Gone),
// as refused by it or after MaxPushTries (Dropped), pushes to send again
// (Retried), claims another sender held (TakenFirst), turns not told to a
// no-show (NoShows).
type Counts struct{ Ready, Turn, Gone, Dropped, Retried, TakenFirst, NoShows int }

// minus is c less b, field by field.
func (c Counts) minus(b Counts) Counts {
	return Counts{c.Ready - b.Ready, c.Turn - b.Turn, c.Gone - b.Gone, c.Dropped - b.Dropped,
		c.Retried - b.Retried, c.TakenFirst - b.TakenFirst, c.NoShows - b.NoShows}
}

// list is one program's subscribers still to tell their turn, as read.
type list struct {
	version  int64
	through  int64 // the last ticket listed whole
	complete bool  // nobody subscribed is left out up to the read's end
	none     bool  // nobody subscribed at all: looked at once a Refill
	readAt   time.Time
	entries  []queue.PushEntry
	told     map[string]queue.PushStage // what was told, by token
	retry    map[string]backoff         // pushes to send again
}

// backoff is when to look at a stage of a token again, after how many tries.
type backoff struct {
	stage queue.PushStage
	at    time.Time
	tries int
}

// New returns a sender over svc and store that pushes with push.
func New(svc *queue.Service, store Store, push Pusher, c clock.Clock, log *slog.Logger) *Sender {
	return &Sender{svc: svc, store: store, push: push, clock: c, log: log, owner: queue.NewTokenID(), lists: map[string]*list{}, sent: map[string]bool{}}
}

// Run ticks every second, on the second, until until, ctx's end, or a tick
// that finds nobody subscribed anywhere, and logs what it sent; its error
// is its last tick's.
func (s *Sender) Run(ctx context.Context, until time.Time) error {
	before := s.Counts
	defer func() { s.log.InfoContext(ctx, "push run", "counts", s.Counts.minus(before)) }()
	s.listed = time.Time{} // a run looks afresh: the last may have ended idle
	for _, l := range s.lists {
		l.readAt = time.Time{}
	}
	for {
		err := s.Tick(ctx)
		if err != nil {
			s.log.WarnContext(ctx, "push sender", "err", err)
		}
		next := s.clock.Now().Truncate(time.Second).Add(time.Second)
		if !next.Before(until) || err == nil && s.idle() {
			return err
		}
		if err := s.clock.Sleep(ctx, next.Sub(s.clock.Now())); err != nil {
			return err
		}
	}
}

// idle reports whether the last look at every program found nobody subscribed.
func (s *Sender) idle() bool {
	for _, l := range s.lists {
		if !l.none {
			return false
		}
	}
	return true
}

// due is one push to send.
type due struct {
	p     admission.Program
	l     *list
	e     queue.PushEntry
	stage queue.PushStage
}

// Tick sends, at the clock's now, every push due in every program, all
// programs' at once; its error joins the store's failures (push services'
// are counted and logged).
func (s *Sender) Tick(ctx context.Context) error {
	now := s.clock.Now()
	var dues []due
	var errs []error
	if now.Sub(s.listed) >= Refill {
		if err := s.listPrograms(ctx); err != nil {
			errs = append(errs, err) // on with the programs known
		} else {
			s.listed = now
		}
	}
	for id, l := range s.lists {
		d, err := s.dueIn(ctx, id, l, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("program %s: %w", id, err))
		}
		dues = append(dues, d...)
	}
	// Turns first, and at most MaxReadies readies: a "ready" can wait for the
	// next tick, an admission's time to show cannot.
	slices.SortStableFunc(dues, func(a, b due) int { return cmp.Compare(b.stage, a.stage) })
	if i := slices.IndexFunc(dues, func(d due) bool { return d.stage == queue.PushReady }); i >= 0 && len(dues)-i > MaxReadies {
		dues = dues[:i+MaxReadies]
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(Senders)
	for _, d := range dues {
		g.Go(func() error {
			if err := s.tell(gctx, d, now); err != nil {
				s.mu.Lock()
				errs = append(errs, fmt.Errorf("program %s: %w", d.p.ID, err))
				s.mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	for _, l := range s.lists {
		l.entries = dropTold(l)
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
				s.lists[id] = &list{version: -1, told: map[string]queue.PushStage{}, retry: map[string]backoff{}}
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

// dueIn reads program id (through the service's cache) and, when it
// changed, a Refill passed or the list's end is due, its list, and returns
// the pushes due at now.
func (s *Sender) dueIn(ctx context.Context, id string, l *list, now time.Time) ([]due, error) {
	if l.none && now.Sub(l.readAt) < Refill {
		return nil, nil
	}
	p, err := s.svc.PushProgram(ctx, id, now)
	if queue.ErrorKind(err) == queue.KindNotFound {
		delete(s.lists, id)
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	if l.version != p.Version || now.Sub(l.readAt) >= Refill || l.endDue(p, now) {
		if err := s.read(ctx, p, l, now); err != nil {
			return nil, err
		}
	}
	var dues []due
	for _, e := range l.entries {
		st := queue.StageAt(p, e.Ticket, now)
		if st == queue.PushNone && (!p.Shuffle || e.Ticket > p.Prequeue) {
			break // by ticket, nobody after is due (a shuffled pre-queue is read whole)
		}
		if b := l.retry[e.TokenID]; st > l.told[e.TokenID] && (b.stage != st || !now.Before(b.at)) {
			dues = append(dues, due{p, l, e, st})
		}
	}
	return dues, nil
}

// endDue reports whether l no longer covers what is due in p at now.
func (l *list) endDue(p admission.Program, now time.Time) bool {
	if l.complete {
		return queue.PushThrough(p, now) > l.through
	}
	return queue.StageAt(p, l.through, now) != queue.PushNone
}

// read lists p's subscribers due within a Refill, and whether there are
// any at all when none is.
func (s *Sender) read(ctx context.Context, p admission.Program, l *list, now time.Time) error {
	through := queue.PushThrough(p, now.Add(Refill))
	entries, complete, err := s.store.Subscribed(ctx, p.ID, 0, through, MaxListed)
	if err != nil {
		return err
	}
	if !complete && len(entries) > 0 {
		through = entries[len(entries)-1].Ticket
	}
	none := false
	if len(entries) == 0 {
		any, _, err := s.store.Subscribed(ctx, p.ID, 0, math.MaxInt64, 1)
		if err != nil {
			return err
		}
		none = len(any) == 0
	}
	l.version, l.through, l.complete, l.none, l.readAt, l.entries = p.Version, through, complete, none, now, entries
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
			delete(l.retry, e.TokenID)
		}
	}
	return kept
}

// tell claims d's stage on its token and, claimed, pushes it; a turn may be
// taken over once another's claim is older than Lease, so a turn's sighting,
// push and record must end within it.
func (s *Sender) tell(ctx context.Context, d due, now time.Time) error {
	id, stage := d.e.TokenID, d.stage
	if stage == queue.PushTurn && s.unrecorded(id) {
		return s.record(ctx, d.l, id) // sent: its record is what failed
	}
	at := s.clock.Now() // not the tick's: a claim waiting for a slot must not start stale
	var staleBefore time.Time
	if stage == queue.PushTurn {
		staleBefore = at.Add(-Lease)
	}
	t, err := s.store.ClaimPush(ctx, id, stage, s.owner, at, staleBefore)
	if err != nil && !errors.Is(err, queue.ErrNotFound) {
		// The answer may be lost with the claim made: this owner's retry wins again.
		t, err = s.store.ClaimPush(ctx, id, stage, s.owner, at, staleBefore)
	}
	mine := err == nil && t.Pending() && t.Push.Endpoint != "" && t.PushOwner == s.owner && t.PushStage == stage &&
		t.PushedAt.Equal(at.Truncate(time.Millisecond)) && t.PushTold < stage
	switch {
	case errors.Is(err, queue.ErrNotFound):
		s.settle(d.l, id, queue.PushTurn, nil)
		return nil
	case err != nil:
		s.later(d.l, id, stage, now.Add(2*time.Second), nil)
		return fmt.Errorf("claim %s: %w", stage, err)
	case mine:
	case !t.Pending() || t.Push.Endpoint == "":
		return s.drop(ctx, d.l, id, "", nil)
	case stage == queue.PushReady: // told, spent or another's: at most once, it is over
		s.settle(d.l, id, stage, func(c *Counts) { c.TakenFirst++ })
		return nil
	case t.PushTold >= stage:
		s.settle(d.l, id, stage, func(c *Counts) { c.TakenFirst++ })
		return nil
	case t.PushTries[stage] >= queue.MaxPushTries && t.PushedAt.Before(staleBefore):
		return s.drop(ctx, d.l, id, t.Push.Endpoint, func(c *Counts) { c.Dropped++ }) // every try failed
	default: // another sender's turn: look again when its lease is over
		s.later(d.l, id, stage, t.PushedAt.Add(Lease), func(c *Counts) { c.TakenFirst++ })
		return nil
	}
	left := at.Add(Lease - 2*time.Second).Sub(s.clock.Now()) // the work ends within the lease
	if left <= 0 {
		s.later(d.l, id, stage, now.Add(time.Second), nil)
		return nil
	}
	ctx, cancel := clock.WithTimeout(ctx, s.clock, left)
	defer cancel()
	if stage == queue.PushTurn {
		// The push is the sighting: the time to show counts from it.
		if err := s.svc.SightPush(ctx, d.p, d.e.Ticket); errors.Is(err, queue.ErrNoShow) {
			return s.drop(ctx, d.l, id, "", func(c *Counts) { c.NoShows++ })
		} else if err != nil {
			s.later(d.l, id, stage, now.Add(time.Second), nil)
			return fmt.Errorf("sight: %w", err)
		}
	}
	sub, err := subscription(t.Push)
	if err != nil {
		return errors.Join(err, s.drop(ctx, d.l, id, t.Push.Endpoint, func(c *Counts) { c.Dropped++ }))
	}
	out, after, err := s.push.Send(ctx, sub, message(d.p, stage))
	var dns *net.DNSError
	switch {
	case out == webpush.Gone || out == webpush.Retry && errors.As(err, &dns) && dns.IsNotFound:
		return s.drop(ctx, d.l, id, t.Push.Endpoint, func(c *Counts) { c.Gone++ })
	case out == webpush.Rejected:
		s.log.Warn("push refused", "err", err)
		return s.drop(ctx, d.l, id, t.Push.Endpoint, func(c *Counts) { c.Dropped++ })
	case out == webpush.Retry:
		s.mu.Lock()
		b := d.l.retry[id]
		if b.stage != stage {
			b = backoff{stage: stage}
		}
		b.tries++
		b.at = now.Add(min(max(after, time.Second<<b.tries), MaxBackoff))
		d.l.retry[id] = b
		s.Counts.Retried++
		s.mu.Unlock()
		s.log.Warn("push to send again", "err", err)
		return nil
	}
	if stage == queue.PushReady {
		s.settle(d.l, id, stage, func(c *Counts) { c.Ready++ })
		return nil
	}
	s.mu.Lock()
	s.sent[id] = true
	s.Counts.Turn++
	s.mu.Unlock()
	return s.record(ctx, d.l, id)
}

// record writes that the turn this sender sent id was told; until it is
// written the turn is not sent again, only its record retried.
func (s *Sender) record(ctx context.Context, l *list, id string) error {
	if err := s.store.PushTold(ctx, id, queue.PushTurn, s.owner); err != nil {
		return fmt.Errorf("record a turn told: %w", err)
	}
	s.mu.Lock()
	delete(s.sent, id)
	s.mu.Unlock()
	s.settle(l, id, queue.PushTurn, nil)
	return nil
}

// unrecorded reports whether this sender sent id its turn without its record.
func (s *Sender) unrecorded(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent[id]
}

// settle records that id was told stage, and counts.
func (s *Sender) settle(l *list, id string, stage queue.PushStage, count func(*Counts)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l.told[id] = stage
	if count != nil {
		count(&s.Counts)
	}
}

// later looks at id's stage again at at, and counts.
func (s *Sender) later(l *list, id string, stage queue.PushStage, at time.Time, count func(*Counts)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := l.retry[id]
	if b.stage != stage {
		b = backoff{stage: stage}
	}
	b.at = at
	l.retry[id] = b
	if count != nil {
		count(&s.Counts)
	}
}

// drop ends id's subscription to endpoint ("": any), nothing more is told
// it; one the page stored since is listed again at the next read.
func (s *Sender) drop(ctx context.Context, l *list, id, endpoint string, count func(*Counts)) error {
	s.settle(l, id, queue.PushTurn, count)
	return s.store.Unsubscribe(ctx, id, endpoint)
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
