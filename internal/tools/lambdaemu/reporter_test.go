//go:build emulator

package lambdaemu_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tools/simclock"
)

// reporterFn is the template's reporter function.
const reporterFn = "ReporterFunction"

// TestReporterFunction runs the reporter's bootstrap under the emulator
// against the test's DynamoDB API, as the schedule starts it: a program
// closed an hour ago has settled, so the first invocation makes its final
// report; the second finds it made and makes none.
func TestReporterFunction(t *testing.T) {
	rie := findRIE(t)
	ctx := t.Context()
	r := provide(t)
	store := dynamostore.New(r.client, r.table)

	// An hour ago: two people, one left, the program closed.
	svc := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(simclock.NewFake(time.Now().Add(-time.Hour))))
	actx := history.WithActor(ctx, history.SystemActor)
	if _, _, err := svc.PutProgram(actx, "gala", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(100)), Paused: new(false)}); err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for range 2 {
		v, _, err := svc.Enter(ctx, "gala", queue.Entry{})
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, v.TokenID)
	}
	if err := svc.Leave(ctx, "gala", tokens[1]); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.PutProgram(actx, "gala", api.ProgramSettings{Closed: new(true)}); err != nil {
		t.Fatal(err)
	}

	log := runScheduled(t, rie, r, reporterFn)
	rep, err := store.GetReport(ctx, "gala")
	if p := rep.People; err != nil || !rep.Final || p.Arrivals != 2 || p.Left != 1 || p.NoShows != 1 {
		t.Errorf("the kept report: final %v, people %+v, %v; want final, 2 arrivals, 1 left, 1 no-show", rep.Final, p, err)
	}
	var made []float64
	for line := range strings.Lines(log) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "reports settled" {
			n, _ := rec["made"].(float64)
			made = append(made, n)
		}
	}
	if len(made) != 2 || made[0] != 1 || made[1] != 0 {
		t.Errorf("reports made by the invocations: %v, want [1 0]", made)
	}
}
