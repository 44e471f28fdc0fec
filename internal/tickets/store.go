package tickets

import (
	"context"
	"time"

	"github.com/example/waitingroom/internal/admission"
)

// Shard is one ticket shard of a program as stored: a block of ticket
// numbers reserved from the program, handed out one at a time, and the
// claim of whoever is refilling it.
type Shard struct {
	Start, Next, End int64     // the block, and the number handed out next (> End: used up); 0 if never filled
	ReservedAt       time.Time // its numbers are handed out for BlockLifetime after
	Takes            int64     // the takes of the block
	Claim            string    // the refill in progress ("" when none is), made at ClaimedAt
	ClaimedAt        time.Time
}

// Run is numbers handed out together, First..Last, from a block reserved
// at ReservedAt. Of a take from a shard: Block is its block's first number,
// After the shard's next number right after the take.
type Run struct {
	First, Last  int64
	ReservedAt   time.Time
	Block, After int64
}

// empty reports whether r holds no number (ticket numbers start at 1).
func (r Run) empty() bool { return r.First < 1 || r.First > r.Last }

// used is how many numbers of the block were handed out.
func (b Shard) used() int64 {
	if b.End < b.Start {
		return 0
	}
	return min(b.Next, b.End+1) - b.Start
}

// Store is what ticket shards need of a queue store: the program item's
// single tickets and reads, blocks of tickets, and the shard items.
// memstore and dynamostore implement it; storetest holds its contract.
type Store interface {
	// IssueTicket and GetProgram are queue.Store's.
	IssueTicket(ctx context.Context, programID string, now time.Time) (admission.Program, error)
	GetProgram(ctx context.Context, id string) (admission.Program, error)
	// IssueTickets atomically hands out n ≥ 1 consecutive tickets at now
	// (Program.WithTicketsIssued) and returns the program after: the
	// tickets are Issued-n+1..Issued. Errors as IssueTicket.
	IssueTickets(ctx context.Context, programID string, now time.Time, n int64) (admission.Program, error)
	// TakeShardTickets hands out the next m ≥ 1 numbers of shard i's block
	// (fewer if fewer are left) and counts a take, if the block was
	// reserved at or after notBefore and is not used up; else false, and
	// nothing changes.
	TakeShardTickets(ctx context.Context, programID string, i int, notBefore time.Time, m int64) (Run, bool, error)
	// ClaimShard makes claim the refiller of shard i at now, if its block
	// is used up or was reserved before notBefore and no other claim made
	// at or after claimNotBefore holds it (the same claim may again), and
	// returns the shard as it was; else false. It creates the shard when
	// there is none: callers claim only programs that exist.
	ClaimShard(ctx context.Context, programID string, i int, claim string, now, notBefore, claimNotBefore time.Time) (Shard, bool, error)
	// FillShard installs b's block (no takes yet) in shard i and clears the
	// claim, if claim made at claimedAt still holds it; never twice, but a
	// retry answers true while the shard shows it. An error means the block
	// may or may not be in the shard.
	FillShard(ctx context.Context, programID string, i int, claim string, claimedAt time.Time, b Shard) (bool, error)
	// SetShards sets the program's shard count (nothing else) to k if it is
	// from, and answers whether the count is k (also when it was already).
	SetShards(ctx context.Context, programID string, from, k int) (bool, error)
	// TrimShard ends shard i's block before its next number, if it is the
	// block that starts at start reserved at reservedAt, and returns the
	// numbers it retired, with back's if the shard's next number is still
	// back.After. False when the block is another or had nothing left.
	TrimShard(ctx context.Context, programID string, i int, start int64, reservedAt time.Time, back Run) (Run, bool, error)
	// ReturnTickets stores p.WithTicketsReturned(from), giving tickets held
	// by nobody back, if the program is still p (its Version, Issued and
	// pre-queue); false when it changed.
	ReturnTickets(ctx context.Context, p admission.Program, from int64) (bool, error)
}

// Bounds of the ticket shards (docs/design.md, "Ticket shards").
const (
	// BlockLifetime bounds how long after its reservation a block's
	// numbers are handed out; never more than the program cache's TTL.
	BlockLifetime         = 900 * time.Millisecond
	MaxShards             = 100  // a program's ticket shards at most
	DefaultItemWriteUnits = 1000 // DynamoDB's write units a second of one item
)

// freshAfter is the earliest reservation of a block whose numbers may be
// handed out at now: less than BlockLifetime ago, and not before the
// opening once it has passed.
func freshAfter(now, opensAt time.Time) time.Time {
	from := now.Add(-BlockLifetime + time.Millisecond)
	if !opensAt.IsZero() && opensAt.After(from) && !now.Before(opensAt) {
		return opensAt
	}
	return from
}
