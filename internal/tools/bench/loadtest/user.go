package loadtest

import (
	"cmp"
	"context"
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/tools/client"
)

// user is one virtual user's outcome.
type user struct {
	entered     bool
	leaving     float64 // fraction of the wait after which it leaves; negative: never
	left        bool
	ticket      int64     // from the enter answer
	issuedAt    time.Time // the token's, on the server's clock; zero when unknown
	prequeue    int64     // the size of a shuffled pre-queue, when an answer told it
	enterAt     time.Duration
	enterSent   time.Duration // send time of the successful enter, for the wait
	lastWaiting time.Duration // send time of the last WAITING answer
	seenAt      time.Duration // receipt of ADMITTED
	admitted    bool
	polls       int

	// With Config.Crowd: noShow and session are drawn, silent is set when
	// the no-show stopped polling, expired when EXPIRED was read.
	noShow, silent, expired       bool
	session                       time.Duration
	windowEnd                     time.Duration // the admission's end, from the start; 0 when unknown
	ended, endFailed, missingPass bool
	endSent, endRecv              time.Duration
}

// user plays one virtual user, calling entered once its enter is over.
func (r *runner) user(ctx context.Context, u *user, entered func()) {
	ans, sent, recv, ok := r.enter(ctx)
	entered()
	if !ok {
		return
	}
	u.entered, u.enterSent, u.enterAt, u.ticket, u.issuedAt = true, sent, recv, ans.Ticket, ans.IssuedAt.Time
	token := ans.TokenID
	for {
		switch ans.Status {
		case api.StatusAdmitted:
			u.admitted, u.seenAt = true, recv
			if ans.AdmissionPass != "" {
				r.passes.Add(1)
				if r.cfg.OnPass != nil {
					r.cfg.OnPass(ans.AdmissionPass)
				}
			}
			if r.cfg.Crowd != nil {
				r.endSession(ctx, u, ans)
			}
			return
		case api.StatusWaiting:
			u.lastWaiting = sent
			if ans.Shuffle != nil && ans.Shuffle.Prequeue > 0 {
				u.prequeue = ans.Shuffle.Prequeue
			}
		default: // EXPIRED or LEFT: the bench lets neither happen, but a late poll may be taken for a no-show
			u.expired = ans.Status == api.StatusExpired
			return
		}
		wait := cmp.Or(r.cfg.Poll.Fixed, ans.RetryAfter())
		if wait <= 0 {
			wait = retryFallback
		}
		if r.cfg.Poll.AtAdmission && u.polls == 0 {
			if wait, ok = r.untilDue(ctx, u, wait); !ok {
				return
			}
		}
		// A no-show goes quiet once the counter, at the fastest rate, could reach it by a second after its next poll.
		if u.noShow && float64(ans.Position) <= 1+math.Ceil(maxRate(r.cfg.Scenario.Rates)*(wait+time.Second).Seconds()) {
			u.silent = true
			return
		}
		if done := r.wait(ctx, u, token, wait); done {
			return
		}
		err := r.retrying(ctx, func() (err error) {
			sent = r.since()
			ans, err = r.client.Poll(ctx, r.cfg.ProgramID, token)
			recv = r.since()
			u.polls++
			return err
		})
		if err != nil {
			return
		}
	}
}

// untilDue is, once the start of admission is known, u's wait for its first poll in the admission mode:
// until its predicted admission plus DueMargin, or d without one; ok is false when the run ended first.
func (r *runner) untilDue(ctx context.Context, u *user, d time.Duration) (_ time.Duration, ok bool) {
	select {
	case <-r.started.Done():
	case <-ctx.Done():
		return 0, false
	}
	if at, ok := r.admissionAt(u); ok {
		d = max(0, at+DueMargin-r.since())
	}
	return d, true
}

// admissionAt is u's predicted admission from the run's start, if known.
func (r *runner) admissionAt(u *user) (time.Duration, bool) {
	start, k := r.admitStart.Load(), u.ticket-r.baseIssued
	if start == 0 || k < 1 || k >= int64(len(r.plan)) || r.plan[k] < 0 {
		return 0, false
	}
	return time.Duration(start-1) + r.plan[k], true
}

// wait sleeps d before u's next poll, or until u leaves if that comes first, and reports whether u is done.
func (r *runner) wait(ctx context.Context, u *user, token string, d time.Duration) (done bool) {
	until := r.since() + d
	for {
		if at, ok := r.leaveAt(u); ok && at < until {
			if !r.sleep(ctx, at-r.since()) {
				return true
			}
			return r.leave(ctx, u, token)
		}
		if u.leaving < 0 || r.admitStart.Load() != 0 {
			return !r.sleep(ctx, until-r.since())
		}
		// Sleep until the poll, or until the start of admission places the leave.
		sctx, stop := context.WithCancel(ctx)
		unhook := context.AfterFunc(r.started, stop)
		slept := r.sleep(sctx, until-r.since())
		unhook()
		stop()
		if slept || r.started.Err() == nil || ctx.Err() != nil { // polls, or the run ended
			return !slept
		}
	}
}

// leaveAt is when u leaves, its fraction of the wait to its predicted admission (or the timeout), once
// the start of admission is known; ok is false for a user who stays.
func (r *runner) leaveAt(u *user) (time.Duration, bool) {
	if u.leaving < 0 || r.admitStart.Load() == 0 {
		return 0, false
	}
	end := r.cfg.Scenario.Timeout
	if at, ok := r.admissionAt(u); ok {
		end = at
	}
	if end <= u.enterAt {
		return 0, false
	}
	return u.enterAt + time.Duration(u.leaving*float64(end-u.enterAt)), true
}

// leave sends u's DELETE until it is answered, and reports whether u is done: after a 409 it polls again.
func (r *runner) leave(ctx context.Context, u *user, token string) bool {
	u.leaving = -1
	err := r.retrying(ctx, func() error { return r.client.Leave(ctx, r.cfg.ProgramID, token) })
	u.left = err == nil
	var ae *client.Error
	return !errors.As(err, &ae) || ae.Status != http.StatusConflict
}
