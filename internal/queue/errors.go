package queue

import (
	"errors"
	"fmt"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/store"
)

// Kind classifies an Error; the HTTP layer maps each kind to one status.
type Kind int

// Error kinds.
const (
	KindInternal    Kind = iota // a bug or an unexpected state: logged, never shown
	KindInvalid                 // malformed input
	KindNotFound                // an unknown program or token
	KindConflict                // a request that contradicts the current state
	KindUnavailable             // a store fault the client should retry later
	KindForbidden               // a credential (an admission pass) that is refused
	KindTooSoon                 // a request repeated sooner than allowed: retry after RetryAfter
)

// Error is a domain error with a stable machine-readable code and a message
// safe to show to the client.
type Error struct {
	Kind    Kind
	Code    string // one of internal/api's codes, e.g. api.CodeProgramNotFound
	Message string // safe for clients
	Err     error  // cause, for logs only
	// RetryAfter is when the error is worth retrying (0: up to the caller).
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

// The errors a Store answers (package store); test them with errors.Is.
var (
	ErrNotFound  = store.ErrNotFound
	ErrConflict  = store.ErrConflict
	ErrClosed    = store.ErrClosed
	ErrThrottled = store.ErrThrottled
	ErrDeleted   = store.ErrDeleted
)

// The answers that say nothing of the request beyond their code.
var (
	errInvalidProgramID = Errorf(KindInvalid, api.CodeInvalidProgramID, "The program id must be 1 to 64 letters, digits, '-' or '_', starting with a letter or digit.")
	errProgramNotFound  = Errorf(KindNotFound, api.CodeProgramNotFound, "No such program.")
	errProgramClosed    = Errorf(KindConflict, api.CodeProgramClosed, "The program's queue is closed to new entries.")
	errTokenNotFound    = Errorf(KindNotFound, api.CodeTokenNotFound, "No such token in this program's queue.")
	errTokenRevoked     = Errorf(KindForbidden, api.CodeTokenRevoked, "The token was revoked: its admission pass is withdrawn.")
	errInvalidPass      = Errorf(KindForbidden, api.CodeInvalidPass, "The admission pass is not one this waiting room handed out for this program.")
	errInvalidCursor    = Errorf(KindInvalid, api.CodeInvalidCursor, "The cursor is not one this API gave; start again without it.")
	errInvalidKey       = Errorf(KindInvalid, api.CodeInvalidIdempotencyKey, "The idempotency key must be %d to %d letters, digits, '-', '_', '.' or ':' (a random UUID fits).", MinIdempotencyKeyLen, MaxIdempotencyKeyLen)
	errEnterInProgress  = &Error{Kind: KindUnavailable, Code: api.CodeEnterInProgress, Message: "An enter with this idempotency key is in progress; retry shortly with the same key."}
)

// storeError is STORE_UNAVAILABLE, a store failure during op.
func storeError(op string, err error) error {
	return &Error{Kind: KindUnavailable, Code: api.CodeUnavailable, Message: "The queue is briefly unavailable; retry shortly.", Err: fmt.Errorf("%s: %w", op, err)}
}

// programReadError is err reading a program for op as the client sees it.
func programReadError(op string, err error) error {
	if errors.Is(err, ErrNotFound) {
		return errProgramNotFound
	}
	return storeError(op, err)
}

// ErrorKind returns the Kind of err, KindInternal when it is not an *Error.
func ErrorKind(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}
