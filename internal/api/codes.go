package api

// Codes of the error answers: the code of an Error body. docs/openapi.yaml
// lists which status and route answers each.
const (
	CodeInvalidProgramID      = "INVALID_PROGRAM_ID"
	CodeInvalidToken          = "INVALID_TOKEN"
	CodeInvalidIdempotencyKey = "INVALID_IDEMPOTENCY_KEY"
	CodeMissingToken          = "MISSING_TOKEN"
	CodeProgramNotFound       = "PROGRAM_NOT_FOUND"
	CodeTokenNotFound         = "TOKEN_NOT_FOUND"
	CodeTokenRevoked          = "TOKEN_REVOKED"
	CodeInvalidSettings       = "INVALID_SETTINGS"
	CodeInvalidCount          = "INVALID_COUNT"
	CodeProgramClosed         = "PROGRAM_CLOSED"
	CodeQueueFull             = "QUEUE_FULL"
	CodeMissingPass           = "MISSING_PASS"
	CodeInvalidPass           = "INVALID_PASS"
	CodePassExpired           = "PASS_EXPIRED"
	CodeNotOpen               = "NOT_OPEN"
	CodeUnavailable           = "STORE_UNAVAILABLE"
	CodeInternal              = "INTERNAL"
	CodePassUnavailable       = "PASS_UNAVAILABLE"
	CodeKeysUnavailable       = "KEYS_UNAVAILABLE"
	CodeBusy                  = "BUSY"
	CodeEnterInProgress       = "ENTER_IN_PROGRESS"
	CodeProgramNotClosed      = "PROGRAM_NOT_CLOSED"
	CodeProgramDeleted        = "PROGRAM_DELETED"
	CodeInvalidCursor         = "INVALID_CURSOR"
	CodeInvalidLimit          = "INVALID_LIMIT"
	CodeInvalidValidity       = "INVALID_VALIDITY"   // a bypass pass's validSeconds out of range
	CodeNoRoom                = "NO_ROOM"            // a cap with no room for the bypass passes asked for
	CodeChallengeRequired     = "CHALLENGE_REQUIRED" // an enter without the proof of work its program asks for
	CodeChallengeFailed       = "CHALLENGE_FAILED"   // a proof that is wrong, expired, of another program or used
	CodeNoKeyring             = "NO_KEYRING"         // passes signed with fixed keys: no keyring
	CodeInvalidKeyID          = "INVALID_KEY_ID"
	CodeKeyNotFound           = "KEY_NOT_FOUND"
	CodeEdgeUnavailable       = "EDGE_UNAVAILABLE"     // the edge gate's store did not take a change
	CodeNoEdge                = "NO_EDGE"              // no edge gate is deployed
	CodeInvalidSubscription   = "INVALID_SUBSCRIPTION" // a push subscription that is malformed or names no known push service
	CodePushUnavailable       = "PUSH_UNAVAILABLE"     // this deployment sends no push
	CodeNotWaiting            = "NOT_WAITING"          // a subscription for a token no longer waiting

	// Codes of the HTTP layer: the request, not the queue, is at fault.
	CodeNotFound         = "NOT_FOUND"
	CodeMethodNotAllowed = "METHOD_NOT_ALLOWED"
	CodeUnauthorized     = "UNAUTHORIZED"
	CodeForbidden        = "FORBIDDEN"
	CodePayloadTooLarge  = "PAYLOAD_TOO_LARGE"
	CodeHeadersTooLarge  = "HEADERS_TOO_LARGE"
	CodeInvalidJSON      = "INVALID_JSON"
	CodeInvalidBody      = "INVALID_BODY"
)
