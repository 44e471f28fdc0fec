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
	MaxAdmissionCount     = 1_000_000 // per manual admission
	endedTokenRetention   = 24 * time.Hour
	WaitingTokenRetention = 48 * time.Hour // a waiting token kept after its enter
)

var (
	programIDPattern      = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)
	tokenIDPattern        = regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`) // 128 bits, base64url
	idempotencyKeyPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{16,128}$`)
)

// ValidProgramID reports whether id is a well-formed program id (1 to 64
// of [A-Za-z0-9_-], not starting with '-' or '_').
func ValidProgramID(id string) bool { return programIDPattern.MatchString(id) }

// ValidTokenID reports whether id has the shape of a token id.
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
	StatusMoved    = api.StatusMoved
)

// Token is one person's place in one program's queue, as stored.
type Token struct {
	ID        string
	ProgramID string
	Ticket    int64
	IssuedAt  time.Time
	// AdmittedAt is the first sighting of the admission (zero while
	// waiting); its window ends at AdmissionExpiresAt.
	AdmittedAt         time.Time
	AdmissionExpiresAt time.Time
	AdmissionPass      string
	LeftAt             time.Time // zero unless the person left
	RevokedAt          time.Time // zero unless an admin revoked the token
	ExpiresAt          time.Time // when the store may delete the item (TTL)
	// Claim is set, with Ticket 0, while an enter with an Idempotency-Key
	// holds the id and has no ticket yet (Store.ClaimToken); "" for a token.
	Claim     string
	ClaimedAt time.Time // zero once released
	// Push is the token's push subscription (zero: none); PushStage is
	// what a sender last claimed to tell it, by PushOwner at PushedAt,
	// PushTold the last stage told, PushTries the claims of each stage.
	Push      Subscription
	PushStage PushStage
	PushOwner string
	PushedAt  time.Time
	PushTold  PushStage
	PushTries [3]int8
	// Account is the site's account whose place this is (an enqueue
	// token's sub; "" for none).
	Account string
	// Handoff is the hash of the token's last handoff code, made at
	// HandoffAt; MovedTo is the token id a handoff moved the place to, at MovedAt.
	Handoff   string
	HandoffAt time.Time
	MovedTo   string
	MovedAt   time.Time
	Moves     int8 // how often the place moved before it came to this token
	// EnterPosition and EnterEstimate are what the enter answered;
	// LeftPosition and LeftEstimate what a poll would have answered when
	// the person left while waiting (MarkLeft): the report's (0: unknown).
	EnterPosition, LeftPosition int64
	EnterEstimate, LeftEstimate time.Duration
}

// Pending reports whether t is neither admitted, left, revoked nor moved in the store.
func (t Token) Pending() bool {
	return t.AdmittedAt.IsZero() && t.LeftAt.IsZero() && t.RevokedAt.IsZero() && t.MovedAt.IsZero()
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

// ValidIdempotencyKey reports whether key is a well-formed Idempotency-Key.
func ValidIdempotencyKey(key string) bool { return idempotencyKeyPattern.MatchString(key) }

// idempotentTokenID is the token id an enter with key creates in programID.
func idempotentTokenID(programID, key string) string {
	sum := sha256.Sum256([]byte("waitingroom/idempotency-key/v1\x00" + programID + "\x00" + key))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// ShuffleView is a shuffled opening as an answer shows it, enough to check a
// place: Seed and Prequeue once fixed, Place 0 when not in it (or not yet).
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

	// Set only while WAITING (Translations are shared, read only; OpensAt
	// while the opening is ahead; Shuffle nil without one).
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
	Push          bool // the token is subscribed to push

	AdmittedAt    time.Time // ADMITTED and EXPIRED
	ExpiresAt     time.Time // ADMITTED and EXPIRED: end of the admission window
	AdmissionPass string    // ADMITTED only
	EdgeToken     string    // ADMITTED only, at the edge gate
	LeftAt        time.Time // LEFT
	RevokedAt     time.Time // REVOKED
	MovedAt       time.Time // MOVED
	Account       bool      // the place is an account's
	// FirstSighting reports that this answer recorded the admission, for
	// the Admissions metric.
	FirstSighting bool
}

// storedView is the view of t, not pending, at now.
func storedView(t Token, now time.Time) View {
	v := View{TokenID: t.ID, IssuedAt: t.IssuedAt, Ticket: t.Ticket, Account: t.Account != ""}
	switch {
	case !t.RevokedAt.IsZero():
		v.Status, v.RevokedAt = StatusRevoked, t.RevokedAt
	case !t.LeftAt.IsZero():
		v.Status, v.LeftAt = StatusLeft, t.LeftAt
	case !t.MovedAt.IsZero():
		v.Status, v.MovedAt = StatusMoved, t.MovedAt
	case now.Before(t.AdmissionExpiresAt):
		v.Status, v.AdmittedAt, v.ExpiresAt, v.AdmissionPass = StatusAdmitted, t.AdmittedAt, t.AdmissionExpiresAt, t.AdmissionPass
	default:
		v.Status, v.AdmittedAt, v.ExpiresAt = StatusExpired, t.AdmittedAt, t.AdmissionExpiresAt
	}
	return v
}

// NoticeIn is v's notice in the best language of prefs (settings.Profile.In).
func (v View) NoticeIn(prefs ...language.Tag) string {
	return settings.Profile{Notice: v.Notice, Translations: v.Translations}.In(prefs...).Notice
}
