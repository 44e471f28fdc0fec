package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/api"
	waitingroom "github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/enqueue"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/clocktest"
	"github.com/example/waitingroom/internal/testing/enqueuetest"
	"github.com/example/waitingroom/internal/testing/sigv4test"
	"github.com/example/waitingroom/internal/tools/localkeys"
	"github.com/example/waitingroom/internal/tools/localkvs"
	"github.com/example/waitingroom/passverify"
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
	env := adminEnv(url)
	must := musts(t, env)
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

// TestPasses: wrctl passes prints the server's bypass passes one per line
// (or its JSON with -json), each one passverify accepts as a bypass pass
// of the program valid for -valid; bad flags and an unknown program fail
// with the server's or its own reason.
func TestPasses(t *testing.T) {
	t.Parallel()
	url := serve(t, newAPI(t))
	env := adminEnv(url)
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
	env := adminEnv(serve(t, newAPI(t)))
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

// newKeyringAPI is newAPI with passes signed by a keyring (the local
// server's: its keys wrapped by a key of this process), whose keys the
// admin routes list, rotate and revoke.
func newKeyringAPI(t *testing.T) http.Handler {
	t.Helper()
	// The keyring's clock reads mid-slot: no next key is due, whatever the
	// hour the test runs at.
	passes, err := localkeys.PassOption(t.Context(), config.Pass{}, testIssuer, admissionpass.WithKeyringClock(clocktest.MidSlot(24*time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	a := newServer(t, passes)
	if a.Keys == nil {
		t.Fatal("no keyring")
	}
	return a.LocalHandler(testSecret)
}

// keyRow is a row of wrctl keys: its kid, state and revocation time.
var keyRow = regexp.MustCompile(`(?m)^([A-Za-z0-9_-]{43})  +(next|signing|published|retired|revoked|unusable)  +(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)  +(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)  +(-|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)$`)

// keyRows returns wrctl keys' rows as "kid state", and checks its header
// and its rotation line.
func keyRows(t *testing.T, env map[string]string) []string {
	t.Helper()
	r := wrctl(t, env, "keys")
	if r.status != 0 {
		t.Fatalf("keys: exit %d, stderr %s", r.status, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if !regexp.MustCompile(`^KID +STATE +SIGNS FROM +CREATED +REVOKED$`).MatchString(lines[0]) || lines[len(lines)-1] != "rotation: a new key signs every 24h0m0s" {
		t.Errorf("keys: no header or no rotation line:\n%s", r.stdout)
	}
	var rows []string
	for _, m := range keyRow.FindAllStringSubmatch(r.stdout, -1) {
		if revoked := m[5] != "-"; revoked != (m[2] == "revoked") {
			t.Errorf("row %q: REVOKED %s for state %s", m[0], m[5], m[2])
		}
		rows = append(rows, m[1]+" "+m[2])
	}
	return rows
}

// TestKeys: wrctl keys lists the keyring's keys, keys rotate makes one,
// keys revoke revokes one once its kid is typed again (or with -yes),
// against the local server's API in process; a site's passverify then
// takes the replacement's passes, and the JWKS no longer has the revoked
// key.
func TestKeys(t *testing.T) {
	t.Parallel()
	url := serve(t, newKeyringAPI(t))
	env := adminEnv(url)
	must := musts(t, env)

	if r := must("keys"); !strings.Contains(r.stdout, "(no key yet: the first pass signed or JWKS request makes one)\n") {
		t.Errorf("keys before any pass:\n%s", r.stdout)
	}
	// A first pass makes the key that signs.
	must("put", "gala", "-paused")
	first := strings.TrimSpace(must("passes", "gala").stdout)
	rows := keyRows(t, env)
	if len(rows) != 1 || !strings.HasSuffix(rows[0], " signing") {
		t.Fatalf("keys after a first pass: %v, want one signing key", rows)
	}
	kid1, _, _ := strings.Cut(rows[0], " ")
	got := decode(t, must("keys", "-json"))
	if keys, _ := got["keys"].([]any); got["rotationSeconds"] != 86400.0 || len(keys) != 1 || keys[0].(map[string]any)["keyId"] != kid1 {
		t.Errorf("keys -json: %v", got)
	}
	// The site has verified a pass of kid1: its JWKS is cached.
	v, err := passverify.New(passverify.Config{JWKSURL: url + api.JWKSPath, Issuer: testIssuer, ProgramID: "gala", MinRefreshInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(t.Context(), first); err != nil {
		t.Fatalf("the first pass: %v", err)
	}

	r := must("keys", "rotate")
	m := regexp.MustCompile(`^new key ([A-Za-z0-9_-]{43}): in the JWKS within a minute, signs from \S+Z \(in 15m0s\)\n$`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("keys rotate: %q", r.stdout)
	}
	kid2 := m[1]
	if rows := keyRows(t, env); !slices.Equal(rows, []string{kid2 + " next", kid1 + " signing"}) {
		t.Errorf("keys after the rotation: %v, want %s next, %s signing", rows, kid2, kid1)
	}

	// The revocation of the key that signs: asked, refused, then made.
	r = wrctlWithInput(t, env, kid2+"\n", "keys", "revoke", kid1)
	if r.status != 1 || !strings.Contains(r.stderr, "Type the key id to confirm: ") || !strings.Contains(r.stderr, "A new key signs in its place from now.") || !strings.Contains(r.stderr, "not revoked") {
		t.Errorf("revoke with the wrong confirmation: exit %d, stderr %s", r.status, r.stderr)
	}
	if rows := keyRows(t, env); !slices.Contains(rows, kid1+" signing") {
		t.Errorf("keys after an unconfirmed revoke: %v, want %s still signing", rows, kid1)
	}
	r = wrctlWithInput(t, env, kid1+"\n", "keys", "revoke", kid1)
	m = regexp.MustCompile(`^revoked key ` + kid1 + `\nkey ([A-Za-z0-9_-]{43}) signs in its place from \S+Z\n$`).FindStringSubmatch(r.stdout)
	if r.status != 0 || m == nil {
		t.Fatalf("revoke confirmed: exit %d, stdout %q, stderr %s", r.status, r.stdout, r.stderr)
	}
	kid3 := m[1]
	if rows := keyRows(t, env); !slices.Equal(rows, []string{kid2 + " next", kid3 + " signing", kid1 + " revoked"}) {
		t.Errorf("keys after the revoke: %v, want %s next, %s signing, %s revoked", rows, kid2, kid3, kid1)
	}
	jwks := jwksOf(t, url)
	if slices.Contains(jwks, kid1) || !slices.Contains(jwks, kid3) || !slices.Contains(jwks, kid2) {
		t.Errorf("JWKS after the revoke: %v, want %s and %s, not %s", jwks, kid2, kid3, kid1)
	}
	// The replacement's passes verify at once: an unknown kid makes the
	// site fetch the JWKS again.
	next := strings.TrimSpace(must("passes", "gala").stdout)
	if _, err := v.Verify(t.Context(), next); err != nil {
		t.Errorf("a pass of the replacement: %v", err)
	}

	// The next key, without asking; then refusals.
	if got := decode(t, must("keys", "revoke", kid2, "-yes", "-json")); got["revoked"] != kid2 || got["replacement"] != nil {
		t.Errorf("keys revoke -yes -json of the next key: %v, want it revoked without a replacement", got)
	}
	for _, tc := range []struct {
		args   []string
		status int
		stderr string
	}{
		{[]string{"keys", "revoke", "unknownKeyFixture00000000000000000000000000", "-yes"}, 1, `^wrctl: KEY_NOT_FOUND: No signing key has this id\.\n$`},
		{[]string{"keys", "revoke", "not-a-kid"}, 1, `^wrctl: INVALID_KEY_ID: `},
		{[]string{"keys", "revoke"}, 2, `wrctl keys revoke: want KID, got 0 argument\(s\)`},
		{[]string{"keys", "bogus"}, 2, `wrctl keys: want no arguments, got 1 argument\(s\)`},
		{[]string{"keys", "rotate", "now"}, 2, `wrctl keys rotate: want no arguments, got 1 argument\(s\)`},
	} {
		r := wrctl(t, env, tc.args...)
		if r.status != tc.status || !regexp.MustCompile(tc.stderr).MatchString(r.stderr) || r.stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and %s", tc.args, r.status, r.stdout, r.stderr, tc.status, tc.stderr)
		}
	}
}

// jwksOf is the kids of the JWKS that url serves.
func jwksOf(t *testing.T, url string) []string {
	t.Helper()
	resp, err := http.Get(url + api.JWKSPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set struct{ Keys []struct{ KID string } }
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	var kids []string
	for _, k := range set.Keys {
		kids = append(kids, k.KID)
	}
	return kids
}

// TestKeysFixedKeys: a server that signs with fixed keys has no keyring:
// each key command says so, and where fixed keys are rotated.
func TestKeysFixedKeys(t *testing.T) {
	t.Parallel()
	env := adminEnv(serve(t, newAPI(t)))
	for _, args := range [][]string{{"keys"}, {"keys", "rotate"}, {"keys", "revoke", "unknownKeyFixture00000000000000000000000000", "-yes"}} {
		r := wrctl(t, env, args...)
		if r.status != 1 || !strings.HasPrefix(r.stderr, "wrctl: NO_KEYRING: Passes are signed with fixed key files") || !strings.Contains(r.stderr, `"Rotating the key"`) {
			t.Errorf("%v: exit %d, stderr %q", args, r.status, r.stderr)
		}
	}
}

// TestKeysSigV4: the key commands as on AWS, signed with AWS credentials
// through a gateway that verifies the signature as API Gateway's IAM
// authorizer does.
func TestKeysSigV4(t *testing.T) {
	creds := awsEnv(t, "eu-west-1")
	env := map[string]string{"WR_URL": serve(t, sigv4test.Gateway(creds, "eu-west-1", "Bearer "+testSecret, newKeyringAPI(t)))}
	rot := decode(t, wrctl(t, env, "keys", "rotate", "-json"))
	key, _ := rot["key"].(map[string]any)
	kid, _ := key["keyId"].(string)
	if key["state"] != "next" || len(kid) != 43 {
		t.Fatalf("keys rotate through the signed gateway: %v", rot)
	}
	if got := decode(t, wrctl(t, env, "keys", "-json")); len(got["keys"].([]any)) != 1 {
		t.Errorf("keys through the signed gateway: %v", got)
	}
	if got := decode(t, wrctl(t, env, "keys", "revoke", kid, "-yes", "-json")); got["revoked"] != kid {
		t.Errorf("keys revoke through the signed gateway: %v", got)
	}
	if r := wrctl(t, env, "keys", "-region", "us-east-1"); r.status != 1 || !strings.Contains(r.stderr, "signed for execute-api in us-east-1") {
		t.Errorf("keys signed for another region: exit %d, stderr %s", r.status, r.stderr)
	}
}

// TestEdge: the program at the edge gate and its keys, as an operator
// switches them, against the API in process with an emulated store.
func TestEdge(t *testing.T) {
	t.Parallel()
	passes, err := localkeys.PassOption(t.Context(), config.Pass{}, testIssuer)
	if err != nil {
		t.Fatal(err)
	}
	kvs := localkvs.New("")
	a := newServer(t, passes, waitingroom.WithEdge(kvsReadWriter{kvs}))
	env := adminEnv(serve(t, a.LocalHandler(testSecret)))
	must := musts(t, env)

	if r := wrctl(t, env, "edge-keys"); r.status != 0 || !strings.Contains(r.stdout, `(no edge key yet: "wrctl edge-keys rotate" makes one)`) {
		t.Errorf("edge-keys before any: exit %d, %q", r.status, r.stdout)
	}
	must("put", "gala", "-paused")
	must("edge", "gala", "standby", "-paths", "/tickets/,/cart")
	if got := decode(t, must("get", "gala", "-json")); got["edgeMode"] != "standby" || fmt.Sprint(got["edgePaths"]) != "[/tickets/ /cart]" {
		t.Errorf("after edge standby: %v", got)
	}
	must("edge", "gala", "on")
	if got := decode(t, must("get", "gala", "-json")); fmt.Sprint(got["edgePaths"]) != "[/tickets/ /cart]" {
		t.Errorf("edge without -paths changed them: %v", got["edgePaths"])
	}
	must("edge", "gala", "on", "-paths", "")
	if got := decode(t, must("get", "gala", "-json")); got["edgePaths"] != nil {
		t.Errorf("edge -paths \"\": %v, want none", got["edgePaths"])
	}
	must("edge", "gala", "on", "-paths", "/tickets/,/cart")
	must("put", "gala", "-fail-open-until", "2030-01-02T03:04:05Z", "-edge-session", "10m")
	var p struct {
		Mode          string `json:"mode"`
		FailOpenUntil int64  `json:"failOpenUntil"`
		Session       int64  `json:"session"`
	}
	if v, _ := kvs.Get("p.gala"); json.Unmarshal([]byte(v), &p) != nil || p.Mode != "on" || p.Session != 600 || p.FailOpenUntil != time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC).Unix() {
		t.Errorf("the gate's entry: %q", v)
	}
	if r := wrctl(t, env, "edge", "gala", "maybe"); r.status != 1 || !strings.Contains(r.stderr, "edgeMode must be") {
		t.Errorf("edge gala maybe: exit %d, stderr %s", r.status, r.stderr)
	}
	if r := wrctl(t, env, "edge", "nosuch", "on"); r.status != 1 || !strings.Contains(r.stderr, "PROGRAM_NOT_FOUND") {
		t.Errorf("edge of a missing program: exit %d, stderr %s; want PROGRAM_NOT_FOUND, nothing created", r.status, r.stderr)
	}
	if r := wrctl(t, env, "get", "nosuch"); r.status != 1 {
		t.Errorf("edge of a missing program created it: %s", r.stdout)
	}
	if h := must("history", "gala").stdout; !strings.Contains(h, `{"edgeMode":"on"}`) || !strings.Contains(h, `"edgeMode":"standby","edgePaths":["/tickets/","/cart"]`) {
		t.Errorf("the history lacks the mode's changes:\n%s", h)
	}

	// The first program at the gate made a key; a rotation adds the next.
	row := regexp.MustCompile(`(?m)^([A-Z2-7]{12})  +(next|signing|verifying)  +\S+$`)
	rows := row.FindAllStringSubmatch(must("edge-keys").stdout, -1)
	if len(rows) != 1 || rows[0][2] != "signing" {
		t.Fatalf("edge-keys: %v, want one signing", rows)
	}
	must("edge-keys", "rotate", "-drop")
	rows = row.FindAllStringSubmatch(must("edge-keys").stdout, -1)
	if len(rows) != 1 || rows[0][2] != "signing" || rows[0][1] == "" {
		t.Errorf("edge-keys after a rotation with -drop: %v, want one new signing key", rows)
	}
	if out := must("edge-keys", "-json").stdout; strings.Contains(out, `"k"`) {
		t.Errorf("a secret in the output: %s", out)
	}
}

// kvsReadWriter is an emulated store read and written in process.
type kvsReadWriter struct{ *localkvs.Server }

func (s kvsReadWriter) Get(ctx context.Context, key string) (string, error) {
	return s.Reader().Get(ctx, key)
}

func (s kvsReadWriter) Put(_ context.Context, key, value string) error {
	s.Set(key, value)
	return nil
}

// TestAccountTokenCommand: wrctl put sets a program's enqueue settings
// (wrctl get shows them); wrctl token -account prints the place two
// enters of one account share, with the account; a place moved by a
// handoff reads MOVED with movedAt.
func TestAccountTokenCommand(t *testing.T) {
	t.Parallel()
	site := enqueuetest.New(t)
	verifier := enqueue.NewVerifier(site.Client, nil)
	env := adminEnv(serve(t, newServer(t, waitingroom.WithServiceOptions(queue.WithEnqueue(verifier))).LocalHandler(testSecret)))
	must := musts(t, env)
	must("put", "gala", "-paused", "-enqueue-jwks", site.JWKSURL, "-enqueue-issuer", enqueuetest.Issuer)
	get := must("get", "gala").stdout
	for _, line := range []string{`enqueueJwksUrl +` + regexp.QuoteMeta(site.JWKSURL), `enqueueIssuer +` + regexp.QuoteMeta(enqueuetest.Issuer)} {
		if !regexp.MustCompile(`(?m)^  ` + line + `$`).MatchString(get) {
			t.Errorf("wrctl get: no line %q in:\n%s", line, get)
		}
	}
	must("put", "gala", "-require-enqueue-token")
	if got := decode(t, must("get", "gala", "-json")); got["requireEnqueueToken"] != true {
		t.Errorf("wrctl get -json after -require-enqueue-token: %v", got)
	}

	enterWith := func(h http.Header) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, env["WR_URL"]+"/api/v1/queues/programs/gala", nil)
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	if code, body := enterWith(http.Header{}); code != http.StatusForbidden || body["code"] != api.CodeEnqueueTokenRequired {
		t.Errorf("enter without an enqueue token: %d %v; want 403 %s", code, body, api.CodeEnqueueTokenRequired)
	}
	var ids []any
	for range 2 { // two devices of alice
		code, body := enterWith(http.Header{api.HeaderEnqueueToken: {site.Token(t, "gala", "alice@example.com")}})
		if code != http.StatusCreated && code != http.StatusOK || body["ticket"] != 1.0 {
			t.Fatalf("enter of alice: %d %v; want ticket 1", code, body)
		}
		ids = append(ids, body["tokenId"])
	}
	if ids[0] != ids[1] {
		t.Errorf("alice's two enters answered tokens %v", ids)
	}

	r := must("token", "-account", "alice@example.com", "gala")
	for _, line := range []string{`tokenId +` + regexp.QuoteMeta(ids[0].(string)), `status +WAITING`, `ticket +1`, `position +1`, `account +alice@example\.com`} {
		if !regexp.MustCompile(`(?m)^  ` + line + `$`).MatchString(r.stdout) {
			t.Errorf("wrctl token -account: no line %q in:\n%s", line, r.stdout)
		}
	}
	if got := decode(t, must("token", "gala", "-account", "alice@example.com", "-json")); got["tokenId"] != ids[0] || got["account"] != "alice@example.com" {
		t.Errorf("wrctl token gala -account alice@example.com -json: %v", got)
	}
	if got := decode(t, must("token", "gala", ids[0].(string), "-json")); got["account"] != "alice@example.com" {
		t.Errorf("wrctl token gala TOKEN -json of alice's place: %v; want its account", got)
	}
	for _, tc := range []struct {
		args   []string
		status int
		stderr string
	}{
		{[]string{"token", "-account", "bob", "gala"}, 1, "wrctl: TOKEN_NOT_FOUND: "},
		{[]string{"token", "-account", "alice@example.com", "gala", "tok"}, 2, "with -account SUB, want ID only"},
		{[]string{"token", "gala"}, 2, "want ID TOKEN"},
		{[]string{"token", "gala", "a", "b"}, 2, "want ID [TOKEN], got 3 argument(s)"},
	} {
		if r := wrctl(t, env, tc.args...); r.status != tc.status || !strings.Contains(r.stderr, tc.stderr) || r.stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d with %q", tc.args, r.status, r.stdout, r.stderr, tc.status, tc.stderr)
		}
	}

	// A place without an account, moved to another device by a handoff code.
	must("put", "gala", "-require-enqueue-token=false")
	old := enterToken(t, env["WR_URL"], "gala")
	post := func(path string, h http.Header, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, env["WR_URL"]+path, strings.NewReader(body))
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode/100 != 2 {
			t.Fatalf("POST %s: %d %v %v", path, resp.StatusCode, out, err)
		}
		return out
	}
	h := post("/api/v1/queues/programs/gala/handoff", http.Header{api.HeaderToken: {old}}, `{"page":"`+env["WR_URL"]+`/waiting-room/gala"}`)
	moved := post("/api/v1/queues/programs/gala/handoff/redeem", http.Header{api.HeaderIdempotencyKey: {"phone-redeem-key-0001"}}, `{"code":"`+h["code"].(string)+`"}`)
	r = must("token", "gala", old)
	for _, line := range []string{`status +MOVED`, `ticket +2`, `movedAt +20\d\d-.*`} {
		if !regexp.MustCompile(`(?m)^  ` + line + `$`).MatchString(r.stdout) {
			t.Errorf("wrctl token of a moved place: no line %q in:\n%s", line, r.stdout)
		}
	}
	if got := decode(t, must("token", "gala", moved["tokenId"].(string), "-json")); got["status"] != "WAITING" || got["ticket"] != 2.0 {
		t.Errorf("wrctl token of the place's new token: %v; want WAITING with ticket 2", got)
	}
}

// TestReport: report prints the program's report as a table, -json as the
// API answers it, -csv its series, -html FILE its page; an unknown program
// fails with the API's error.
func TestReport(t *testing.T) {
	t.Parallel()
	url := serve(t, newAPI(t))
	env := adminEnv(url)
	must := musts(t, env)
	must("put", "gala", "-paused")
	enter(t, url, "gala", 3)

	if table := must("report", "gala").stdout; !regexp.MustCompile(`(?m)^\s+arrivals\s+3$`).MatchString(table) || !strings.HasPrefix(table, "Waiting room report: gala") {
		t.Errorf("report: want a table of 3 arrivals:\n%s", table)
	}
	if got := decode(t, must("report", "gala", "-json")); got["programId"] != "gala" || got["people"].(map[string]any)["waiting"] != 3.0 {
		t.Errorf("report -json: %v", got)
	}
	rows := strings.Split(strings.TrimSpace(must("report", "gala", "-csv").stdout), "\n")
	if len(rows) < 2 || rows[0] != "minute,arrivals,admitted,left,waiting,requests,peak_per_second" || !strings.Contains(rows[1], ",3,0,0,3,") {
		t.Errorf("report -csv: want a header and the minute of 3 arrivals:\n%s", strings.Join(rows, "\n"))
	}
	page := filepath.Join(t.TempDir(), "gala.html")
	if out := must("report", "gala", "-html", page).stdout; out != "wrote "+page+"\n" {
		t.Errorf("report -html: %q", out)
	}
	if b, err := os.ReadFile(page); err != nil || !strings.HasPrefix(strings.ToLower(string(b)), "<!doctype html>") || !strings.Contains(string(b), "<svg") {
		t.Errorf("report -html wrote %d bytes (%v), want a page with charts", len(b), err)
	}
	if r := wrctl(t, env, "report", "gala", "-csv", "-html", page); r.status != 2 || !strings.Contains(r.stderr, "one at a time") {
		t.Errorf("report -csv -html: exit %d, stderr %s; want a usage error", r.status, r.stderr)
	}
	if r := wrctl(t, env, "report", "nobody"); r.status != 1 || !strings.Contains(r.stderr, "PROGRAM_NOT_FOUND") {
		t.Errorf("report of an unknown program: exit %d, stderr %s", r.status, r.stderr)
	}
}
