package tickets

import (
	"math"
	"time"
)

// Sizing bounds: blocks last minBlockTime..maxBlockTime; an instance takes
// runs of its enters in runTime (or 1.5 fetches), at most maxRun.
const (
	minBlockTime, maxBlockTime = 50 * time.Millisecond, 360 * time.Millisecond
	runTime, maxRun            = 50 * time.Millisecond, 500
)

// The rates that size the shards: turning them on and off, a shard's share,
// and the program item's writes left to block reservations.
func (s *Shards) switchOnRate() float64 { return 0.2 * s.writeUnits }
func (s *Shards) switchOff() float64    { return 0.1 * s.writeUnits }
func (s *Shards) perShard() float64     { return 0.7 * s.writeUnits }
func (s *Shards) reservations() float64 { return 0.25 * s.writeUnits }

// EnterRates are, for items of writeUnits write units a second, the enters a
// second above which a program uses shards, and the most they take together.
func EnterRates(writeUnits float64) (shardsFrom, most float64) {
	s := Shards{writeUnits: writeUnits}
	return s.switchOnRate(), MaxShards * s.perShard()
}

// enabled reports whether shards are in use with a program cache of ttl.
func (s *Shards) enabled(ttl time.Duration) bool { return s.writeUnits > 0 && ttl >= BlockLifetime }

func (s *Shards) shardsFor(rate float64) int {
	if s.fixedShards > 0 {
		return s.fixedShards
	}
	return min(MaxShards, max(1, int(math.Ceil(rate/s.perShard()))))
}

// blockSize is a block for a shard of k handing out perShard numbers a second, lasting for k
// shards to take reservations() writes a second: at most twice the last and 16, half for a first
// block, at least run.
func (s *Shards) blockSize(perShard float64, k int, last, run int64) int64 {
	d := time.Duration(float64(k) / s.reservations() * float64(time.Second))
	n := int64(math.Ceil(perShard * min(max(d, minBlockTime), maxBlockTime).Seconds()))
	if last > 0 {
		n = min(n, 2*last+16)
	} else {
		n = (n + 1) / 2
	}
	return max(1, n, run)
}

// runLength is how many numbers this instance takes at a time for asked enters a second; s.mu must be held.
func (s *Shards) runLength(ps *programState, asked float64) int64 {
	if s.fixedShards > 0 {
		return 1
	}
	return min(maxRun, max(1, int64(asked*max(runTime, ps.fetchTook*3/2).Seconds())))
}

// pace is what a refill measures of a shard and its program.
type pace struct {
	perShard, perTake float64 // the old block's numbers a second and a take
	program           float64 // the program's numbers a second
	stale             bool    // the old block went stale before it was used up
	full              bool    // program is measured over a block's whole life
}

// paceOf measures the pace from the shard's old block at now, the program's
// answers (served), this instance's enters (asked), k shards and the run.
func paceOf(old Shard, served, asked float64, k int, run int64, now time.Time) pace {
	pc := pace{perTake: float64(run)}
	if old.End > 0 {
		age := max(now.Sub(old.ReservedAt), time.Millisecond).Seconds()
		pc.perShard, pc.stale = float64(old.used())/age, old.Next <= old.End
		if old.Takes > 0 {
			pc.perTake = max(pc.perTake, float64(old.used())/float64(old.Takes))
		}
	}
	pc.program, pc.full = served, served > 0 || pc.stale
	switch {
	case pc.stale:
		pc.program = pc.perShard * float64(k)
	case old.End > 0:
		pc.program = max(served, pc.perShard*float64(k))
	}
	pc.program = max(pc.program, asked)
	return pc
}

// wantShards is the shard count a refill of k asks for: 0 below the
// switch-off rate, at most doubled, cut only when the pace fell a lot.
func (s *Shards) wantShards(pc pace, old Shard, asked float64, k int) int {
	switch w := s.shardsFor(pc.program / pc.perTake); {
	case old.End == 0:
		return k
	case pc.full && pc.program < s.switchOff():
		return 0
	case s.fixedShards > 0:
		return s.fixedShards
	case old.Takes >= 4 && asked > 0 && 2*w >= 3*k:
		return min(w, 2*k)
	case pc.full && w <= k/2:
		return w
	}
	return k
}

// refillSize is the block a refill reserves with want shards (k before); one number for want 0.
func (s *Shards) refillSize(pc pace, old Shard, k, want int, run int64) int64 {
	if want == 0 {
		return 1
	}
	if s.fixedBlock > 0 {
		return max(s.fixedBlock, run)
	}
	perShard := pc.perShard
	if old.End == 0 || perShard == 0 {
		perShard = pc.program / float64(want)
	}
	last := int64(0)
	if old.End > 0 {
		last = old.End - old.Start + 1
	}
	return s.blockSize(perShard*float64(k)/float64(want), want, last, run)
}
