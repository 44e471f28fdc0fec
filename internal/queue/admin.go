package queue

import (
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/example/waitingroom/internal/polling"
)

// Settings are the admin-editable fields of a program; nil fields keep their
// current value (or take the default on creation).
type Settings struct {
	AdmissionRatePerSecond *float64
	Paused                 *bool
	AdmissionWindow        *time.Duration
	// PollingPolicy names a policy the service knows (WithPolicies); ""
	// returns the program to the service's default.
	PollingPolicy *string
	// Closed stops (or resumes) new entries; people already waiting keep
	// their place.
	Closed *bool
}

// Counters is the admin view of a program.
type Counters struct {
	ProgramID       string
	Issued          int64 // tickets handed out
	Admitted        int64 // serving counter: tickets admitted, including ones whose holder left
	Waiting         int64 // Issued − Admitted
	Rate            float64
	Paused          bool
	AdmissionWindow time.Duration
	CreatedAt       time.Time
	// PollingPolicy is the program's policy name, "" for the default.
	PollingPolicy string
	// Closed reports whether the program takes no new entries.
	Closed bool
	// EffectiveAt is when the last change (Rate, Paused, an admission)
	// takes effect, if it has not yet; zero otherwise.
	EffectiveAt time.Time
}

func (s Settings) validate(policies map[string]polling.Policy) error {
	if name := s.PollingPolicy; name != nil && *name != "" {
		if _, ok := policies[*name]; !ok {
			names := slices.Sorted(maps.Keys(policies))
			return Errorf(KindInvalid, CodeInvalidSettings, "pollingPolicy must be one of %q, or \"\" for the default.", names)
		}
	}
	if r := s.AdmissionRatePerSecond; r != nil && (math.IsNaN(*r) || *r < 0 || *r > MaxAdmissionRate || *r > 0 && *r < MinAdmissionRate) {
		return Errorf(KindInvalid, CodeInvalidSettings, "admissionRatePerSecond must be 0 (manual admission only) or between %g and %g.", MinAdmissionRate, MaxAdmissionRate)
	}
	if w := s.AdmissionWindow; w != nil && (*w < MinAdmissionWindow || *w > MaxAdmissionWindow) {
		return Errorf(KindInvalid, CodeInvalidSettings, "admissionWindowSeconds must be between %d and %d.", int(MinAdmissionWindow.Seconds()), int(MaxAdmissionWindow.Seconds()))
	}
	return nil
}

// PutProgram creates programID with settings (defaults for what is unset) or
// applies settings to it; created tells which. A rate or pause change takes
// effect from now without moving the serving counter.
func (s *Service) PutProgram(ctx context.Context, programID string, set Settings) (c Counters, created bool, err error) {
	if !ValidProgramID(programID) {
		return Counters{}, false, errInvalidProgramID()
	}
	if err := set.validate(s.policies); err != nil {
		return Counters{}, false, err
	}
	for range maxStoreOptimisticTrials {
		now := s.now()
		p, err := s.store.GetProgram(ctx, programID)
		switch {
		case errors.Is(err, ErrNotFound):
			p = Program{ID: programID, CreatedAt: now.Truncate(time.Millisecond), Rate: DefaultAdmissionRate, AdmissionWindow: DefaultAdmissionWindow}
			p = p.apply(set, now, 0)
			p.Version = 1
			err = s.store.CreateProgram(ctx, p)
			if err == nil {
				return p.counters(now), true, nil
			}
		case err == nil:
			if err := s.awaitPending(ctx, p, now); err != nil {
				return Counters{}, false, err
			}
			if p.Pending(now) {
				continue
			}
			p = p.apply(set, now, s.changeDelay())
			err = s.updateProgram(ctx, p)
			if err == nil {
				s.cache.put(p, now)
				return p.counters(now), false, nil
			}
		}
		if !errors.Is(err, ErrConflict) {
			return Counters{}, false, storeError("put program", err)
		}
	}
	return Counters{}, false, errBusy()
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
	return p.counters(s.now()), nil
}

// Admit moves programID's serving counter forward by n now, on top of the
// automatic admission, never beyond the tickets issued.
func (s *Service) Admit(ctx context.Context, programID string, n int64) (Counters, error) {
	if !ValidProgramID(programID) {
		return Counters{}, errInvalidProgramID()
	}
	if n < 1 || n > MaxAdmissionCount {
		return Counters{}, Errorf(KindInvalid, CodeInvalidCount, "count must be a whole number between 1 and %d.", MaxAdmissionCount)
	}
	for range maxStoreOptimisticTrials {
		now := s.now()
		p, err := s.store.GetProgram(ctx, programID)
		if errors.Is(err, ErrNotFound) {
			return Counters{}, errProgramNotFound()
		} else if err != nil {
			return Counters{}, storeError("get program", err)
		}
		if err := s.awaitPending(ctx, p, now); err != nil {
			return Counters{}, err
		}
		if p.Pending(now) {
			continue
		}
		settled := p.Settled()
		p = p.withManualAdmission(n, now).Rebased(now, settled.Rate, settled.Paused, n, s.changeDelay())
		err = s.updateProgram(ctx, p)
		if err == nil {
			s.cache.put(p, now)
			return p.counters(now), nil
		}
		if !errors.Is(err, ErrConflict) {
			return Counters{}, storeError("admit", err)
		}
	}
	return Counters{}, errBusy()
}

// adminWriteBudget bounds how long an admin change may take to be stored.
// A change takes effect one program-cache TTL after it is stored at the
// latest, so that every instance that read the program before has dropped
// that read; it is scheduled at now + TTL + adminWriteBudget, and its write
// is abandoned past the budget.
const adminWriteBudget = time.Second

// changeDelay is how long after an admin change it takes effect: nothing
// without a program cache, the cache TTL plus the write budget with one.
func (s *Service) changeDelay() time.Duration {
	if s.cache.ttl <= 0 {
		return 0
	}
	return s.cache.ttl + adminWriteBudget
}

// updateProgram stores the admin change p within the write budget. A
// conflict may be the store's retry of a write whose answer was lost after
// it was applied: if the program as stored is p's change, it succeeded, and
// must not be applied a second time.
func (s *Service) updateProgram(ctx context.Context, p Program) error {
	wctx, cancel := context.WithTimeout(ctx, adminWriteBudget)
	defer cancel()
	err := s.store.UpdateProgram(wctx, p, p.Issued)
	if !errors.Is(err, ErrConflict) {
		return err
	}
	stored, rerr := s.store.GetProgram(ctx, p.ID)
	if rerr == nil && sameChange(stored, p) {
		return nil
	}
	return err
}

// sameChange reports whether stored carries the admin change p made: the
// same version and the same settings and admission state (tickets issued
// since may have moved Issued and DrainAtMs).
func sameChange(stored, p Program) bool {
	stored.Issued, stored.DrainAtMs = p.Issued, p.DrainAtMs
	return stored.Version == p.Version && stored.Equal(p)
}

// awaitPending sleeps until p's pending change (if any) has taken effect,
// so that a new change can be scheduled after it; the caller then reads the
// program again. A change is pending for at most the program cache TTL.
func (s *Service) awaitPending(ctx context.Context, p Program, now time.Time) error {
	if !p.Pending(now) {
		return nil
	}
	wait := p.NextAt.Sub(now)
	if wait > maxPendingWait || s.cache.ttl <= 0 {
		return errBusy()
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return errBusy()
	case <-t.C:
		return nil
	}
}

// maxPendingWait bounds how long an admin request waits for the previous
// change to take effect before answering BUSY.
const maxPendingWait = 3 * time.Second

func (p Program) apply(set Settings, now time.Time, delay time.Duration) Program {
	settled := p.Settled()
	rate, paused := settled.Rate, settled.Paused
	if set.AdmissionRatePerSecond != nil {
		rate = *set.AdmissionRatePerSecond
	}
	if set.Paused != nil {
		paused = *set.Paused
	}
	if set.AdmissionWindow != nil {
		p.AdmissionWindow = *set.AdmissionWindow
	}
	if set.PollingPolicy != nil {
		p.Policy = *set.PollingPolicy
	}
	if set.Closed != nil {
		p.Closed = *set.Closed
	}
	return p.Rebased(now, rate, paused, 0, delay)
}

func (p Program) counters(now time.Time) Counters {
	admitted := p.Serving(now)
	settled := p.Settled()
	c := Counters{
		ProgramID:       p.ID,
		Issued:          p.Issued,
		Admitted:        admitted,
		Waiting:         p.Issued - admitted,
		Rate:            settled.Rate,
		Paused:          settled.Paused,
		AdmissionWindow: p.AdmissionWindow,
		CreatedAt:       p.CreatedAt,
		PollingPolicy:   p.Policy,
		Closed:          p.Closed,
	}
	if p.Pending(now) {
		c.EffectiveAt = p.NextAt
	}
	return c
}

func errBusy() error {
	return Errorf(KindUnavailable, CodeBusy, "The program is being changed concurrently; retry.")
}
