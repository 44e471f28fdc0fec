package loadtest

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/tools/client"
)

// user is one virtual user's outcome.
type user struct {
	entered     bool
	leaving     float64 // fraction of the wait after which it leaves; negative: never
	left        bool
	ticket      int64 // from the enter answer
	issuedAtMs  int64 // the token's issuedAt (server clock, Unix ms); 0 when unknown
	prequeue    int64 // the size of a shuffled pre-queue, when an answer told it
	enterAt     time.Duration
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

// user plays one virtual user; entered is called once its enter is over,
// whatever the outcome.
func (r *runner) user(ctx context.Context, u *user, entered func()) {
	var once sync.Once
	defer once.Do(entered)
	ans, sent, recv, ok := r.enter(ctx)
	if !ok {
		return
	}
	u.entered, u.enterAt, u.ticket = true, recv, ans.Ticket
	if !ans.IssuedAt.IsZero() {
		u.issuedAtMs = ans.IssuedAt.UnixMilli()
	}
	once.Do(entered)
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
		wait := r.cfg.Poll.Fixed
		if wait == 0 {
			wait = ans.RetryAfter()
			if wait <= 0 {
				wait = retryFallback
			}
		}
		if r.cfg.Poll.AtAdmission && u.polls == 0 {
			d, ok := r.untilDue(ctx, u)
			if !ok {
				return
			}
			if d >= 0 {
				wait = d
			}
		}
		if r.stopsPolling(u, ans.Position, wait) {
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

// untilDue is, in the admission mode, how long from now u waits for its
// first poll, once the start of admission is known: until its predicted
// admission plus DueMargin, or -1 when there is none. ok is false when the
// run ended first.
func (r *runner) untilDue(ctx context.Context, u *user) (d time.Duration, ok bool) {
	select {
	case <-r.started.Done():
	case <-ctx.Done():
		return 0, false
	}
	at, ok := r.admissionAt(u)
	if !ok {
		return -1, true
	}
	return max(0, at+DueMargin-r.since()), true
}

// admissionAt is when u's ticket is predicted to be admitted, from the
// run's start; ok is false when that is not known.
func (r *runner) admissionAt(u *user) (time.Duration, bool) {
	start, k := r.admitStart.Load(), u.ticket-r.baseIssued
	if start == 0 || k < 1 || k >= int64(len(r.plan)) || r.plan[k] < 0 {
		return 0, false
	}
	return time.Duration(start-1) + r.plan[k], true
}

// wait sleeps d before u's next poll, or leaves if u's leave instant comes
// first (woken at the start of admission to place it), and reports whether
// u is done (it left, or the run ended).
func (r *runner) wait(ctx context.Context, u *user, token string, d time.Duration) (done bool) {
	until := r.since() + d
	for {
		if at, ok := r.leaveAt(u); ok && at < until {
			if !r.sleep(ctx, at-r.since()) {
				return true
			}
			// A 409 (admitted first) leaves u waiting: it polls at once and
			// hears it.
			return r.leave(ctx, u, token)
		}
		if u.leaving < 0 || r.admitStart.Load() != 0 {
			return !r.sleep(ctx, until-r.since())
		}
		// Sleep until the poll, or until the start of admission is known.
		sctx, stop := context.WithCancel(ctx)
		unhook := context.AfterFunc(r.started, stop)
		slept := r.sleep(sctx, until-r.since())
		unhook()
		stop()
		if slept {
			return false
		}
		if r.started.Err() == nil || ctx.Err() != nil { // the run ended
			return true
		}
	}
}

// leaveAt is when u leaves: its fraction of the wait from its enter to its
// predicted admission (or the timeout). ok is false for a user who stays,
// or while the start of admission is not known.
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

// leave sends u's DELETE until it is answered, and reports whether u is
// done; after a 409 (admitted first) u polls again.
func (r *runner) leave(ctx context.Context, u *user, token string) bool {
	u.leaving = -1
	for {
		err := r.client.Leave(ctx, r.cfg.ProgramID, token)
		var ae *client.Error
		switch {
		case err == nil:
			u.left = true
			return true
		case errors.As(err, &ae) && ae.Status == http.StatusConflict:
			return false
		case !r.retry(ctx, err):
			return true
		}
	}
}
