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

// call is a store call's answer and error, for checkCall.
type call[T any] struct {
	got T
	err error
}

// answer is the call whose results are got and err.
func answer[T any](got T, err error) call[T] { return call[T]{got, err} }

// checkCall stops the test if c failed, and reports how its answer
// differs from want.
func checkCall[T any](t *testing.T, what string, c call[T], want T) {
	t.Helper()
	checkErr(t, what, c.err, nil)
	check(t, what, c.got, want)
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

// checkNoProgram stops the test unless program id is absent after what.
func checkNoProgram(t *testing.T, s queue.Store, id, what string) {
	t.Helper()
	_, err := s.GetProgram(t.Context(), id)
	checkErr(t, "GetProgram after "+what, err, queue.ErrNotFound)
}

// oneWins calls win(0..n-1) in parallel and stops the test unless none
// failed and exactly one won; it returns the winner.
func oneWins(t *testing.T, what string, n int, win func(i int) (bool, error)) int {
	t.Helper()
	won := make([]bool, n)
	errs := make([]error, n)
	inParallel(n, func(i int) { won[i], errs[i] = win(i) })
	checkErr(t, what, errors.Join(errs...), nil)
	var winners []int
	for i, ok := range won {
		if ok {
			winners = append(winners, i)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("%s: callers %v of %d won, want exactly one", what, winners, n)
	}
	return winners[0]
}

// paged reads a list n items a page, each page from the key next gives
// its predecessor's last item, and stops the test if a page is longer than
// n, or shorter with more to come.
func paged[T, K any](t *testing.T, what string, n int, read func(from K) ([]T, bool, error), next func(T) K) []T {
	t.Helper()
	var all []T
	var from K
	for pages := 0; ; pages++ {
		page, more, err := read(from)
		checkErr(t, what, err, nil)
		if len(page) > n || more && len(page) < n || pages > 3 {
			t.Fatalf("%s from %v by %d: %d items, more %v", what, from, n, len(page), more)
		}
		all = append(all, page...)
		if !more {
			return all
		}
		from = next(page[len(page)-1])
	}
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
