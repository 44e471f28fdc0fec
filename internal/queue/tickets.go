package queue

import (
	"context"
	"time"

	"github.com/example/waitingroom/internal/admission"
)

// Tickets hands out enters' tickets when one program item cannot take them
// all (package tickets).
type Tickets interface {
	// Take hands out the next ticket of programID for an enter asked at
	// now; its errors are the Store's.
	Take(ctx context.Context, programs Programs, programID string, now time.Time) (Taken, error)
	// GiveBack gives back to programID, when due, the numbers reserved for
	// this instance that nobody took; it never fails the request.
	GiveBack(ctx context.Context, programs Programs, programID string, now time.Time)
}

// Taken is a ticket handed out to an enter.
type Taken struct {
	Ticket int64
	// Program is the program as the ticket left it, when Fresh.
	admission.Program
	Fresh bool
	// At is when the ticket was taken.
	At time.Time
}

// WithTickets makes enters take their tickets through t.
func WithTickets(t Tickets) Option { return func(s *Service) { s.tickets = t } }

// Programs is a Service's program cache, as its Tickets use it.
type Programs struct{ s *Service }

// TTL is how long a read is reused (WithProgramCache).
func (p Programs) TTL() time.Duration { return p.s.cache.TTL() }

// Recent is admission.Cache.ShardView.
func (p Programs) Recent(id string, now time.Time) (admission.Program, bool) {
	return p.s.cache.ShardView(id, now)
}

// Get is program id as a poll reads it: cached, else read and cached.
func (p Programs) Get(ctx context.Context, id string, now time.Time) (admission.Program, error) {
	return p.s.program(ctx, id, now)
}

// Put caches prog as read at now.
func (p Programs) Put(prog admission.Program, now time.Time) { p.s.cache.Put(prog, now) }

// takeTicket hands out the next ticket of programID asked at now.
func (s *Service) takeTicket(ctx context.Context, programID string, now time.Time) (Taken, error) {
	if s.tickets != nil {
		return s.tickets.Take(ctx, Programs{s}, programID, now)
	}
	p, err := s.store.IssueTicket(ctx, programID, now)
	return Taken{Ticket: p.Issued, Program: p, Fresh: true, At: now}, err
}
