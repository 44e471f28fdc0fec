// Package storetest is the contract every queue.Store keeps: memstore and
// dynamostore both run it from their tests, so the in-memory store the
// local server and the simulations use behaves like DynamoDB.
//
// Stores keep times to the millisecond, except Token.ExpiresAt (the TTL)
// which a store may round up to the second; the suite only stores times of
// millisecond precision, and accepts that rounding.
package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tickets"
)

// Sizes of the concurrency tests: enough callers to interleave on a real
// server (moto answers a few hundred requests a second), few enough to stay
// within a couple of seconds there.
const (
	concurrentTickets   = 64 // 4 calls per worker: every worker's calls overlap the others' (500 took 15-40 s on moto)
	concurrentReanchors = 48
	concurrentMarks     = 20
	workers             = 16
)

// Run runs the contract against stores from newStore. Each call must return
// a store where no program or token exists yet; Run calls it once per group
// of subtests.
func Run(t *testing.T, newStore func(t *testing.T) queue.Store) {
	probe := newStore(t)
	_, sharded := probe.(tickets.Store)
	_, prequeued := probe.(queue.PrequeueStore)
	_, scheduled := probe.(queue.ScheduleStore)
	_, capped := probe.(capacity.Store)
	for _, group := range []struct {
		name string
		runs bool // the store implements what the group tests
		test func(t *testing.T, s queue.Store)
	}{
		{"Program", true, testProgram},
		{"UpdateProgram", true, testUpdateProgram},
		{"IssueTicket", true, testIssueTicket},
		{"IssueTicketConcurrent", true, testIssueTicketConcurrent},
		{"Token", true, testToken},
		{"Mark", true, testMark},
		{"MarkConcurrent", true, testMarkConcurrent},
		{"Revoke", true, testRevoke},
		{"RevokeConcurrent", true, testRevokeConcurrent},
		{"Claims", true, testClaims},
		{"ClaimsConcurrent", true, testClaimsConcurrent},
		{"Catalog", true, testCatalog},
		{"Challenges", true, testChallenges},
		{"ChallengesConcurrent", true, testChallengesConcurrent},
		{"IssueTickets", sharded, withTickets(testIssueTickets)},
		{"IssueTicketsConcurrent", sharded, withTickets(testIssueTicketsConcurrent)},
		{"Shards", sharded, withTickets(testShards)},
		{"ShardsConcurrent", sharded, withTickets(testShardsConcurrent)},
		{"SetShards", sharded, withTickets(testSetShards)},
		{"TrimShard", sharded, withTickets(testTrimShard)},
		{"ReturnTickets", sharded, withTickets(testReturnTickets)},
		{"FixPrequeue", prequeued, testFixPrequeue},
		{"Schedule", scheduled, testSchedule},
		{"Capacity", capped, testCapacity},
		{"CapacityConcurrent", capped, testCapacityConcurrent},
	} {
		if group.runs {
			t.Run(group.name, func(t *testing.T) { group.test(t, newStore(t)) })
		}
	}
}

// withTickets runs test on a store's tickets.Store.
func withTickets(test func(t *testing.T, s tickets.Store)) func(t *testing.T, s queue.Store) {
	return func(t *testing.T, s queue.Store) { test(t, s.(tickets.Store)) }
}

// t0 is the suite's epoch; times are derived from it at millisecond
// precision.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// unixNs is t in Unix nanoseconds, as Program.DrainAtNs keeps it.
func unixNs(t time.Time) int64 { return t.UnixNano() }

// equal is how the suite compares what a store returns: every field
// counts, times as instants, an empty list or map equals a missing one,
// and a TTL (Token.ExpiresAt, StoredKey.Expires) may come back rounded up
// to the second.
var equal = cmp.Options{cmpopts.EquateEmpty(), ttlField(".ExpiresAt"), ttlField(".Expires")}

// ttlField compares the time fields named field (".ExpiresAt") as a TTL:
// one may be the other rounded up to the second (a zero one stays zero).
func ttlField(field string) cmp.Option {
	return cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == field },
		cmp.Comparer(func(w, g time.Time) bool {
			if w.After(g) { // the comparer must be symmetric: w is the earlier
				w, g = g, w
			}
			return w.IsZero() == g.IsZero() && !g.Before(w) && g.Before(w.Add(time.Second)) && g.Equal(g.Truncate(time.Second)) || w.Equal(g)
		}))
}

// check reports how got differs from want (equal), if it does.
func check[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if d := cmp.Diff(want, got, equal); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

// checkErr stops the test unless got is want (errors.Is), or nil when
// want is.
func checkErr(t *testing.T, what string, got, want error) {
	t.Helper()
	if want == nil && got != nil || want != nil && !errors.Is(got, want) {
		t.Fatalf("%s: error %v, want %v", what, got, want)
	}
}

// checkOK stops the test unless a conditional write answered want
// without an error.
func checkOK(t *testing.T, what string, ok bool, err error, want bool) {
	t.Helper()
	if err != nil || ok != want {
		t.Fatalf("%s: ok=%v %v; want %v", what, ok, err, want)
	}
}

// create stores the programs, which must not exist yet.
func create(t *testing.T, s queue.Store, ps ...admission.Program) {
	t.Helper()
	for _, p := range ps {
		checkErr(t, "CreateProgram "+p.ID, s.CreateProgram(t.Context(), p), nil)
	}
}

// storedProgram reads program id.
func storedProgram(t *testing.T, s queue.Store, id string) admission.Program {
	t.Helper()
	p, err := s.GetProgram(t.Context(), id)
	checkErr(t, "GetProgram "+id, err, nil)
	return p
}

// checkStoredProgram reads the program and compares it with want.
func checkStoredProgram(t *testing.T, s queue.Store, want admission.Program) {
	t.Helper()
	check(t, "stored program", storedProgram(t, s, want.ID), want)
}

// inParallel calls f(0..n-1) from a pool of workers.
func inParallel(n int, f func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
