package queue

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"regexp"
	"time"

	"golang.org/x/text/language"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/settings"
)

// Limits on program settings and admissions.
const (
	MaxAdmissionCount   = 1_000_000 // per manual admission
	programIDMaxLen     = 64
	tokenIDLen          = 22 // 128 bits, base64url without padding
	endedTokenRetention = 24 * time.Hour

	// WaitingTokenRetention is how long a waiting token is kept after
	// its enter.
	WaitingTokenRetention = 48 * time.Hour
)

var (
	programIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)
	tokenIDPattern   = regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)
)

// ValidProgramID reports whether id is a well-formed program id: 1 to 64
// characters of ASCII letters, digits, '-' and '_', starting with a letter or
// digit.
func ValidProgramID(id string) bool {
	return len(id) <= programIDMaxLen && programIDPattern.MatchString(id)
}

// ValidTokenID reports whether id has the shape of a token id (22 base64url
// characters); it says nothing of whether the token exists.
func ValidTokenID(id string) bool { return len(id) == tokenIDLen && tokenIDPattern.MatchString(id) }

// Status is where a token stands: the wire's status. A token only ever
// moves WAITING → ADMITTED → EXPIRED or WAITING → LEFT, and from any of
// them to REVOKED by an admin.
type Status = api.Status

// Token statuses, as api names them.
const (
	StatusWaiting  = api.StatusWaiting
	StatusAdmitted = api.StatusAdmitted
	StatusExpired  = api.StatusExpired
	StatusLeft     = api.StatusLeft
	StatusRevoked  = api.StatusRevoked
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
	// AdmissionPass is the signed pass of the admission ("" while not
	// admitted, or when the service signs none).
	AdmissionPass string
	// LeftAt is when the person left the queue (zero otherwise).
	LeftAt time.Time
	// RevokedAt is when an admin revoked the token (zero otherwise).
	RevokedAt time.Time
	// ExpiresAt is when the store may delete the item (DynamoDB TTL).
	ExpiresAt time.Time
	// Claim is set, with Ticket 0, while an enter with an Idempotency-Key
	// holds the id its key names and has no ticket yet (Store.ClaimToken):
	// no place, answered as an unknown token. "" for a token.
	Claim string
	// ClaimedAt is when Claim was made; zero once released.
	ClaimedAt time.Time
}

// pending reports whether t is neither admitted, left nor revoked in the
// store: its status then comes from its program's serving counter.
func (t Token) pending() bool {
	return t.AdmittedAt.IsZero() && t.LeftAt.IsZero() && t.RevokedAt.IsZero()
}

// NewTokenID returns 128 bits from crypto/rand, base64url-encoded.
func NewTokenID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Idempotency keys: any client-chosen id within these bounds.
const (
	MinIdempotencyKeyLen = 16
	MaxIdempotencyKeyLen = 128
)

var idempotencyKeyPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]+$`)

// ValidIdempotencyKey reports whether key is a well-formed Idempotency-Key:
// 16 to 128 ASCII letters, digits, '-', '_', '.' or ':'.
func ValidIdempotencyKey(key string) bool {
	return len(key) >= MinIdempotencyKeyLen && len(key) <= MaxIdempotencyKeyLen && idempotencyKeyPattern.MatchString(key)
}

// idempotentTokenID is the token id an enter with key creates in
// programID: 128 bits of SHA-256 over both, so the key is as secret as the
// token it names.
func idempotentTokenID(programID, key string) string {
	sum := sha256.Sum256([]byte("waitingroom/idempotency-key/v1\x00" + programID + "\x00" + key))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// ShuffleView is a shuffled opening as a token's answer shows it: enough
// for anyone to check a place (docs/design.md, "The shuffle").
type ShuffleView struct {
	// Commitment is the message the shuffle key signs at the opening
	// (shuffle.Message), and PublicKey that key's public half
	// (shuffle.EncodePublicKey): both published before anyone entered.
	Commitment, PublicKey string
	// Seed, the key's signature of Commitment, and Prequeue are revealed
	// once the pre-queue is fixed.
	Seed     string
	Prequeue int64
	// Place is the token's place in the pre-queue, 0 when it is not in it
	// or it is not fixed yet.
	Place int64
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
	// Notice is the program's notice to the people who wait; WAITING only.
	Notice string
	// Translations are the program's texts in other languages, shared
	// with it (read only); WAITING only. NoticeIn picks the notice.
	Translations settings.Translations
	// Paused reports whether admission is paused; WAITING only.
	Paused bool
	// OpensAt is the program's opening while it is ahead; WAITING only.
	OpensAt time.Time
	// ClosesAt is the program's scheduled close, if it has one; WAITING
	// only.
	ClosesAt time.Time
	// StatusLine says what the opening means for the token; WAITING only,
	// "" when there is nothing to say.
	StatusLine string
	// Shuffle is what the token can check of a shuffled opening; WAITING
	// only, nil without one.
	Shuffle *ShuffleView
	// RetryAfter is when to poll next; set only while WAITING.
	RetryAfter time.Duration
	// EstimatedWait is the expected time until admission; set only while
	// WAITING and when the admission pace is known.
	EstimatedWait time.Duration
	AdmittedAt    time.Time // ADMITTED and EXPIRED
	ExpiresAt     time.Time // ADMITTED and EXPIRED: end of the admission window
	// AdmissionPass is the signed pass; ADMITTED only.
	AdmissionPass string
	LeftAt        time.Time // LEFT
	RevokedAt     time.Time // REVOKED
	// FirstSighting reports that this answer recorded the admission (wrote
	// AdmittedAt): once per token, for the Admissions metric; two answers
	// recording it in the same millisecond with no pass signer both do.
	FirstSighting bool
}

// storedView is the view of t at now from what it stores: revoked, left,
// or admitted (ADMITTED within its window, EXPIRED after it).
func storedView(t Token, now time.Time) View {
	v := View{TokenID: t.ID, IssuedAt: t.IssuedAt, Ticket: t.Ticket}
	switch {
	case !t.RevokedAt.IsZero():
		v.Status, v.RevokedAt = StatusRevoked, t.RevokedAt
	case !t.LeftAt.IsZero():
		v.Status, v.LeftAt = StatusLeft, t.LeftAt
	case now.Before(t.AdmissionExpiresAt):
		v.Status, v.AdmittedAt, v.ExpiresAt, v.AdmissionPass = StatusAdmitted, t.AdmittedAt, t.AdmissionExpiresAt, t.AdmissionPass
	default:
		v.Status, v.AdmittedAt, v.ExpiresAt = StatusExpired, t.AdmittedAt, t.AdmissionExpiresAt
	}
	return v
}

// NoticeIn is v's notice in the language of prefs that best matches a
// translation, else the untranslated one (settings.Profile.In).
func (v View) NoticeIn(prefs ...language.Tag) string {
	return settings.Profile{Notice: v.Notice, Translations: v.Translations}.In(prefs...).Notice
}
