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

// Limits on admissions and how long tokens are kept.
const (
	MaxAdmissionCount   = 1_000_000 // per manual admission
	endedTokenRetention = 24 * time.Hour
	// WaitingTokenRetention is how long a waiting token is kept after
	// its enter.
	WaitingTokenRetention = 48 * time.Hour
)

var (
	programIDPattern      = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)
	tokenIDPattern        = regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`) // 128 bits, base64url
	idempotencyKeyPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{16,128}$`)
)

// ValidProgramID reports whether id is a well-formed program id: 1 to 64
// characters of ASCII letters, digits, '-' and '_', starting with a letter or
// digit.
func ValidProgramID(id string) bool { return programIDPattern.MatchString(id) }

// ValidTokenID reports whether id has the shape of a token id (22 base64url
// characters); it says nothing of whether the token exists.
func ValidTokenID(id string) bool { return tokenIDPattern.MatchString(id) }

// Status is where a token stands: WAITING → ADMITTED → EXPIRED or
// WAITING → LEFT, and from any of them to REVOKED by an admin.
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
	// ticket (zero while waiting); the admission window runs from it to
	// AdmissionExpiresAt. AdmissionPass is "" when the service signs none.
	AdmittedAt         time.Time
	AdmissionExpiresAt time.Time
	AdmissionPass      string
	LeftAt             time.Time // zero unless the person left
	RevokedAt          time.Time // zero unless an admin revoked the token
	ExpiresAt          time.Time // when the store may delete the item (TTL)
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

// ValidIdempotencyKey reports whether key is a well-formed Idempotency-Key:
// 16 to 128 ASCII letters, digits, '-', '_', '.' or ':'.
func ValidIdempotencyKey(key string) bool { return idempotencyKeyPattern.MatchString(key) }

// idempotentTokenID is the token id an enter with key creates in
// programID: 128 bits of SHA-256 over both.
func idempotentTokenID(programID, key string) string {
	sum := sha256.Sum256([]byte("waitingroom/idempotency-key/v1\x00" + programID + "\x00" + key))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// ShuffleView is a shuffled opening as a token's answer shows it: enough
// for anyone to check a place. Commitment (shuffle.Message) and PublicKey
// are published before anyone entered; Seed, the key's signature of
// Commitment, and Prequeue once the pre-queue is fixed; Place is the
// token's place in it (0: not in it, or not fixed yet).
type ShuffleView struct {
	Commitment, PublicKey string
	Seed                  string
	Prequeue              int64
	Place                 int64
}

// View is what a client is told about its token.
type View struct {
	TokenID  string
	Status   Status
	IssuedAt time.Time
	// Ticket is the token's number in the program's queue.
	Ticket int64

	// Set only while WAITING: Position is ticket − serving counter;
	// Translations (shared, read only) hold the program's texts in other
	// languages (NoticeIn); OpensAt is set while the opening is ahead,
	// ClosesAt when a close is scheduled; StatusLine ("" for none) says what
	// the opening means; Shuffle (nil without one) is what the token can
	// check of a shuffled opening; EstimatedWait is set when the pace is
	// known.
	Position      int64
	Notice        string
	Translations  settings.Translations
	Paused        bool
	OpensAt       time.Time
	ClosesAt      time.Time
	StatusLine    string
	Shuffle       *ShuffleView
	RetryAfter    time.Duration
	EstimatedWait time.Duration

	AdmittedAt    time.Time // ADMITTED and EXPIRED
	ExpiresAt     time.Time // ADMITTED and EXPIRED: end of the admission window
	AdmissionPass string    // ADMITTED only
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
