package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/example/waitingroom/internal/api"
)

// Bounds of a bypass issuance (docs/design.md, "Bypass passes").
const (
	MaxBypassCount    = 1000
	MinBypassValidity = time.Minute
	MaxBypassValidity = 24 * time.Hour
	// bypassSigners bounds the signatures of one issuance in flight: the
	// account's KMS ECC quota is shared with the admissions' passes.
	bypassSigners = 8
	// bypassSignBudget bounds the signing of one issuance, and so does
	// the request's deadline less adminDeadline, kept for the admin change
	// that reserves the slots.
	bypassSignBudget = 5 * time.Second
	// maxReservations bounds the bypass reservations a program keeps; an
	// issuance beyond merges into the one that ends nearest its own.
	maxReservations = 8
)

// Bypass is one bypass pass to sign: an admin's pass to ProgramID without
// a place in the queue, its subject the fresh id ID, valid from IssuedAt
// to ExpiresAt.
type Bypass struct {
	ProgramID, ID       string
	IssuedAt, ExpiresAt time.Time
}

// BypassSigner signs bypass passes; a PassSigner that is one lets the
// service issue them.
type BypassSigner interface {
	SignBypass(ctx context.Context, b Bypass) (string, error)
}

// Reservation is N slots of a capped program's ceiling held by live bypass
// passes: from FromMs (Unix ms) to UntilMs, then freed at Rate, the first
// at UntilMs (all at once when Rate is 0), as a fold's Step frees them.
type Reservation struct {
	FromMs  int64 `dynamodbav:"from"`
	UntilMs int64 `dynamodbav:"until"`
	N       int64 `dynamodbav:"n"`
	Rate    Rate  `dynamodbav:"rate"`
}

// heldAt is how many of r's slots are held at Unix ms.
func (r Reservation) heldAt(ms int64) int64 {
	switch {
	case ms < r.FromMs:
		return 0
	case ms < r.UntilMs:
		return r.N
	case r.Rate <= 0:
		return 0
	}
	freed, _ := mulDiv(uint64(ms-r.UntilMs), uint64(r.Rate), 1e6, false)
	return max(r.N-addSat(freed, 1), 0)
}

// reservedAt is how many slots p's bypass passes hold at Unix ms.
func (p Program) reservedAt(ms int64) int64 {
	n := int64(0)
	for _, r := range p.Reserved {
		n = addSat(n, r.heldAt(ms))
	}
	return n
}

// bypassRoom is how many bypass passes p, capped, can take at now: the
// ceiling now, less the most the counter may reach before the passes hold
// their slots everywhere (q is p with the change made: the old segments'
// counter at the change while one is scheduled, else the counter now).
// From now on the ceiling only rises, so passes within it never take the
// counter back (docs/design.md, "Bypass passes").
func bypassRoom(p, q Program, now time.Time) int64 {
	at := UnixMs(now)
	if q.Pending(now) {
		at = q.Next.AnchorMs
	}
	ceiling, _ := p.ceilingAt(UnixMs(now))
	return ceiling - q.segmentAt(at).Counter(at)
}

// withBypass returns p with n bypass passes, held until untilMs, reserved
// from its ceiling at now as an admin change taking effect delay later,
// or NO_ROOM. Without a cap it is p as an admin change that changes
// nothing.
func (p Program) withBypass(n, untilMs int64, now time.Time, delay time.Duration) (Program, error) {
	settled := p.Settled()
	q := p.Rebased(now, settled.Rate, settled.Paused, 0, delay)
	if p.MaxActiveUsers <= 0 {
		return q, nil
	}
	if room := bypassRoom(p, q, now); n > room {
		return p, errNoRoom(p, max(room, 0), delay)
	}
	ms := UnixMs(now)
	q.Reserved = reserve(q.Reserved, Reservation{FromMs: ms, UntilMs: untilMs, N: n, Rate: settled.Rate}, ms)
	return q, nil
}

// reserve returns rs, less the reservations over at ms, with r added, or
// merged into the one that ends nearest it when rs is full: the merged one
// holds at least what both would, so the ceiling is never higher.
func reserve(rs []Reservation, r Reservation, ms int64) []Reservation {
	kept := make([]Reservation, 0, len(rs)+1)
	for _, x := range rs {
		if ms < x.UntilMs || x.heldAt(ms) > 0 {
			kept = append(kept, x)
		}
	}
	if len(kept) < maxReservations {
		return append(kept, r)
	}
	near := 0
	for i, x := range kept {
		if absDiff(x.UntilMs, r.UntilMs) < absDiff(kept[near].UntilMs, r.UntilMs) {
			near = i
		}
	}
	x := &kept[near]
	x.FromMs, x.UntilMs, x.N = min(x.FromMs, r.FromMs), max(x.UntilMs, r.UntilMs), addSat(x.N, r.N)
	if x.Rate <= 0 || r.Rate > 0 && r.Rate < x.Rate {
		x.Rate = r.Rate // the slower release; 0 (all at once) only if both are
	}
	return kept
}

func absDiff(a, b int64) int64 {
	if a > b {
		return a - b
	}
	return b - a
}

// errNoRoom is NO_ROOM: p's cap has room for only room passes.
func errNoRoom(p Program, room int64, delay time.Duration) error {
	e := Errorf(KindConflict, api.CodeNoRoom, "maxActiveUsers (%d) has room for %d bypass passes now: retry once people have left, or pause admission so that the line does not take the freed slots first.", p.MaxActiveUsers, room)
	e.RetryAfter = time.Duration(roundMs(delay)) * time.Millisecond
	return e
}

// IssueBypass signs count bypass passes to programID, each valid for
// validity from now with a fresh subject and "bypass": true. Under a cap
// they hold slots until they expire, reserved by one admin change: with no
// room it is NO_ROOM, and nothing is reserved unless every pass was signed.
func (s *Service) IssueBypass(ctx context.Context, programID string, count int64, validity time.Duration) ([]string, error) {
	if !ValidProgramID(programID) {
		return nil, errInvalidProgramID()
	}
	if count < 1 || count > MaxBypassCount {
		return nil, Errorf(KindInvalid, api.CodeInvalidCount, "count must be a whole number between 1 and %d.", MaxBypassCount)
	}
	if validity < MinBypassValidity || validity > MaxBypassValidity {
		return nil, Errorf(KindInvalid, api.CodeInvalidValidity, "validSeconds must be between %d and %d.", int(MinBypassValidity.Seconds()), int(MaxBypassValidity.Seconds()))
	}
	p, err := s.store.GetProgram(ctx, programID)
	if errors.Is(err, ErrNotFound) {
		return nil, errProgramNotFound()
	} else if err != nil {
		return nil, storeError("get program", err)
	}
	signer, ok := s.passes.(BypassSigner)
	if !ok {
		return nil, &Error{Kind: KindUnavailable, Code: api.CodePassUnavailable, Message: "This deployment signs no passes.", Err: errors.New("no bypass signer")}
	}
	now := s.clock.Now()
	if !p.Pending(now) {
		if _, err := p.withBypass(count, 0, now, s.changeDelay()); err != nil {
			return nil, err // no room: refused before any signature
		}
	}
	expires := now.Add(validity)
	passes, err := s.signBypass(ctx, signer, programID, count, now, expires)
	if err != nil {
		return nil, err
	}
	// One admin change, also without a cap, so that the history holds it
	// exactly once.
	until := UnixMs(expires.Add(expiryMargin))
	edit := func(p Program, now time.Time) (Program, error) {
		return p.withBypass(count, until, now, s.changeDelay())
	}
	rec := Change{Action: ActionBypass, Fields: fieldsOf(map[string]int64{"count": count, "validSeconds": int64(validity / time.Second)})}
	if _, _, _, err := s.changeProgram(ctx, "reserve bypass", programID, rec, nil, edit); err != nil {
		return nil, err
	}
	return passes, nil
}

// signBypass signs n bypass passes to programID valid from now to expires,
// at most bypassSigners at a time, within bypassSignBudget and leaving
// adminDeadline of ctx's time.
func (s *Service) signBypass(ctx context.Context, signer BypassSigner, programID string, n int64, now, expires time.Time) ([]string, error) {
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-adminDeadline))
		defer cancel()
	}
	ctx, cancel := context.WithTimeout(ctx, bypassSignBudget)
	defer cancel()
	passes := make([]string, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(bypassSigners)
	for i := range passes {
		g.Go(func() error {
			pass, err := signer.SignBypass(gctx, Bypass{ProgramID: programID, ID: NewTokenID(), IssuedAt: now, ExpiresAt: expires})
			if err != nil {
				return fmt.Errorf("sign bypass pass %d of %d: %w", i+1, n, err)
			}
			passes[i] = pass
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		e := &Error{Kind: KindUnavailable, Code: api.CodePassUnavailable, Message: "The passes could not be signed; retry shortly.", Err: err}
		e.RetryAfter = time.Second
		return nil, e
	}
	return passes, nil
}
