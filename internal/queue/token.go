package queue

import (
	"crypto/rand"
	"encoding/base64"
	"time"
)

// Status is where a token stands.
type Status string

// Token statuses. A token only ever moves WAITING → ADMITTED → EXPIRED or
// WAITING → LEFT.
const (
	StatusWaiting  Status = "WAITING"
	StatusAdmitted Status = "ADMITTED"
	StatusExpired  Status = "EXPIRED"
	StatusLeft     Status = "LEFT"
)

// Token is one person's place in one program's queue, as stored.
type Token struct {
	ID        string
	ProgramID string
	Ticket    int64
	IssuedAt  time.Time
	// AdmittedAt is when the service first saw the serving counter pass the
	// ticket (zero while waiting); the admission window runs from it.
	AdmittedAt time.Time
	// AdmissionExpiresAt is AdmittedAt plus the program's admission window.
	AdmissionExpiresAt time.Time
	// LeftAt is when the person left the queue (zero otherwise).
	LeftAt time.Time
	// ExpiresAt is when the store may delete the item (DynamoDB TTL).
	ExpiresAt time.Time
}

// NewTokenID returns 128 bits from crypto/rand, base64url-encoded.
func NewTokenID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// View is what a client is told about its token.
type View struct {
	TokenID  string
	Status   Status
	IssuedAt time.Time
	// Ticket is the token's number in the program's queue.
	Ticket int64
	// Position is ticket − serving counter; set only while WAITING.
	Position int64
	// RetryAfter is when to poll next; set only while WAITING.
	RetryAfter time.Duration
	// EstimatedWait is the expected time until admission; set only while
	// WAITING and when the admission pace is known.
	EstimatedWait time.Duration
	AdmittedAt    time.Time // ADMITTED and EXPIRED
	ExpiresAt     time.Time // ADMITTED and EXPIRED: end of the admission window
	LeftAt        time.Time // LEFT
}
