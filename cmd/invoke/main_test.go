package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/waitingroom/internal/tools/samtemplate"
)

// TestFunctionFor routes events as API Gateway would: by method and path,
// whatever their routeKey says, ANY for every method and $default last.
func TestFunctionFor(t *testing.T) {
	tpl, err := samtemplate.Load(filepath.Join("..", "..", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	poll, err := os.ReadFile(filepath.Join("..", "..", "events", "poll-waiting.json"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, event, wantRoute, wantFunction string
	}{
		{"SampleEvent", string(poll), "ANY /api/v1/queues/programs/{programId}", "QueueFunction"},
		{"MethodRouteKey", strings.ReplaceAll(string(poll), "ANY /api", "GET /api"), "ANY /api/v1/queues/programs/{programId}", "QueueFunction"},
		{"Admin", event("PUT", "/api/v1/admin/programs/demo"), "ANY /api/v1/admin/{proxy+}", "AdminFunction"},
		{"Admissions", event("POST", "/api/v1/admin/programs/demo/admissions"), "ANY /api/v1/admin/{proxy+}", "AdminFunction"},
		{"WrongMethod", event("PATCH", "/api/v1/admin/programs/demo/admissions"), "ANY /api/v1/admin/{proxy+}", "AdminFunction"},
		{"AdminUnknownPath", event("GET", "/api/v1/admin/programs"), "ANY /api/v1/admin/{proxy+}", "AdminFunction"},
		{"Default", event("GET", "/api/v1/programs"), "$default", "QueueFunction"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			route, fn, err := functionFor(tpl, []byte(tt.event))
			if err != nil || route != tt.wantRoute || fn != tt.wantFunction {
				t.Errorf("functionFor = %q, %q, %v; want %q, %q", route, fn, err, tt.wantRoute, tt.wantFunction)
			}
		})
	}
	if _, _, err := functionFor(tpl, []byte(`{"routeKey":"GET /x"}`)); err == nil {
		t.Error("an event without method and path: no error")
	}
}

// event is a minimal HTTP API event.
func event(method, path string) string {
	return `{"version":"2.0","routeKey":"$default","rawPath":"` + path + `","requestContext":{"http":{"method":"` + method + `","path":"` + path + `"}}}`
}
