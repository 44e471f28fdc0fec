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
	// Start..End is the block; Next is the number handed out next (Next >
	// End: used up). All 0 for a shard never filled.
	Start, Next, End int64
	// ReservedAt is when the block was reserved: its numbers are handed
	// out for BlockLifetime after, no longer.
	ReservedAt time.Time
	// Takes counts the takes of the block (each of one number or more).
	Takes int64
	// Claim is the id of the refill in progress, made at ClaimedAt ("" and
	// zero when none is).
	Claim     string
	ClaimedAt time.Time
}

// Run is numbers handed out together, First..Last, from a block reserved
// at ReservedAt.
type Run struct {
	First, Last int64
	ReservedAt  time.Time
	// Block and After, of a take from a shard: the first number of its
	// block, and the shard's next number right after the take.
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
	// IssueTickets atomically hands out n ≥ 1 consecutive tickets at now,
	// applying Program.WithTicketsIssued, and returns the program after:
	// the tickets are Issued-n+1..Issued. Errors as IssueTicket.
	IssueTickets(ctx context.Context, programID string, now time.Time, n int64) (admission.Program, error)
	// TakeShardTickets hands out the next m ≥ 1 numbers of shard i's block
	// (fewer if fewer are left) and counts a take, if the block was
	// reserved at or after notBefore and is not used up: the numbers and
	// true. Otherwise false, and nothing changes.
	TakeShardTickets(ctx context.Context, programID string, i int, notBefore time.Time, m int64) (Run, bool, error)
	// ClaimShard makes claim the refiller of shard i at now, if its block
	// is used up or was reserved before notBefore, and it is not claimed
	// by another claim made at or after claimNotBefore (a claim made again
	// by the same id succeeds again). It returns the shard as it was and
	// true, or false when it is taken or still usable. A claim creates the
	// shard when there is none: callers claim only programs that exist.
	ClaimShard(ctx context.Context, programID string, i int, claim string, now, notBefore, claimNotBefore time.Time) (Shard, bool, error)
	// FillShard installs b's block (Start, Next, End, ReservedAt; no takes
	// yet) in shard i and clears the claim, if claim still holds it (made
	// at claimedAt); false otherwise. A fill is never applied twice; the
	// same fill again (a retry after a lost answer) answers true while the
	// shard still shows it. An error means the block may or may not be in
	// the shard.
	FillShard(ctx context.Context, programID string, i int, claim string, claimedAt time.Time, b Shard) (bool, error)
	// SetShards sets the program's ticket shard count to k if it is from,
	// and answers whether the count is k (true also when it was k
	// already: a retry after a lost answer). It changes nothing else (not
	// the version).
	SetShards(ctx context.Context, programID string, from, k int) (bool, error)
	// TrimShard ends shard i's block, if it is the block that starts at
	// start and was reserved at reservedAt, before its next number, and
	// returns the numbers it retired. If back is not empty and the shard's
	// next number is still back.After, back's numbers are taken back and
	// retired first. False when the block is another or had nothing left.
	TrimShard(ctx context.Context, programID string, i int, start int64, reservedAt time.Time, back Run) (Run, bool, error)
	// ReturnTickets gives tickets from..p.Issued, held by nobody, back to
	// the program, if it is still p (its Version, Issued and pre-queue):
	// it stores p.WithTicketsReturned(from). False when the program
	// changed.
	ReturnTickets(ctx context.Context, p admission.Program, from int64) (bool, error)
}

// Bounds of the ticket shards (docs/design.md, "Ticket shards").
const (
	// BlockLifetime bounds how long after its reservation a block's
	// numbers are handed out: someone who entered this much before another
	// is never behind them. Never more than the program cache's TTL.
	BlockLifetime = 900 * time.Millisecond
	// MaxShards bounds a program's ticket shards.
	MaxShards = 100
	// DefaultItemWriteUnits is DynamoDB's write limit of one item (its
	// partition), in write units a second.
	DefaultItemWriteUnits = 1000
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
