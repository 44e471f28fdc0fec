package dynamostore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/dynamostore"
	changes "github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/await"
	"github.com/example/waitingroom/internal/testing/clocktest"
	"github.com/example/waitingroom/internal/testing/faultinject"
)

// historyOf reads programID's whole history through svc, newest first.
func historyOf(t *testing.T, svc *queue.Service, programID string) []changes.Change {
	t.Helper()
	var all []changes.Change
	cursor := ""
	for {
		h, err := svc.History(t.Context(), programID, cursor, 7)
		if err != nil {
			t.Fatalf("History: %v", err)
		}
		all = append(all, h.Changes...)
		if cursor = h.Next; cursor == "" {
			return all
		}
	}
}

// messagesOf is the message each change in cs set, "" for one that set
// none, newest first.
func messagesOf(cs []changes.Change) []string {
	var ms []string
	for _, c := range cs {
		var f struct{ Message string }
		_ = json.Unmarshal(c.Fields, &f)
		ms = append(ms, c.Action+":"+f.Message)
	}
	return ms
}

// TestHistoryWritesAnswerLost: every write of an admin change applied with
// its first answer lost (the SDK retries it) leaves the change in the
// history exactly once, as does a deletion's.
func TestHistoryWritesAnswerLost(t *testing.T) {
	t.Parallel()
	r := newFaultRig(t)
	ctx := changes.WithActor(t.Context(), "arn:aws:iam::123456789012:user/ops")
	put := func(msg string) {
		t.Helper()
		if _, _, err := r.svc.PutProgram(ctx, "lost", api.ProgramSettings{Message: &msg}); err != nil {
			t.Fatalf("PutProgram %s: %v", msg, err)
		}
	}
	put("created")
	steps := []struct{ op, body string }{
		{"PutItem", `"changeId"`},   // the change, before the program
		{"UpdateItem", `"message"`}, // the program
		{"UpdateItem", `"committed"`},
		{"PutItem", `"PROGRAMS"`}, // the list
	}
	want := []string{"update:created"}
	for i, s := range steps {
		r.ft.SetRules(faultinject.Rule{Op: s.op, BodyContains: s.body, FirstOnly: true, Count: 1, Action: faultinject.DropResponse})
		msg := fmt.Sprintf("step %d", i)
		put(msg)
		r.checkLost(t, s.op, s.body)
		want = append([]string{"update:" + msg}, want...)
	}
	want[len(want)-1] = "create:created"
	got := historyOf(t, r.svc, "lost")
	if diff := cmp.Diff(want, messagesOf(got)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	for _, c := range got {
		if c.Actor != "arn:aws:iam::123456789012:user/ops" {
			t.Errorf("change %s by %q, want the caller's ARN", c.ID, c.Actor)
		}
	}

	closed := true
	if _, _, err := r.svc.PutProgram(ctx, "lost", api.ProgramSettings{Closed: &closed}); err != nil {
		t.Fatal(err)
	}
	r.loseFirst("DeleteItem", `"version"`)
	if err := r.svc.DeleteProgram(ctx, "lost"); err != nil {
		t.Fatalf("DeleteProgram with its answer lost: %v, want done", err)
	}
	r.checkLost(t, "DeleteItem", "delete")
	if _, err := r.svc.Program(ctx, "lost"); queue.ErrorKind(err) != queue.KindNotFound {
		t.Errorf("the program after its deletion: %v, want not found", err)
	}
	if l, err := r.svc.ListPrograms(ctx, "", 0); err != nil || len(l.Programs) != 0 {
		t.Errorf("ListPrograms after the deletion = %+v, %v; want none", l, err)
	}
	if _, _, err := r.svc.PutProgram(ctx, "lost", api.ProgramSettings{}); queue.ErrorKind(err) != queue.KindConflict {
		t.Errorf("PutProgram of the deleted id = %v, want PROGRAM_DELETED", err)
	}
}

// TestHistoryConcurrentChanges: admins changing one program at once from
// two instances find each change answered as made in the history exactly
// once, and none that was refused. The eight admins' first reads all see
// one version, so that their first writes conflict; every change is made
// at one instant of the instances' clock.
func TestHistoryConcurrentChanges(t *testing.T) {
	t.Parallel()
	const workers, each = 8, 4
	a := newFaultRig(t)
	reads := &await.Barrier{N: workers}
	clk := clocktest.Patient{Frozen: clocktest.NewFrozen(t0)}
	svcs := make([]*queue.Service, 2)
	for i := range svcs {
		svcs[i] = queue.NewService(barrierReads{dynamostore.New(a.client, a.table), reads}, polling.DefaultTiers(), queue.WithClock(clk))
	}
	ctx := changes.WithActor(t.Context(), "local-admin")
	if _, _, err := a.svc.PutProgram(ctx, "busy", api.ProgramSettings{}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	made, refused := map[string]bool{}, map[string]bool{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			svc := svcs[w%2]
			for i := range each {
				msg := fmt.Sprintf("w%d-%d", w, i)
				var err error
				if i%2 == 0 {
					_, _, err = svc.PutProgram(ctx, "busy", api.ProgramSettings{Message: &msg})
				} else {
					_, err = svc.Admit(ctx, "busy", int64(100*w+i))
					msg = fmt.Sprint(100*w + i)
				}
				mu.Lock()
				switch {
				case err == nil:
					made[msg] = true
				case queue.ErrorKind(err) == queue.KindUnavailable && err.(*queue.Error).Code == api.CodeBusy:
					refused[msg] = true // not made
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	seen := map[string]int{}
	hist := historyOf(t, a.svc, "busy")
	for i := 1; i < len(hist); i++ {
		if hist[i].Version >= hist[i-1].Version {
			t.Errorf("history out of order: version %d listed after %d (newest first)", hist[i].Version, hist[i-1].Version)
		}
	}
	for _, c := range hist {
		var f struct {
			Message string
			Count   int64
		}
		_ = json.Unmarshal(c.Fields, &f)
		key := f.Message
		if c.Action == changes.ActionAdmit {
			key = fmt.Sprint(f.Count)
		}
		if c.Action != changes.ActionCreate {
			seen[key]++
		}
	}
	for msg := range made {
		if seen[msg] != 1 {
			t.Errorf("change %s answered as made is in the history %d times, want once", msg, seen[msg])
		}
	}
	for msg, n := range seen {
		if refused[msg] || n != 1 {
			t.Errorf("change %s is in the history %d times (refused: %v)", msg, n, refused[msg])
		}
	}
	if len(made) == 0 {
		t.Fatal("no change was made")
	}
	t.Logf("%d changes made, %d refused as busy", len(made), len(refused))
}

// barrierReads holds a store's first program reads at a barrier until all
// have been made.
type barrierReads struct {
	*dynamostore.Store
	b *await.Barrier
}

func (s barrierReads) GetProgram(ctx context.Context, id string) (admission.Program, error) {
	p, err := s.Store.GetProgram(ctx, id)
	if _, werr := s.b.Arrive(ctx); werr != nil {
		return admission.Program{}, werr
	}
	return p, err
}
