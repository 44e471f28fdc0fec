package queue

import (
	"context"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/catalog"
	"github.com/example/waitingroom/internal/history"
)

// Store keeps programs and tokens (memstore, dynamostore; storetest holds
// the contract). Errors: ErrNotFound for a missing item, ErrConflict for a
// failed condition, anything else is a store fault.
type Store interface {
	// CreateProgram stores a new program; ErrConflict if the id exists.
	CreateProgram(ctx context.Context, p admission.Program) error
	// GetProgram reads a program with a strongly consistent read.
	GetProgram(ctx context.Context, id string) (admission.Program, error)
	// UpdateProgram replaces p's settings and admission state (everything
	// but ID, CreatedAt and Issued) and sets Version to p.Version, provided
	// the stored program still has version p.Version-1 and expectIssued
	// tickets; ErrConflict otherwise.
	UpdateProgram(ctx context.Context, p admission.Program, expectIssued int64) error
	// IssueTicket atomically hands out the next ticket at now, applying
	// admission.Program.WithTicketIssued, and returns the program after it.
	// ErrNotFound if the program does not exist, ErrClosed if it is closed.
	IssueTicket(ctx context.Context, programID string, now time.Time) (admission.Program, error)
	// PutToken stores a new token; ErrConflict if the id exists.
	PutToken(ctx context.Context, t Token) error
	// GetToken reads a token, or a claim on its id; ErrNotFound if absent.
	GetToken(ctx context.Context, id string) (Token, error)
	// ClaimToken stores claim c (Claim and ClaimedAt set, Ticket 0) under
	// c.ID if nothing is stored there, or only a claim made before
	// staleBefore, and returns what is stored afterwards (c if it was
	// stored, also by an earlier attempt). ErrNotFound if the item it
	// failed on is gone when read.
	ClaimToken(ctx context.Context, c Token, staleBefore time.Time) (Token, error)
	// FillToken replaces claim on t.ID by token t, provided the item still
	// holds that claim and no ticket, and returns what is stored
	// afterwards. ErrNotFound if the item is gone.
	FillToken(ctx context.Context, t Token, claim string) (Token, error)
	// ReleaseClaim makes claim on token id stale at once (ClaimedAt zero),
	// if the item still holds that claim and no ticket.
	ReleaseClaim(ctx context.Context, id, claim string) error
	// MarkAdmitted records the first sighting of the token's admission
	// (sets AdmittedAt, AdmissionExpiresAt and ExpiresAt) if it is neither
	// admitted, left nor revoked yet, and returns the token as stored
	// afterwards.
	MarkAdmitted(ctx context.Context, t Token) (Token, error)
	// MarkLeft records that a waiting token left (sets LeftAt and
	// ExpiresAt) if it is neither admitted, left nor revoked yet, and
	// returns the token as stored afterwards.
	MarkLeft(ctx context.Context, t Token) (Token, error)
	// EndAdmission records that an admitted token's admission ended before
	// its window (sets LeftAt and ExpiresAt) if it is admitted, not left
	// yet, and t.LeftAt is within its window; it returns the token as
	// stored afterwards.
	EndAdmission(ctx context.Context, t Token) (Token, error)
	// RevokeToken records that an admin revoked token t.ID (sets
	// RevokedAt and ExpiresAt) if it is not revoked yet, and returns the
	// token as stored afterwards. ErrNotFound if there is no token, or
	// only a claim.
	RevokeToken(ctx context.Context, t Token) (Token, error)
	// UseChallenge records that the proof of work named key (a hash of its
	// challenge) served the enter owner, to be kept until expires; it
	// succeeds again for the same owner (a retry) and answers ErrConflict
	// when another owner used it first.
	UseChallenge(ctx context.Context, key, owner string, expires time.Time) error

	CatalogStore
}

// CatalogStore keeps the list of programs, their deletion and the history
// of their admin changes.
type CatalogStore interface {
	catalog.Store
	history.Store
	// DeleteProgram deletes program p.ID, with its ticket shards and its
	// place in the list, if it is stored at version p.Version (else
	// ErrConflict; absent counts as deleted). Until until, CreateProgram
	// of the id answers ErrDeleted.
	DeleteProgram(ctx context.Context, p admission.Program, until time.Time) error
}

// ScheduleStore is a Store that stores a scheduled change whatever
// tickets were issued since it was read, then moves its drain instant.
type ScheduleStore interface {
	// UpdateScheduled is UpdateProgram for p with a change scheduled, on
	// the condition of the version alone, and returns the tickets issued
	// when it landed (also when it is retried after a lost answer).
	// ErrConflict if the version moved.
	UpdateScheduled(ctx context.Context, p admission.Program) (issued int64, err error)
	// MoveDrain adds p.ScheduledDrainAtNs(issued) − p.DrainAtNs to the
	// stored drain instant, once, if p is still the stored version.
	MoveDrain(ctx context.Context, p admission.Program, issued int64) error
}
