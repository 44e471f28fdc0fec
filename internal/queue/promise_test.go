package queue_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
)

// The policies' promise (docs/design.md, "The earliest admission") holds
// for either cache setting: a TTL of 1 s (the default), or none.
const promiseTTL = time.Second

// changeDelay is the service's change delay under a cache TTL.
func changeDelay(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		return 0
	}
	return ttl + admission.AdminWriteBudget
}

// randomProgram is a program in any state the admission model allows:
// with or without a rate, paused or not, maybe before its opening, maybe
// with a change scheduled; and a waiting ticket and an instant to answer
// it at.
func randomProgram(rng *rand.Rand, delay time.Duration) (p admission.Program, ticket int64, now time.Time) {
	randRate := func() pace.Rate {
		if rng.IntN(6) == 0 {
			return 0 // manual admission only
		}
		return pace.Rate(1 + rng.Int64N(2_000_000)) // 0.001/s to 2,000/s
	}
	issued := 1 + rng.Int64N(1_000_000)
	p = admission.Program{ID: "p", Issued: issued}
	if rng.IntN(4) == 0 {
		p.OpensAt = t0.Add(time.Duration(rng.Int64N(int64(time.Minute))))
	}
	p = p.Rebased(t0, randRate(), rng.IntN(2) == 0, rng.Int64N(issued), 0)
	if rng.IntN(3) == 0 { // a change seen by the answer, maybe a rise
		p = p.Rebased(t0.Add(time.Duration(rng.Int64N(int64(5*time.Second)))), randRate(), rng.IntN(2) == 0, rng.Int64N(100), delay)
	}
	now = t0.Add(time.Duration(rng.Int64N(int64(10 * time.Second))))
	if rng.IntN(4) == 0 { // manual admissions at a measured pace
		p.ManualRate = randRate() + 1
		p.LastAdmitGap = time.Duration(1+rng.Int64N(60)) * time.Second
		p.LastAdmitAt = now.Add(-time.Duration(rng.Int64N(int64(2 * p.LastAdmitGap))))
	}
	serving := p.Serving(now)
	if serving >= issued {
		return p, 0, now
	}
	return p, serving + 1 + rng.Int64N(issued-serving), now
}

// earliestUnderTheBound is the first instant at or after now at which
// ticket is admitted, over the futures the bound allows: the schedule p
// knows, or a resume at p's configured rate (an opening ahead moved to it)
// made as early as a change the answer does not show can be (it takes
// effect notice after now) and not before a scheduled change has taken
// effect. False when p has no rate.
func earliestUnderTheBound(p admission.Program, ticket int64, now time.Time, notice, delay time.Duration) (time.Time, bool) {
	settled := p.Settled()
	if settled.Rate <= 0 {
		return time.Time{}, false
	}
	// A change p does not show was made after every write p shows: after
	// the one that anchored its current segment, delay before it took
	// effect (or at it).
	made := laterOf(now.Add(notice-delay), pace.FromUnixMs(p.Current.AnchorMs).Add(-delay))
	if p.Pending(made) {
		made = pace.FromUnixMs(p.Next.AnchorMs)
	}
	// Until the resume takes effect its program is p, and it is valid
	// only from the instant it was made.
	if known, ok := p.AdmissionTime(ticket, now); ok && !known.After(made) {
		return known, true
	}
	q := p
	q.OpensAt = time.Time{} // the opening moved to the resume (Rebased's segment starts then)
	resumed := q.Rebased(made, settled.Rate, false, 0, delay)
	return resumed.AdmissionTime(ticket, laterOf(now, made))
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// TestNoPollAfterTheEarliestAdmission: whatever the program's state and
// the cache setting, an eta or steady answer schedules the next poll no
// later than the earliest admission the bound allows (or the policy's
// floor, and its two leads of margin), and within Hold while paused.
func TestNoPollAfterTheEarliestAdmission(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 1))
	policies := []struct {
		name              string
		policy            polling.Policy
		floor, lead, hold time.Duration
	}{
		{"eta", polling.DefaultETA(), polling.DefaultETA().Floor, polling.DefaultETA().Lead, polling.DefaultETA().Hold},
		{"steady", polling.DefaultSteady(), polling.DefaultSteady().Floor, polling.DefaultSteady().Lead, polling.DefaultSteady().Hold},
	}
	checked := 0
	for i := range 20000 {
		ttl := promiseTTL * time.Duration(i%2) // every other case without a cache
		delay := changeDelay(ttl)
		p, ticket, now := randomProgram(rng, delay)
		if ticket == 0 {
			continue
		}
		// The read the answer comes from: up to one TTL old with a cache,
		// made at now without one.
		readAt := now.Add(-time.Duration(rng.Int64N(int64(ttl) + 1)).Truncate(time.Millisecond))
		notice := admission.ChangeNotice(readAt, now, ttl)
		earliest, bounded := earliestUnderTheBound(p, ticket, now, notice, delay)
		if !bounded {
			continue
		}
		checked++
		sit := p.Situation(ticket, now, notice)
		for _, pol := range policies {
			d := pol.policy.RetryAfter(sit, rng)
			latest := max(pol.floor, earliest.Sub(now)+2*pol.lead+time.Millisecond)
			if d > latest {
				t.Fatalf("%s: ticket %d of %+v at t0+%v, notice %v: polls at t0+%v, after the earliest admission t0+%v (situation %+v)",
					pol.name, ticket, p, now.Sub(t0), notice, now.Add(d).Sub(t0), earliest.Sub(t0), sit)
			}
			if p.Settled().Paused && d > pol.hold {
				t.Fatalf("%s: paused, polls after %v, beyond the hold %v (situation %+v)", pol.name, d, pol.hold, sit)
			}
		}
	}
	if checked < 10000 {
		t.Fatalf("only %d of the random cases had a rate and a waiting ticket", checked)
	}
}

// TestPausedAnswerCountsTheCacheAge: a paused program's answer under steady
// comes back when a resume made right after the program was read could
// first admit the ticket: the older the cached read, the sooner.
func TestPausedAnswerCountsTheCacheAge(t *testing.T) {
	ctx := context.Background()
	svc, c := newService(t, queue.WithProgramCache(promiseTTL),
		queue.WithPolicies(polling.Named(polling.DefaultTiers(), polling.DefaultETA(), polling.DefaultSteady())))
	paused := true
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(10)), Paused: &paused, PollingPolicy: new("steady")}); err != nil {
		t.Fatal(err)
	}
	var last queue.View
	for range 50 {
		v, _, err := svc.Enter(ctx, "gala", queue.Entry{})
		if err != nil {
			t.Fatal(err)
		}
		last = v
	}
	c.Advance(3 * time.Second)
	// Position 50 at 10/s: 5 s after the resume takes effect.
	for _, tt := range []struct {
		age  time.Duration
		want time.Duration
	}{
		{0, promiseTTL + 5*time.Second},                                             // a fresh read
		{400 * time.Millisecond, promiseTTL - 400*time.Millisecond + 5*time.Second}, // the same read, 400 ms old
	} {
		c.Advance(tt.age)
		v, err := svc.Poll(ctx, "gala", last.TokenID)
		if err != nil {
			t.Fatal(err)
		}
		if v.Position != 50 || v.RetryAfter != tt.want {
			t.Errorf("read %v old: position %d, retry after %v; want 50 and %v", tt.age, v.Position, v.RetryAfter, tt.want)
		}
	}
}

// TestCacheNotice: an answer's notice comes from the read of its own
// program version; a newer version read later lends it nothing, and
// without a cache a change may have taken effect a write budget ago.
func TestCacheNotice(t *testing.T) {
	svc, _ := newService(t, queue.WithProgramCache(promiseTTL))
	v1, v2 := admission.Program{ID: "p", Version: 1}, admission.Program{ID: "p", Version: 2}
	svc.CachePut(v1, t0)
	if got, want := svc.CacheNotice(v1, t0.Add(300*time.Millisecond)), 700*time.Millisecond; got != want {
		t.Errorf("read 300 ms ago: notice %v, want %v", got, want)
	}
	svc.CachePut(v2, t0.Add(500*time.Millisecond))
	if got, want := svc.CacheNotice(v1, t0.Add(600*time.Millisecond)), -admission.AdminWriteBudget; got != want {
		t.Errorf("version 1 after version 2 was read: notice %v, want %v", got, want)
	}
	if got, want := svc.CacheNotice(v2, t0.Add(600*time.Millisecond)), 900*time.Millisecond; got != want {
		t.Errorf("version 2: notice %v, want %v", got, want)
	}
	uncached, _ := newService(t)
	if got, want := uncached.CacheNotice(v1, t0), -admission.AdminWriteBudget; got != want {
		t.Errorf("no cache: notice %v, want %v", got, want)
	}
}
