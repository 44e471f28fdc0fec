// Package api is the waiting room's HTTP API on the wire: its paths,
// headers, bodies and error codes, shared by the server, the Go client, the
// page and the tests. docs/openapi.yaml describes the same API, and tests
// hold the server's answers to it.
package api

//go:generate go run ../tools/genschemas ../../docs/openapi.yaml

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
)

// Route paths, in the syntax of http.ServeMux and API Gateway alike.
const (
	QueuePath        = "/api/v1/queues/programs/{programId}"
	SessionPath      = "/api/v1/queues/programs/{programId}/session"
	ChallengePath    = "/api/v1/queues/programs/{programId}/challenge" // a proof-of-work challenge for an enter
	ProgramsPath     = "/api/v1/admin/programs"
	AdminPath        = "/api/v1/admin/programs/{programId}"
	ChangesPath      = "/api/v1/admin/programs/{programId}/changes"
	ReportPath       = "/api/v1/admin/programs/{programId}/report"
	AdmissionPath    = "/api/v1/admin/programs/{programId}/admissions"
	AdminSessionPath = "/api/v1/admin/programs/{programId}/session"            // the site's end of a session
	TokenPath        = "/api/v1/admin/programs/{programId}/tokens/{tokenId}"   // looked up or revoked by an admin
	PassesPath       = "/api/v1/admin/programs/{programId}/passes"             // issues bypass passes
	KeysPath         = "/api/v1/admin/keys"                                    // the pass signing keys: list, rotate
	KeyPath          = "/api/v1/admin/keys/{keyId}"                            // revokes one key
	EdgeKeysPath     = "/api/v1/admin/edge/keys"                               // the edge gate's keys: list, rotate
	PushPath         = "/api/v1/queues/programs/{programId}/push"              // a token's push subscription: put, delete
	HandoffPath      = "/api/v1/queues/programs/{programId}/handoff"           // a code that moves the token's place to another device
	RedeemPath       = "/api/v1/queues/programs/{programId}/handoff/redeem"    // takes the place a code moves
	AccountPath      = "/api/v1/admin/programs/{programId}/accounts/{account}" // an account's token, looked up by an admin
	JWKSPath         = "/.well-known/jwks.json"
)

// Challenge is a proof of work to solve before an enter: a solution is 1
// to 64 characters of [A-Za-z0-9_-] such that SHA-256 of
// "<challenge>.<solution>" starts with Bits zero bits.
type Challenge struct {
	Challenge string `json:"challenge"`
	// Bits is the leading zero bits asked for; 0: the program asks for no
	// proof, and an enter needs none.
	Bits      int  `json:"bits"`
	ExpiresAt Time `json:"expiresAt"`
}

// Headers of the API.
const (
	HeaderToken          = "X-Queue-Token"     // the queue token
	HeaderAdmissionPass  = "X-Admission-Pass"  // a pass, with which its site ends the admission
	HeaderIdempotencyKey = "Idempotency-Key"   // names an enter: its retries answer the same token
	HeaderEnqueueToken   = "X-Enqueue-Token"   // an enter's JWT from the site, naming the account whose place it is
	HeaderRetryAfter     = "Retry-After"       // when to poll again (WAITING) or retry (503), in seconds
	HeaderChallenge      = "X-Queue-Challenge" // an enter's proof of work: a challenge from ChallengePath,
	HeaderSolution       = "X-Queue-Solution"  // and its solution
)

// Status is a token's status.
type Status string

// Token statuses.
const (
	StatusWaiting  Status = "WAITING"
	StatusAdmitted Status = "ADMITTED"
	StatusExpired  Status = "EXPIRED"
	StatusLeft     Status = "LEFT"
	StatusRevoked  Status = "REVOKED" // an admin revoked the token: no place, no pass, for good
	StatusMoved    Status = "MOVED"   // the place moved to another device by a handoff code
)

// Token is the answer to an enter or a poll. Fields that do not apply to
// the status are absent, never null.
type Token struct {
	// TokenID is the queue token, sent back in X-Queue-Token.
	TokenID string `json:"tokenId"`
	// Status moves WAITING to ADMITTED to EXPIRED, WAITING to LEFT, or
	// WAITING to MOVED (a handoff gave the place a new token id); an
	// admin's revoke makes it REVOKED from any of them.
	Status Status `json:"status"`
	// Ticket is the token's number in the program's queue (1 for the
	// first to enter); it never changes.
	Ticket   int64 `json:"ticket"`
	IssuedAt Time  `json:"issuedAt"`
	// Position is the place in line (1 = next), WAITING only.
	Position int64 `json:"position,omitempty"`
	// RetryAfterMs is when to poll next, WAITING only.
	RetryAfterMs int64 `json:"retryAfterMs,omitempty"`
	// EstimatedWaitMs is present while WAITING when the admission pace is known.
	EstimatedWaitMs int64 `json:"estimatedWaitMs,omitempty"`
	// Push is true while WAITING with a push subscription: the page is
	// woken at its turn, and retryAfterMs is a fallback.
	Push bool `json:"push,omitempty"`
	// Notice is the program's notice to the people who wait, WAITING only.
	Notice string `json:"notice,omitempty"`
	// Paused is true while WAITING and admission is paused.
	Paused bool `json:"paused,omitempty"`
	// OpensAt is the program's scheduled opening, WAITING only.
	OpensAt Time `json:"opensAt,omitzero"`
	// ClosesAt is the program's scheduled close to new entries, WAITING
	// only.
	ClosesAt Time `json:"closesAt,omitzero"`
	// StatusLine tells the opening's state in words, WAITING only.
	StatusLine string `json:"statusLine,omitempty"`
	// Shuffle is the shuffled opening, WAITING only.
	Shuffle *Shuffle `json:"shuffle,omitempty"`
	// AdmittedAt is when the admission was first seen.
	AdmittedAt Time `json:"admittedAt,omitzero"`
	// AdmissionPass is the signed pass (a compact JWS) the protected site
	// checks, ADMITTED only; the same in every answer.
	AdmissionPass string `json:"admissionPass,omitempty"`
	// EdgeToken is the token the edge gate trades for an edge session,
	// ADMITTED only, for a program at the gate: the page adds it to the
	// URL it sends the person to as wrEdge.
	EdgeToken string `json:"edgeToken,omitempty"`
	// ExpiresAt is the end of the admission window, ADMITTED and EXPIRED.
	ExpiresAt Time `json:"expiresAt,omitzero"`
	// LeftAt is when the token left, LEFT only.
	LeftAt Time `json:"leftAt,omitzero"`
	// RevokedAt is when an admin revoked the token, REVOKED only.
	RevokedAt Time `json:"revokedAt,omitzero"`
	// MovedAt is when a handoff moved the place to another device, MOVED only.
	MovedAt Time `json:"movedAt,omitzero"`
}

// TokenRecord is the admin view of a token: the answer its holder would
// get, computed without recording anything (an admission not yet seen
// reads ADMITTED without admittedAt) and never with the pass, with every
// time the token stores whatever its status.
type TokenRecord struct {
	Token
	// RetainedUntil is when the store may delete the token.
	RetainedUntil Time `json:"retainedUntil"`
	// Account is the site's account whose place this is, if any.
	Account string `json:"account,omitempty"`
}

// RetryAfter is the server's advice of when to poll next.
func (t Token) RetryAfter() time.Duration { return time.Duration(t.RetryAfterMs) * time.Millisecond }

// Shuffle is a shuffled opening in a token's answer.
type Shuffle struct {
	// Commitment is the message the key signs at the opening.
	Commitment string `json:"commitment"`
	// PublicKey is the signing key's public half.
	PublicKey string `json:"publicKey,omitempty"`
	// Seed is the signature, once the pre-queue is fixed.
	Seed string `json:"seed,omitempty"`
	// Prequeue is the pre-queue's size, once it is fixed.
	Prequeue int64 `json:"prequeue,omitempty"`
	// Place is the token's place in the shuffled pre-queue.
	Place int64 `json:"place,omitempty"`
}

// Profile is what a program shows the people who wait, and where it sends
// them once admitted; each field is absent while empty.
type Profile struct {
	// DisplayName is the program's name on the page.
	DisplayName string `json:"displayName,omitempty"`
	// Message is shown on the page.
	Message string `json:"message,omitempty"`
	// Notice is news for the people who wait, in every WAITING answer.
	Notice string `json:"notice,omitempty"`
	// TargetURL is where admitted people are sent, with ?admissionPass=.
	TargetURL string `json:"targetUrl,omitempty"`
	// Translations are the texts in other languages, by BCP 47 tag.
	Translations map[string]Texts `json:"translations,omitempty"`
}

// Texts are a program's texts in one language; each is absent while
// empty.
type Texts struct {
	DisplayName string `json:"displayName,omitempty"`
	Message     string `json:"message,omitempty"`
	Notice      string `json:"notice,omitempty"`
}

// TextSettings are the texts of one language in a program PUT: absent
// keeps a text, "" clears it; the limits are the untranslated ones'.
type TextSettings struct {
	DisplayName *string `json:"displayName,omitempty"`
	Message     *string `json:"message,omitempty"`
	Notice      *string `json:"notice,omitempty"`
}

// Program is the admin view of a program: its counters and settings.
type Program struct {
	ProgramID string `json:"programId"`
	// Issued is the number of tickets issued.
	Issued int64 `json:"issued"`
	// Admitted is the serving counter: tickets up to it are admitted.
	Admitted int64 `json:"admitted"`
	// Waiting is issued less admitted.
	Waiting int64 `json:"waiting"`
	// AdmissionRatePerSecond is people admitted a second; 0 is manual
	// admission only.
	AdmissionRatePerSecond float64 `json:"admissionRatePerSecond"`
	// Paused stops admission; entering goes on.
	Paused bool `json:"paused"`
	// Closed refuses new entries (PROGRAM_CLOSED).
	Closed bool `json:"closed"`
	// AdmissionWindowSeconds is how long an admission lasts.
	AdmissionWindowSeconds int64 `json:"admissionWindowSeconds"`
	CreatedAt              Time  `json:"createdAt"`
	// PollingPolicy is the program's own policy; absent for the default.
	PollingPolicy string `json:"pollingPolicy,omitempty"`
	// EffectiveAt is when the last change takes effect, while it has not.
	EffectiveAt Time `json:"effectiveAt,omitzero"`
	// OpensAt is the scheduled opening: nobody is admitted before it.
	OpensAt Time `json:"opensAt,omitzero"`
	// ClosesAt is the scheduled close: enters from it on get
	// PROGRAM_CLOSED.
	ClosesAt Time `json:"closesAt,omitzero"`
	// ShuffleAtOpen is true when the pre-queue is shuffled at the opening.
	ShuffleAtOpen bool `json:"shuffleAtOpen,omitempty"`
	// ShuffleCommitment is the message the shuffle key signs at the opening.
	ShuffleCommitment string `json:"shuffleCommitment,omitempty"`
	// Prequeue is the pre-queue's size, once it is fixed.
	Prequeue *int64 `json:"prequeue,omitempty"`
	// MaxWaiting is the longest the line may be; absent: no limit.
	MaxWaiting int64 `json:"maxWaiting,omitempty"`
	// MaxActiveUsers caps how many people are admitted at once; absent:
	// no cap.
	MaxActiveUsers int64 `json:"maxActiveUsers,omitempty"`
	// NoShowSeconds is how long an admitted person has to fetch their
	// pass; absent: no no-show handling.
	NoShowSeconds int64 `json:"noShowSeconds,omitempty"`
	// ChallengeBits is the proof of work an enter must carry; absent:
	// none.
	ChallengeBits int64 `json:"challengeBits,omitempty"`
	// PushLeadSeconds is how long before their turn subscribed people
	// are told to get ready; absent: 120.
	PushLeadSeconds int64 `json:"pushLeadSeconds,omitempty"`
	// EnqueueJWKSURL and EnqueueIssuer name the site's keys and issuer of
	// enqueue tokens; absent: none accepted.
	EnqueueJWKSURL string `json:"enqueueJwksUrl,omitempty"`
	EnqueueIssuer  string `json:"enqueueIssuer,omitempty"`
	// RequireEnqueueToken is true when every enter must carry one.
	RequireEnqueueToken bool `json:"requireEnqueueToken,omitempty"`
	// Active, Ended and NoShows count, as of the last second's fold, the
	// people admitted and not yet done, the admissions ended early, and
	// the no-shows; present with a cap or no-show handling.
	Active  *int64 `json:"active,omitempty"`
	Ended   *int64 `json:"ended,omitempty"`
	NoShows *int64 `json:"noShows,omitempty"`
	// TurnoverPerSecond is the slots freed a second (ends, no-shows,
	// windows over), smoothed over 30 s, and TurnoverSpreadPerSecond its
	// uncertainty; TurnoverBoundPerSecond the most a waiting answer counts
	// on (0 until known); HeldBack the slots freed that wait for the bound
	// to let them in. Present with a cap or no-show handling.
	TurnoverPerSecond       *float64 `json:"turnoverPerSecond,omitempty"`
	TurnoverSpreadPerSecond *float64 `json:"turnoverSpreadPerSecond,omitempty"`
	TurnoverBoundPerSecond  *float64 `json:"turnoverBoundPerSecond,omitempty"`
	HeldBack                *int64   `json:"heldBack,omitempty"`
	// BypassHeld is how many slots of the cap live bypass passes hold
	// now; absent: none.
	BypassHeld int64 `json:"bypassHeld,omitempty"`
	Edge
	Profile
}

// Edge is a program at the edge gate (docs/edge-gate.md).
type Edge struct {
	// EdgeMode is off (the gate lets everyone through), standby (it gives
	// everyone an edge session) or on (it sends those without one to the
	// waiting room); absent: off.
	EdgeMode string `json:"edgeMode,omitempty"`
	// EdgePaths are the path prefixes of the protected site that the gate
	// guards for the program.
	EdgePaths []string `json:"edgePaths,omitempty"`
	// EdgeSessionSeconds is how long an edge session lasts; absent: 3600.
	EdgeSessionSeconds int64 `json:"edgeSessionSeconds,omitempty"`
	// FailOpenUntil is the break-glass: until then the gate and passverify
	// let everyone through.
	FailOpenUntil Time `json:"failOpenUntil,omitzero"`
}

// ProgramSettings is the body of a program PUT: absent fields keep their
// value (or take the default on creation).
type ProgramSettings struct {
	AdmissionRatePerSecond *Rate   `json:"admissionRatePerSecond,omitempty"`
	Paused                 *bool   `json:"paused,omitempty"`
	AdmissionWindowSeconds *int64  `json:"admissionWindowSeconds,omitempty"`
	PollingPolicy          *string `json:"pollingPolicy,omitempty"`
	Closed                 *bool   `json:"closed,omitempty"`
	// OpensAt is an RFC 3339 time; "" clears the opening.
	OpensAt       *string `json:"opensAt,omitempty"`
	ShuffleAtOpen *bool   `json:"shuffleAtOpen,omitempty"`
	// ClosesAt is an RFC 3339 time after opensAt, from which enters get
	// PROGRAM_CLOSED; "" clears it.
	ClosesAt *string `json:"closesAt,omitempty"`
	// MaxWaiting limits the line: an enter while waiting is at it gets
	// QUEUE_FULL; 0 removes the limit.
	MaxWaiting *int64 `json:"maxWaiting,omitempty"`
	// MaxActiveUsers caps how many people may be admitted at once
	// (admitted, and not ended, expired or a no-show); 0 removes the cap.
	MaxActiveUsers *int64 `json:"maxActiveUsers,omitempty"`
	// NoShowSeconds, 5 to 3600, is how long an admitted person has to
	// fetch their pass before they are a no-show; 0 removes it.
	NoShowSeconds *int64 `json:"noShowSeconds,omitempty"`
	// ChallengeBits, 0 to 26, makes every enter carry a proof of work:
	// the leading zero bits of the hash of a solved challenge; 0 removes it.
	ChallengeBits *int64 `json:"challengeBits,omitempty"`
	// PushLeadSeconds, 30 to 1800 (0: 120), is how long before their
	// turn a person subscribed to push hears "get ready".
	PushLeadSeconds *int64 `json:"pushLeadSeconds,omitempty"`
	// EnqueueJWKSURL is the site's JWKS of enqueue token keys, an absolute
	// https URL (http only for a loopback host); "" clears it.
	EnqueueJWKSURL *string `json:"enqueueJwksUrl,omitempty"`
	// EnqueueIssuer is the iss of the site's enqueue tokens, at most 256
	// printable characters; "" clears it.
	EnqueueIssuer *string `json:"enqueueIssuer,omitempty"`
	// RequireEnqueueToken makes every enter carry an enqueue token
	// (ENQUEUE_TOKEN_REQUIRED without); it needs enqueueJwksUrl and enqueueIssuer.
	RequireEnqueueToken *bool `json:"requireEnqueueToken,omitempty"`
	// DisplayName, at most 80 characters on one line; "" clears it.
	DisplayName *string `json:"displayName,omitempty"`
	// Message, at most 500 characters; "" clears it.
	Message *string `json:"message,omitempty"`
	// Notice, at most 280 characters; "" clears it.
	Notice *string `json:"notice,omitempty"`
	// TargetURL, an absolute https URL (http only for a loopback host)
	// without credentials or fragment, at most 2048 bytes; "" clears it.
	TargetURL *string `json:"targetUrl,omitempty"`
	// Translations set texts in other languages, by BCP 47 tag (at most
	// 10 languages), merged per language and per text.
	Translations map[string]TextSettings `json:"translations,omitempty"`
	// EdgeMode is off, standby or on.
	EdgeMode *string `json:"edgeMode,omitempty"`
	// EdgePaths, at most 10 path prefixes of at most 128 bytes, each
	// starting with /; [] clears them.
	EdgePaths *[]string `json:"edgePaths,omitempty"`
	// EdgeSessionSeconds, 60 to 86,400; 0 restores the default (3600).
	EdgeSessionSeconds *int64 `json:"edgeSessionSeconds,omitempty"`
	// FailOpenUntil is an RFC 3339 time; "" clears it.
	FailOpenUntil *string `json:"failOpenUntil,omitempty"`
}

// Edge reports whether s sets any of the edge gate's settings.
func (s ProgramSettings) Edge() bool {
	return s.EdgeMode != nil || s.EdgePaths != nil || s.EdgeSessionSeconds != nil || s.FailOpenUntil != nil
}

// ProgramList is a page of the programs, in id order.
type ProgramList struct {
	Programs []Program `json:"programs"`
	// NextCursor is the cursor query parameter of the next page; absent
	// on the last.
	NextCursor string `json:"nextCursor,omitempty"`
}

// Change is one admin change of a program.
type Change struct {
	ChangeID string `json:"changeId"`
	// At is when the change was made.
	At Time `json:"at"`
	// EffectiveAt is when it takes effect everywhere (at, if at once).
	EffectiveAt Time `json:"effectiveAt"`
	// Actor is who made it: the caller's IAM ARN on AWS, "local-admin" on
	// the local server, "system" for the service's own.
	Actor string `json:"actor"`
	// Action is create, update, admit, revoke (a token; fields name it),
	// bypass (passes issued: count and validSeconds), or readmit
	// (no-shows' admissions given back by the service).
	Action string `json:"action"`
	// Fields is what the change set: {name: new value}, in the names of
	// ProgramSettings; {"count": n} for an admission.
	Fields map[string]any `json:"fields"`
}

// ChangeList is a page of a program's changes, newest first.
type ChangeList struct {
	Changes []Change `json:"changes"`
	// NextCursor is the cursor query parameter of the next page; absent
	// on the last.
	NextCursor string `json:"nextCursor,omitempty"`
}

// Admission is the body of a manual admission.
type Admission struct {
	// Count is how many more people to admit, 1 to 1,000,000.
	Count *int64 `json:"count"`
}

// BypassRequest is the body of a bypass pass issuance.
type BypassRequest struct {
	// Count is how many passes to issue, 1 to 1,000.
	Count *int64 `json:"count"`
	// ValidSeconds is how long each pass is valid from now, 60 to 86,400.
	ValidSeconds *int64 `json:"validSeconds"`
}

// BypassPasses is the answer to a bypass pass issuance: each pass a
// compact JWS like an admission's, with "bypass": true.
type BypassPasses struct {
	Passes []string `json:"passes"`
}

// KeyState is where a pass signing key stands in the keyring.
type KeyState string

// Key states, in the order a key goes through them (but for revoked).
const (
	KeyNext      KeyState = "next"      // signs later, from signFrom; in the JWKS a rotation and a lead before
	KeySigning   KeyState = "signing"   // signs the passes now
	KeyPublished KeyState = "published" // no longer signs; in the JWKS while passes it signed may be valid
	KeyRetired   KeyState = "retired"   // out of the JWKS; the store forgets it later
	KeyRevoked   KeyState = "revoked"   // out of the JWKS, signing nothing, for good
	KeyUnusable  KeyState = "unusable"  // does not open with KMS: out of the JWKS, it never signs
)

// SigningKey is a pass signing key of the keyring, as an operator sees
// it; its private half never leaves the server.
type SigningKey struct {
	// KeyID is the key's kid in the JWKS and in the passes it signs: its
	// RFC 7638 thumbprint, 43 characters of base64url.
	KeyID string `json:"keyId"`
	// State is next, signing, published, retired, revoked or unusable
	// (KeyState).
	State KeyState `json:"state"`
	// SignFrom is when the key starts (or started) signing.
	SignFrom  Time `json:"signFrom"`
	CreatedAt Time `json:"createdAt"`
	// RevokedAt is when the key was revoked; absent unless revoked.
	RevokedAt Time `json:"revokedAt,omitzero"`
}

// EdgeKeys is the edge gate's HMAC keys, newest first, without their
// secrets: the answer to a listing or a rotation (docs/edge-gate.md).
type EdgeKeys struct {
	Keys []EdgeKey `json:"keys"`
}

// EdgeRotation is the body of an edge key rotation.
type EdgeRotation struct {
	// Drop makes the new key sign at once and drops every other, which
	// ends every edge session made before (a leaked key); else the new
	// key signs once it has reached the edges and the one before still
	// verifies.
	Drop bool `json:"drop,omitempty"`
}

// EdgeKey is one edge key.
type EdgeKey struct {
	KeyID string `json:"keyId"`
	// State is next (published, signing from signsFrom), signing, or
	// verifying (the previous key, which no longer signs).
	State string `json:"state"`
	// SignsFrom is when a rotated key starts signing (absent for a key
	// that signed as soon as it was made, or one that no longer signs).
	SignsFrom Time `json:"signsFrom,omitzero"`
}

// SigningKeys is the answer to a listing of the keyring: every key the
// store holds, newest (latest signFrom) first.
type SigningKeys struct {
	// RotationSeconds is how long a scheduled key signs before the next
	// one takes over: PASS_KEY_ROTATION, 86400 (a day) by default.
	RotationSeconds int64        `json:"rotationSeconds"`
	Keys            []SigningKey `json:"keys"`
}

// KeyRotation is the answer to a rotation: the new key, in state next,
// which signs from signFrom (15 minutes from now, once sites can have
// it from the JWKS) until the next scheduled key.
type KeyRotation struct {
	Key SigningKey `json:"key"`
}

// KeyRevocation is the answer to a revocation.
type KeyRevocation struct {
	// Revoked is the kid of the key revoked (or revoked before).
	Revoked string `json:"revoked"`
	// Replacement is the key that signs from now in its place, present
	// only when the key revoked was the one that signed.
	Replacement *SigningKey `json:"replacement,omitempty"`
}

// Error is the body of every error answer.
type Error struct {
	// Code is the error's stable, machine-readable code.
	Code string `json:"code"`
	// Message is safe to show; it never carries internal detail.
	Message string `json:"message"`
}

// Rate is an admission rate in people a second. A JSON number too small
// for a float64 decodes to the smallest one of its sign, not to 0 (manual
// admission only), so that it is refused as too small.
type Rate float64

// UnmarshalJSON decodes a number, keeping an underflow away from 0.
func (n *Rate) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	mantissa, _, _ := strings.Cut(strings.ToLower(string(b)), "e")
	if f == 0 && strings.ContainsAny(mantissa, "123456789") {
		f = math.SmallestNonzeroFloat64
		if strings.HasPrefix(mantissa, "-") {
			f = -f
		}
	}
	*n = Rate(f)
	return nil
}

// Time is an instant on the wire: RFC 3339 in UTC with milliseconds. The
// zero Time is absent (omitzero), and "" decodes to it.
type Time struct{ time.Time }

// TimeOf returns t as a Time.
func TimeOf(t time.Time) Time { return Time{t} }

// MarshalText writes t as RFC 3339 UTC with milliseconds.
func (t Time) MarshalText() ([]byte, error) {
	if t.IsZero() {
		return []byte{}, nil
	}
	return []byte(t.UTC().Format("2006-01-02T15:04:05.000Z")), nil
}

// MarshalJSON writes MarshalText as a JSON string, in place of the
// embedded time.Time's own format.
func (t Time) MarshalJSON() ([]byte, error) {
	b, _ := t.MarshalText()
	return json.Marshal(string(b))
}

// UnmarshalJSON reads a JSON string with UnmarshalText; null is the zero
// Time.
func (t *Time) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s is not an RFC 3339 time", b)
	}
	return t.UnmarshalText([]byte(s))
}

// UnmarshalText reads RFC 3339; "" is the zero Time.
func (t *Time) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*t = Time{}
		return nil
	}
	v, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		return fmt.Errorf("%q is not an RFC 3339 time", b)
	}
	*t = Time{v}
	return nil
}

// PushSubscription is a browser's push subscription as
// PushSubscription.toJSON() gives it: an https endpoint of a push service
// and the keys (base64url) its messages are encrypted to.
type PushSubscription struct {
	Endpoint string `json:"endpoint"`
	// ExpirationTime is ignored: a subscription lasts as long as its token.
	ExpirationTime *int64   `json:"expirationTime,omitempty" jsonschema:"oneof_type=integer;null"`
	Keys           PushKeys `json:"keys"`
}

// PushKeys are a subscription's P-256 public key and 16-byte secret.
type PushKeys struct {
	P256DH string `json:"p256dh"`
	Auth   string `json:"auth"`
}

// EnterRequest is an enter's optional body: a page that holds a push
// subscription already sends it with the enter (one the deployment cannot
// use leaves the token unsubscribed: the answer has no push).
type EnterRequest struct {
	Push *PushSubscription `json:"push,omitempty"`
}

// HandoffRequest asks for a code that moves a waiting place to another
// device; Page is the waiting page's URL, which the code's URL extends.
type HandoffRequest struct {
	Page string `json:"page"`
}

// Handoff is a code that moves a place to another device, once, until
// ExpiresAt: typed there, or as URL (its fragment holds the code) or the
// QR code of URL, QRSVG, an SVG image.
type Handoff struct {
	Code      string `json:"code"`
	URL       string `json:"url"`
	ExpiresAt Time   `json:"expiresAt"`
	QRSVG     string `json:"qrSvg"`
}

// RedeemRequest takes the place a handoff code moves.
type RedeemRequest struct {
	Code string `json:"code"`
}
