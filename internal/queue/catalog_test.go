package queue_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/queue"
)

// TestHistoryRecordsEveryAction: creations, settings, admissions and bypass
// issuances are in the history once each, newest first, with their actor
// and what they set; a refused change is not.
func TestHistoryRecordsEveryAction(t *testing.T) {
	svc, c := newService(t, queue.WithPassSigner(newSigner(t)))
	ctx := queue.WithActor(t.Context(), "arn:aws:iam::123456789012:user/ops")
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		c.Advance(3 * time.Second) // past the change delay
	}
	_, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(5)), Paused: new(true)})
	step("create", err)
	_, _, err = svc.PutProgram(ctx, "gala", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(-1))})
	if queue.ErrorKind(err) != queue.KindInvalid {
		t.Fatalf("a refused change: %v", err)
	}
	_, err = svc.Admit(ctx, "gala", 7)
	step("admit", err)
	_, err = svc.IssueBypass(queue.WithActor(ctx, "arn:aws:iam::123456789012:user/support"), "gala", 2, time.Hour)
	step("bypass", err)
	_, _, err = svc.PutProgram(ctx, "gala", api.ProgramSettings{Paused: new(false), Notice: new("Doors open")})
	step("resume", err)

	h, err := svc.History(ctx, "gala", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ch := range h.Changes {
		got = append(got, ch.Actor+" "+ch.Action+" "+string(ch.Fields))
	}
	want := []string{
		`arn:aws:iam::123456789012:user/ops update {"paused":false,"notice":"Doors open"}`,
		`arn:aws:iam::123456789012:user/support bypass {"count":2,"validSeconds":3600}`,
		`arn:aws:iam::123456789012:user/ops admit {"count":7}`,
		`arn:aws:iam::123456789012:user/ops create {"admissionRatePerSecond":5,"paused":true}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	if h.Next != "" {
		t.Errorf("one page holds it all, but Next = %q", h.Next)
	}
	// Paged one at a time, the same changes in the same order.
	var paged []string
	for cursor := ""; ; {
		page, err := svc.History(ctx, "gala", cursor, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range page.Changes {
			paged = append(paged, ch.Actor+" "+ch.Action+" "+string(ch.Fields))
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	if diff := cmp.Diff(want, paged); diff != "" {
		t.Errorf("history a change a page (-want +got):\n%s", diff)
	}
}

// TestDeleteProgram: open programs are refused; a program closed by its
// closesAt deletes as a closed one; then it is gone and its id taken.
func TestDeleteProgram(t *testing.T) {
	svc, c := newService(t)
	ctx := t.Context()
	closesAt := c.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{ClosesAt: &closesAt}); err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteProgram(ctx, "gala"); !hasCode(err, api.CodeProgramNotClosed) {
		t.Fatalf("delete before closesAt = %v, want PROGRAM_NOT_CLOSED", err)
	}
	c.Advance(time.Hour)
	if err := svc.DeleteProgram(ctx, "gala"); err != nil {
		t.Fatalf("delete at closesAt = %v", err)
	}
	if _, err := svc.Program(ctx, "gala"); !hasCode(err, api.CodeProgramNotFound) {
		t.Errorf("read after delete = %v, want PROGRAM_NOT_FOUND", err)
	}
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{}); !hasCode(err, api.CodeProgramDeleted) {
		t.Errorf("create again within a week = %v, want PROGRAM_DELETED", err)
	}
	c.Advance(queue.DeletedRetention)
	if _, created, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{}); err != nil || !created {
		t.Errorf("create again after a week = created %v, %v", created, err)
	}
	if l, err := svc.ListPrograms(ctx, "", 0); err != nil || len(l.Programs) != 1 {
		t.Errorf("list = %+v, %v; want the new gala", l, err)
	}
	h, err := svc.History(ctx, "gala", "", 0)
	if err != nil || len(h.Changes) != 1 || h.Changes[0].Action != queue.ActionCreate {
		t.Errorf("history of the new gala = %+v, %v; want its creation only, not its namesake's", h, err)
	}
}
