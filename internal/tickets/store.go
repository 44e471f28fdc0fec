package tickets

import (
	"context"
	"time"

	"github.com/example/waitingroom/internal/admission"
)

// Shard is one ticket shard of a program as stored: a block of numbers
// reserved from the program, and the claim of whoever is refilling it.
type Shard struct {
	Start, Next, End int64     // the block, and the number handed out next (> End: used up); 0 if never filled
	ReservedAt       time.Time // its numbers are handed out for BlockLifetime after
	Takes            int64     // the takes of the block
	Claim            string    // the refill in progress ("" when none is), made at ClaimedAt
	ClaimedAt        time.Time
}

// Run is numbers First..Last handed out together from a block reserved at
// ReservedAt; of a take, Block is the block's first number and After the next one.
type Run struct {
	First, Last  int64
	ReservedAt   time.Time
	Block, After int64
}

// empty reports whether r holds no number (tickets start at 1).
func (r Run) empty() bool { return r.First < 1 || r.First > r.Last }

// used is how many numbers of the block were handed out.
func (b Shard) used() int64 { return max(0, min(b.Next, b.End+1)-b.Start) }

// Store is what ticket shards need of a queue store (memstore, dynamostore;
// the contract is storetest's).
type Store interface {
	// IssueTicket and GetProgram are queue.Store's.
	IssueTicket(ctx context.Context, programID string, now time.Time) (admission.Program, error)
	GetProgram(ctx context.Context, id string) (admission.Program, error)
	// IssueTickets atomically hands out n ≥ 1 tickets at now
	// (Program.WithTicketsIssued), Issued-n+1..Issued of the program returned.
	IssueTickets(ctx context.Context, programID string, now time.Time, n int64) (admission.Program, error)
	// TakeShardTickets hands out the next m ≥ 1 numbers of shard i's block
	// (or those left) and counts a take, if it was reserved at or after
	// notBefore and is not used up; else false.
	TakeShardTickets(ctx context.Context, programID string, i int, notBefore time.Time, m int64) (Run, bool, error)
	// ClaimShard makes claim the refiller of shard i at now, if its block is
	// used up or reserved before notBefore and no other claim made at or
	// after claimNotBefore holds it, and returns the shard as it was; it
	// creates the shard if need be.
	ClaimShard(ctx context.Context, programID string, i int, claim string, now, notBefore, claimNotBefore time.Time) (Shard, bool, error)
	// FillShard installs b's block in shard i and clears the claim, if claim
	// made at claimedAt holds it (a retry: true while the shard shows it);
	// after an error the block may or may not be in the shard.
	FillShard(ctx context.Context, programID string, i int, claim string, claimedAt time.Time, b Shard) (bool, error)
	// SetShards sets the program's shard count to k if it is from, and
	// answers whether the count is k.
	SetShards(ctx context.Context, programID string, from, k int) (bool, error)
	// TrimShard ends shard i's block (start, reservedAt) before its next
	// number and returns the numbers it retired, with back's if next is
	// still back.After; false when the block is another or used up.
	TrimShard(ctx context.Context, programID string, i int, start int64, reservedAt time.Time, back Run) (Run, bool, error)
	// ReturnTickets stores p.WithTicketsReturned(from) if the program is
	// still p (Version, Issued and pre-queue); false when it changed.
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

// freshAfter is the earliest reservation of a block handed out at now:
// less than BlockLifetime ago, and not before a passed opening.
func freshAfter(now, opensAt time.Time) time.Time {
	from := now.Add(-BlockLifetime + time.Millisecond)
	if !opensAt.IsZero() && opensAt.After(from) && !now.Before(opensAt) {
		return opensAt
	}
	return from
}
