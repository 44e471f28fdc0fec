package queue

import (
	"context"
	"errors"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/settings"
	"github.com/example/waitingroom/internal/shuffle"
)

// invalidSetting is the INVALID_SETTINGS error of setting name.
func invalidSetting(name, problem string) *Error {
	return Errorf(KindInvalid, api.CodeInvalidSettings, "%s %s.", name, problem)
}

// applySettings is settings.Apply, answering INVALID_SETTINGS.
func applySettings(set api.ProgramSettings, o *settings.Options, seg *pace.Segment, policies map[string]polling.Policy) error {
	err := settings.Apply(set, o, seg, policies)
	if e := (*settings.Error)(nil); errors.As(err, &e) {
		return invalidSetting(e.Setting, e.Problem)
	}
	return err
}

// PutProgram creates programID with set or applies set to it (taking
// effect ChangeDelay later); created tells which.
func (s *Service) PutProgram(ctx context.Context, programID string, set api.ProgramSettings) (c admission.Counters, created bool, err error) {
	if !ValidProgramID(programID) {
		return admission.Counters{}, false, errInvalidProgramID
	}
	if err := applySettings(set, &settings.Options{}, &pace.Segment{}, s.policies); err != nil {
		return admission.Counters{}, false, err
	}
	if set.ShuffleAtOpen != nil && *set.ShuffleAtOpen {
		if _, ok := s.store.(PrequeueStore); !ok {
			return admission.Counters{}, false, Errorf(KindInvalid, api.CodeInvalidSettings, "This deployment's store cannot shuffle an opening.")
		}
	}
	create := func(now time.Time) (admission.Program, error) {
		p := admission.Program{ID: programID, CreatedAt: pace.FromUnixMs(pace.UnixMs(now)), Current: pace.Segment{Rate: admission.DefaultAdmissionRate}, Options: settings.Options{AdmissionWindow: admission.DefaultAdmissionWindow}}
		p, err := apply(p, set, now, 0, s.policies)
		p.Version = 1
		return p, err
	}
	edit := func(p admission.Program, now time.Time) (admission.Program, error) {
		return apply(p, set, now, s.changeDelay(), s.policies)
	}
	p, now, created, err := s.changeProgram(ctx, "put program", programID, history.Change{Action: history.ActionUpdate, Fields: history.Fields(set)}, create, edit)
	if err != nil {
		return admission.Counters{}, false, err
	}
	return p.Counters(now), created, nil
}

// Program returns programID's counters, read fresh.
func (s *Service) Program(ctx context.Context, programID string) (admission.Counters, error) {
	if !ValidProgramID(programID) {
		return admission.Counters{}, errInvalidProgramID
	}
	p, err := s.store.GetProgram(ctx, programID)
	if err != nil {
		return admission.Counters{}, programReadError("get program", err)
	}
	return p.Counters(s.clock.Now()), nil
}

// Admit lets n more people in, never beyond the tickets issued.
func (s *Service) Admit(ctx context.Context, programID string, n int64) (admission.Counters, error) {
	if !ValidProgramID(programID) {
		return admission.Counters{}, errInvalidProgramID
	}
	if n < 1 || n > MaxAdmissionCount {
		return admission.Counters{}, Errorf(KindInvalid, api.CodeInvalidCount, "count must be a whole number between 1 and %d.", MaxAdmissionCount)
	}
	edit := func(p admission.Program, now time.Time) (admission.Program, error) {
		if !p.Opened(now.Add(s.changeDelay())) {
			return p, Errorf(KindConflict, api.CodeNotOpen, "The program opens at %s; admissions start then.", p.OpensAt.UTC().Format(time.RFC3339))
		}
		settled := p.Settled()
		return p.WithManualAdmission(n, now).Rebased(now, settled.Rate, settled.Paused, n, s.changeDelay()), nil
	}
	p, now, _, err := s.changeProgram(ctx, "admit", programID, history.Change{Action: history.ActionAdmit, Fields: history.Fields(map[string]int64{"count": n})}, nil, edit)
	if err != nil {
		return admission.Counters{}, err
	}
	return p.Counters(now), nil
}

// apply returns p with set applied at now, taking effect delay later.
func apply(p admission.Program, set api.ProgramSettings, now time.Time, delay time.Duration, policies map[string]polling.Policy) (admission.Program, error) {
	if err := checkSchedule(p, set, now, delay); err != nil {
		return p, err
	}
	if err := checkCapacityChange(p, set, now, delay); err != nil {
		return p, err
	}
	seg := p.Settled()
	before, started := p.MaxActiveUsers, admissionStarted(p, now, delay)
	if err := applySettings(set, &p.Options, &seg, policies); err != nil {
		return p, err
	}
	if p.Enqueue.Required && !p.Enqueue.Accepts() {
		return p, invalidSetting("requireEnqueueToken", "needs enqueueJwksUrl and enqueueIssuer")
	}
	if started && before > 0 && p.MaxActiveUsers > before {
		// Slots the folds free within the turnover bound, as they would ends.
		p.CapRaised += p.MaxActiveUsers - before
	}
	if set.ShuffleAtOpen != nil && p.Shuffle && p.ShuffleNonce == "" {
		p.ShuffleNonce = shuffle.NewNonce()
	}
	return p.Rebased(now, seg.Rate, seg.Paused, 0, delay), nil
}

// admissionStarted reports whether p exists and has admitted someone by
// the time a change made at now takes effect.
func admissionStarted(p admission.Program, now time.Time, delay time.Duration) bool {
	return p.Version > 0 && p.CounterAt(pace.UnixMs(now.Add(delay))) > 0
}

// checkCapacityChange refuses, once anyone was admitted, a new cap or
// no-show handling, a cap lowered or removed, a changed noShowSeconds,
// and, under a cap or no-shows, a shorter admission window.
func checkCapacityChange(p admission.Program, set api.ProgramSettings, now time.Time, delay time.Duration) error {
	if !admissionStarted(p, now, delay) {
		return nil // being created, or nobody admitted before the change takes effect
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
	switch n := set.NoShowSeconds; {
	case n == nil || *n == p.NoShowSeconds:
	case !p.Followed():
		return started("noShowSeconds cannot be set")
	default:
		return Errorf(KindConflict, api.CodeInvalidSettings, "noShowSeconds is fixed once admission has started (it is %d): people waiting were told when to poll by it.", p.NoShowSeconds)
	}
	if w := set.AdmissionWindowSeconds; w != nil && p.Followed() && *w < int64(p.AdmissionWindow/time.Second) {
		return Errorf(KindConflict, api.CodeInvalidSettings, "admissionWindowSeconds can only be raised once admission has started under a cap or no-shows (it is %d): the passes already out keep their end.", int64(p.AdmissionWindow/time.Second))
	}
	return nil
}
