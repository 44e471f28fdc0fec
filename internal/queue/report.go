package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/catalog"
	"github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/report"
)

// ReportStore keeps what a program's report needs past its tokens
// (storetest holds the contract).
type ReportStore interface {
	report.Sink
	// Minutes reads the program's minute tallies, ascending by At.
	Minutes(ctx context.Context, programID string) ([]report.Minute, error)
	// PutReport stores r as its program's kept report, replacing any.
	PutReport(ctx context.Context, r report.Report) error
	// GetReport reads a program's kept report; ErrNotFound if none.
	GetReport(ctx context.Context, programID string) (report.Report, error)
	// EachToken calls each, never concurrently, for every token of the
	// program (claims without a ticket too), and returns how many items
	// it read to find them.
	EachToken(ctx context.Context, programID string, each func(Token)) (read int64, err error)
}

// maxReportChanges bounds the admin changes a report marks, and
// maxChangeFields the text of each one's fields, so that a kept report
// stays far below DynamoDB's 400 KB item.
const (
	maxReportChanges = history.MaxLimit
	maxChangeFields  = 256
)

// tokensKept is how long after its last event a token may be gone (its
// TTL): a pass later than that may miss people, so it is never final and
// never replaces a kept report.
const tokensKept = endedTokenRetention

// Report is programID's report: the one kept once final (while the program
// takes no entries and is unchanged since), else one made now by a pass over the program's tokens,
// and kept. A deleted program's last kept report is still answered; one
// that cannot be kept is answered all the same.
func (s *Service) Report(ctx context.Context, programID string) (report.Report, error) {
	if !ValidProgramID(programID) {
		return report.Report{}, errInvalidProgramID
	}
	kept, err := s.store.GetReport(ctx, programID)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return report.Report{}, storeError("get report", err)
	}
	haveKept := err == nil
	p, err := s.store.GetProgram(ctx, programID)
	switch {
	case (errors.Is(err, ErrNotFound) || errors.Is(err, ErrDeleted)) && haveKept:
		return kept, nil
	case err != nil:
		return report.Report{}, programReadError("get program", err)
	}
	now := s.clock.Now()
	changed := pace.FromUnixMs(p.Current.AnchorMs).After(kept.MadeAt) // reopened and closed since, say
	if haveKept && kept.Final && kept.CreatedAt.Equal(p.CreatedAt) && !p.TakesEntries(now) && !changed {
		return kept, nil
	}
	if s.flushReport != nil {
		if err := s.flushReport(ctx); err != nil {
			s.log.WarnContext(ctx, "report: flush of this instance's tally", "error", err.Error())
		}
	}
	var people []report.Person
	read, err := s.store.EachToken(ctx, programID, func(t Token) {
		if t.Ticket > 0 && t.MovedTo == "" && t.MovedAt.IsZero() { // a moved place is its new token's
			people = append(people, personOf(p, t, now))
		}
	})
	if err != nil {
		return report.Report{}, storeError("read tokens", err)
	}
	minutes, err := s.store.Minutes(ctx, programID)
	if err != nil {
		return report.Report{}, storeError("read tallies", err)
	}
	born := p.CreatedAt.Truncate(time.Minute)
	minutes = slices.DeleteFunc(minutes, func(m report.Minute) bool { return m.At.Before(born) }) // a namesake's
	changes, err := s.reportChanges(ctx, programID)
	if err != nil {
		return report.Report{}, err
	}
	last := lastEvent(p, people)
	late := now.After(last.Add(tokensKept)) // the TTL may have taken people
	r := report.Build(report.Program{ID: p.ID, DisplayName: p.Profile.DisplayName, Final: final(p, people, last, now) && !late}, people, minutes, changes, now)
	r.CreatedAt, r.ItemsRead = p.CreatedAt.UTC(), read
	switch {
	case late && haveKept && kept.CreatedAt.Equal(p.CreatedAt):
		return kept, nil // made while every token was there
	case haveKept && kept.Final && !r.Final && kept.CreatedAt.Equal(p.CreatedAt) && !late:
		// reopened: answer the new pass, keep the final one until it settles again
	default:
		if err := s.store.PutReport(ctx, r); err != nil {
			s.log.WarnContext(ctx, "report: not kept", "programId", programID, "error", err.Error())
		}
	}
	return r, nil
}

// personOf is token t of p as the report counts it at now: its turn came
// once the counter reached it and the no-show time after passed.
func personOf(p admission.Program, t Token, now time.Time) report.Person {
	place, _ := p.Place(t.Ticket)
	turn := p.AdmitsTicket(t.Ticket, now.Add(-p.NoShowAfter()))
	var turnAt time.Time
	if turn {
		turnAt, _ = p.AdmissionTime(t.Ticket, pace.FromUnixMs(p.Current.AnchorMs))
	}
	return report.Person{
		Place: place, TurnCame: turn, TurnAt: turnAt,
		IssuedAt: t.IssuedAt, AdmittedAt: t.AdmittedAt, LeftAt: t.LeftAt, RevokedAt: t.RevokedAt,
		EnterPosition: t.EnterPosition, EnterEstimate: t.EnterEstimate,
		LeftPosition: t.LeftPosition, LeftEstimate: t.LeftEstimate,
		Account: t.Account != "",
	}
}

// final reports whether p's report no longer changes at now: it takes no
// entries, nobody waits, and a minute passed since the last event's
// no-show time (the tallies' last minute).
func final(p admission.Program, people []report.Person, last, now time.Time) bool {
	if p.TakesEntries(now) {
		return false
	}
	for _, x := range people {
		if !x.TurnCame && x.AdmittedAt.IsZero() && x.LeftAt.IsZero() && x.RevokedAt.IsZero() {
			return false // still waiting
		}
	}
	return !now.Before(last.Add(p.NoShowAfter() + time.Minute))
}

// lastEvent is the latest event of p's people: an entry, a sighting, a
// leave, a revoke, or the last turn, or p's creation (exact within the current pace, else
// at its start at the latest).
func lastEvent(p admission.Program, people []report.Person) time.Time {
	last := p.CreatedAt
	for _, x := range people {
		last = latest(last, x.IssuedAt, x.AdmittedAt, x.LeftAt, x.RevokedAt)
	}
	if at, ok := p.AdmissionTime(p.Issued, pace.FromUnixMs(p.Current.AnchorMs)); ok {
		last = latest(last, at)
	}
	return last
}

func latest(ts ...time.Time) time.Time {
	var l time.Time
	for _, t := range ts {
		if t.After(l) {
			l = t
		}
	}
	return l
}

// reportChanges reads the program's admin changes, oldest first, at most
// maxReportChanges.
func (s *Service) reportChanges(ctx context.Context, programID string) ([]report.Change, error) {
	var out []report.Change
	cursor := ""
	for len(out) < maxReportChanges {
		page, err := s.History(ctx, programID, cursor, history.MaxLimit)
		if err != nil {
			return nil, err
		}
		for _, c := range page.Changes {
			fields := string(c.Fields)
			if len(fields) > maxChangeFields {
				fields = strings.ToValidUTF8(fields[:maxChangeFields], "") + "…"
			}
			out = append(out, report.Change{At: c.At.UTC(), Actor: c.Actor, Action: c.Action, Fields: fields})
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	slices.SortFunc(out, func(a, b report.Change) int { return a.At.Compare(b.At) })
	return out, nil
}

// standing is where ticket stands in p at now, as an answer tells it: its
// position and estimated wait (0, 0 without a place yet).
func (s *Service) standing(p admission.Program, ticket int64, now time.Time) (int64, time.Duration) {
	place, placed := p.Place(ticket)
	if !placed {
		return 0, 0
	}
	sit := p.Situation(place, now, s.cache.Notice(p, now))
	return sit.Position, sit.Wait
}

// SettleReports makes the final report of every program that can have one
// and has none: closed, everyone's turn come and its no-show time and a
// minute past, within a day of it (the tokens still there). It returns the
// reports made; a program's failure does not stop the others.
func (s *Service) SettleReports(ctx context.Context) (made int, err error) {
	read := func(ctx context.Context, id string) (admission.Program, bool, error) {
		p, err := s.store.GetProgram(ctx, id)
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrDeleted) {
			return p, false, nil
		}
		return p, err == nil, err
	}
	var errs []error
	for after := ""; ; {
		programs, next, err := catalog.List(ctx, s.store, after, catalog.MaxLimit, read)
		if err != nil {
			return made, storeError("list programs", err)
		}
		for _, p := range programs {
			ok, err := s.settle(ctx, p)
			if err != nil {
				errs = append(errs, fmt.Errorf("program %s: %w", p.ID, err))
			} else if ok {
				made++
			}
		}
		if after, _ = catalog.DecodeCursor(next); next == "" {
			return made, errors.Join(errs...)
		}
	}
}

// settle makes p's final report if it is due and not made yet.
func (s *Service) settle(ctx context.Context, p admission.Program) (bool, error) {
	programID, now := p.ID, s.clock.Now()
	lastTurn, ok := p.AdmissionTime(p.Issued, pace.FromUnixMs(p.Current.AnchorMs))
	due := lastTurn.Add(p.NoShowAfter() + time.Minute)
	if p.TakesEntries(now) || !ok || !p.AdmitsTicket(p.Issued, now) || now.Before(due) || now.After(due.Add(tokensKept)) {
		return false, nil
	}
	kept, err := s.store.GetReport(ctx, programID)
	switch {
	case err == nil && kept.Final && kept.CreatedAt.Equal(p.CreatedAt) && !pace.FromUnixMs(p.Current.AnchorMs).After(kept.MadeAt):
		return false, nil
	case err != nil && !errors.Is(err, ErrNotFound):
		return false, storeError("get report", err)
	}
	r, err := s.Report(ctx, programID)
	return err == nil && r.Final, err
}
