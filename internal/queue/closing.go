package queue

import (
	"time"

	"github.com/example/waitingroom/internal/api"
)

// A scheduled close (closesAt): see docs/design.md, "A scheduled close".

// ClosedAt reports whether p's scheduled close has come at now: from then
// on it takes no new entries, as if Closed.
func (p Program) ClosedAt(now time.Time) bool { return !p.ClosesAt.IsZero() && !now.Before(p.ClosesAt) }

// takesEntries reports whether p takes new entries at now: neither closed
// by hand nor past its scheduled close.
func (p Program) takesEntries(now time.Time) bool { return !p.Closed && !p.ClosedAt(now) }

// errEntriesClosed is the PROGRAM_CLOSED answer to an enter in p at now.
func (p Program) errEntriesClosed(now time.Time) error {
	if !p.Closed && p.ClosedAt(now) {
		return Errorf(KindConflict, api.CodeProgramClosed, "The program's queue closed to new entries at %s.", p.ClosesAt.UTC().Format(time.RFC3339))
	}
	return errProgramClosed()
}

// applyClosing checks set's closesAt against p at now, for a change taking
// effect delay later, as applyOpening checks opensAt: the close moves only
// while the current and the new one are both more than delay ahead, and it
// must come after the opening.
func (p Program) applyClosing(set api.ProgramSettings, now time.Time, delay time.Duration) error {
	effective := now.Add(delay)
	closesAt, opensAt := p.ClosesAt, p.OpensAt
	if set.ClosesAt != nil {
		closesAt, _ = parseOpening(*set.ClosesAt) // checked by PutProgram
	}
	if set.OpensAt != nil {
		opensAt, _ = parseOpening(*set.OpensAt)
	}
	if set.ClosesAt != nil && !closesAt.Equal(p.ClosesAt) {
		switch {
		case !p.ClosesAt.IsZero() && !p.ClosesAt.After(effective):
			return Errorf(KindConflict, api.CodeInvalidSettings, "The program closes at %s (or has closed): its closing can no longer change.", p.ClosesAt.UTC().Format(time.RFC3339))
		case !closesAt.IsZero() && !closesAt.After(effective):
			return Errorf(KindInvalid, api.CodeInvalidSettings, "closesAt must be more than %v from now.", delay)
		}
	}
	if !closesAt.IsZero() && !opensAt.IsZero() && !closesAt.After(opensAt) {
		return invalidSetting("closesAt", "must be after opensAt ("+opensAt.UTC().Format(time.RFC3339)+")")
	}
	return nil
}
