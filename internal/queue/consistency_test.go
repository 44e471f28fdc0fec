package queue_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/queue"
)

// TestCachedViewsAgree is the property that makes a per-instance program
// cache safe: whatever mix of tickets, re-anchors and admin changes
// happens, an instance that read the program at l and reuses it until
// CacheableUntil(l, ttl) computes, at every instant, the same serving
// counter as an instance that reads the program fresh. So positions never
// go backwards when a client's polls land on different instances, and no
// instance admits a ticket the others do not.
func TestCachedViewsAgree(t *testing.T) {
	const ttl = time.Second
	for seed := range uint64(16) {
		rng := rand.New(rand.NewPCG(seed, 99))
		// history[i] is the program as stored from at[i] on.
		p := queue.Program{ID: "p", Issued: 0}
		p = p.Rebased(t0, float64(1+rng.IntN(20)), rng.IntN(4) == 0, 0, 0)
		history := []queue.Program{p}
		at := []time.Time{t0}
		now := t0
		for range 400 {
			now = now.Add(time.Duration(rng.IntN(700)) * time.Millisecond)
			switch op := rng.IntN(10); {
			case op < 7: // a burst of tickets
				for range rng.IntN(5) {
					p = p.WithTicketIssued(now)
				}
			case !p.Pending(now): // an admin change, once the previous took effect
				switch rng.IntN(4) {
				case 0:
					p = p.Rebased(now, p.Settled().Rate, true, 0, ttl)
				case 1:
					p = p.Rebased(now, float64(1+rng.IntN(30)), false, 0, ttl)
				case 2:
					p = p.Rebased(now, p.Settled().Rate, p.Settled().Paused, int64(1+rng.IntN(20)), ttl)
				default:
					p = p.Rebased(now, 0.5, false, 0, ttl)
				}
			}
			history = append(history, p)
			at = append(at, now)
		}
		stored := func(t time.Time) queue.Program { // the program as a fresh read at t sees it
			i := len(at) - 1
			for at[i].After(t) {
				i--
			}
			return history[i]
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
	}
}

// TestScheduledChange: with a cache TTL an admin change takes effect one
// TTL later, and the counter is continuous across it.
func TestScheduledChange(t *testing.T) {
	p := program(1000, 100, 10, false)
	at := t0.Add(10 * time.Second) // serving 200
	q := p.Rebased(at, 10, true, 0, time.Second)
	if !q.Pending(at) || !q.NextAt.Equal(at.Add(time.Second)) {
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
	admit := p.Rebased(at, 10, false, 50, time.Second)
	if got := admit.Serving(at.Add(999 * time.Millisecond)); got != 209 {
		t.Errorf("admission before it takes effect: %d, want 209", got)
	}
	if got := admit.Serving(at.Add(time.Second)); got != 260 {
		t.Errorf("admission when it takes effect: %d, want 260", got)
	}
}
