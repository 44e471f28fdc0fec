package main

import (
	"strings"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/passverify"
)

// TestPasses: wrctl passes prints the server's bypass passes one per line
// (or its JSON with -json), each one passverify accepts as a bypass pass
// of the program valid for -valid; bad flags and an unknown program fail
// with the server's or its own reason.
func TestPasses(t *testing.T) {
	t.Parallel()
	url := serve(t, newAPI(t))
	env := map[string]string{"WR_URL": url, "ADMIN_TOKEN": testSecret}
	if r := wrctl(t, env, "close", "gala"); r.status != 0 {
		t.Fatal(r.stderr)
	}
	start := time.Now().Truncate(time.Second)
	r := wrctl(t, env, "passes", "gala", "-n", "10", "-valid", "2h")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.status != 0 || len(lines) != 10 {
		t.Fatalf("exit %d, %d lines, stderr %s", r.status, len(lines), r.stderr)
	}
	v, err := passverify.New(passverify.Config{JWKSURL: url + api.JWKSPath, Issuer: testIssuer, ProgramID: "gala"})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, pass := range lines {
		c, err := v.Verify(t.Context(), pass)
		if err != nil {
			t.Fatalf("pass %d: %v", i, err)
		}
		if exp := c.ExpiresAt.Sub(c.AdmittedAt); !c.Bypass || c.Ticket != 0 || exp != 2*time.Hour || c.AdmittedAt.Before(start) || seen[c.TokenID] {
			t.Errorf("pass %d: %+v, want a bypass pass valid 2h from now with a fresh sub", i, c)
		}
		seen[c.TokenID] = true
	}

	got := decode(t, wrctl(t, env, "passes", "gala", "-json"))
	if ps, _ := got["passes"].([]any); len(ps) != 1 {
		t.Errorf("-json: %v, want {\"passes\": [one]}", got)
	}
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"passes", "gala", "-n", "1001"}, "INVALID_COUNT"},
		{[]string{"passes", "gala", "-valid", "30s"}, "INVALID_VALIDITY"},
		{[]string{"passes", "gala", "-valid", "90.5s"}, "whole seconds"},
		{[]string{"passes", "nobody"}, "PROGRAM_NOT_FOUND"},
	} {
		if r := wrctl(t, env, tc.args...); r.status == 0 || !strings.Contains(r.stderr, tc.stderr) || r.stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want a failure with %s", tc.args, r.status, r.stdout, r.stderr, tc.stderr)
		}
	}
}
