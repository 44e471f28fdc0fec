package queue

import (
	"errors"
	"fmt"
	"time"
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
	// KindUnauthorized is a request without the credentials it needs.
	KindUnauthorized
	// KindForbidden is a request whose credentials are not valid.
	KindForbidden
	// KindMethodNotAllowed is a known path asked with a method it does not serve.
	KindMethodNotAllowed
	// KindTooLarge is a request body over the size limit.
	KindTooLarge
)

// Error is a domain error with a stable machine-readable code and a message
// safe to show to the client.
type Error struct {
	Kind    Kind
	Code    string // e.g. "PROGRAM_NOT_FOUND"
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
	// ErrThrottled marks a store fault that was the store's throughput
	// limit (a hot item), through every retry: a fault like any other to
	// the client, and a sign to spread the tickets wider.
	ErrThrottled = errors.New("store: throughput exceeded")
)

// Codes of every error the API answers, the service's and the HTTP
// layer's; internal/httpapi maps their Kind to a status in one table.
const (
	CodeInvalidProgramID      = "INVALID_PROGRAM_ID"
	CodeInvalidToken          = "INVALID_TOKEN"
	CodeInvalidIdempotencyKey = "INVALID_IDEMPOTENCY_KEY"
	CodeMissingToken          = "MISSING_TOKEN"
	CodeProgramNotFound       = "PROGRAM_NOT_FOUND"
	CodeTokenNotFound         = "TOKEN_NOT_FOUND"
	CodeInvalidSettings       = "INVALID_SETTINGS"
	CodeInvalidCount          = "INVALID_COUNT"
	CodeAlreadyAdmitted       = "ALREADY_ADMITTED"
	CodeProgramClosed         = "PROGRAM_CLOSED"
	CodeNotOpen               = "NOT_OPEN"
	CodeUnavailable           = "STORE_UNAVAILABLE"
	CodeInternal              = "INTERNAL"
	CodePassUnavailable       = "PASS_UNAVAILABLE"
	CodeKeysUnavailable       = "KEYS_UNAVAILABLE"
	CodeBusy                  = "BUSY"
	CodeEnterInProgress       = "ENTER_IN_PROGRESS"

	CodeNotFound         = "NOT_FOUND"
	CodeMethodNotAllowed = "METHOD_NOT_ALLOWED"
	CodeUnauthorized     = "UNAUTHORIZED"
	CodeForbidden        = "FORBIDDEN"
	CodePayloadTooLarge  = "PAYLOAD_TOO_LARGE"
	CodeInvalidJSON      = "INVALID_JSON"
	CodeInvalidBody      = "INVALID_BODY"
)

// storeError turns a store failure into a client-facing error: the store's
// sentinels keep their meaning, anything else is a store fault worth a retry.
func storeError(op string, err error) error {
	return &Error{Kind: KindUnavailable, Code: CodeUnavailable, Message: "The queue is briefly unavailable; retry shortly.", Err: fmt.Errorf("%s: %w", op, err)}
}

// ErrorKind returns the Kind of err, KindInternal when it is not an *Error.
func ErrorKind(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}
