package queue

import (
	"errors"
	"fmt"
	"time"

	"github.com/example/waitingroom/internal/api"
)

// Kind classifies an Error; the HTTP layer maps each kind to one status in a
// single table.
type Kind int

// Error kinds.
const (
	// KindInternal is a bug or an unexpected state: logged, never shown.
	KindInternal Kind = iota
	// KindInvalid is malformed input.
	KindInvalid
	// KindNotFound is an unknown program or token.
	KindNotFound
	// KindConflict is a request that contradicts the current state.
	KindConflict
	// KindUnavailable is a store fault the client should retry later.
	KindUnavailable
	// KindForbidden is a credential (an admission pass) that is refused.
	KindForbidden
)

// Error is a domain error with a stable machine-readable code and a message
// safe to show to the client.
type Error struct {
	Kind    Kind
	Code    string // one of internal/api's codes, e.g. api.CodeProgramNotFound
	Message string // safe for clients
	Err     error  // cause, for logs only
	// RetryAfter is when a KindUnavailable error is worth retrying, when
	// the service knows; 0 leaves it to the caller.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return e.Code + ": " + e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error of the given kind and code.
func Errorf(kind Kind, code, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Sentinel errors a Store returns; callers test them with errors.Is.
var (
	// ErrNotFound means the item does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrConflict means a conditional write found the item changed or
	// already present.
	ErrConflict = errors.New("store: condition failed")
	// ErrClosed means IssueTicket found the program closed to entries.
	ErrClosed = errors.New("store: program closed")
	// ErrThrottled marks a store fault caused by the store's throughput
	// limit on one item, after every retry. Clients see it as any other
	// fault; package tickets takes it as a sign to use more shards.
	ErrThrottled = errors.New("store: throughput exceeded")
	// ErrDeleted means CreateProgram found the id deleted less than the
	// retention ago (Store.DeleteProgram).
	ErrDeleted = errors.New("store: program deleted")
)

// storeError is a failure of the store during op as the client sees it:
// STORE_UNAVAILABLE, worth a retry, whatever the cause (kept for the logs).
func storeError(op string, err error) error {
	return &Error{Kind: KindUnavailable, Code: api.CodeUnavailable, Message: "The queue is briefly unavailable; retry shortly.", Err: fmt.Errorf("%s: %w", op, err)}
}

// ErrorKind returns the Kind of err, KindInternal when it is not an *Error.
func ErrorKind(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}
