package queue_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
)

// The policies' promise (docs/design.md, "The earliest admission"), checked
// with the change delay of the default cache TTL.
const (
	promiseTTL   = time.Second
	promiseDelay = promiseTTL + queue.AdminWriteBudget
)

// randomProgram is a program in any state the admission model allows:
// with or without a rate, paused or not, maybe before its opening, maybe
// with a change scheduled; and a waiting ticket and an instant to answer
// it at.
func randomProgram(rng *rand.Rand) (p queue.Program, ticket int64, now time.Time) {
	randRate := func() queue.Rate {
		if rng.IntN(6) == 0 {
			return 0 // manual admission only
		}
		return queue.Rate(1 + rng.Int64N(2_000_000)) // 0.001/s to 2,000/s
	}
	issued := 1 + rng.Int64N(1_000_000)
	p = queue.Program{ID: "p", Issued: issued}
	if rng.IntN(4) == 0 {
		p.OpensAt = t0.Add(time.Duration(rng.Int64N(int64(time.Minute))))
	}
	p = p.Rebased(t0, randRate(), rng.IntN(2) == 0, rng.Int64N(issued), 0)
	if rng.IntN(3) == 0 { // a change seen by the answer, maybe a rise
		p = p.Rebased(t0.Add(time.Duration(rng.Int64N(int64(5*time.Second)))), randRate(), rng.IntN(2) == 0, rng.Int64N(100), promiseDelay)
	}
	now = t0.Add(time.Duration(rng.Int64N(int64(10 * time.Second))))
	serving := p.Serving(now)
	if serving >= issued {
		return p, 0, now
	}
	return p, serving + 1 + rng.Int64N(issued-serving), now
}

// earliestUnderTheBound is the first instant at or after now at which
// ticket is admitted, over the futures the bound allows: the schedule p
// knows, or a resume at p's configured rate made as early as a change the
// answer does not show can be (it takes effect notice after now) and not
// before a scheduled change has taken effect. False when p has no rate.
func earliestUnderTheBound(p queue.Program, ticket int64, now time.Time, notice time.Duration) (time.Time, bool) {
	settled := p.Settled()
	if settled.Rate <= 0 {
		return time.Time{}, false
	}
	made := now.Add(notice - promiseDelay)
	if p.Pending(made) {
		made = queue.FromUnixMs(p.Next.AnchorMs)
	}
	// Until the resume takes effect its program is p, and it is valid
	// only from the instant it was made.
	if known, ok := p.AdmissionTime(ticket, now); ok && !known.After(made) {
		return known, true
	}
	resumed := p.Rebased(made, settled.Rate, false, 0, promiseDelay)
	return resumed.AdmissionTime(ticket, laterOf(now, made))
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// TestNoPollAfterTheEarliestAdmission: whatever the program's state, an
// eta or steady answer schedules the next poll no later than the earliest
// admission the bound allows (or the policy's floor, and its two leads of
// margin), and within Hold while admission is stopped.
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
	for range 20000 {
		p, ticket, now := randomProgram(rng)
		if ticket == 0 {
			continue
		}
		notice := time.Duration(rng.Int64N(int64(promiseTTL) + 1)).Truncate(time.Millisecond)
		earliest, bounded := earliestUnderTheBound(p, ticket, now, notice)
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
			if sit.Wait == 0 && d > pol.hold {
				t.Fatalf("%s: admission stopped, polls after %v, beyond the hold %v (situation %+v)", pol.name, d, pol.hold, sit)
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
