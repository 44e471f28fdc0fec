package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	wire "github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
)

// adminCall sends one admin request with the bearer secret and decodes its
// JSON answer into out (if any); it returns the status and error code.
func adminCall(t *testing.T, h http.Handler, method, path, body string, out any) (int, string) {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer s3cret")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if out != nil && w.Code < 300 {
		if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, w.Body)
		}
	}
	return w.Code, decodeCode(w.Body.String())
}

// TestHandlerCatalog walks list, history and delete through the HTTP API
// on the local server's bearer secret, with their refusals.
func TestHandlerCatalog(t *testing.T) {
	h := checked(t, httpapi.New(queue.NewService(memstore.New(), polling.DefaultTiers()), httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard)))
	for _, id := range []string{"gala-c", "gala-a", "gala-b"} {
		if code, _ := adminCall(t, h, "PUT", "/api/v1/admin/programs/"+id, `{"message":"hello"}`, nil); code != 201 {
			t.Fatalf("create %s: %d", id, code)
		}
	}
	var ids []string
	cursor := ""
	for range 3 {
		var page wire.ProgramList
		if code, _ := adminCall(t, h, "GET", "/api/v1/admin/programs?limit=2&cursor="+cursor, "", &page); code != 200 {
			t.Fatalf("list: %d", code)
		}
		for _, p := range page.Programs {
			ids = append(ids, p.ProgramID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if diff := cmp.Diff([]string{"gala-a", "gala-b", "gala-c"}, ids); diff != "" {
		t.Errorf("programs listed by 2 (-want +got):\n%s", diff)
	}

	if code, _ := adminCall(t, h, "POST", "/api/v1/admin/programs/gala-a/admissions", `{"count":3}`, nil); code != 200 {
		t.Fatalf("admit: %d", code)
	}
	var hist wire.ChangeList
	if code, _ := adminCall(t, h, "GET", "/api/v1/admin/programs/gala-a/changes", "", &hist); code != 200 {
		t.Fatalf("history: %d", code)
	}
	var got []string
	for _, c := range hist.Changes {
		got = append(got, fmt.Sprintf("%s %s %v", c.Actor, c.Action, c.Fields))
		if c.At.IsZero() || c.EffectiveAt.Before(c.At.Time) || len(c.ChangeID) != 22 {
			t.Errorf("change %+v: want an id, at, and effectiveAt not before at", c)
		}
	}
	want := []string{"local-admin admit map[count:3]", "local-admin create map[message:hello]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("history, newest first (-want +got):\n%s", diff)
	}

	refusals := []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/api/v1/admin/programs?cursor=%21%21", 400, wire.CodeInvalidCursor},
		{"GET", "/api/v1/admin/programs?cursor=Li4", 400, wire.CodeInvalidCursor}, // "..", not an id
		{"GET", "/api/v1/admin/programs?limit=0", 400, wire.CodeInvalidLimit},
		{"GET", "/api/v1/admin/programs?limit=201", 400, wire.CodeInvalidLimit},
		{"GET", "/api/v1/admin/programs?limit=ten", 400, wire.CodeInvalidLimit},
		{"GET", "/api/v1/admin/programs/gala-a/changes?limit=1001", 400, wire.CodeInvalidLimit},
		{"GET", "/api/v1/admin/programs/gala-a/changes?cursor=Z2FsYQ", 400, wire.CodeInvalidCursor},
		{"GET", "/api/v1/admin/programs/nope/changes", 404, wire.CodeProgramNotFound},
		{"GET", "/api/v1/admin/programs/n%20o/changes", 400, wire.CodeInvalidProgramID},
		{"DELETE", "/api/v1/admin/programs/nope", 404, wire.CodeProgramNotFound},
		{"DELETE", "/api/v1/admin/programs/gala-a", 409, wire.CodeProgramNotClosed},
	}
	for _, r := range refusals {
		if code, ecode := adminCall(t, h, r.method, r.path, "", nil); code != r.status || ecode != r.code {
			t.Errorf("%s %s = %d %s, want %d %s", r.method, r.path, code, ecode, r.status, r.code)
		}
	}

	// Closed, deleted: gone everywhere, and its id taken.
	var enter wire.Token
	r := httptest.NewRequest("POST", "/api/v1/queues/programs/gala-b", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if err := json.Unmarshal(w.Body.Bytes(), &enter); err != nil || w.Code != 201 {
		t.Fatalf("enter: %d %s", w.Code, w.Body)
	}
	adminCall(t, h, "PUT", "/api/v1/admin/programs/gala-b", `{"closed":true}`, nil)
	if code, _ := adminCall(t, h, "DELETE", "/api/v1/admin/programs/gala-b", "", nil); code != 204 {
		t.Fatalf("delete a closed program: %d, want 204", code)
	}
	gone := []struct{ method, path string }{
		{"GET", "/api/v1/admin/programs/gala-b"},
		{"GET", "/api/v1/admin/programs/gala-b/changes"},
		{"DELETE", "/api/v1/admin/programs/gala-b"},
		{"POST", "/api/v1/admin/programs/gala-b/admissions"},
	}
	for _, g := range gone {
		body := ""
		if g.method == "POST" {
			body = `{"count":1}`
		}
		if code, ecode := adminCall(t, h, g.method, g.path, body, nil); code != 404 || ecode != wire.CodeProgramNotFound {
			t.Errorf("%s %s after the delete = %d %s, want 404 PROGRAM_NOT_FOUND", g.method, g.path, code, ecode)
		}
	}
	r = httptest.NewRequest("GET", "/api/v1/queues/programs/gala-b", nil)
	r.Header.Set(wire.HeaderToken, enter.TokenID)
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 404 {
		t.Errorf("a poll of the deleted program's token = %d %s, want 404", w.Code, w.Body)
	}
	if code, ecode := adminCall(t, h, "PUT", "/api/v1/admin/programs/gala-b", `{}`, nil); code != 409 || ecode != wire.CodeProgramDeleted {
		t.Errorf("re-create the deleted id = %d %s, want 409 PROGRAM_DELETED", code, ecode)
	}
	var page wire.ProgramList
	adminCall(t, h, "GET", "/api/v1/admin/programs", "", &page)
	if len(page.Programs) != 2 || page.NextCursor != "" {
		t.Errorf("list after the delete = %+v, want gala-a and gala-c", page)
	}
}
