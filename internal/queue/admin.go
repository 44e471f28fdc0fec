package queue

import (
	"context"
	"errors"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/settings"
	"github.com/example/waitingroom/internal/shuffle"
)

// invalidSetting is the INVALID_SETTINGS error of the setting named name
// (its JSON name in api.ProgramSettings) and its problem.
func invalidSetting(name, problem string) *Error {
	return Errorf(KindInvalid, api.CodeInvalidSettings, "%s %s.", name, problem)
}

// applySettings is settings.Apply, a value its rule refuses
// INVALID_SETTINGS.
func applySettings(set api.ProgramSettings, o *settings.Options, seg *pace.Segment, policies map[string]polling.Policy) error {
	err := settings.Apply(set, o, seg, policies)
	if e := (*settings.Error)(nil); errors.As(err, &e) {
		return invalidSetting(e.Setting, e.Problem)
	}
	return err
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
	settings.Options
	// EffectiveAt is when the last change (Rate, Paused, an admission)
	// takes effect, if it has not yet; zero otherwise.
	EffectiveAt time.Time
	// ShuffleCommitment is the message the shuffle key signs at the
	// opening (shuffle.Message); Prequeue (its size) once the pre-queue is
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

// PutProgram creates programID with set (defaults for what is absent) or
// applies set to it; created tells which. A rate or pause change takes
// effect one program-cache TTL plus the admin write budget after it is made
// (at once without a cache), without moving the serving counter. It answers
// within adminDeadline: applied, or BUSY.
func (s *Service) PutProgram(ctx context.Context, programID string, set api.ProgramSettings) (c Counters, created bool, err error) {
	if !ValidProgramID(programID) {
		return Counters{}, false, errInvalidProgramID
	}
	if err := applySettings(set, &settings.Options{}, &pace.Segment{}, s.policies); err != nil {
		return Counters{}, false, err
	}
	if set.ShuffleAtOpen != nil && *set.ShuffleAtOpen {
		if _, ok := s.store.(PrequeueStore); !ok {
			return Counters{}, false, Errorf(KindInvalid, api.CodeInvalidSettings, "This deployment's store cannot shuffle an opening.")
		}
	}
	create := func(now time.Time) (Program, error) {
		p := Program{ID: programID, CreatedAt: pace.FromUnixMs(pace.UnixMs(now)), Current: pace.Segment{Rate: DefaultAdmissionRate}, Options: settings.Options{AdmissionWindow: DefaultAdmissionWindow}}
		p, err := p.apply(set, now, 0, s.policies)
		p.Version = 1
		return p, err
	}
	edit := func(p Program, now time.Time) (Program, error) { return p.apply(set, now, s.changeDelay(), s.policies) }
	p, now, created, err := s.changeProgram(ctx, "put program", programID, history.Change{Action: history.ActionUpdate, Fields: history.Fields(set)}, create, edit)
	if err != nil {
		return Counters{}, false, err
	}
	return p.counters(now), created, nil
}

// Program returns programID's counters, read fresh.
func (s *Service) Program(ctx context.Context, programID string) (Counters, error) {
	if !ValidProgramID(programID) {
		return Counters{}, errInvalidProgramID
	}
	p, err := s.store.GetProgram(ctx, programID)
	if err != nil {
		return Counters{}, programReadError("get program", err)
	}
	return p.counters(s.clock.Now()), nil
}

// Admit lets n more people in, on top of the automatic admission and never
// beyond the tickets issued, taking effect as PutProgram's changes do. An
// admission answered without error is counted exactly once.
func (s *Service) Admit(ctx context.Context, programID string, n int64) (Counters, error) {
	if !ValidProgramID(programID) {
		return Counters{}, errInvalidProgramID
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
	p, now, _, err := s.changeProgram(ctx, "admit", programID, history.Change{Action: history.ActionAdmit, Fields: history.Fields(map[string]int64{"count": n})}, nil, edit)
	if err != nil {
		return Counters{}, err
	}
	return p.counters(now), nil
}

// apply returns p with set applied at now, taking effect delay later.
func (p Program) apply(set api.ProgramSettings, now time.Time, delay time.Duration, policies map[string]polling.Policy) (Program, error) {
	if err := p.checkSchedule(set, now, delay); err != nil {
		return p, err
	}
	if err := p.checkCapacityChange(set, now, delay); err != nil {
		return p, err
	}
	seg := p.Settled()
	before := p.ceiling().CapAt(pace.UnixMs(now.Add(delay)))
	if err := applySettings(set, &p.Options, &seg, policies); err != nil {
		return p, err
	}
	if before > 0 && p.MaxActiveUsers > before && delay > 0 {
		// A raised cap takes effect with the change, as a rate would.
		p.CapFrom, p.CapRaiseAtMs = before, pace.UnixMs(now.Add(delay))
	}
	if set.ShuffleAtOpen != nil && p.Shuffle && p.ShuffleNonce == "" {
		p.ShuffleNonce = shuffle.NewNonce()
	}
	return p.Rebased(now, seg.Rate, seg.Paused, 0, delay), nil
}

// checkCapacityChange refuses, once anyone has been admitted, a cap or
// no-show handling that would follow people admitted before it (their
// sightings were never recorded, and a new ceiling would take the serving
// counter back), and a cap lowered or removed; raising one is allowed.
func (p Program) checkCapacityChange(set api.ProgramSettings, now time.Time, delay time.Duration) error {
	if p.Version == 0 || p.counterAt(pace.UnixMs(now.Add(delay))) == 0 {
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
	if n := set.NoShowSeconds; n != nil && *n > 0 && !p.Followed() {
		return started("noShowSeconds cannot be set")
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
		c.EffectiveAt = pace.FromUnixMs(p.Next.AnchorMs)
	}
	if p.Shuffle {
		c.ShuffleCommitment = shuffle.Message(p.ID, p.ShuffleNonce)
	}
	if p.PrequeueFixed {
		c.Prequeue = p.Prequeue
	}
	if p.Followed() {
		k := p.Capacity
		c.Followed = true
		c.Ended, c.NoShows = k.Ended, k.NoShows
		c.Active = max(admitted-k.Ended-k.NoShows-k.Expired, 0)
		c.BypassHeld = p.ceiling().ReservedAt(pace.UnixMs(now))
	}
	return c
}
