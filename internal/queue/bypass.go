package queue

import (
	"context"
	"errors"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/bypass"
	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/pace"
)

// withBypass is p.WithBypass, NO_ROOM when the cap has no room.
func withBypass(p admission.Program, n, untilMs int64, now time.Time, delay time.Duration) (admission.Program, error) {
	q, room := p.WithBypass(n, untilMs, now, delay)
	if room >= n {
		return q, nil
	}
	e := Errorf(KindConflict, api.CodeNoRoom, "maxActiveUsers (%d) has room for %d bypass passes now: retry once people have left, or pause admission so that the line does not take the freed slots first.", p.MaxActiveUsers, room)
	e.RetryAfter = time.Duration(admission.RoundMs(delay)) * time.Millisecond
	return p, e
}

// IssueBypass signs count bypass passes to programID, valid for validity;
// under a cap one admin change then reserves their slots (else NO_ROOM).
func (s *Service) IssueBypass(ctx context.Context, programID string, count int64, validity time.Duration) ([]string, error) {
	if !ValidProgramID(programID) {
		return nil, errInvalidProgramID
	}
	if count < 1 || count > bypass.MaxCount {
		return nil, Errorf(KindInvalid, api.CodeInvalidCount, "count must be a whole number between 1 and %d.", bypass.MaxCount)
	}
	if validity < bypass.MinValidity || validity > bypass.MaxValidity {
		return nil, Errorf(KindInvalid, api.CodeInvalidValidity, "validSeconds must be between %d and %d.", int(bypass.MinValidity.Seconds()), int(bypass.MaxValidity.Seconds()))
	}
	p, err := s.store.GetProgram(ctx, programID)
	if err != nil {
		return nil, programReadError("get program", err)
	}
	signer, ok := s.passes.(bypass.Signer)
	if !ok {
		return nil, &Error{Kind: KindUnavailable, Code: api.CodePassUnavailable, Message: "This deployment signs no passes.", Err: errors.New("no bypass signer")}
	}
	now := s.clock.Now()
	if !p.Pending(now) {
		if _, err := withBypass(p, count, 0, now, s.changeDelay()); err != nil {
			return nil, err // no room: refused before any signature
		}
	}
	expires := now.Add(validity)
	passes, err := bypass.Sign(ctx, signer, programID, count, now, expires, adminDeadline, NewTokenID)
	if err != nil {
		return nil, &Error{Kind: KindUnavailable, Code: api.CodePassUnavailable, Message: "The passes could not be signed; retry shortly.", Err: err, RetryAfter: time.Second}
	}
	// An admin change also without a cap, for the history.
	until := pace.UnixMs(expires.Add(capacity.ExpiryMargin))
	edit := func(p admission.Program, now time.Time) (admission.Program, error) {
		return withBypass(p, count, until, now, s.changeDelay())
	}
	rec := history.Change{Action: history.ActionBypass, Fields: history.Fields(map[string]int64{"count": count, "validSeconds": int64(validity / time.Second)})}
	if _, _, _, err := s.changeProgram(ctx, "reserve bypass", programID, rec, nil, edit); err != nil {
		return nil, err
	}
	return passes, nil
}
