package main

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// enterToken makes one person enter program id and returns their token.
func enterToken(t *testing.T, url, id string) string {
	t.Helper()
	resp, err := http.Post(url+"/api/v1/queues/programs/"+id, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct{ TokenID string }
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("enter: status %d, %v", resp.StatusCode, err)
	}
	return tok.TokenID
}

// TestTokenCommands: wrctl token prints where a token stands, one field a
// line (the API's JSON with -json); wrctl revoke revokes it, again with
// no error; an unknown token is the API's error.
func TestTokenCommands(t *testing.T) {
	t.Parallel()
	env := map[string]string{"WR_URL": serve(t, newAPI(t)), "ADMIN_TOKEN": testSecret}
	if r := wrctl(t, env, "put", "gala", "-paused"); r.status != 0 {
		t.Fatal(r.stderr)
	}
	enterToken(t, env["WR_URL"], "gala")
	id := enterToken(t, env["WR_URL"], "gala")

	r := wrctl(t, env, "token", "gala", id)
	for _, line := range []string{`tokenId +` + id, `status +WAITING`, `ticket +2`, `position +2`, `paused +true`, `retainedUntil +20\d\d-.*`} {
		if r.status != 0 || !regexp.MustCompile(`(?m)^  `+line+`$`).MatchString(r.stdout) {
			t.Errorf("wrctl token: exit %d, no line %q in:\n%s%s", r.status, line, r.stdout, r.stderr)
		}
	}
	for range 2 {
		r = wrctl(t, env, "revoke", "gala", id)
		if want := "revoked token " + id + " of program gala\n"; r.status != 0 || r.stdout != want {
			t.Errorf("wrctl revoke: exit %d, stdout %q, stderr %s; want %q", r.status, r.stdout, r.stderr, want)
		}
	}
	got := decode(t, wrctl(t, env, "token", "gala", id, "-json"))
	if got["status"] != "REVOKED" || got["revokedAt"] == nil || got["position"] != nil {
		t.Errorf("wrctl token -json after the revoke: %v; want REVOKED with revokedAt, no position", got)
	}
	r = wrctl(t, env, "revoke", "gala", "unknownTokenFixture001")
	if r.status != 1 || !strings.HasPrefix(r.stderr, "wrctl: TOKEN_NOT_FOUND: ") {
		t.Errorf("revoke of an unknown token: exit %d, stderr %q", r.status, r.stderr)
	}
	r = wrctl(t, env, "token", "gala")
	if r.status != 2 || !strings.Contains(r.stderr, "want ID TOKEN") {
		t.Errorf("token without TOKEN: exit %d, stderr %q", r.status, r.stderr)
	}
}
