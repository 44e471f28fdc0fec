// Package storetest is the contract every queue.Store keeps, run by the tests
// of memstore and dynamostore. Stores keep times to the millisecond, except
// TTLs, which a store may round up to the second.
package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/sync/errgroup"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tickets"
)

// Sizes of the concurrency tests: enough callers to interleave on moto, few
// enough to take seconds there (500 tickets took 15-40 s).
const (
	concurrentTickets   = 64
	concurrentReanchors = 48
	concurrentMarks     = 20
	workers             = 16
)

// Run runs the contract against stores from newStore, called once per group
// of subtests, each an empty store.
func Run(t *testing.T, newStore func(t *testing.T) queue.Store) {
	probe := newStore(t)
	_, sharded := probe.(tickets.Store)
	_, prequeued := probe.(queue.PrequeueStore)
	_, scheduled := probe.(queue.ScheduleStore)
	_, capped := probe.(capacity.Store)
	_, pushes := probe.(queue.PushStore)
	_, vapid := probe.(vapidStore)
	_, handoffs := probe.(queue.HandoffStore)
	_, reports := probe.(queue.ReportStore)
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
		{"Push", pushes, testPush},
		{"PushConcurrent", pushes, testPushConcurrent},
		{"PushListed", pushes, testPushListed},
		{"VAPIDKey", vapid, testVAPIDKey},
		{"Handoffs", handoffs, testHandoffs},
		{"HandoffsConcurrent", handoffs, testHandoffsConcurrent},
		{"Reports", reports, testReports},
	} {
		if group.runs {
			t.Run(group.name, func(t *testing.T) { group.test(t, newStore(t)) })
		}
	}
}

func withTickets(test func(t *testing.T, s tickets.Store)) func(t *testing.T, s queue.Store) {
	return func(t *testing.T, s queue.Store) { test(t, s.(tickets.Store)) }
}

// t0 is the suite's epoch, times derive from it at millisecond precision.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// equal compares what a store returns: empty equals missing, and a TTL
// (Token.ExpiresAt, StoredKey.Expires) may come back rounded up to the second.
var equal = cmp.Options{cmpopts.EquateEmpty(), ttlField(".ExpiresAt"), ttlField(".Expires")}

// ttlField compares the time fields named field as TTLs (see equal).
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

func answer[T any](got T, err error) call[T] { return call[T]{got, err} }

// must returns c's answer, stopping the test if it failed.
func (c call[T]) must(t *testing.T, what string) T {
	t.Helper()
	checkErr(t, what, c.err, nil)
	return c.got
}

// checkCall stops the test if c failed, and reports how it differs from want.
func checkCall[T any](t *testing.T, what string, c call[T], want T) {
	t.Helper()
	check(t, what, c.must(t, what), want)
}

// checkErr stops the test unless got is want (errors.Is), or nil when want is.
func checkErr(t *testing.T, what string, got, want error) {
	t.Helper()
	if want == nil && got != nil || want != nil && !errors.Is(got, want) {
		t.Fatalf("%s: error %v, want %v", what, got, want)
	}
}

// errOf is the error of a store call, its answer dropped.
func errOf[T any](_ T, err error) error { return err }

// checkOK stops the test unless a conditional write answered want.
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

func storedProgram(t *testing.T, s queue.Store, id string) admission.Program {
	t.Helper()
	return answer(s.GetProgram(t.Context(), id)).must(t, "GetProgram "+id)
}

func checkStoredProgram(t *testing.T, s queue.Store, want admission.Program) {
	t.Helper()
	check(t, "stored program", storedProgram(t, s, want.ID), want)
}

// checkNoProgram stops the test unless program id is absent after what.
func checkNoProgram(t *testing.T, s queue.Store, id, what string) {
	t.Helper()
	checkErr(t, "GetProgram after "+what, errOf(s.GetProgram(t.Context(), id)), queue.ErrNotFound)
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

// paged reads a list n items a page, each from the key next gives the last
// item before, and stops the test on a page too long, or short with more.
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

// inParallel calls f(0..n-1), workers at a time.
func inParallel(n int, f func(i int)) {
	var g errgroup.Group
	g.SetLimit(workers)
	for i := range n {
		g.Go(func() error { f(i); return nil })
	}
	_ = g.Wait()
}
