package tickets

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/queue"
)

// Bounds of the give-back: at most once a giveBackEvery per program, of
// maxOwnBlocks blocks and maxReturns runs kept for returnsKept at most.
const (
	giveBackEvery            = 250 * time.Millisecond
	maxOwnBlocks, maxReturns = 32, 64
	returnsKept              = time.Minute
)

// shardBlock names shard's block that starts at start, reserved at reservedAt.
type shardBlock struct {
	shard      int
	start      int64
	reservedAt time.Time
}

// same reports whether b and o name the same block (to the millisecond, as stores keep it).
func (b shardBlock) same(o shardBlock) bool {
	return b.shard == o.shard && b.start == o.start && b.reservedAt.UnixMilli() == o.reservedAt.UnixMilli()
}

// recordReserved records block b: to trim once stale if filled, its numbers left to give back if surely not.
func (s *Shards) recordReserved(id string, b shardBlock, left Run, filled, sure bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.addState(id, b.reservedAt)
	switch {
	case filled:
		// The shard's older block, and those a lifetime older, are used up or below the top.
		ps.blocks = slices.DeleteFunc(ps.blocks, func(o shardBlock) bool {
			return o.shard == b.shard || o.reservedAt.Before(b.reservedAt.Add(-BlockLifetime))
		})
		ps.blocks = append(ps.blocks, b)
		if len(ps.blocks) > maxOwnBlocks {
			ps.blocks = ps.blocks[1:]
		}
	case sure && left.First <= left.Last:
		left.ReservedAt = b.reservedAt
		ps.addReturns(left)
	}
}

// addReturns adds runs to give back, keeping the newest maxReturns; s.mu must be held.
func (ps *programState) addReturns(runs ...Run) {
	ps.returns = append(ps.returns, runs...)
	if n := len(ps.returns) - maxReturns; n > 0 {
		slices.SortFunc(ps.returns, func(a, b Run) int { return cmp.Compare(a.Last, b.Last) })
		ps.returns = slices.Delete(ps.returns, 0, n)
	}
}

// giveBackWork is one give-back: blocks to trim (backOf with back, the
// numbers this instance held) and runs to give back.
type giveBackWork struct {
	trims   []shardBlock
	back    Run
	backOf  shardBlock
	returns []Run
}

// startGiveBack takes the give-back due at now, if any; the caller must end it (GiveBack).
func (s *Shards) startGiveBack(id string, now time.Time) (giveBackWork, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.stateOf(id)
	staleBefore := now.Add(-BlockLifetime)
	if ps.givingBack || now.Sub(ps.giveBackAt) < giveBackEvery || now.Sub(ps.lastAsk) < BlockLifetime {
		return giveBackWork{}, false
	}
	var w giveBackWork
	if !ps.held.empty() && ps.held.ReservedAt.Before(staleBefore) {
		if ps.heldFilled {
			w.back, w.backOf = ps.held, shardBlock{shard: ps.heldShard, start: ps.held.Block, reservedAt: ps.held.ReservedAt}
			w.trims = append(w.trims, w.backOf)
		} else {
			w.returns = append(w.returns, Run{First: ps.held.First, Last: ps.held.Last, ReservedAt: ps.held.ReservedAt})
		}
		ps.held = Run{}
	}
	ps.blocks = slices.DeleteFunc(ps.blocks, func(b shardBlock) bool {
		if !b.reservedAt.Before(staleBefore) {
			return false
		}
		if !b.same(w.backOf) {
			w.trims = append(w.trims, b)
		}
		return true
	})
	w.returns = append(w.returns, ps.returns...)
	ps.returns = nil
	if len(w.trims) == 0 && len(w.returns) == 0 {
		return giveBackWork{}, false
	}
	ps.givingBack, ps.giveBackAt = true, now
	return w, true
}

// GiveBack gives back to programID, when due, the numbers this instance
// reserved or holds that nobody took: it trims its stale blocks, then gives
// back, top down, the runs that end at the last ticket while the counter is far.
func (s *Shards) GiveBack(ctx context.Context, programs queue.Programs, programID string, now time.Time) {
	if !s.enabled(programs.TTL()) {
		return
	}
	w, ok := s.startGiveBack(programID, now)
	if !ok {
		return
	}
	runs := append(w.returns, s.trim(ctx, programID, w)...)
	defer s.withState(programID, func(ps *programState) { // ends it, keeping the runs left at return
		ps.givingBack = false
		ps.addReturns(runs...)
	})
	runs = coalesce(runs)
	p, err := programs.Get(ctx, programID, now)
	if err != nil {
		return
	}
	hold := programs.TTL() + time.Second
	runs, p = s.returnTop(ctx, programs, p, runs, hold, now)
	// Runs the counter will have reached, or kept too long, are dropped.
	reach := now.Add(hold)
	runs = slices.DeleteFunc(runs, func(r Run) bool {
		return now.Sub(r.ReservedAt) > returnsKept || p.Segment(reach).Counter(reach.UnixMilli()) >= r.First-1
	})
}

// trim trims w's blocks and returns the numbers they retired.
func (s *Shards) trim(ctx context.Context, programID string, w giveBackWork) []Run {
	var runs []Run
	for _, b := range w.trims {
		var back Run
		if b.same(w.backOf) {
			back = w.back
		}
		r, ok, err := s.store.TrimShard(ctx, programID, b.shard, b.start, b.reservedAt, back)
		if err != nil {
			s.logFailure(ctx, "trim shard", programID, err, "the numbers it may have retired are gaps")
		}
		if err == nil && ok {
			r.ReservedAt = b.reservedAt
			runs = append(runs, r)
		}
	}
	return runs
}

// returnTop gives back, top down, the sorted runs that end at p's last ticket; a store error drops its run.
func (s *Shards) returnTop(ctx context.Context, programs queue.Programs, p admission.Program, runs []Run, hold time.Duration, now time.Time) ([]Run, admission.Program) {
	for len(runs) > 0 {
		top := runs[len(runs)-1]
		if top.Last != p.Issued || !p.MayReturn(top.First, now, hold) {
			break
		}
		ok, err := s.store.ReturnTickets(ctx, p, top.First)
		if !ok {
			if err != nil {
				s.logFailure(ctx, "return tickets", p.ID, err, "the run is dropped: gaps if it was not given back")
				runs = runs[:len(runs)-1]
			}
			break
		}
		runs = runs[:len(runs)-1]
		p = p.WithTicketsReturned(top.First)
		programs.Put(p, now)
	}
	return runs, p
}

// coalesce sorts runs and joins adjacent ones, keeping the latest ReservedAt.
func coalesce(runs []Run) []Run {
	slices.SortFunc(runs, func(a, b Run) int { return cmp.Compare(a.First, b.First) })
	out := runs[:0]
	for _, r := range runs {
		if n := len(out); n > 0 && out[n-1].Last+1 == r.First {
			out[n-1].Last = r.Last
			if r.ReservedAt.After(out[n-1].ReservedAt) {
				out[n-1].ReservedAt = r.ReservedAt
			}
			continue
		}
		out = append(out, r)
	}
	return out
}
