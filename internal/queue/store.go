package queue

import (
	"context"
	"time"
)

// Store keeps programs and tokens. Implementations: memstore (embedded) and
// dynamostore (DynamoDB); storetest holds the contract both pass.
//
// Errors: ErrNotFound for a missing item, ErrConflict for a failed
// condition, anything else is a store fault.
type Store interface {
	// CreateProgram stores a new program; ErrConflict if the id exists.
	CreateProgram(ctx context.Context, p Program) error
	// GetProgram reads a program with a strongly consistent read.
	GetProgram(ctx context.Context, id string) (Program, error)
	// UpdateProgram replaces p's settings and admission state (everything
	// but ID, CreatedAt and Issued) and sets Version to p.Version, provided
	// the stored program still has version p.Version-1 and expectIssued
	// tickets; ErrConflict otherwise.
	UpdateProgram(ctx context.Context, p Program, expectIssued int64) error
	// IssueTicket atomically hands out the next ticket at now, applying
	// Program.WithTicketIssued, and returns the program after it.
	// ErrNotFound if the program does not exist, ErrClosed if it is closed.
	IssueTicket(ctx context.Context, programID string, now time.Time) (Program, error)
	// PutToken stores a new token; ErrConflict if the id exists.
	PutToken(ctx context.Context, t Token) error
	// GetToken reads a token; ErrNotFound if absent.
	GetToken(ctx context.Context, id string) (Token, error)
	// MarkAdmitted records the first sighting of the token's admission
	// (sets AdmittedAt, AdmissionExpiresAt and ExpiresAt) if it is neither
	// admitted nor left yet, and returns the token as stored afterwards.
	MarkAdmitted(ctx context.Context, t Token) (Token, error)
	// MarkLeft records that a waiting token left (sets LeftAt and
	// ExpiresAt) if it is neither admitted nor left yet, and returns the
	// token as stored afterwards.
	MarkLeft(ctx context.Context, t Token) (Token, error)
}

// ScheduleStore is a Store whose admin writes need not find a moment
// without tickets: a change scheduled for later (Program.Next) is stored
// whatever tickets were issued since it was read, and its drain instant
// then moved to match them.
type ScheduleStore interface {
	// UpdateScheduled is UpdateProgram for p with a change scheduled, on
	// the condition of the version alone, and returns the tickets issued
	// when it landed (also when it is retried after a lost answer).
	// ErrConflict if the version moved.
	UpdateScheduled(ctx context.Context, p Program) (issued int64, err error)
	// MoveDrain adds p.ScheduledDrainAtNs(issued) − p.DrainAtNs to the
	// stored drain instant, once, if p is still the stored version.
	MoveDrain(ctx context.Context, p Program, issued int64) error
}
