package main

import (
	"regexp"
	"strings"
	"testing"
)

// wrctlWithInput is wrctl with stdin.
func wrctlWithInput(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	return runApp(t, env, func(a *app) { a.stdin = strings.NewReader(stdin) }, args...)
}

// TestCatalogCommands: list, history and delete against the API in
// process, as an operator runs them.
func TestCatalogCommands(t *testing.T) {
	t.Parallel()
	url := serve(t, newAPI(t))
	env := map[string]string{"WR_URL": url, "ADMIN_TOKEN": testSecret}
	must := func(args ...string) result {
		t.Helper()
		return mustRun(t, env, args...)
	}
	must("put", "gala", "-rate", "5")
	must("put", "matinee", "-paused")
	enter(t, url, "gala", 3)
	must("admit", "gala", "2")
	must("close", "matinee")

	list := must("list").stdout
	for _, re := range []string{`(?m)^\s*PROGRAM\s+WAITING\s+ADMITTED\s+ISSUED\s+RATE/S\s+STATE$`, `(?m)^\s*gala\s+1\s+2\s+3\s+5\s+open$`, `(?m)^\s*matinee\s+0\s+0\s+0\s+\d+\s+closed, paused$`} {
		if !regexp.MustCompile(re).MatchString(list) {
			t.Errorf("list output lacks %s:\n%s", re, list)
		}
	}
	if got := decode(t, must("list", "-json", "-n", "1")); len(got["programs"].([]any)) != 1 {
		t.Errorf("list -n 1 -json: %v", got)
	}

	hist := must("history", "gala").stdout
	lines := strings.Split(strings.TrimSpace(hist), "\n")
	want := []string{`local-admin\s+admit\s+\{"count":2\}`, `local-admin\s+create\s+\{"admissionRatePerSecond":5\}`}
	if len(lines) != 1+len(want) {
		t.Fatalf("history: %d lines, want a header and %d:\n%s", len(lines), len(want), hist)
	}
	for i, re := range want {
		if !regexp.MustCompile(re).MatchString(lines[i+1]) {
			t.Errorf("history line %d = %q, want %s", i+1, lines[i+1], re)
		}
	}

	// Delete: refused while open, asked for, then done.
	if r := wrctl(t, env, "delete", "gala", "-yes"); r.status != 1 || !strings.Contains(r.stderr, "PROGRAM_NOT_CLOSED") {
		t.Errorf("delete an open program: exit %d, stderr %s", r.status, r.stderr)
	}
	if r := wrctlWithInput(t, env, "gala\n", "delete", "gala"); r.status != 1 || !strings.Contains(r.stderr, "program gala is open: close it first") || strings.Contains(r.stderr, "Type the id") {
		t.Errorf("delete an open program, asked: exit %d, stderr %s", r.status, r.stderr)
	}
	if r := wrctlWithInput(t, env, "gal\n", "delete", "matinee"); r.status != 1 || !strings.Contains(r.stderr, "Type the id to confirm") || !strings.Contains(r.stderr, "not deleted") {
		t.Errorf("delete with the wrong confirmation: exit %d, stderr %s", r.status, r.stderr)
	}
	must("get", "matinee")
	if r := wrctlWithInput(t, env, "matinee\n", "delete", "matinee"); r.status != 0 || r.stdout != "deleted program matinee; its id stays taken for 7 days (a put of it answers PROGRAM_DELETED)\n" {
		t.Errorf("delete confirmed: exit %d, stdout %q, stderr %s", r.status, r.stdout, r.stderr)
	}
	if r := wrctl(t, env, "get", "matinee"); r.status != 1 || !strings.Contains(r.stderr, "PROGRAM_NOT_FOUND") {
		t.Errorf("get after delete: exit %d, stderr %s", r.status, r.stderr)
	}
	// The in-memory server keeps the id taken too, and says so.
	if r := wrctl(t, env, "put", "matinee", "-rate", "5"); r.status != 1 || !regexp.MustCompile(`^wrctl: PROGRAM_DELETED: .*deleted less than 7 days ago; choose another id\.\n$`).MatchString(r.stderr) {
		t.Errorf("put after delete: exit %d, stderr %q", r.status, r.stderr)
	}
	must("close", "gala")
	if got := decode(t, must("delete", "gala", "-yes", "-json")); got["deleted"] != true {
		t.Errorf("delete -yes -json: %v", got)
	}
	if got := decode(t, must("list", "-json")); len(got["programs"].([]any)) != 0 {
		t.Errorf("list after deleting both: %v", got)
	}
}
