// Package queuetest holds helpers that tests of queue.Service and of the
// ticket shards behind it share.
package queuetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/shufflekey"
	"github.com/example/waitingroom/internal/tools/simclock"
)

var shuffleKey = sync.OnceValues(shufflekey.GenerateLocalKey)

// ShuffleKey is the test binary's shuffle key, one for every instance as a
// deployment's KMS key is.
func ShuffleKey(t testing.TB) *shufflekey.LocalKey {
	t.Helper()
	k, err := shuffleKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// EnterUnknown enters n distinct program ids that do not exist, from first
// on: each must answer PROGRAM_NOT_FOUND.
func EnterUnknown(t testing.TB, svc *queue.Service, first, n int) {
	t.Helper()
	for i := first; i < first+n; i++ {
		_, _, err := svc.Enter(t.Context(), fmt.Sprintf("nobody-%d", i), queue.Entry{})
		if queue.ErrorKind(err) != queue.KindNotFound {
			t.Fatalf("enter to an unknown program: %v, want not found", err)
		}
	}
}

// CheckIdleProgramsDropped checks that svc on clk keeps state (programs
// counts it, what names it) for no unknown program, and drops a program idle
// for 10 minutes.
func CheckIdleProgramsDropped(t testing.TB, svc *queue.Service, clk *simclock.Fake, programs func() int, what string) {
	t.Helper()
	ctx := t.Context()
	EnterUnknown(t, svc, 0, 10_000)
	if n := programs(); n != 0 {
		t.Fatalf("after 10,000 enters to unknown programs: %s for %d programs; want none", what, n)
	}
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(5))}); err != nil {
		t.Fatal(err)
	}
	v, _, err := svc.Enter(ctx, "gala", queue.Entry{})
	if err != nil {
		t.Fatal(err)
	}
	if n := programs(); n != 1 {
		t.Fatalf("after an enter to a program: %s for %d programs; want 1", what, n)
	}
	clk.Advance(10 * time.Minute)
	EnterUnknown(t, svc, 10_000, 1)
	if _, err := svc.Poll(ctx, "gala", v.TokenID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.PutProgram(ctx, "other", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(6))}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Minute)
	if _, _, err := svc.Enter(ctx, "other", queue.Entry{}); err != nil {
		t.Fatal(err)
	}
	if n := programs(); n != 1 {
		t.Errorf("after gala was idle 10 minutes: %s for %d programs; want only other's", what, n)
	}
}
