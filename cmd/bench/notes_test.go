package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/tools/bench"
)

// TestNotes: under the table, the errors and the gaps are explained where
// they are not zero, a line each, the errors with their codes (summed over
// the results, in code order), as a rehearsal that closes its program
// while the crowd still arrives and enters once with curl prints them.
func TestNotes(t *testing.T) {
	const (
		errorsLine = "errors: requests that failed: transport errors, 5xx, 429 and answers the bench does not expect (409 PROGRAM_CLOSED: enters after the program closed)"
		gapsLine   = "gaps: tickets of the program that no user of the bench holds: taken by others during the run (a curl, a browser) or by enters whose answer was lost"
	)
	tests := []struct {
		name    string
		results []bench.Result
		want    []string
	}{
		{"none", []bench.Result{{Users: 10}}, nil},
		{"the rehearsal", []bench.Result{{Errors: 1216, Gaps: 1, ErrorCodes: map[string]int64{"PROGRAM_CLOSED": 1216}}},
			[]string{"\n" + errorsLine + "; by code: PROGRAM_CLOSED 1,216", gapsLine}},
		{"errors without a code", []bench.Result{{Errors: 3}}, []string{"\n" + errorsLine}},
		{"gaps alone", []bench.Result{{Gaps: 2}}, []string{"\n" + gapsLine}},
		{"codes summed over the results", []bench.Result{
			{Errors: 2, ErrorCodes: map[string]int64{"QUEUE_FULL": 1, "BUSY": 1}},
			{Errors: 1, ErrorCodes: map[string]int64{"BUSY": 1}},
		}, []string{"\n" + errorsLine + "; by code: BUSY 2, QUEUE_FULL 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := notes(tt.results)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("notes (-want +got):\n%s", diff)
			}
			for _, line := range got {
				if strings.Count(strings.TrimPrefix(line, "\n"), "\n") != 0 {
					t.Errorf("note %q is more than one line", line)
				}
			}
		})
	}
}
