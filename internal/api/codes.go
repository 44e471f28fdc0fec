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
	CodeEdgeUnavailable       = "EDGE_UNAVAILABLE"       // the edge gate's store did not take a change
	CodeNoEdge                = "NO_EDGE"                // no edge gate is deployed
	CodeInvalidSubscription   = "INVALID_SUBSCRIPTION"   // a push subscription that is malformed or names no known push service
	CodePushUnavailable       = "PUSH_UNAVAILABLE"       // this deployment sends no push
	CodeNotWaiting            = "NOT_WAITING"            // a subscription or handoff for a token no longer waiting
	CodeEnqueueTokenRequired  = "ENQUEUE_TOKEN_REQUIRED" // an enter without the site's enqueue token its program asks for
	CodeInvalidEnqueueToken   = "INVALID_ENQUEUE_TOKEN"  // an enqueue token expired, of another audience or issuer, or badly signed
	CodeHandoffRefused        = "HANDOFF_REFUSED"        // an account's place: it follows the account, not a code
	CodeHandoffTooSoon        = "HANDOFF_TOO_SOON"       // a new code within HandoffGap of the last
	CodeInvalidHandoffCode    = "INVALID_HANDOFF_CODE"
	CodeHandoffNotFound       = "HANDOFF_NOT_FOUND" // a code unknown, expired or replaced by a newer one
	CodeHandoffUsed           = "HANDOFF_USED"      // the place was moved by another device
	CodeInvalidPage           = "INVALID_PAGE"      // a handoff's page URL that is not the program's waiting page

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
