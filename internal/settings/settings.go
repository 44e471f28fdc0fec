// Package settings holds what an admin sets on a program beside its
// admission pace (Options), what it shows the people who wait (Profile,
// in every language: Translations), and one rule per setting, which Apply
// checks a change against (docs/design.md, "Program settings: one field,
// one rule"). It knows nothing of a program's state: the rules that depend
// on it (an opening that can no longer move, a cap set once admission has
// started) are package queue's.
//
// Invariants:
//   - Each field of api.ProgramSettings has exactly one rule, which turns
//     its wire value into the stored one (seconds into a Duration, a rate
//     into thousandths) or refuses it with an *Error naming the field.
//   - A rule reads the value alone, never the stored Options, so a call
//     on zero values validates a change before anything is read.
//   - The texts are plain text: valid UTF-8 within their length, without
//     control or invisible formatting characters that could make them read
//     otherwise than they are; a target URL is absolute https (http only
//     for a loopback host).
//   - A stored Translations map is never modified, only replaced: a
//     cached program may share it.
package settings

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/challenge"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/polling"
)

// Bounds of an admission window.
const (
	MinAdmissionWindow = time.Minute
	MaxAdmissionWindow = 24 * time.Hour
)

// Options are a program's admin-set values beside its admission pace
// (dynamodbav "-": stored in another unit).
type Options struct {
	AdmissionWindow time.Duration `dynamodbav:"-"`
	// Policy names the program's polling policy ("": the default).
	Policy string `dynamodbav:"policy,omitempty"`
	// Closed programs take no new entries; those in line are still admitted.
	Closed bool `dynamodbav:"closed"`
	// OpensAt is the program's opening (zero: none).
	OpensAt time.Time `dynamodbav:"-"`
	// ClosesAt is the program's scheduled close (zero: none).
	ClosesAt time.Time `dynamodbav:"-"`
	// Shuffle draws the order of those who entered before OpensAt.
	Shuffle bool `dynamodbav:"shuffle,omitempty"`
	// MaxWaiting is the longest the line may be (0: no limit).
	MaxWaiting int64 `dynamodbav:"maxWaiting,omitempty"`
	// MaxActiveUsers caps how many people may be admitted at once (0: none).
	MaxActiveUsers int64 `dynamodbav:"maxActiveUsers,omitempty"`
	// NoShowSeconds is how long an admitted person has to fetch their pass.
	NoShowSeconds int64 `dynamodbav:"noShowSeconds,omitempty"`
	// ChallengeBits is the proof of work an enter must carry (package challenge).
	ChallengeBits int64 `dynamodbav:"challengeBits,omitempty"`
	// PushLeadSeconds is how long before their turn a subscribed person is
	// told to get ready (0: DefaultPushLead).
	PushLeadSeconds int64 `dynamodbav:"pushLeadSeconds,omitempty"`
	// Enqueue is the site's enqueue tokens: whose place an enter takes.
	Enqueue Enqueue `dynamodbav:"-"`
	// Edge is the program at the edge gate.
	Edge Edge `dynamodbav:"-"`
	// Profile is what the program shows the people who wait.
	Profile Profile `dynamodbav:"-"`
}

// Enqueue names the site's enqueue tokens (docs/design.md, "Accounts"):
// its JWKS and issuer, and whether every enter must carry one.
type Enqueue struct {
	JWKSURL  string `dynamodbav:"jwksUrl,omitempty"`
	Issuer   string `dynamodbav:"issuer,omitempty"`
	Required bool   `dynamodbav:"required,omitempty"`
}

// Accepts reports whether enqueue tokens can be checked: keys and issuer are set.
func (e Enqueue) Accepts() bool { return e.JWKSURL != "" && e.Issuer != "" }

// MaxIssuerLen bounds an enqueue issuer.
const MaxIssuerLen = 256

// enqueueIssuer accepts "" or 1 to MaxIssuerLen printable ASCII characters.
func enqueueIssuer(v string) (string, string) {
	if len(v) > MaxIssuerLen {
		return "", fmt.Sprintf("must be at most %d characters (got %d)", MaxIssuerLen, len(v))
	}
	for _, r := range v {
		if r <= ' ' || r > '~' {
			return "", "must be printable ASCII without spaces"
		}
	}
	return v, ""
}

// Error is a value a setting's rule refuses (INVALID_SETTINGS).
type Error struct {
	Setting string // its JSON name, e.g. "translations.ko.notice"
	Problem string // the end of a sentence, e.g. "must be at most 80 characters (got 81)"
}

func (e *Error) Error() string { return e.Setting + " " + e.Problem + "." }

// Apply applies the admin's change set to o and to seg's Rate and Paused,
// each value checked by its rule; the first problem is the error.
func Apply(set api.ProgramSettings, o *Options, seg *pace.Segment, policies map[string]polling.Policy) error {
	return cmp.Or(
		change(&o.OpensAt, set.OpensAt, "opensAt", opening),
		change(&o.ClosesAt, set.ClosesAt, "closesAt", opening),
		changeProfile(&o.Profile, set),
		change(&o.Policy, set.PollingPolicy, "pollingPolicy", policyIn(policies)),
		change(&seg.Rate, set.AdmissionRatePerSecond, "admissionRatePerSecond", admissionRate),
		change(&o.AdmissionWindow, set.AdmissionWindowSeconds, "admissionWindowSeconds", admissionWindow),
		change(&seg.Paused, set.Paused, "paused", anyValue[bool]),
		change(&o.Closed, set.Closed, "closed", anyValue[bool]),
		change(&o.Shuffle, set.ShuffleAtOpen, "shuffleAtOpen", anyValue[bool]),
		change(&o.MaxWaiting, set.MaxWaiting, "maxWaiting", maxWaiting),
		change(&o.MaxActiveUsers, set.MaxActiveUsers, "maxActiveUsers", maxActiveUsers),
		change(&o.NoShowSeconds, set.NoShowSeconds, "noShowSeconds", noShowSeconds),
		change(&o.ChallengeBits, set.ChallengeBits, "challengeBits", challengeBits),
		change(&o.PushLeadSeconds, set.PushLeadSeconds, "pushLeadSeconds", pushLead),
		change(&o.Enqueue.JWKSURL, set.EnqueueJWKSURL, "enqueueJwksUrl", profileText(checkTargetURL)),
		change(&o.Enqueue.Issuer, set.EnqueueIssuer, "enqueueIssuer", enqueueIssuer),
		change(&o.Enqueue.Required, set.RequireEnqueueToken, "requireEnqueueToken", anyValue[bool]),
		change(&o.Edge.Mode, set.EdgeMode, "edgeMode", edgeMode),
		change(&o.Edge.Paths, set.EdgePaths, "edgePaths", edgePaths),
		change(&o.Edge.SessionSeconds, set.EdgeSessionSeconds, "edgeSessionSeconds", edgeSession),
		change(&o.Edge.FailOpenUntil, set.FailOpenUntil, "failOpenUntil", failOpenUntil),
	)
}

// change stores rule(*v) in *dst when v is set, or answers its problem.
func change[T, U any](dst *U, v *T, name string, rule func(T) (U, string)) error {
	if v == nil {
		return nil
	}
	u, problem := rule(*v)
	if problem != "" {
		return &Error{Setting: name, Problem: problem}
	}
	*dst = u
	return nil
}

// The rules of Apply: each returns the value to store, or why v is not
// valid.
func anyValue[T any](v T) (T, string) { return v, "" }

func policyIn(policies map[string]polling.Policy) func(string) (string, string) {
	return func(name string) (string, string) {
		if _, ok := policies[name]; !ok && name != "" {
			return "", fmt.Sprintf("must be one of %q, or \"\" for the default", slices.Sorted(maps.Keys(policies)))
		}
		return name, ""
	}
}

func admissionRate(perSecond api.Rate) (pace.Rate, string) {
	f := float64(perSecond)
	if math.IsNaN(f) || f < 0 || f > pace.MaxAdmissionRate || f > 0 && f < pace.MinAdmissionRate {
		return 0, fmt.Sprintf("must be 0 (manual admission only) or between %g and %g", pace.MinAdmissionRate, pace.MaxAdmissionRate)
	}
	r, ok := pace.NewRate(f)
	if !ok {
		return 0, fmt.Sprintf("must be a whole number of thousandths (%g)", pace.MinAdmissionRate)
	}
	return r, ""
}

// Bounds of the counts an admin sets.
const (
	MaxMaxWaiting     = 1_000_000_000
	MaxMaxActiveUsers = 100_000_000
	MinNoShowSeconds  = 5
	MaxNoShowSeconds  = 3600
	MinPushLead       = 30
	MaxPushLead       = 1800
	DefaultPushLead   = 2 * time.Minute
)

// PushLead is how long before their turn a subscribed person hears "get ready".
func (o Options) PushLead() time.Duration {
	if o.PushLeadSeconds > 0 {
		return time.Duration(o.PushLeadSeconds) * time.Second
	}
	return DefaultPushLead
}

// The rules of the counts: 0 (off) or a whole number within their bounds.
var (
	maxWaiting     = bounded(0, MaxMaxWaiting, "must be 0 (no limit) or at most %[2]d")
	maxActiveUsers = bounded(0, MaxMaxActiveUsers, "must be 0 (no cap) or at most %[2]d")
	noShowSeconds  = bounded(MinNoShowSeconds, MaxNoShowSeconds, "must be 0 (none) or %d to %d")
	challengeBits  = bounded(0, challenge.MaxBits, "must be 0 (no proof of work) to %[2]d")
	pushLead       = bounded(MinPushLead, MaxPushLead, "must be 0 (the default, 120) or %d to %d")
)

// bounded is the rule of a count that is 0 or within lo..hi.
func bounded(lo, hi int64, problem string) func(int64) (int64, string) {
	return func(n int64) (int64, string) {
		if n != 0 && (n < lo || n > hi) {
			return 0, fmt.Sprintf(problem, lo, hi)
		}
		return n, ""
	}
}

// admissionWindow reads a window in whole seconds.
func admissionWindow(seconds int64) (time.Duration, string) {
	if seconds < 0 || seconds > math.MaxInt64/int64(time.Second) {
		return 0, "is out of range"
	}
	w := time.Duration(seconds) * time.Second
	if w < MinAdmissionWindow || w > MaxAdmissionWindow {
		return 0, fmt.Sprintf("must be between %d and %d", int(MinAdmissionWindow.Seconds()), int(MaxAdmissionWindow.Seconds()))
	}
	return w, ""
}

// opening reads an opensAt, kept to the millisecond in UTC.
func opening(v string) (time.Time, string) {
	t, ok := ParseOpening(v)
	if !ok {
		return t, openingProblem
	}
	return t.UTC().Truncate(time.Millisecond), ""
}

// ParseOpening reads an opensAt: the zero time for "", else an RFC 3339
// time in the range of an opening.
func ParseOpening(v string) (time.Time, bool) {
	if v == "" {
		return time.Time{}, true
	}
	t, err := time.Parse(time.RFC3339, v)
	return t, err == nil && !t.Before(MinOpensAt) && !t.After(MaxOpensAt)
}

// The range of an opening: from 2000 (never the zero time) to RFC 3339's last.
var (
	MinOpensAt = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxOpensAt = time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC)
)

const openingProblem = `must be an RFC 3339 time from 2000-01-01T00:00:00Z to 9999-12-31T23:59:59Z, e.g. 2026-12-01T10:00:00+09:00, or "" to clear it`
