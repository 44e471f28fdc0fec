package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// Bounds of an admin change; see docs/design.md, "Segments and scheduled changes".
const (
	// adminDeadline bounds an admin request, waits for a pending change
	// and optimistic retries included.
	adminDeadline = 3 * time.Second
	// adminWriteReserve is the least time before the deadline in which an
	// admin request still starts a write (more when the store is slow).
	adminWriteReserve = 500 * time.Millisecond
	// maxWakeSpread spreads the admin requests that waited for the same
	// pending change.
	maxWakeSpread = 300 * time.Millisecond
	// maxAdminTrials bounds an admin request's optimistic retries.
	maxAdminTrials = 16
	// maxConflictBackoff bounds the random pause after a conflict.
	maxConflictBackoff = 20 * time.Millisecond
	// moveDrainAttempts bounds the tries of a failing MoveDrain;
	// moveDrainBackoff is the pause before the second, doubling after.
	moveDrainAttempts = 3
	moveDrainBackoff  = 50 * time.Millisecond
)

// AdminWriteBudget bounds how long an admin change may take to be stored;
// the change is scheduled that much later than the cache TTL.
const AdminWriteBudget = time.Second

// changeDelay is how long after an admin change it takes effect: nothing
// without a program cache, the cache TTL plus the write budget with one.
func (s *Service) changeDelay() time.Duration {
	if s.cache.ttl <= 0 {
		return 0
	}
	return s.cache.ttl + AdminWriteBudget
}

// changeProgram stores edit(program, now) as one admin change tagged with a
// fresh change id and recorded in the history as rec (its action and
// fields), retrying on conflicts and first waiting for a pending change to
// take effect, within adminDeadline. BUSY means the change was not made;
// STORE_UNAVAILABLE that it may have been. A missing program is created
// with create (action ActionCreate), or is PROGRAM_NOT_FOUND if create is nil.
func (s *Service) changeProgram(ctx context.Context, op, id string, rec Change, create func(now time.Time) (Program, error), edit func(p Program, now time.Time) (Program, error)) (_ Program, now time.Time, created bool, _ error) {
	deadline := s.clock.Now().Add(adminDeadline)
	rec.Actor = ActorOf(ctx)
	ctx, cancel := context.WithTimeout(ctx, adminDeadline) // the same bound for the store's calls
	defer cancel()
	// room is the time a write needs before the deadline: a reserve, more
	// if the store has answered slowly so far.
	var slowest time.Duration
	room := func() time.Duration { return adminWriteReserve + 2*slowest }
	// timeLeft reports whether a write may still start, on the service's
	// clock and in the request's real time.
	timeLeft := func() bool {
		d, _ := ctx.Deadline()
		return !s.clock.Now().Add(room()).After(deadline) && time.Until(d) >= room()
	}
	change := NewTokenID()
	rec.ID = change
	action := rec.Action
	for range maxAdminTrials {
		start := time.Now()
		p, err := s.store.GetProgram(ctx, id)
		slowest = max(slowest, time.Since(start))
		now = s.clock.Now()
		switch {
		case err == nil || errors.Is(err, ErrNotFound) && create != nil:
		case errors.Is(err, ErrNotFound):
			return Program{}, now, false, errProgramNotFound()
		case !timeLeft(): // the read ran into the deadline: nothing written
			return Program{}, now, false, errBusy(time.Second)
		default:
			return Program{}, now, false, storeError(op, err)
		}
		if p.Pending(now) {
			// A change is scheduled only once the previous one has taken
			// effect (every instance must know it before it acts).
			if err := s.awaitPending(ctx, p, now, deadline.Add(-room())); err != nil {
				return Program{}, now, false, err
			}
			continue
		}
		if !timeLeft() {
			return Program{}, now, false, errBusy(time.Second)
		}
		start = time.Now()
		if err != nil { // not found: create it
			if p, err = create(now); err != nil {
				return Program{}, now, false, err
			}
			rec.At, rec.Action = changeAt(Program{}, now), ActionCreate
			p = p.withChange(change, rec.At)
			if err = s.writeCreation(ctx, p, &rec); err == nil {
				s.endChange(ctx, id, rec)
				s.cache.put(p, now)
				return p, now, true, nil
			}
		} else {
			read := p
			if p, err = edit(p, now); err != nil {
				return Program{}, now, false, err
			}
			rec.At, rec.Action = changeAt(read, now), action
			p = p.withChange(change, rec.At)
			// A change that makes the shuffle depends on nobody having
			// entered: it keeps the condition on the tickets issued.
			scheduled := p.Pending(now) && p.Shuffle == read.Shuffle
			if err = s.beginEdit(ctx, read, p, &rec); err != nil {
				return Program{}, now, false, storeError(op, err)
			}
			if err = s.updateProgram(ctx, p, change, scheduled); err == nil {
				s.endChange(ctx, id, rec)
				s.cache.put(p, now)
				return p, now, false, nil
			}
		}
		slowest = max(slowest, time.Since(start)/2) // a write and a read
		if e := (*Error)(nil); errors.As(err, &e) {
			return Program{}, now, false, err
		}
		if !errors.Is(err, ErrConflict) {
			return Program{}, now, false, storeError(op, err)
		}
		if err := s.clock.Sleep(ctx, s.jitter(maxConflictBackoff)); err != nil {
			return Program{}, now, false, errBusy(time.Second)
		}
	}
	return Program{}, now, false, errBusy(time.Second)
}

// awaitPending sleeps until p's pending change has taken effect, plus a
// random spread so that those who waited for it wake apart (one makes the
// next change, the others see it); BUSY if that is past latest.
func (s *Service) awaitPending(ctx context.Context, p Program, now, latest time.Time) error {
	effective := FromUnixMs(p.Next.AnchorMs)
	if effective.After(latest) {
		return errBusy(effective.Sub(now))
	}
	wake := effective.Add(s.jitter(maxWakeSpread))
	if wake.After(latest) {
		wake = effective
	}
	if err := s.clock.Sleep(ctx, wake.Sub(now)); err != nil {
		return errBusy(time.Second)
	}
	return nil
}

// beginEdit lists the program p (listing the programs made before the
// list) and begins its change rec over read.
func (s *Service) beginEdit(ctx context.Context, read, p Program, rec *Change) error {
	return s.beginChangeListed(ctx, read, p, rec, true)
}

// writeCreation lists and records the new program p made by admin change
// rec, then stores it. A conflict is another creation, or this one's own
// write retried after its answer was lost: then the stored program records
// the change.
func (s *Service) writeCreation(ctx context.Context, p Program, rec *Change) error {
	if err := s.beginChangeListed(ctx, Program{}, p, rec, true); err != nil {
		return err
	}
	err := s.store.CreateProgram(ctx, p)
	if errors.Is(err, ErrDeleted) {
		return Errorf(KindConflict, api.CodeProgramDeleted, "A program with this id was deleted less than %d days ago; choose another id.", int(DeletedRetention.Hours()/24))
	}
	return s.checkOwnWrite(ctx, p, rec.ID, err)
}

// updateProgram stores the admin change p within the write budget (the
// change is scheduled for a write that lands within it). A scheduled
// change goes to a ScheduleStore on the condition of the version alone, so
// that a flood of tickets, each moving Issued, cannot starve it.
func (s *Service) updateProgram(ctx context.Context, p Program, change string, scheduled bool) error {
	wctx, cancel := context.WithTimeout(ctx, AdminWriteBudget)
	defer cancel()
	ss, ok := s.store.(ScheduleStore)
	if !ok || !scheduled {
		return s.checkOwnWrite(ctx, p, change, s.store.UpdateProgram(wctx, p, p.Issued))
	}
	issued, err := ss.UpdateScheduled(wctx, p)
	if err != nil {
		// Not applied, or applied and superseded since (the later change
		// set the drain instant afresh).
		return s.checkOwnWrite(ctx, p, change, err)
	}
	if issued == p.Issued {
		return nil
	}
	// The tickets issued meanwhile counted the old time per ticket. The
	// drain instant matters once the change takes effect, a cache TTL
	// plus the write budget from now; till then it is moved within the
	// admin deadline.
	return s.moveDrain(ctx, ss, p, issued)
}

// moveDrain moves the drain instant of the stored change p for issued
// tickets, trying again after a failure (MoveDrain is idempotent) while
// ctx allows. If every try fails, it logs the instant left early and
// answers a store error, which no client repeats for an admission.
func (s *Service) moveDrain(ctx context.Context, ss ScheduleStore, p Program, issued int64) error {
	var err error
	for attempt := range moveDrainAttempts {
		if attempt > 0 && s.clock.Sleep(ctx, moveDrainBackoff<<(attempt-1)) != nil {
			break
		}
		if err = ss.MoveDrain(ctx, p, issued); err == nil {
			return nil
		}
	}
	s.logger().LogAttrs(ctx, slog.LevelError, "admin change stored, its drain instant not moved",
		slog.String("programId", p.ID), slog.Int64("version", p.Version), slog.Int64("ticketsEarly", issued-p.Issued), slog.String("error", err.Error()))
	return fmt.Errorf("the change is stored, its drain instant not moved: %w", err)
}

// checkOwnWrite sorts out a write's conflict: it may be the store's retry
// of this very write, applied by an earlier attempt whose answer was lost.
// If the stored program records change, the write succeeded (nil); if it
// cannot tell, the error is no longer a conflict, so that the change is
// never applied twice.
func (s *Service) checkOwnWrite(ctx context.Context, p Program, change string, err error) error {
	if !errors.Is(err, ErrConflict) {
		return err
	}
	stored, rerr := s.store.GetProgram(ctx, p.ID)
	if rerr != nil {
		return fmt.Errorf("a conflict, and reading whether the write was applied failed: %w", rerr)
	}
	switch applied, known := stored.changeApplied(change, p.Version); {
	case applied:
		return nil
	case !known:
		// So many changes since that ours, if applied, has left the list:
		// neither retry (it could apply twice) nor call it undone.
		return fmt.Errorf("a conflict, and %d later changes hide whether the write was applied", maxRecentChanges)
	}
	return err
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

// errBusy is the answer to an admin change that could not be made within
// adminDeadline; retry after retry.
func errBusy(retry time.Duration) error {
	e := Errorf(KindUnavailable, api.CodeBusy, "The program is being changed concurrently; retry.")
	e.RetryAfter = max(retry, time.Millisecond)
	return e
}
