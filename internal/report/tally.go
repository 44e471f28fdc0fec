package report

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/metrics"
)

// Minute is one minute of a program's tally, summed over the instances
// that flushed it.
type Minute struct {
	At time.Time // the minute's start, UTC
	// Requests answered for the program, of them Polls; enters that solved
	// a proof of work and those refused for one; bypass passes issued.
	Requests, Polls                          int64
	ProofsSolved, ProofsFailed, BypassPasses int64
	// Answers counts the WAITING answers; Positions, EstimatesMs and
	// Counters sum their positions, estimated waits and serving counters
	// (ticket − position).
	Answers, Positions, EstimatesMs, Counters int64
	PerSecond                                 [60]int64 // requests in each second
}

// Add adds n's counts to m.
func (m *Minute) Add(n Minute) {
	m.Requests += n.Requests
	m.Polls += n.Polls
	m.ProofsSolved += n.ProofsSolved
	m.ProofsFailed += n.ProofsFailed
	m.BypassPasses += n.BypassPasses
	m.Answers += n.Answers
	m.Positions += n.Positions
	m.EstimatesMs += n.EstimatesMs
	m.Counters += n.Counters
	for i, c := range n.PerSecond {
		m.PerSecond[i] += c
	}
}

// Counter is the mean serving counter the minute's WAITING answers saw.
func (m Minute) Counter() int64 {
	if m.Answers == 0 {
		return 0
	}
	return m.Counters / m.Answers
}

// PerPlace is the mean estimated wait a place the minute's answers gave.
func (m Minute) PerPlace() (time.Duration, bool) {
	if m.Positions == 0 {
		return 0, false
	}
	return time.Duration(float64(m.EstimatesMs) / float64(m.Positions) * float64(time.Millisecond)), true
}

// Sink keeps the tallies (storetest holds the contract).
type Sink interface {
	// AddMinute adds m to the program's stored minute m.At, once for a
	// flush id, however often it is retried.
	AddMinute(ctx context.Context, programID, flush string, m Minute) error
}

// MaxPrograms bounds the programs one instance tallies in a minute.
const MaxPrograms = 64

// maxPending bounds the minutes kept for a retry.
const maxPending = 4 * MaxPrograms

// FlushBudget bounds a flush.
const FlushBudget = 5 * time.Second

// Tally is a metrics.Observer that counts each program's answered
// requests by minute, and writes each minute once it is over, at most once
// a minute an instance, off the requests' path (Flush on the way out).
type Tally struct {
	sink Sink
	now  func() time.Time
	log  *slog.Logger
	id   string // the instance's, in flush ids

	mu       sync.Mutex
	open     map[key]*Minute
	failed   []pending // written and failed: retried as they are, from retryAt
	retryAt  time.Time
	flushing bool
	seq      int64
}

// pending is a minute's write with its flush id.
type pending struct {
	key   key
	flush string
	m     Minute
}

type key struct {
	program string
	minute  int64 // Unix minutes
}

// NewTally returns a Tally writing to sink, instance naming this process.
func NewTally(sink Sink, now func() time.Time, log *slog.Logger, instance string) *Tally {
	return &Tally{sink: sink, now: now, log: log, id: instance, open: map[key]*Minute{}}
}

// Observe counts r (of the operator's, only the bypass passes issued); a
// minute over starts a flush in the background.
func (t *Tally) Observe(r metrics.Request) {
	if r.ProgramID == "" || r.Op == metrics.OpPage || r.Op == metrics.OpOther || r.Op == metrics.OpAdmin && r.BypassPasses == 0 {
		return
	}
	now := t.now().UTC()
	k := key{r.ProgramID, now.Unix() / 60}
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.open[k]
	if m == nil {
		// A program the answer found, or a proof refused: the store knows
		// it. Other refusals count only beside those.
		if r.Status >= 400 && r.Code != api.CodeChallengeFailed && r.Code != api.CodeChallengeRequired || len(t.open) >= MaxPrograms {
			return
		}
		m = &Minute{At: time.Unix(k.minute*60, 0).UTC()}
		t.open[k] = m
	}
	m.BypassPasses += r.BypassPasses
	if r.Op != metrics.OpAdmin {
		m.Requests++
		m.PerSecond[now.Second()]++
	}
	switch {
	case r.Op == metrics.OpPoll:
		m.Polls++
	case r.Op == metrics.OpEnter && r.Proof && r.Status < 400:
		m.ProofsSolved++
	case r.Code == api.CodeChallengeFailed || r.Code == api.CodeChallengeRequired:
		m.ProofsFailed++
	}
	if r.TokenStatus == string(api.StatusWaiting) && r.Position > 0 {
		m.Answers++
		m.Positions += r.Position
		m.EstimatesMs += r.EstimatedWait.Milliseconds()
		m.Counters += r.Ticket - r.Position
	}
	if !t.flushing && (t.due(k.minute) || len(t.failed) > 0 && !now.Before(t.retryAt)) {
		t.flushing = true
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), FlushBudget)
			defer cancel()
			if err := t.flush(ctx, false); err != nil {
				t.log.Warn("report tally", "error", err.Error())
			}
		}()
	}
}

// due reports whether a minute before minute is open.
func (t *Tally) due(minute int64) bool {
	for k := range t.open {
		if k.minute < minute {
			return true
		}
	}
	return false
}

// Flush writes every open minute, the current one too.
func (t *Tally) Flush(ctx context.Context) error {
	t.mu.Lock()
	t.flushing = true
	t.mu.Unlock()
	return t.flush(ctx, true)
}

// flush writes the minutes over (all with every); a write that fails is
// retried by the next flush under the same flush id, so that a write
// applied whose answer was lost is not added twice.
func (t *Tally) flush(ctx context.Context, every bool) error {
	t.mu.Lock()
	current := t.now().UTC().Unix() / 60
	for k, m := range t.open {
		if every || k.minute < current {
			t.seq++
			t.failed = append(t.failed, pending{k, t.id + "." + strconv.FormatInt(t.seq, 10), *m})
			delete(t.open, k)
		}
	}
	todo := t.failed
	t.failed = nil
	t.mu.Unlock()
	var errs []error
	var again []pending
	for _, p := range todo {
		if err := t.sink.AddMinute(ctx, p.key.program, p.flush, p.m); err != nil {
			errs = append(errs, err)
			again = append(again, p)
		}
	}
	t.mu.Lock()
	t.failed = append(t.failed, again...)
	if n := len(t.failed) - maxPending; n > 0 {
		t.failed = t.failed[n:] // the oldest go: a store down for hours
	}
	t.retryAt = t.now().Add(time.Minute)
	t.flushing = false
	t.mu.Unlock()
	return errors.Join(errs...)
}
