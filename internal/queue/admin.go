package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/challenge"
	"github.com/example/waitingroom/internal/polling"
)

// Options are a program's admin-set values beside its admission pace
// (the rate and pause, which live in its segments). Their dynamodbav tags
// name their attributes in the DynamoDB program item; "-" marks one stored
// in another unit.
type Options struct {
	AdmissionWindow time.Duration `dynamodbav:"-"`
	// Policy names the program's polling policy; "" is the service's
	// default.
	Policy string `dynamodbav:"policy,omitempty"`
	// Closed programs take no new entries (sold out, ended); people
	// already in the queue keep their place and are admitted as before.
	Closed bool `dynamodbav:"closed"`
	// OpensAt is the program's opening (zero: none): before it entries are
	// taken and nobody is admitted, at it admission starts at the rate.
	OpensAt time.Time `dynamodbav:"-"`
	// ClosesAt is the program's scheduled close (zero: none): from it on
	// entries are refused, as when Closed.
	ClosesAt time.Time `dynamodbav:"-"`
	// Shuffle places everyone who entered before OpensAt in a random
	// order at the opening (see PlaceOf and Place).
	Shuffle bool `dynamodbav:"shuffle,omitempty"`
	// MaxWaiting is the longest the line may be (0: no limit): an enter
	// while Waiting is at it gets QUEUE_FULL (Program.Full).
	MaxWaiting int64 `dynamodbav:"maxWaiting,omitempty"`
	// MaxActiveUsers caps how many people may be admitted at once (0: no
	// cap): admitted, and neither ended, expired nor a no-show.
	MaxActiveUsers int64 `dynamodbav:"maxActiveUsers,omitempty"`
	// NoShowSeconds is how long an admitted person has to fetch their pass
	// before they are a no-show (0: no no-show handling; with a cap, the
	// admission window).
	NoShowSeconds int64 `dynamodbav:"noShowSeconds,omitempty"`
	// ChallengeBits is the proof of work an enter must carry, in leading
	// zero bits of its hash (0: none; see package challenge).
	ChallengeBits int64 `dynamodbav:"challengeBits,omitempty"`
	// Profile is what the program shows the people who wait.
	Profile Profile `dynamodbav:"-"`
}

// Counters is the admin view of a program.
type Counters struct {
	ProgramID string
	Issued    int64 // tickets handed out
	Admitted  int64 // serving counter: tickets admitted, including ones whose holder left
	Waiting   int64 // Issued − Admitted
	Rate      float64
	Paused    bool
	CreatedAt time.Time
	Options
	// EffectiveAt is when the last change (Rate, Paused, an admission)
	// takes effect, if it has not yet; zero otherwise.
	EffectiveAt time.Time
	// ShuffleCommitment is the message the shuffle key signs at the
	// opening (ShuffleMessage); Prequeue (its size) once the pre-queue is
	// fixed (PrequeueFixed). The seed is in the queue's answers only: the
	// admin side cannot sign.
	ShuffleCommitment string
	Prequeue          int64
	PrequeueFixed     bool
	// Followed is set when the folds follow the program's admissions (a
	// cap or no-show handling): then Active (admitted and not done),
	// Ended (early) and NoShows count them, as of the last fold.
	Followed               bool
	Active, Ended, NoShows int64
	// BypassHeld is how many slots of the cap bypass passes hold.
	BypassHeld int64
}

// invalidSetting is the INVALID_SETTINGS error of the setting named name
// (its JSON name in api.ProgramSettings) and its problem.
func invalidSetting(name, problem string) *Error {
	return Errorf(KindInvalid, api.CodeInvalidSettings, "%s %s.", name, problem)
}

// changeOptions applies the admin's change set to o and to pace's Rate and
// Paused, each value present converted from its wire unit and checked by
// its setting's rule; the first problem is the error. The rules ignore the
// values in o, so a call on zero values validates set alone.
func changeOptions(set api.ProgramSettings, o *Options, pace *Segment, policies map[string]polling.Policy) error {
	return cmp.Or(
		change(&o.OpensAt, set.OpensAt, "opensAt", opening),
		change(&o.ClosesAt, set.ClosesAt, "closesAt", opening),
		changeProfile(&o.Profile, set),
		change(&o.Policy, set.PollingPolicy, "pollingPolicy", policyIn(policies)),
		change(&pace.Rate, set.AdmissionRatePerSecond, "admissionRatePerSecond", admissionRate),
		change(&o.AdmissionWindow, set.AdmissionWindowSeconds, "admissionWindowSeconds", admissionWindow),
		change(&pace.Paused, set.Paused, "paused", anyValue[bool]),
		change(&o.Closed, set.Closed, "closed", anyValue[bool]),
		change(&o.Shuffle, set.ShuffleAtOpen, "shuffleAtOpen", anyValue[bool]),
		change(&o.MaxWaiting, set.MaxWaiting, "maxWaiting", maxWaiting),
		change(&o.MaxActiveUsers, set.MaxActiveUsers, "maxActiveUsers", maxActiveUsers),
		change(&o.NoShowSeconds, set.NoShowSeconds, "noShowSeconds", noShowSeconds),
		change(&o.ChallengeBits, set.ChallengeBits, "challengeBits", challengeBits),
	)
}

// change stores rule(*v) in *dst when v is set, or answers the rule's
// problem as the error of the setting called name.
func change[T, U any](dst *U, v *T, name string, rule func(T) (U, string)) error {
	if v == nil {
		return nil
	}
	u, problem := rule(*v)
	if problem != "" {
		return invalidSetting(name, problem)
	}
	*dst = u
	return nil
}

// The rules of changeOptions: each returns the value to store, or why v
// is not valid.

func anyValue[T any](v T) (T, string) { return v, "" }

func policyIn(policies map[string]polling.Policy) func(string) (string, string) {
	return func(name string) (string, string) {
		if _, ok := policies[name]; !ok && name != "" {
			return "", fmt.Sprintf("must be one of %q, or \"\" for the default", slices.Sorted(maps.Keys(policies)))
		}
		return name, ""
	}
}

func admissionRate(perSecond api.Rate) (Rate, string) {
	f := float64(perSecond)
	if math.IsNaN(f) || f < 0 || f > MaxAdmissionRate || f > 0 && f < MinAdmissionRate {
		return 0, fmt.Sprintf("must be 0 (manual admission only) or between %g and %g", MinAdmissionRate, MaxAdmissionRate)
	}
	r, ok := NewRate(f)
	if !ok {
		return 0, fmt.Sprintf("must be a whole number of thousandths (%g)", MinAdmissionRate)
	}
	return r, ""
}

// MaxMaxWaiting bounds maxWaiting.
const MaxMaxWaiting = 1_000_000_000

func maxWaiting(n int64) (int64, string) {
	if n < 0 || n > MaxMaxWaiting {
		return 0, fmt.Sprintf("must be 0 (no limit) or at most %d", MaxMaxWaiting)
	}
	return n, ""
}

// MaxMaxActiveUsers bounds maxActiveUsers.
const MaxMaxActiveUsers = 100_000_000

func maxActiveUsers(n int64) (int64, string) {
	if n < 0 || n > MaxMaxActiveUsers {
		return 0, fmt.Sprintf("must be 0 (no cap) or at most %d", MaxMaxActiveUsers)
	}
	return n, ""
}

// Bounds of noShowSeconds, when set.
const (
	MinNoShowSeconds = 5
	MaxNoShowSeconds = 3600
)

func noShowSeconds(n int64) (int64, string) {
	if n != 0 && (n < MinNoShowSeconds || n > MaxNoShowSeconds) {
		return 0, fmt.Sprintf("must be 0 (none) or %d to %d", MinNoShowSeconds, MaxNoShowSeconds)
	}
	return n, ""
}

func challengeBits(n int64) (int64, string) {
	if n < 0 || n > challenge.MaxBits {
		return 0, fmt.Sprintf("must be 0 (no proof of work) to %d", challenge.MaxBits)
	}
	return n, ""
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

// opening reads an opensAt, kept to the millisecond in UTC: "" (no
// opening) or an RFC 3339 time in the range of an opening.
func opening(v string) (time.Time, string) {
	t, ok := parseOpening(v)
	if !ok {
		return t, openingProblem
	}
	return t.UTC().Truncate(time.Millisecond), ""
}

// parseOpening reads an opensAt as given: the zero time for "", else an
// RFC 3339 time, which must be in the range of an opening.
func parseOpening(v string) (time.Time, bool) {
	if v == "" {
		return time.Time{}, true
	}
	t, err := time.Parse(time.RFC3339, v)
	return t, err == nil && validOpening(t)
}

// The range of an opening: from the year 2000, so that no time given can be
// taken for the zero time that clears it, to the last that RFC 3339's four
// digit year can write in UTC. A change must also be ahead of the change
// delay (applyOpening).
var (
	MinOpensAt = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxOpensAt = time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC)
)

// validOpening reports whether t is in the range of an opening.
func validOpening(t time.Time) bool { return !t.Before(MinOpensAt) && !t.After(MaxOpensAt) }

const openingProblem = `must be an RFC 3339 time from 2000-01-01T00:00:00Z to 9999-12-31T23:59:59Z, e.g. 2026-12-01T10:00:00+09:00, or "" to clear it`

// PutProgram creates programID with set (defaults for what is absent) or
// applies set to it; created tells which. A rate or pause change takes
// effect one program-cache TTL plus the admin write budget after it is made
// (at once without a cache), without moving the serving counter. It answers
// within adminDeadline: applied, or BUSY.
func (s *Service) PutProgram(ctx context.Context, programID string, set api.ProgramSettings) (c Counters, created bool, err error) {
	if !ValidProgramID(programID) {
		return Counters{}, false, errInvalidProgramID()
	}
	if err := changeOptions(set, &Options{}, &Segment{}, s.policies); err != nil {
		return Counters{}, false, err
	}
	if set.ShuffleAtOpen != nil && *set.ShuffleAtOpen {
		if _, ok := s.store.(PrequeueStore); !ok {
			return Counters{}, false, Errorf(KindInvalid, api.CodeInvalidSettings, "This deployment's store cannot shuffle an opening.")
		}
	}
	create := func(now time.Time) (Program, error) {
		p := Program{ID: programID, CreatedAt: FromUnixMs(UnixMs(now)), Current: Segment{Rate: DefaultAdmissionRate}, Options: Options{AdmissionWindow: DefaultAdmissionWindow}}
		p, err := p.apply(set, now, 0, s.policies)
		p.Version = 1
		return p, err
	}
	edit := func(p Program, now time.Time) (Program, error) { return p.apply(set, now, s.changeDelay(), s.policies) }
	p, now, created, err := s.changeProgram(ctx, "put program", programID, Change{Action: ActionUpdate, Fields: fieldsOf(set)}, create, edit)
	if err != nil {
		return Counters{}, false, err
	}
	return p.counters(now), created, nil
}

// Program returns programID's counters, read fresh.
func (s *Service) Program(ctx context.Context, programID string) (Counters, error) {
	if !ValidProgramID(programID) {
		return Counters{}, errInvalidProgramID()
	}
	p, err := s.store.GetProgram(ctx, programID)
	if errors.Is(err, ErrNotFound) {
		return Counters{}, errProgramNotFound()
	} else if err != nil {
		return Counters{}, storeError("get program", err)
	}
	return p.counters(s.clock.Now()), nil
}

// Admit lets n more people in, on top of the automatic admission and never
// beyond the tickets issued, taking effect as PutProgram's changes do. An
// admission answered without error is counted exactly once.
func (s *Service) Admit(ctx context.Context, programID string, n int64) (Counters, error) {
	if !ValidProgramID(programID) {
		return Counters{}, errInvalidProgramID()
	}
	if n < 1 || n > MaxAdmissionCount {
		return Counters{}, Errorf(KindInvalid, api.CodeInvalidCount, "count must be a whole number between 1 and %d.", MaxAdmissionCount)
	}
	edit := func(p Program, now time.Time) (Program, error) {
		if !p.Opened(now.Add(s.changeDelay())) {
			return p, Errorf(KindConflict, api.CodeNotOpen, "The program opens at %s; admissions start then.", p.OpensAt.UTC().Format(time.RFC3339))
		}
		settled := p.Settled()
		return p.withManualAdmission(n, now).Rebased(now, settled.Rate, settled.Paused, n, s.changeDelay()), nil
	}
	p, now, _, err := s.changeProgram(ctx, "admit", programID, Change{Action: ActionAdmit, Fields: fieldsOf(map[string]int64{"count": n})}, nil, edit)
	if err != nil {
		return Counters{}, err
	}
	return p.counters(now), nil
}

// apply returns p with set applied at now, taking effect delay later.
func (p Program) apply(set api.ProgramSettings, now time.Time, delay time.Duration, policies map[string]polling.Policy) (Program, error) {
	if err := cmp.Or(p.applyOpening(set, now, delay), p.applyClosing(set, now, delay)); err != nil {
		return p, err
	}
	if err := p.checkCapacityChange(set, now, delay); err != nil {
		return p, err
	}
	pace := p.Settled()
	before := p.ceilingCap(UnixMs(now.Add(delay)))
	if err := changeOptions(set, &p.Options, &pace, policies); err != nil {
		return p, err
	}
	if before > 0 && p.MaxActiveUsers > before && delay > 0 {
		// A raised cap takes effect with the change, as a rate would.
		p.CapFrom, p.CapRaiseAtMs = before, UnixMs(now.Add(delay))
	}
	if set.ShuffleAtOpen != nil && p.Shuffle && p.ShuffleNonce == "" {
		p.ShuffleNonce = NewShuffleNonce()
	}
	return p.Rebased(now, pace.Rate, pace.Paused, 0, delay), nil
}

// checkCapacityChange refuses, once anyone has been admitted, a cap or
// no-show handling that would follow people admitted before it (their
// sightings were never recorded, and a new ceiling would take the serving
// counter back), and a cap lowered or removed; raising one is allowed.
func (p Program) checkCapacityChange(set api.ProgramSettings, now time.Time, delay time.Duration) error {
	if p.Version == 0 || p.counterAt(UnixMs(now.Add(delay))) == 0 {
		return nil // being created, or nobody admitted before the change takes effect everywhere
	}
	started := func(what string) error {
		return Errorf(KindConflict, api.CodeInvalidSettings, "%s once admission has started: the people admitted before it were not followed.", what)
	}
	switch n := set.MaxActiveUsers; {
	case n == nil:
	case p.MaxActiveUsers == 0 && *n > 0:
		return started("maxActiveUsers cannot be set")
	case p.MaxActiveUsers > 0 && *n < p.MaxActiveUsers:
		return Errorf(KindConflict, api.CodeInvalidSettings, "maxActiveUsers can only be raised once admission has started (it is %d).", p.MaxActiveUsers)
	}
	if n := set.NoShowSeconds; n != nil && *n > 0 && !p.capacityManaged() {
		return started("noShowSeconds cannot be set")
	}
	return nil
}

// applyOpening checks set's opening and shuffle against p at now, for a
// change taking effect delay later: the opening moves only while the
// current and the new one are both more than delay ahead, and the shuffle
// is armed only before anyone entered and with an opening ahead.
func (p Program) applyOpening(set api.ProgramSettings, now time.Time, delay time.Duration) error {
	effective := now.Add(delay)
	opensAt, shuffle := p.OpensAt, p.Shuffle
	if set.OpensAt != nil {
		opensAt, _ = parseOpening(*set.OpensAt) // checked by PutProgram
	}
	if set.OpensAt != nil && !opensAt.Equal(p.OpensAt) {
		switch {
		case !p.OpensAt.IsZero() && !p.OpensAt.After(effective):
			return Errorf(KindConflict, api.CodeNotOpen, "The program opens at %s (or has opened): its opening can no longer change.", p.OpensAt.UTC().Format(time.RFC3339))
		case !opensAt.IsZero() && !opensAt.After(effective):
			return Errorf(KindInvalid, api.CodeInvalidSettings, "opensAt must be more than %v from now.", delay)
		}
	}
	if set.ShuffleAtOpen != nil {
		if p.PrequeueFixed && *set.ShuffleAtOpen != p.Shuffle {
			return Errorf(KindConflict, api.CodeNotOpen, "The pre-queue was shuffled at the opening: shuffleAtOpen can no longer change.")
		}
		if *set.ShuffleAtOpen && !p.Shuffle && p.Issued > 0 {
			return Errorf(KindConflict, api.CodeInvalidSettings, "shuffleAtOpen must be set before anyone enters: its commitment is published before the pre-queue starts.")
		}
		shuffle = *set.ShuffleAtOpen
	}
	if shuffle && !p.PrequeueFixed && (opensAt.IsZero() || !opensAt.After(effective)) {
		return Errorf(KindInvalid, api.CodeInvalidSettings, "shuffleAtOpen needs an opensAt more than %v from now.", delay)
	}
	return nil
}

// counters is the admin view of p at now.
func (p Program) counters(now time.Time) Counters {
	admitted := p.Serving(now)
	settled := p.Settled()
	c := Counters{
		ProgramID:     p.ID,
		Issued:        p.Issued,
		Admitted:      admitted,
		Waiting:       p.Issued - admitted,
		Rate:          settled.Rate.PerSecond(),
		Paused:        settled.Paused,
		CreatedAt:     p.CreatedAt,
		Options:       p.Options,
		PrequeueFixed: p.PrequeueFixed,
	}
	if p.Pending(now) {
		c.EffectiveAt = FromUnixMs(p.Next.AnchorMs)
	}
	if p.Shuffle {
		c.ShuffleCommitment = ShuffleMessage(p.ID, p.ShuffleNonce)
	}
	if p.PrequeueFixed {
		c.Prequeue = p.Prequeue
	}
	if p.capacityManaged() {
		k := p.Capacity
		c.Followed = true
		c.Ended, c.NoShows = k.Ended, k.NoShows
		c.Active = max(admitted-k.Ended-k.NoShows-k.Expired, 0)
		c.BypassHeld = p.reservedAt(UnixMs(now))
	}
	return c
}
