package queue

import (
	"math"
	"regexp"
	"time"
)

// Limits on program settings and admissions.
const (
	MaxAdmissionRate         = 100_000.0 // people per second
	MaxAdmissionCount        = 1_000_000 // per manual admission
	DefaultAdmissionRate     = 10.0
	DefaultAdmissionWindow   = 10 * time.Minute
	MinAdmissionWindow       = time.Minute
	MaxAdmissionWindow       = 24 * time.Hour
	programIDMaxLen          = 64
	tokenIDLen               = 22 // 128 bits, base64url without padding
	waitingTokenRetention    = 48 * time.Hour
	endedTokenRetention      = 24 * time.Hour
	maxStoreOptimisticTrials = 8
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

// Program is one queue: its ticket counter and its admission state.
//
// Admission is a counter computed from time rather than advanced by a timer:
// from the instant Anchor the serving counter grows from Base at Rate people
// per second, never beyond Issued. DrainAt is the instant at which that
// growth reaches Issued (the queue is empty from then on); every ticket
// issued pushes it back by one ticket's worth of time, and a ticket issued
// after it re-anchors the counter at that instant, so that credit never piles
// up while the queue is empty. See the README, "Admission".
type Program struct {
	ID              string
	CreatedAt       time.Time
	Version         int64 // bumped by every settings or admission change
	Issued          int64 // tickets handed out, 1..Issued
	Rate            float64
	Paused          bool
	Base            int64     // serving counter at Anchor
	Anchor          time.Time // millisecond precision
	DrainAtMs       float64   // Unix ms at which the counter reaches Issued; meaningful when Advancing
	AdmissionWindow time.Duration
}

// Advancing reports whether the serving counter grows by itself.
func (p Program) Advancing() bool { return !p.Paused && p.Rate > 0 }

// MsPerTicket is the time, in milliseconds, between two automatic
// admissions; +Inf when the counter does not advance.
func (p Program) MsPerTicket() float64 {
	if !p.Advancing() {
		return math.Inf(1)
	}
	return 1000 / p.Rate
}

// Serving returns the serving counter at now: every ticket at or below it
// is admitted.
func (p Program) Serving(now time.Time) int64 {
	s := p.Base
	if p.Advancing() {
		if ms := now.Sub(p.Anchor).Milliseconds(); ms > 0 {
			// The epsilon absorbs float error at exact multiples (0.1/s × 10 s).
			s += int64(math.Floor(p.Rate*float64(ms)/1000 + 1e-9))
		}
	}
	return min(s, p.Issued)
}

// Drained reports whether, at now, the counter has caught up with every
// ticket issued and the next ticket would find idle credit.
func (p Program) Drained(now time.Time) bool {
	return p.Advancing() && p.DrainAtMs <= float64(now.UnixMilli())
}

// WithTicketIssued returns p after one more ticket is handed out at now.
// It is the rule every Store implements atomically: while the queue has
// people in it (or admission is stopped) the ticket only extends DrainAt;
// when the queue has drained, the counter is re-anchored at now on the
// current Issued, so the newcomer waits one ticket's time, not zero and not
// behind piled-up credit.
func (p Program) WithTicketIssued(now time.Time) Program {
	if p.Drained(now) {
		p.Base = p.Issued
		p.Anchor = now.Truncate(time.Millisecond)
		p.DrainAtMs = float64(p.Anchor.UnixMilli())
		p.Version++
	}
	p.Issued++
	if p.Advancing() {
		p.DrainAtMs += p.MsPerTicket()
	}
	return p
}

// Rebased returns p with its admission re-anchored at now: the counter keeps
// its current value plus admit (capped at Issued), then grows at rate unless
// paused. Every admin change goes through it so that no change ever moves
// the counter backwards.
func (p Program) Rebased(now time.Time, rate float64, paused bool, admit int64) Program {
	now = now.Truncate(time.Millisecond)
	p.Base = min(p.Serving(now)+admit, p.Issued)
	p.Anchor = now
	p.Rate = rate
	p.Paused = paused
	p.DrainAtMs = float64(now.UnixMilli())
	if p.Advancing() {
		p.DrainAtMs += float64(p.Issued-p.Base) * p.MsPerTicket()
	}
	p.Version++
	return p
}
