// Package sampleevents seeds a store with the programs and tokens that the sample events in events/
// refer to, so that `make invoke` and the tests replay the same events against the same state.
package sampleevents

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/settings"
)

// Token ids used by the sample events.
const (
	WaitingToken  = "waitingTokenFixture001" // ticket 734: position 234 at seed time
	AdmittedToken = "admittedTokenFixture01" // ticket 400, admitted a minute before seed time
	// AdmitNowToken (ticket 450) is within the admitted 500 but has no admittedAt yet: its first poll records the admission.
	AdmitNowToken = "admitNowTokenFixture01"
	LeavingToken  = "leavingTokenFixture001" // ticket 900, waiting
	EndingToken   = "endingTokenFixture0001" // ticket 410, admitted a minute before seed time: its holder ends it
	// SessionToken (ticket 420, admitted a minute before seed time) holds SessionPass, with which the site
	// ends its admission; ExpiredToken (ticket 430) holds ExpiredPass, whose admission ended 10 minutes
	// before seed time. The passes are JWTs signed by no key: the service checks a pass against the one it stored.
	SessionToken = "sessionTokenFixture001"
	ExpiredToken = "expiredTokenFixture001"
	SessionPass  = "eyJhbGciOiJFUzI1NiIsImtpZCI6ImZpeHR1cmUta2V5IiwidHlwIjoiSldUIn0.eyJhdWQiOiJkZW1vIiwiZXhwIjoxNzc5MTg1MzQwLCJpYXQiOjE3NzkxODQ3NDAsImlzcyI6Imh0dHBzOi8vYWJjMTIzLmV4ZWN1dGUtYXBpLnVzLWVhc3QtMS5hbWF6b25hd3MuY29tIiwianRpIjoiZml4dHVyZS1zZXNzaW9uVCIsIm5iZiI6MTc3OTE4NDc0MCwic3ViIjoic2Vzc2lvblRva2VuRml4dHVyZTAwMSIsInRpY2tldCI6NDIwfQ.BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBw"
	ExpiredPass  = "eyJhbGciOiJFUzI1NiIsImtpZCI6ImZpeHR1cmUta2V5IiwidHlwIjoiSldUIn0.eyJhdWQiOiJkZW1vIiwiZXhwIjoxNzc5MTg0ODAwLCJpYXQiOjE3NzkxODQ3NDAsImlzcyI6Imh0dHBzOi8vYWJjMTIzLmV4ZWN1dGUtYXBpLnVzLWVhc3QtMS5hbWF6b25hd3MuY29tIiwianRpIjoiZml4dHVyZS1leHBpcmVkVCIsIm5iZiI6MTc3OTE4NDc0MCwic3ViIjoiZXhwaXJlZFRva2VuRml4dHVyZTAwMSIsInRpY2tldCI6NDIwfQ.BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBw"
	UnknownToken = "unknownTokenFixture001" // well formed, never stored
	RevokeToken  = "revokeTokenFixture0001" // ticket 440, admitted a minute before seed time: an admin revokes it
	// NoShowToken (ticket 5 of CappedProgramID) was admitted and never came: its place is sealed as a no-show.
	NoShowToken        = "noShowTokenFixture0001"
	ProgramID          = "demo"
	ClosedProgramID    = "sold-out"   // closed to new entries
	DeletableProgramID = "ended-show" // closed; an event deletes it
	EndedProgramID     = "ended"      // closed to new entries at its closesAt, a minute before seed time
	FullProgramID      = "full-house" // paused, its line at its maxWaiting
	// CappedProgramID admits at most 50 people at once, no-shows after 60 s; 50 of its 100 tickets are
	// admitted, and places up to 50 are sealed as no-shows but those seen.
	CappedProgramID  = "capped"
	GuardedProgramID = "guarded" // asks every enter for a proof of work of 16 bits
)

// Seed stores the events' programs in s: ProgramID (1,000 tickets issued, 500 admitted at now, admission
// at 10 people per second), the others above, and the tokens above but UnknownToken.
func Seed(ctx context.Context, s queue.Store, now time.Time) error {
	now = now.Truncate(time.Millisecond)
	window := admission.DefaultAdmissionWindow
	for _, seed := range []struct {
		id             string
		issued, admit  int64
		rate           pace.Rate
		paused, closed bool
		opts           settings.Options
	}{
		{ProgramID, 1000, 500, 10 * pace.OnePerSecond, false, false, settings.Options{AdmissionWindow: window}},
		{ClosedProgramID, 10, 0, pace.OnePerSecond, false, true, settings.Options{AdmissionWindow: window}},
		{DeletableProgramID, 10, 0, pace.OnePerSecond, false, true, settings.Options{AdmissionWindow: window}},
		{EndedProgramID, 10, 0, pace.OnePerSecond, false, false, settings.Options{AdmissionWindow: window, ClosesAt: now.Add(-time.Minute)}},
		{FullProgramID, 100, 0, pace.OnePerSecond, true, false, settings.Options{AdmissionWindow: window, MaxWaiting: 100}},
		{GuardedProgramID, 0, 0, pace.OnePerSecond, true, false, settings.Options{AdmissionWindow: window, ChallengeBits: 16}},
	} {
		p := admission.Program{ID: seed.id, CreatedAt: now.Add(-time.Hour), Issued: seed.issued, Options: seed.opts}
		p = p.Rebased(now, seed.rate, seed.paused, seed.admit, 0)
		p.Closed = seed.closed
		if err := s.CreateProgram(ctx, p); err != nil {
			return fmt.Errorf("seed program %s: %w", seed.id, err)
		}
	}
	capped, err := seedCapped(ctx, s, now)
	if err != nil {
		return err
	}
	if err := seedCatalog(ctx, s, now); err != nil {
		return err
	}
	// admitted is a token of ProgramID issued 40 minutes and admitted 1 minute before now.
	admitted := func(id string, ticket int64, pass string) queue.Token {
		return queue.Token{ID: id, ProgramID: ProgramID, Ticket: ticket, IssuedAt: now.Add(-40 * time.Minute), AdmissionPass: pass,
			AdmittedAt: now.Add(-time.Minute), AdmissionExpiresAt: now.Add(-time.Minute).Add(window)}
	}
	expired := admitted(ExpiredToken, 430, ExpiredPass)
	expired.AdmittedAt, expired.AdmissionExpiresAt = now.Add(-20*time.Minute), now.Add(-10*time.Minute)
	tokens := []queue.Token{
		{ID: WaitingToken, ProgramID: ProgramID, Ticket: 734, IssuedAt: now.Add(-30 * time.Minute)},
		{ID: LeavingToken, ProgramID: ProgramID, Ticket: 900, IssuedAt: now.Add(-20 * time.Minute)},
		{ID: AdmitNowToken, ProgramID: ProgramID, Ticket: 450, IssuedAt: now.Add(-35 * time.Minute)},
		admitted(AdmittedToken, 400, ""), admitted(EndingToken, 410, ""), admitted(SessionToken, 420, SessionPass),
		admitted(RevokeToken, 440, ""), expired,
	}
	for _, t := range append(tokens, capped...) {
		t.ExpiresAt = now.Add(48 * time.Hour)
		if err := s.PutToken(ctx, t); err != nil {
			return fmt.Errorf("seed token %s: %w", t.ID, err)
		}
	}
	return nil
}

// seedCapped stores CappedProgramID and seals the no-shows of its first 50 places when s keeps
// capacity records, and returns NoShowToken to store then.
func seedCapped(ctx context.Context, s queue.Store, now time.Time) ([]queue.Token, error) {
	cs, ok := s.(capacity.Store)
	if !ok {
		return nil, nil
	}
	p := admission.Program{ID: CappedProgramID, CreatedAt: now.Add(-time.Hour), Issued: 100,
		Options: settings.Options{AdmissionWindow: admission.DefaultAdmissionWindow, MaxActiveUsers: 50, NoShowSeconds: 60}}
	p = p.Rebased(now.Add(-10*time.Minute), 20*pace.OnePerSecond, false, 0, 0)
	if err := s.CreateProgram(ctx, p); err != nil {
		return nil, fmt.Errorf("seed capped program: %w", err)
	}
	for place := int64(1); place <= 50; place++ {
		if place == 5 {
			continue // the no-show
		}
		if _, err := cs.Sight(ctx, CappedProgramID, place); err != nil {
			return nil, fmt.Errorf("seed sightings: %w", err)
		}
	}
	if _, err := cs.SealSightings(ctx, CappedProgramID, 0, 50, now.Add(-8*time.Minute)); err != nil {
		return nil, fmt.Errorf("seed the no-show seal: %w", err)
	}
	return []queue.Token{{ID: NoShowToken, ProgramID: CappedProgramID, Ticket: 5, IssuedAt: now.Add(-50 * time.Minute)}}, nil
}

// seedCatalog lists the programs and records ProgramID's opening change, made by an operator half an hour before now.
func seedCatalog(ctx context.Context, s queue.Store, now time.Time) error {
	for _, id := range []string{ProgramID, ClosedProgramID, DeletableProgramID, EndedProgramID, FullProgramID, CappedProgramID} {
		if err := s.IndexProgram(ctx, id); err != nil {
			return fmt.Errorf("seed the list: %w", err)
		}
	}
	c := history.Change{ID: "changeFixture000000001", At: now.Add(-30 * time.Minute), Actor: "arn:aws:sts::123456789012:assumed-role/ops/ops",
		Action: history.ActionUpdate, Fields: json.RawMessage(`{"admissionRatePerSecond":10,"paused":false}`), Committed: true}
	if err := s.PutChange(ctx, ProgramID, c); err != nil {
		return fmt.Errorf("seed the history: %w", err)
	}
	return nil
}
