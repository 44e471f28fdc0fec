package queue_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/pace"
)

// randomRate is an admission rate from the whole range, most often a
// handful per second, sometimes one whose ticket time is not a whole
// number of nanoseconds or milliseconds, sometimes an extreme.
func randomRate(rng *rand.Rand) pace.Rate {
	switch rng.IntN(8) {
	case 0:
		return pace.Rate(1 + rng.IntN(999)) // under one per second
	case 1:
		return pace.Rate(1 + rng.Int64N(int64(100_000*pace.OnePerSecond))) // anything
	case 2:
		return pace.Rate(3 * (1 + rng.IntN(10)) * int(pace.OnePerSecond) / 7) // awkward fractions
	default:
		return pace.Rate(1+rng.IntN(30)) * pace.OnePerSecond
	}
}

// seeds is n, or a quarter of it under the race detector. The property
// tests run each seed in one goroutine of its own, where the detector finds
// nothing at five times the CPU; make test runs them all without it too.
func seeds(n uint64) uint64 {
	if raceEnabled {
		return max(n/4, 2)
	}
	return n
}

// TestCachedViewsAgree is the property that makes a per-instance program
// cache safe: whatever mix of tickets, re-anchors and admin changes
// happens, an instance that read the program at l and reuses it until
// CacheableUntil(l, ttl) computes, at every instant, the same serving
// counter as an instance that reads the program fresh. So positions never
// go backwards when a client's polls land on different instances, and no
// instance admits a ticket the others do not. A fresh read's counter
// never goes down either.
func TestCachedViewsAgree(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	for seed := range seeds(32) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 99))
			// history[i] is the program as stored from at[i] on.
			p := admission.Program{ID: "p", Issued: 0}
			p = p.Rebased(t0, randomRate(rng), rng.IntN(4) == 0, 0, 0)
			history := []admission.Program{p}
			at := []time.Time{t0}
			now := t0
			for range 400 {
				now = now.Add(time.Duration(rng.IntN(700)) * time.Millisecond)
				switch op := rng.IntN(10); {
				case op < 5: // a burst of tickets
					for range rng.IntN(5) {
						p = p.WithTicketIssued(now)
					}
				case op < 7: // blocks of tickets for the ticket shards
					for range rng.IntN(3) {
						p = p.WithTicketsIssued(now, 1+rng.Int64N(200))
					}
				case !p.Pending(now): // an admin change, once the previous took effect
					settled := p.Settled()
					switch rng.IntN(4) {
					case 0:
						p = p.Rebased(now, settled.Rate, true, 0, ttl)
					case 1:
						p = p.Rebased(now, randomRate(rng), false, 0, ttl)
					case 2:
						p = p.Rebased(now, settled.Rate, settled.Paused, int64(1+rng.IntN(20)), ttl)
					default:
						p = p.Rebased(now, 0, false, 0, ttl)
					}
				}
				history = append(history, p)
				at = append(at, now)
			}
			checkCachedViews(t, seed, history, at, ttl)
		})
	}
}

// checkCachedViews checks a program's history (history[i] stored from
// at[i] on): an instance that read it at any point and reuses the read
// until CacheableUntil(read, ttl) admits exactly the tickets a fresh read
// admits, and a fresh read's serving counter never goes down.
func checkCachedViews(t *testing.T, seed uint64, history []admission.Program, at []time.Time, ttl time.Duration) {
	t.Helper()
	stored := func(t time.Time) admission.Program { // the program as a fresh read at t sees it
		// at is in order: the last entry not after t.
		return history[sort.Search(len(at), func(i int) bool { return at[i].After(t) })-1]
	}
	for i, loaded := range history {
		l := at[i]
		if i+1 < len(at) && at[i+1].Equal(l) {
			continue // overwritten at the same instant: never read
		}
		until := loaded.CacheableUntil(l, ttl)
		for when := l; when.Before(until); when = when.Add(7 * time.Millisecond) {
			fresh := stored(when)
			for ticket := fresh.Serving(when) - 3; ticket <= fresh.Serving(when)+3; ticket++ {
				if ticket < 1 || ticket > loaded.Issued {
					continue // a cached instance never sees tokens issued after its read
				}
				if got, want := loaded.Admits(ticket, when), fresh.Admits(ticket, when); got != want {
					t.Fatalf("seed %d: ticket %d at +%v: cached read from +%v admits=%v, fresh admits=%v\ncached %+v\nfresh  %+v",
						seed, ticket, when.Sub(t0), l.Sub(t0), got, want, loaded, fresh)
				}
			}
		}
	}
	for when, prev := t0, int64(0); when.Before(at[len(at)-1]); when = when.Add(3 * time.Millisecond) {
		s := stored(when).Serving(when)
		if s < prev {
			t.Fatalf("seed %d: the serving counter went down at +%v: %d after %d", seed, when.Sub(t0), s, prev)
		}
		prev = s
	}
}

// TestReturnedTicketsAgree: tickets given back from the top (never handed
// out) keep TestCachedViewsAgree's property, when
// admission.Program.MayReturn allows it: however close to the counter they are, with admin changes pending or
// due, and when the queue then drains and re-anchors on the numbers handed
// out again.
func TestReturnedTicketsAgree(t *testing.T) {
	t.Parallel()
	const ttl, hold = time.Second, 2 * time.Second
	returned, n := 0, seeds(12)
	for seed := range n {
		rng := rand.New(rand.NewPCG(seed, 5))
		p := admission.Program{ID: "p"}.Rebased(t0, pace.Rate(1+rng.IntN(30))*pace.OnePerSecond, false, 0, 0)
		history, at, now := []admission.Program{p}, []time.Time{t0}, t0
		for range 400 {
			now = now.Add(time.Duration(rng.IntN(700)) * time.Millisecond)
			switch rng.IntN(5) {
			case 0:
				p = p.WithTicketsIssued(now, 1+rng.Int64N(30))
			case 1:
				p = p.WithTicketIssued(now)
			case 2: // a change that acts a TTL later, and stays unfolded after
				if !p.Pending(now) {
					p = p.Rebased(now, pace.Rate(1+rng.IntN(30))*pace.OnePerSecond, rng.IntN(5) == 0, 0, ttl)
				}
			default:
				serving := p.Serving(now)
				if from := serving + 1 + rng.Int64N(max(1, min(40, p.Issued-serving))); p.MayReturn(from, now, hold) {
					p = p.WithTicketsReturned(from)
					returned++
				}
			}
			history, at = append(history, p), append(at, now)
		}
		checkCachedViews(t, seed, history, at, ttl)
	}
	t.Logf("%d returns in %d histories", returned, n)
	if want := 150 * int(n) / 12; returned < want {
		t.Errorf("only %d returns in %d histories, want %d: the test exercises too few", returned, n, want)
	}
}

// TestNoIdleCredit: with changes that act at once, a ticket is never
// admitted at the instant it is handed out, nor a block's first number at
// the instant the block is reserved, however long the queue sat empty
// before; and the stored drain instant is never before the exact one and
// late by less than a nanosecond per ticket since the counter was last
// anchored. A block reserved from n tickets leaves the program exactly as
// n single tickets at that instant would.
func TestNoIdleCredit(t *testing.T) {
	t.Parallel()
	for seed := range seeds(64) {
		rng := rand.New(rand.NewPCG(seed, 7))
		p := admission.Program{ID: "p"}.Rebased(t0, randomRate(rng), false, 0, 0)
		now := t0
		for range 2000 {
			switch op := rng.IntN(20); {
			case op == 0:
				now = now.Add(time.Duration(rng.Int64N(int64(time.Hour))))
			case op == 1:
				p = p.Rebased(now, randomRate(rng), rng.IntN(5) == 0, int64(rng.IntN(3)), 0)
			case op < 10:
				now = now.Add(time.Duration(rng.IntN(50)) * time.Millisecond)
			case op < 13:
				n := 1 + rng.Int64N(300)
				one := p
				for range n {
					one = one.WithTicketIssued(now)
				}
				p = p.WithTicketsIssued(now, n)
				if n > 1 {
					one.Recent = p.Recent // single tickets only
				}
				if d := cmp.Diff(one, p); d != "" {
					t.Fatalf("seed %d: a block of %d differs from %d single tickets (-single +block):\n%s", seed, n, n, d)
				}
				if p.Current.Advancing() && p.Admits(p.Issued-n+1, now) {
					t.Fatalf("seed %d: block %d..%d admitted the instant it was reserved: %+v", seed, p.Issued-n+1, p.Issued, p)
				}
			default:
				p = p.WithTicketIssued(now)
				if p.Current.Advancing() && p.Admits(p.Issued, now) {
					t.Fatalf("seed %d: ticket %d admitted the instant it was issued: %+v", seed, p.Issued, p)
				}
			}
			if p.Current.Advancing() {
				exact := p.Current.DrainAtNs(p.Issued)
				if late := p.DrainAtNs - exact; late < 0 || late > max(p.Issued-p.Current.Base, 0) {
					t.Fatalf("seed %d: DrainAtNs %d is %d ns after the exact %d, want within [0, %d]: %+v",
						seed, p.DrainAtNs, late, exact, p.Issued-p.Current.Base, p)
				}
			}
		}
	}
}

// TestScheduledChange: with a cache TTL an admin change takes effect one
// TTL later, and the counter is continuous across it.
func TestScheduledChange(t *testing.T) {
	p := program(1000, 100, 10, false)
	at := t0.Add(10 * time.Second) // serving 200
	q := p.Rebased(at, rate(10), true, 0, time.Second)
	if !q.Pending(at) || q.Next.AnchorMs != at.Add(time.Second).UnixMilli() {
		t.Fatalf("pause not scheduled one TTL later: %+v", q)
	}
	if got := q.Serving(at.Add(500 * time.Millisecond)); got != 205 {
		t.Errorf("during the TTL the counter keeps its course: %d, want 205", got)
	}
	if got := q.Serving(at.Add(time.Hour)); got != 210 {
		t.Errorf("after the pause took effect: %d, want 210", got)
	}
	if s := q.Settled(); !s.Paused {
		t.Errorf("settled segment not paused: %+v", s)
	}
	admit := p.Rebased(at, rate(10), false, 50, time.Second)
	if got := admit.Serving(at.Add(999 * time.Millisecond)); got != 209 {
		t.Errorf("admission before it takes effect: %d, want 209", got)
	}
	if got := admit.Serving(at.Add(time.Second)); got != 260 {
		t.Errorf("admission when it takes effect: %d, want 260", got)
	}
}
