package queue

import (
	"context"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/catalog"
	"github.com/example/waitingroom/internal/history"
)

// Store keeps programs and tokens (storetest holds the contract): ErrNotFound
// for a missing item, ErrConflict for a failed condition, else a fault.
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
	// IssueTicket atomically applies admission.Program.WithTicketIssued at
	// now and returns the program after it; ErrNotFound, or ErrClosed.
	IssueTicket(ctx context.Context, programID string, now time.Time) (admission.Program, error)
	// PutToken stores a new token; ErrConflict if the id exists.
	PutToken(ctx context.Context, t Token) error
	// GetToken reads a token, or a claim on its id; ErrNotFound if absent.
	GetToken(ctx context.Context, id string) (Token, error)
	// ClaimToken stores claim c (Ticket 0) under c.ID if nothing, or only a
	// claim made before staleBefore, is stored there, and returns what is
	// stored afterwards; ErrNotFound if the item it failed on is gone.
	ClaimToken(ctx context.Context, c Token, staleBefore time.Time) (Token, error)
	// FillToken replaces claim on t.ID by t if the item still holds that
	// claim and no ticket, and returns what is stored; ErrNotFound if gone.
	FillToken(ctx context.Context, t Token, claim string) (Token, error)
	// ReleaseClaim makes claim on token id stale at once (ClaimedAt zero),
	// if the item still holds that claim and no ticket.
	ReleaseClaim(ctx context.Context, id, claim string) error
	// MarkAdmitted records the first sighting of the token's admission (its
	// times) if it is pending, and returns the token as stored afterwards.
	MarkAdmitted(ctx context.Context, t Token) (Token, error)
	// MarkLeft records that a pending token left (LeftAt, LeftPosition,
	// LeftEstimate, ExpiresAt), and returns the token as stored afterwards.
	MarkLeft(ctx context.Context, t Token) (Token, error)
	// EndAdmission records that an admitted token, not left, ended at
	// t.LeftAt within its window, and returns the token as stored afterwards.
	EndAdmission(ctx context.Context, t Token) (Token, error)
	// RevokeToken records that an admin revoked token t.ID (RevokedAt,
	// ExpiresAt) unless it is, and returns the token as stored afterwards;
	// ErrNotFound without a token (or only a claim).
	RevokeToken(ctx context.Context, t Token) (Token, error)
	// UseChallenge records that the proof of work named key served owner
	// until expires; ErrConflict when another owner used it first.
	UseChallenge(ctx context.Context, key, owner string, expires time.Time) error

	CatalogStore
	ReportStore
}

// CatalogStore keeps the list of programs, their deletion and history.
type CatalogStore interface {
	catalog.Store
	history.Store
	// DeleteProgram deletes program p.ID, its shards and listing, if stored
	// at p.Version (else ErrConflict; absent counts as deleted); until
	// until, its id is ErrDeleted.
	DeleteProgram(ctx context.Context, p admission.Program, until time.Time) error
}

// ScheduleStore stores a scheduled change whatever tickets were issued.
type ScheduleStore interface {
	// UpdateScheduled is UpdateProgram on the version alone, and returns
	// the tickets issued when it landed (also on a retry).
	UpdateScheduled(ctx context.Context, p admission.Program) (issued int64, err error)
	// MoveDrain adds p.DrainMoveNs(issued) to the stored drain instant,
	// once, if p is still the stored version.
	MoveDrain(ctx context.Context, p admission.Program, issued int64) error
}
