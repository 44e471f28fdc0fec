// Package queue is the waiting room's domain service (Service): people
// enter a program's queue for a ticket, each poll computes their place from
// the serving counter, and the first answer that finds them admitted signs
// their pass; operators change programs through the same Service. Store is
// what it needs of a database. docs/design.md says why each rule is so.
//
// Invariants:
//   - The serving counter is computed, never stored as a running number:
//     from the program's segments and the clock, so every instance holding
//     the same read computes the same counter, and it never goes back.
//   - An admin change takes effect once every read made before it was
//     stored has expired (ChangeDelay: the cache TTL plus the write
//     budget), so a position never goes up, a status only moves forward,
//     and no instance admits a ticket another would not.
//   - No idle credit: the first ticket after the counter caught up with
//     the tickets issued re-anchors it, in the write that hands it out.
//   - A repeated write is recognised as its own: an admin change by its id
//     among the program's latest (history.Applied), a keyed enter by its
//     claim, a token by its id. A failed enter costs at most a gap in the
//     tickets; no ticket is ever held by two tokens.
//   - Every admin request answers within its deadline: applied, or BUSY
//     and not made (STORE_UNAVAILABLE: it may have been).
//   - A token only moves WAITING → ADMITTED → EXPIRED or WAITING → LEFT,
//     and to REVOKED by an admin; its pass is signed once, at the first
//     sighting of its admission, and never shown to an admin.
//   - Under a cap, admissions plus live bypass passes never exceed the cap
//     (package capacity).
package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/settings"
	"github.com/example/waitingroom/internal/shuffle"
	"github.com/example/waitingroom/internal/webpush"
)

// Service applies the queue's rules on top of a Store. It is safe for
// concurrent use; build one per process (per Lambda cold start).
type Service struct {
	store    Store
	policy   polling.Policy
	policies map[string]polling.Policy
	clock    clock.Clock
	rng      *rand.Rand
	cache    *admission.Cache
	passes   PassSigner
	edge     EdgeTokens
	shuffle  shuffleSeeds
	tickets  Tickets
	folds    capacity.Throttle
	log      *slog.Logger
	secret   []byte // of the proof-of-work challenges and the accounts' token ids
	enqueue  EnqueueVerifier
	// pushHosts are the push services subscriptions may name; nil: no push.
	pushHosts webpush.Hosts
	// flushReport writes this instance's report tallies before a pass.
	flushReport func(context.Context) error
}

// Option configures a Service.
type Option func(*Service)

// WithClock replaces the real clock, for the time and every wait.
func WithClock(c clock.Clock) Option { return func(s *Service) { s.clock = c } }

// WithRand makes jitter come from rng; a *rand.Rand is not safe for
// concurrent use, so only single-goroutine tests set it.
func WithRand(rng *rand.Rand) Option { return func(s *Service) { s.rng = rng } }

// WithProgramCache lets polls reuse a program read for up to ttl (0: never)
// and delays admin changes by ChangeDelay(ttl); every instance uses one ttl.
func WithProgramCache(ttl time.Duration) Option {
	return func(s *Service) { s.cache = admission.NewCache(ttl) }
}

// PassSigner signs the admission pass of a token at the first sighting of
// its admission (AdmittedAt and AdmissionExpiresAt are set).
type PassSigner interface {
	SignPass(ctx context.Context, t Token) (string, error)
}

// WithPassSigner makes every admission carry a pass signed once by signer.
func WithPassSigner(signer PassSigner) Option { return func(s *Service) { s.passes = signer } }

// EdgeTokens mints the edge gate's token of an admission whose pass
// expires at exp (package edge).
type EdgeTokens interface {
	EdgeToken(ctx context.Context, programID string, exp time.Time, pass string) (string, error)
}

// WithEdgeTokens makes the admitted answers of programs at the edge gate
// (edge mode not off) carry an edge token minted by m.
func WithEdgeTokens(m EdgeTokens) Option { return func(s *Service) { s.edge = m } }

// WithPolicies names the polling policies a program may choose
// ("pollingPolicy"); others get the service's default.
func WithPolicies(named map[string]polling.Policy) Option {
	return func(s *Service) { s.policies = named }
}

// WithReportFlush makes a report's pass first write this instance's tallies
// with flush (report.Tally.Flush): one process serving both APIs answers its
// last minute too.
func WithReportFlush(flush func(context.Context) error) Option {
	return func(s *Service) { s.flushReport = flush }
}

// WithLogger makes the service log to l instead of slog.Default().
func WithLogger(l *slog.Logger) Option { return func(s *Service) { s.log = l } }

// jitter returns a uniform random duration in [0, d).
func (s *Service) jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	if s.rng != nil {
		return time.Duration(s.rng.Int64N(int64(d)))
	}
	return time.Duration(rand.Int64N(int64(d)))
}

// policyOf is the polling policy of p.
func (s *Service) policyOf(p admission.Program) polling.Policy {
	if pol, ok := s.policies[p.Policy]; ok && p.Policy != "" {
		return pol
	}
	return s.policy
}

// NewService returns a Service over store that answers retry delays with
// policy.
func NewService(store Store, policy polling.Policy, opts ...Option) *Service {
	s := &Service{store: store, policy: policy, clock: clock.Real{}, cache: admission.NewCache(0)}
	for _, o := range opts {
		o(s)
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.secret == nil {
		s.secret = randomSecret()
	}
	return s
}

// Entry is what a person brings to Enter ("" for none of each): a token
// held, an idempotency key, a proof of work (challengeBits), and a push
// subscription (nil: none).
type Entry struct {
	Token, IdempotencyKey, Challenge, Solution string
	Push                                       *api.PushSubscription
	// Enqueue is the site's enqueue token, naming the account whose place it is.
	Enqueue string
}

// Enter puts a person in programID's queue, created=true for a new ticket;
// a still valid e.Token, or the token of e.IdempotencyKey, is answered again.
func (s *Service) Enter(ctx context.Context, programID string, e Entry) (v View, created bool, err error) {
	if !ValidProgramID(programID) {
		return View{}, false, errInvalidProgramID
	}
	if e.IdempotencyKey != "" && !ValidIdempotencyKey(e.IdempotencyKey) {
		return View{}, false, errInvalidKey
	}
	account, err := s.account(ctx, programID, e.Enqueue)
	if err != nil {
		return View{}, false, err
	}
	var sub Subscription
	if e.Push != nil {
		var err error
		if sub, err = s.subscription(*e.Push); err != nil {
			// The enter goes on unsubscribed (push false); Subscribe says why.
			sub, e.Push = Subscription{}, nil
		}
	}
	if account != "" {
		// The account's one place, whatever token the device holds.
		return s.enterWithKey(ctx, programID, e, Token{ID: s.AccountTokenID(programID, account), Push: sub, Account: account})
	}
	if e.Token != "" {
		v, err := s.Poll(ctx, programID, e.Token) // INVALID_TOKEN if malformed
		switch {
		case err == nil && v.Status == StatusWaiting && e.Push != nil && !v.Push:
			// A page that subscribed since: its answer becomes a subscriber's
			// (unless admitted meanwhile: the answer says so).
			t, err := s.token(ctx, programID, e.Token)
			if err == nil {
				t, err = s.subscribe(ctx, t, sub)
			}
			if err != nil && ErrorKind(err) == KindUnavailable {
				return View{}, false, err
			}
			v, err := s.answer(ctx, programID, t)
			return v, false, err
		case err == nil && (v.Status == StatusWaiting || v.Status == StatusAdmitted):
			return v, false, nil
		case err != nil && ErrorKind(err) != KindNotFound:
			return View{}, false, err
		}
		// Unknown, foreign, left or expired: a fresh place.
	}
	if e.IdempotencyKey != "" {
		return s.enterWithKey(ctx, programID, e, Token{ID: idempotentTokenID(programID, e.IdempotencyKey), Push: sub})
	}
	id := NewTokenID()
	if err := s.checkEntry(ctx, programID, e, id, s.clock.Now()); err != nil {
		return View{}, false, err
	}
	return s.enterNew(ctx, programID, Token{ID: id, Push: sub}, "")
}

// enterNew takes a ticket and stores it as the new token want.ID (with its
// Push and Account), created=true; with a claim (see enterWithKey), as the
// fill of that claim.
func (s *Service) enterNew(ctx context.Context, programID string, want Token, claim string) (v View, created bool, err error) {
	tk, err := s.takeTicket(ctx, programID, s.clock.Now())
	p, now := tk.Program, tk.At
	switch {
	case errors.Is(err, ErrNotFound):
		return View{}, false, errProgramNotFound
	case errors.Is(err, ErrClosed):
		return View{}, false, errProgramClosed
	case err != nil:
		return View{}, false, storeError("issue ticket", err)
	}
	if tk.Fresh {
		s.cache.Put(p, now)
	} else if p, err = s.program(ctx, programID, now); err != nil {
		// A ticket from a shard: the answer needs a read within the cache rules.
		return View{}, false, err
	}
	t := Token{
		ID:        want.ID,
		ProgramID: programID,
		Ticket:    tk.Ticket,
		IssuedAt:  now.Truncate(time.Millisecond),
		ExpiresAt: now.Add(WaitingTokenRetention),
		Push:      want.Push,
		Account:   want.Account,
	}
	t.EnterPosition, t.EnterEstimate = s.standing(p, t.Ticket, now)
	var stored Token
	if claim == "" {
		stored, err = s.putToken(ctx, t)
	} else {
		stored, err = s.fillToken(ctx, t, claim)
	}
	if err != nil {
		// The ticket is lost: a gap the serving counter passes over.
		return View{}, false, err
	}
	if stored.Ticket != t.Ticket {
		// An enter that took the claim over stored first: this ticket is a gap.
		v, err := s.answer(ctx, programID, stored)
		return v, false, err
	}
	if p, err = s.withOpening(ctx, p, now); err != nil {
		return View{}, false, err
	}
	s.maybeFold(ctx, p, now)
	v, err = s.view(ctx, p, t, now)
	return v, true, err
}

// putToken stores the new token t and returns the token stored under its
// id: on a conflict, the one an earlier attempt whose answer was lost stored.
func (s *Service) putToken(ctx context.Context, t Token) (Token, error) {
	err := s.store.PutToken(ctx, t)
	if err == nil {
		return t, nil
	} else if !errors.Is(err, ErrConflict) {
		return Token{}, storeError("put token", err)
	}
	got, gerr := s.store.GetToken(ctx, t.ID)
	if gerr != nil || got.ProgramID != t.ProgramID {
		return Token{}, storeError("put token", err)
	}
	return got, nil
}

// Poll answers where token tokenID stands in programID's queue; a token of
// another program, or an unfilled claim, reads as unknown.
func (s *Service) Poll(ctx context.Context, programID, tokenID string) (View, error) {
	t, err := s.token(ctx, programID, tokenID)
	if err != nil {
		return View{}, err
	}
	return s.answer(ctx, programID, t)
}

// answer is Poll's answer for t, a token of programID as just read.
func (s *Service) answer(ctx context.Context, programID string, t Token) (View, error) {
	now := s.clock.Now()
	if s.tickets != nil {
		s.tickets.GiveBack(ctx, Programs{s}, programID, now)
	}
	p, err := s.program(ctx, programID, now)
	if err != nil {
		return View{}, err
	}
	if t.IssuedAt.Before(p.CreatedAt.Add(-incarnationMargin)) {
		return View{}, errTokenNotFound // of a deleted program of that id
	}
	var v View
	if t.Pending() {
		if p, err = s.withOpening(ctx, p, now); err != nil {
			return View{}, err
		}
		s.maybeFold(ctx, p, now)
		v, err = s.view(ctx, p, t, now)
	} else {
		v, err = s.view(ctx, admission.Program{}, t, now)
	}
	if err == nil && s.edge != nil && v.AdmissionPass != "" && p.Edge.Mode != "" {
		if v.EdgeToken, err = s.edge.EdgeToken(ctx, programID, v.ExpiresAt, v.AdmissionPass); err != nil {
			return View{}, &Error{Kind: KindUnavailable, Code: api.CodeEdgeUnavailable, Message: "Your pass to the site could not be made just now; retry shortly.", Err: fmt.Errorf("edge token: %w", err)}
		}
	}
	return v, err
}

// withOpening is withShuffle(p), read fresh with its pre-queue fixed once an
// armed shuffle's opening has come.
func (s *Service) withOpening(ctx context.Context, p admission.Program, now time.Time) (admission.Program, error) {
	if !p.Armed() || now.Before(p.OpensAt) {
		return s.withShuffle(ctx, p)
	}
	q, err := s.store.GetProgram(ctx, p.ID)
	if err == nil && q.Armed() {
		ps, ok := s.store.(PrequeueStore)
		if !ok {
			return admission.Program{}, Errorf(KindInternal, api.CodeInternal, "The store cannot shuffle.")
		}
		q, err = ps.FixPrequeue(ctx, p.ID, now)
	}
	if err != nil {
		return admission.Program{}, programReadError("fix the pre-queue", err)
	}
	s.cache.Put(q, now)
	return s.withShuffle(ctx, q)
}

// Leave takes a token out of the queue, or ends its admission: it then
// reads LEFT. Leaving again, or after the admission, is not an error.
func (s *Service) Leave(ctx context.Context, programID, tokenID string) error {
	t, err := s.token(ctx, programID, tokenID)
	if err != nil {
		return err
	}
	now := s.clock.Now()
	if !t.RevokedAt.IsZero() {
		return nil // out of the queue already
	}
	if t.AdmittedAt.IsZero() && t.LeftAt.IsZero() {
		// Waiting, or admitted but never told: it leaves without its pass.
		left := t
		left.LeftAt, left.ExpiresAt = now.Truncate(time.Millisecond), now.Add(endedTokenRetention)
		if p, err := s.program(ctx, programID, now); err == nil { // for the report; its fault is not the leave's
			left.LeftPosition, left.LeftEstimate = s.standing(p, t.Ticket, now)
		}
		if t, err = s.store.MarkLeft(ctx, left); err != nil {
			return storeError("mark left", err)
		}
	}
	if !t.LeftAt.IsZero() || !t.RevokedAt.IsZero() || !now.Before(t.AdmissionExpiresAt) {
		return nil // left, revoked meanwhile, or its admission is over
	}
	return s.endAdmission(ctx, t, now)
}

// endAdmission ends t's admission at now: the token reads LEFT (the store
// leaves one already ended or expired as it is).
func (s *Service) endAdmission(ctx context.Context, t Token, now time.Time) error {
	t.LeftAt, t.ExpiresAt = now.Truncate(time.Millisecond), now.Add(endedTokenRetention)
	if _, err := s.store.EndAdmission(ctx, t); err != nil {
		return storeError("end admission", err)
	}
	return nil
}

// token reads token tokenID of programID: TOKEN_NOT_FOUND if it is absent,
// of another program, or a claim not filled yet.
func (s *Service) token(ctx context.Context, programID, tokenID string) (Token, error) {
	switch {
	case !ValidProgramID(programID):
		return Token{}, errInvalidProgramID
	case tokenID == "":
		return Token{}, Errorf(KindInvalid, api.CodeMissingToken, "A queue token is required.")
	case !ValidTokenID(tokenID):
		return Token{}, Errorf(KindInvalid, api.CodeInvalidToken, "The queue token is malformed.")
	}
	t, err := s.store.GetToken(ctx, tokenID)
	if errors.Is(err, ErrNotFound) || (err == nil && (t.ProgramID != programID || t.Claim != "")) {
		return Token{}, errTokenNotFound
	} else if err != nil {
		return Token{}, storeError("get token", err)
	}
	return t, nil
}

// view derives the token's status at now; p is needed only while the token
// is neither admitted nor left in the store.
func (s *Service) view(ctx context.Context, p admission.Program, t Token, now time.Time) (View, error) {
	first := false
	if t.Pending() {
		if !p.AdmitsTicket(t.Ticket, now) {
			return s.waiting(p, t, now), nil
		}
		var err error
		t, first, err = s.markAdmitted(ctx, p, t, now)
		if errors.Is(err, errNoShow) {
			// Admitted, but not seen within the time to show: no pass, ever.
			return View{TokenID: t.ID, IssuedAt: t.IssuedAt, Ticket: t.Ticket, Status: StatusExpired}, nil
		} else if err != nil {
			return View{}, err
		}
	}
	v := storedView(t, now)
	v.FirstSighting = first
	return v, nil
}

// waiting is the view of t, WAITING in p at now; without a place yet
// (a shuffled pre-queue), the next poll is a little after the opening.
func (s *Service) waiting(p admission.Program, t Token, now time.Time) View {
	v := View{TokenID: t.ID, Status: StatusWaiting, IssuedAt: t.IssuedAt, Ticket: t.Ticket, Account: t.Account != "", Notice: p.Profile.Notice, Translations: p.Profile.Translations, Paused: p.Segment(now).Paused}
	if !p.Opened(now) {
		v.OpensAt = p.OpensAt
	}
	v.ClosesAt = p.ClosesAt
	place, placed := p.Place(t.Ticket)
	if p.Shuffle {
		v.Shuffle = &ShuffleView{Commitment: shuffle.Message(p.ID, p.ShuffleNonce), PublicKey: p.ShufflePublicKey}
		if p.PrequeueFixed {
			v.Shuffle.Seed, v.Shuffle.Prequeue = p.ShuffleSeed, p.Prequeue
			if t.Ticket <= p.Prequeue {
				v.Shuffle.Place = place
			}
		}
	}
	v.StatusLine = statusLine(p, v, now)
	var sit polling.Situation
	notice := s.cache.Notice(p, now)
	if placed {
		sit = p.Situation(place, now, notice)
		v.Position, v.EstimatedWait = sit.Position, sit.Wait
	} else {
		// No position, no estimate: come back after the opening, spread out.
		sit = p.Situation(p.Issued, now, 0)
		sit.Wait = max(p.OpensAt.Sub(now), 0) + s.jitter(p.OpeningSpread(now))
		sit.Earliest, sit.HeldEarliest = sit.Wait, 0
	}
	v.RetryAfter = s.policyOf(p).RetryAfter(sit, s.rng)
	if v.Push = s.pushHosts != nil && t.Push != (Subscription{}); v.Push {
		v.RetryAfter = polling.Pushed(sit, v.RetryAfter, s.rng)
	}
	if p.Followed() {
		// Whoever polls as told fetches their admission in time to show.
		v.RetryAfter = min(v.RetryAfter, p.PollToShow(max(notice, 0), sit.HeldEarliest))
	}
	return v
}

// statusLine is the sentence a waiting answer carries about the opening.
func statusLine(p admission.Program, v View, now time.Time) string {
	at := p.OpensAt.UTC().Format(time.RFC3339)
	switch {
	case !v.OpensAt.IsZero() && p.Shuffle:
		return "Opens at " + at + ". Everyone who enters before then gets a place drawn at random at the opening."
	case !v.OpensAt.IsZero():
		return "Opens at " + at + ". Admission starts then, in order of arrival."
	case v.Shuffle != nil && v.Shuffle.Place > 0:
		return fmt.Sprintf("Place %d of %d in the pre-queue, drawn at random at the opening.", v.Shuffle.Place, v.Shuffle.Prequeue)
	}
	return ""
}

// markAdmitted records the first sighting of t's admission; recorded is
// false when another version of the token won.
func (s *Service) markAdmitted(ctx context.Context, p admission.Program, t Token, now time.Time) (stored Token, recorded bool, err error) {
	place, _ := p.Place(t.Ticket) // placed: p admits t
	sealedAt, err := s.sight(ctx, p, place)
	if err != nil {
		return t, false, err
	}
	t.AdmittedAt = now.Truncate(time.Millisecond)
	t.AdmissionExpiresAt = t.AdmittedAt.Add(p.Window())
	if !sealedAt.IsZero() && sealedAt.Add(p.Window()).Before(t.AdmissionExpiresAt) {
		// Seen before its seal, recorded after: the window the fold counts.
		t.AdmissionExpiresAt = sealedAt.Add(p.Window())
	}
	t.ExpiresAt = t.AdmissionExpiresAt.Add(endedTokenRetention)
	if s.passes != nil {
		pass, err := s.passes.SignPass(ctx, t)
		if err != nil {
			// Nothing is recorded: the next poll signs again.
			return Token{}, false, &Error{Kind: KindUnavailable, Code: api.CodePassUnavailable, Message: "Your admission pass could not be signed just now; retry shortly.", Err: fmt.Errorf("sign pass: %w", err)}
		}
		t.AdmissionPass = pass
	}
	stored, err = s.store.MarkAdmitted(ctx, t)
	if err != nil {
		return Token{}, false, storeError("mark admitted", err)
	}
	// The stored token is this write's when it holds this write's values.
	recorded = stored.LeftAt.IsZero() && stored.AdmittedAt.Equal(t.AdmittedAt) && stored.AdmissionPass == t.AdmissionPass
	return stored, recorded, nil
}

// program returns program id as of now, from the cache or read (and cached);
// PROGRAM_NOT_FOUND if it does not exist.
func (s *Service) program(ctx context.Context, id string, now time.Time) (admission.Program, error) {
	if p, ok := s.cache.Get(id, now); ok {
		return p, nil
	}
	p, err := s.store.GetProgram(ctx, id)
	if err != nil {
		return admission.Program{}, programReadError("get program", err)
	}
	s.cache.Put(p, now)
	return p, nil
}

// Showing is what anyone may see of a program now (no counts); Closed:
// new entries are refused, ClosesAt: its scheduled close (zero: none).
type Showing struct {
	Profile  settings.Profile
	Edge     settings.Edge
	Paused   bool
	Closed   bool
	ClosesAt time.Time
}

// Showing returns what programID shows, read through the program cache.
func (s *Service) Showing(ctx context.Context, programID string) (Showing, error) {
	if !ValidProgramID(programID) {
		return Showing{}, errInvalidProgramID
	}
	now := s.clock.Now()
	p, err := s.program(ctx, programID, now)
	if err != nil {
		return Showing{}, err
	}
	return Showing{Profile: p.Profile, Edge: p.Edge, Paused: p.Segment(now).Paused, Closed: !p.TakesEntries(now), ClosesAt: p.ClosesAt}, nil
}
