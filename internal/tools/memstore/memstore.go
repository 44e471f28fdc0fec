// Package memstore is the embedded, in-memory queue.Store used by the local
// server and by tests. It keeps the same contract as the DynamoDB store
// (internal/testing/storetest) but nothing survives the process.
package memstore

import (
	"cmp"
	"context"
	"maps"
	"sync"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tickets"
	"github.com/example/waitingroom/internal/tools/localkeys"
)

// Store is an in-memory queue.Store, safe for concurrent use.
type Store struct {
	mu       sync.Mutex
	programs map[string]admission.Program
	tokens   map[string]queue.Token
	vapid    *admissionpass.StoredKey // the VAPID key, once made
	shards   map[shardKey]tickets.Shard
	// changeIssued is dynamostore's attribute: per program, the tickets
	// issued when its scheduled change landed, until MoveDrain uses it.
	changeIssued map[string]int64
	cap          capRecords
	cat          catalogRecords
	rep          reportRecords
	challenges   map[string]expiring[string] // proof-of-work owners
	handoffs     map[string]expiring[queue.Handoff]
	clock        clock.Clock // dates the capacity records' expiry

	*localkeys.KeyStore // the signing keys
}

// expiring is a record and when Sweep drops it.
type expiring[T any] struct {
	v       T
	expires time.Time
}

var (
	_ queue.Store            = (*Store)(nil)
	_ queue.PrequeueStore    = (*Store)(nil)
	_ queue.ScheduleStore    = (*Store)(nil)
	_ tickets.Store          = (*Store)(nil)
	_ capacity.Store         = (*Store)(nil)
	_ admissionpass.KeyStore = (*Store)(nil)
)

// New returns an empty Store.
func New() *Store {
	return &Store{
		programs: map[string]admission.Program{}, tokens: map[string]queue.Token{}, shards: map[shardKey]tickets.Shard{},
		changeIssued: map[string]int64{}, challenges: map[string]expiring[string]{}, handoffs: map[string]expiring[queue.Handoff]{},
		KeyStore: localkeys.NewKeyStore(),
		cap:      capRecords{groups: map[groupKey]expiring[capacity.Group]{}, ends: map[endsKey]ends{}, marks: map[string][]expiring[capacity.Mark]{}},
		cat:      catalogRecords{listed: map[string]struct{}{}, deleted: map[string]time.Time{}, history: map[string][]history.Change{}},
		rep:      reportRecords{minutes: map[minuteKey]*minute{}, reports: map[string]kept{}},
		clock:    clock.Real{},
	}
}

// CreateProgram implements queue.Store.
func (s *Store) CreateProgram(ctx context.Context, p admission.Program) error {
	return s.do(ctx, func() error {
		if _, ok := s.programs[p.ID]; ok {
			return queue.ErrConflict
		}
		if p.CreatedAt.Before(s.cat.deleted[p.ID]) {
			return queue.ErrDeleted
		}
		delete(s.cat.deleted, p.ID)
		s.programs[p.ID] = p
		return nil
	})
}

// GetProgram implements queue.Store.
func (s *Store) GetProgram(ctx context.Context, id string) (admission.Program, error) {
	return locked(ctx, s, func() (admission.Program, error) { return lookup(s.programs, id) })
}

// UpdateProgram implements queue.Store.
func (s *Store) UpdateProgram(ctx context.Context, p admission.Program, expectIssued int64) error {
	return s.do(ctx, func() error {
		cur, ok := s.programs[p.ID]
		if !ok || cur.Version != p.Version-1 || cur.Issued != expectIssued {
			return queue.ErrConflict
		}
		s.programs[p.ID] = updated(cur, p)
		return nil
	})
}

// updated is p stored over cur: what tickets, shards and folds maintain stay as in cur.
func updated(cur, p admission.Program) admission.Program {
	p.CreatedAt, p.Issued, p.Shards, p.Recent = cur.CreatedAt, cur.Issued, cur.Shards, cur.Recent
	p.Prequeue, p.PrequeueFixed, p.Capacity = cur.Prequeue, cur.PrequeueFixed, cur.Capacity
	return p
}

// UpdateScheduled implements queue.ScheduleStore; a retry reports the count recorded.
func (s *Store) UpdateScheduled(ctx context.Context, p admission.Program) (int64, error) {
	return locked(ctx, s, func() (int64, error) {
		cur, ok := s.programs[p.ID]
		switch {
		case ok && cur.Version == p.Version-1:
			s.programs[p.ID] = updated(cur, p)
			s.changeIssued[p.ID] = cur.Issued
			return cur.Issued, nil
		case !ok || cur.Version != p.Version || len(cur.Changes) == 0 || len(p.Changes) == 0 || cur.Changes[0] != p.Changes[0]:
			return 0, queue.ErrConflict
		}
		if issued, ok := s.changeIssued[p.ID]; ok {
			return issued, nil
		}
		return p.Issued, nil // the drain instant is moved already
	})
}

// MoveDrain implements queue.ScheduleStore.
func (s *Store) MoveDrain(ctx context.Context, p admission.Program, issued int64) error {
	return s.do(ctx, func() error {
		cur, ok := s.programs[p.ID]
		recorded, moving := s.changeIssued[p.ID]
		if ok && moving && cur.Version == p.Version && recorded == issued {
			cur.DrainAtNs = p.MovedDrainAtNs(cur.DrainAtNs, issued)
			s.programs[p.ID] = cur
			delete(s.changeIssued, p.ID)
		}
		return nil
	})
}

// IssueTicket implements queue.Store.
func (s *Store) IssueTicket(ctx context.Context, programID string, now time.Time) (admission.Program, error) {
	return s.IssueTickets(ctx, programID, now, 1)
}

// IssueTickets implements tickets.Store.
func (s *Store) IssueTickets(ctx context.Context, programID string, now time.Time, n int64) (admission.Program, error) {
	return s.editProgram(ctx, programID, func(p admission.Program) (admission.Program, error) {
		if p.Closed {
			return admission.Program{}, queue.ErrClosed
		}
		return p.WithTicketsIssued(now, n), nil
	})
}

// FixPrequeue implements queue.PrequeueStore.
func (s *Store) FixPrequeue(ctx context.Context, programID string, now time.Time) (admission.Program, error) {
	return s.editProgram(ctx, programID, func(p admission.Program) (admission.Program, error) {
		return p.WithPrequeueFixed(now), nil
	})
}

// editProgram stores and returns edit's program in place of program id unless edit fails.
func (s *Store) editProgram(ctx context.Context, id string, edit func(admission.Program) (admission.Program, error)) (admission.Program, error) {
	return locked(ctx, s, func() (admission.Program, error) {
		p, err := lookup(s.programs, id)
		if err == nil {
			p, err = edit(p)
		}
		if err != nil {
			return admission.Program{}, err
		}
		s.programs[id] = p
		return p, nil
	})
}

type shardKey struct {
	program string
	index   int
}

// TakeShardTickets implements tickets.Store.
func (s *Store) TakeShardTickets(ctx context.Context, programID string, i int, notBefore time.Time, m int64) (tickets.Run, bool, error) {
	return locked2(ctx, s, func() (tickets.Run, bool) {
		k := shardKey{programID, i}
		b, ok := s.shards[k]
		if !ok || b.Next > b.End || b.ReservedAt.Before(notBefore.Truncate(time.Millisecond)) {
			return tickets.Run{}, false
		}
		r := tickets.Run{First: b.Next, Last: min(b.Next+m-1, b.End), ReservedAt: b.ReservedAt, Block: b.Start, After: b.Next + m}
		b.Next += m
		b.Takes++
		s.shards[k] = b
		return r, true
	})
}

// ClaimShard implements tickets.Store.
func (s *Store) ClaimShard(ctx context.Context, programID string, i int, claim string, now, notBefore, claimNotBefore time.Time) (tickets.Shard, bool, error) {
	return locked2(ctx, s, func() (tickets.Shard, bool) {
		k := shardKey{programID, i}
		b, exists := s.shards[k]
		usable := exists && b.Next <= b.End && !b.ReservedAt.Before(notBefore.Truncate(time.Millisecond))
		taken := b.Claim != "" && b.Claim != claim && !b.ClaimedAt.Before(claimNotBefore.Truncate(time.Millisecond))
		if usable || taken {
			return tickets.Shard{}, false
		}
		old := b
		b.Claim, b.ClaimedAt = claim, now.Truncate(time.Millisecond)
		s.shards[k] = b
		return old, true
	})
}

// FillShard implements tickets.Store.
func (s *Store) FillShard(ctx context.Context, programID string, i int, claim string, claimedAt time.Time, f tickets.Shard) (bool, error) {
	return locked(ctx, s, func() (bool, error) {
		k := shardKey{programID, i}
		b := s.shards[k]
		if b.Claim == claim && b.ClaimedAt.IsZero() && b.Start == f.Start && b.ReservedAt.Equal(f.ReservedAt.Truncate(time.Millisecond)) {
			return true, nil // filled already by this claim: a retry
		}
		if b.Claim != claim || !b.ClaimedAt.Equal(claimedAt.Truncate(time.Millisecond)) {
			return false, nil
		}
		s.shards[k] = tickets.Shard{Start: f.Start, Next: f.Next, End: f.End, ReservedAt: f.ReservedAt.Truncate(time.Millisecond), Claim: claim}
		return true, nil
	})
}

// SetShards implements tickets.Store.
func (s *Store) SetShards(ctx context.Context, programID string, from, k int) (bool, error) {
	return locked(ctx, s, func() (bool, error) {
		p, ok := s.programs[programID]
		if !ok || p.Shards != from {
			return ok && p.Shards == k, nil
		}
		p.Shards = k
		s.programs[programID] = p
		return true, nil
	})
}

// TrimShard implements tickets.Store.
func (s *Store) TrimShard(ctx context.Context, programID string, i int, start int64, reservedAt time.Time, back tickets.Run) (tickets.Run, bool, error) {
	return locked2(ctx, s, func() (tickets.Run, bool) {
		k := shardKey{programID, i}
		b, ok := s.shards[k]
		if !ok || b.End == 0 || b.Start != start || !b.ReservedAt.Equal(reservedAt.Truncate(time.Millisecond)) {
			return tickets.Run{}, false
		}
		if back.First <= back.Last && back.First > 0 && b.Next == back.After {
			b.Next = back.First
		} else if b.Next > b.End {
			return tickets.Run{}, false
		}
		r := tickets.Run{First: b.Next, Last: b.End, ReservedAt: b.ReservedAt}
		b.End = b.Next - 1
		s.shards[k] = b
		return r, true
	})
}

// ReturnTickets implements tickets.Store.
func (s *Store) ReturnTickets(ctx context.Context, p admission.Program, from int64) (bool, error) {
	return locked(ctx, s, func() (bool, error) {
		cur, ok := s.programs[p.ID]
		if !ok || cur.Version != p.Version || cur.Issued != p.Issued || cur.PrequeueFixed != p.PrequeueFixed || from < 1 || from > cur.Issued {
			return false, nil
		}
		s.programs[p.ID] = cur.WithTicketsReturned(from)
		return true, nil
	})
}

// Shard returns shard i of programID as stored (for tests and audits).
func (s *Store) Shard(programID string, i int) tickets.Shard {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shards[shardKey{programID, i}]
}

// PutToken implements queue.Store.
func (s *Store) PutToken(ctx context.Context, t queue.Token) error {
	return s.do(ctx, func() error {
		if _, ok := s.tokens[t.ID]; ok {
			return queue.ErrConflict
		}
		s.tokens[t.ID] = t
		return nil
	})
}

// ClaimToken implements queue.Store.
func (s *Store) ClaimToken(ctx context.Context, c queue.Token, staleBefore time.Time) (queue.Token, error) {
	return locked(ctx, s, func() (queue.Token, error) {
		cur, ok := s.tokens[c.ID]
		if ok && (cur.Claim == "" || cur.Claim == c.Claim || !cur.ClaimedAt.Before(staleBefore.Truncate(time.Millisecond))) {
			return cur, nil
		}
		c.ClaimedAt = c.ClaimedAt.Truncate(time.Millisecond)
		s.tokens[c.ID] = c
		return c, nil
	})
}

// FillToken implements queue.Store.
func (s *Store) FillToken(ctx context.Context, t queue.Token, claim string) (queue.Token, error) {
	return locked(ctx, s, func() (queue.Token, error) {
		cur, err := lookup(s.tokens, t.ID)
		if err != nil || cur.Claim != claim || cur.Ticket != 0 {
			return cur, err
		}
		s.tokens[t.ID] = t
		return t, nil
	})
}

// ReleaseClaim implements queue.Store.
func (s *Store) ReleaseClaim(ctx context.Context, id, claim string) error {
	return s.do(ctx, func() error {
		if cur, ok := s.tokens[id]; ok && cur.Claim == claim && cur.Ticket == 0 {
			cur.ClaimedAt = time.Time{}
			s.tokens[id] = cur
		}
		return nil
	})
}

// GetToken implements queue.Store; like DynamoDB TTL, it returns expired tokens until Sweep.
func (s *Store) GetToken(ctx context.Context, id string) (queue.Token, error) {
	return locked(ctx, s, func() (queue.Token, error) { return lookup(s.tokens, id) })
}

// MarkAdmitted implements queue.Store.
func (s *Store) MarkAdmitted(ctx context.Context, t queue.Token) (queue.Token, error) {
	return s.mark(ctx, t, func(cur *queue.Token) {
		cur.AdmittedAt, cur.AdmissionExpiresAt, cur.ExpiresAt, cur.AdmissionPass = t.AdmittedAt, t.AdmissionExpiresAt, t.ExpiresAt, t.AdmissionPass
	})
}

// MarkLeft implements queue.Store.
func (s *Store) MarkLeft(ctx context.Context, t queue.Token) (queue.Token, error) {
	return s.mark(ctx, t, func(cur *queue.Token) {
		cur.LeftAt, cur.LeftPosition, cur.LeftEstimate, cur.ExpiresAt = t.LeftAt, t.LeftPosition, t.LeftEstimate, t.ExpiresAt
	})
}

// EndAdmission implements queue.Store.
func (s *Store) EndAdmission(ctx context.Context, t queue.Token) (queue.Token, error) {
	return s.update(ctx, t.ID, func(cur queue.Token) bool {
		return !cur.AdmittedAt.IsZero() && cur.LeftAt.IsZero() && t.LeftAt.Before(cur.AdmissionExpiresAt)
	}, func(cur *queue.Token) { cur.LeftAt, cur.ExpiresAt = t.LeftAt, t.ExpiresAt })
}

// RevokeToken implements queue.Store.
func (s *Store) RevokeToken(ctx context.Context, t queue.Token) (queue.Token, error) {
	cur, err := s.update(ctx, t.ID, func(cur queue.Token) bool { return cur.Claim == "" && cur.RevokedAt.IsZero() },
		func(cur *queue.Token) { cur.RevokedAt, cur.ExpiresAt = t.RevokedAt, t.ExpiresAt })
	if err == nil && cur.Claim != "" {
		return queue.Token{}, queue.ErrNotFound
	}
	return cur, err
}

// mark applies set to a token that is neither admitted, left nor revoked.
func (s *Store) mark(ctx context.Context, t queue.Token, set func(*queue.Token)) (queue.Token, error) {
	return s.update(ctx, t.ID, queue.Token.Pending, set)
}

// update applies set to token id if when holds of it, and returns the token as stored.
func (s *Store) update(ctx context.Context, id string, when func(queue.Token) bool, set func(*queue.Token)) (queue.Token, error) {
	return locked(ctx, s, func() (queue.Token, error) {
		cur, err := lookup(s.tokens, id)
		if err == nil && when(cur) {
			set(&cur)
			s.tokens[id] = cur
		}
		return cur, err
	})
}

// UseChallenge implements queue.Store.
func (s *Store) UseChallenge(ctx context.Context, key, owner string, expires time.Time) error {
	return s.do(ctx, func() error {
		if u, ok := s.challenges[key]; ok && u.v != owner {
			return queue.ErrConflict
		}
		s.challenges[key] = expiring[string]{owner, expires}
		return nil
	})
}

// Sweep deletes the records past their expiry, as DynamoDB TTL does, and returns how many tokens it removed.
func (s *Store) Sweep(now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	maps.DeleteFunc(s.challenges, func(_ string, u expiring[string]) bool { return now.After(u.expires) })
	maps.DeleteFunc(s.handoffs, func(_ string, h expiring[queue.Handoff]) bool { return now.After(h.expires) })
	s.DropExpired(now)
	s.sweepCapacity(now)
	s.sweepReports(now)
	n := len(s.tokens)
	maps.DeleteFunc(s.tokens, func(_ string, t queue.Token) bool { return !t.ExpiresAt.IsZero() && now.After(t.ExpiresAt) })
	return n - len(s.tokens)
}

// locked2 returns f's results, called with s.mu held, unless ctx is done.
func locked2[A, B any](ctx context.Context, s *Store, f func() (A, B)) (a A, b B, err error) {
	if err = ctx.Err(); err == nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		a, b = f()
	}
	return a, b, err
}

func locked[T any](ctx context.Context, s *Store, f func() (T, error)) (T, error) {
	v, err, lerr := locked2(ctx, s, f)
	return v, cmp.Or(lerr, err)
}

// do returns f's error, called with s.mu held, unless ctx is done.
func (s *Store) do(ctx context.Context, f func() error) error {
	_, err := locked(ctx, s, func() (struct{}, error) { return struct{}{}, f() })
	return err
}

// lookup returns m[k], or queue.ErrNotFound when m has no k; s.mu is held.
func lookup[K comparable, V any](m map[K]V, k K) (V, error) {
	v, ok := m[k]
	if !ok {
		return v, queue.ErrNotFound
	}
	return v, nil
}
