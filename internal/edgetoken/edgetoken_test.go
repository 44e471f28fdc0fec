package edgetoken_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/edgetoken"
)

func mustKey(t *testing.T, id string) edgetoken.Key {
	t.Helper()
	k, err := edgetoken.NewKey(id)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestVerify(t *testing.T) {
	now := time.Date(2026, 12, 4, 20, 0, 0, 0, time.UTC)
	exp := now.Add(10 * time.Minute)
	old, cur, other := mustKey(t, "e1"), mustKey(t, "e2"), mustKey(t, "e2")
	ks := edgetoken.Keys{Current: old}.Rotated(cur)
	if ks.Previous == nil || ks.Previous.ID != "e1" || ks.Current.ID != "e2" {
		t.Fatalf("Rotated: %+v", ks)
	}
	flip := func(s string) string { // the last character of the MAC changed
		last := s[len(s)-1]
		return s[:len(s)-1] + map[bool]string{true: "A", false: "B"}[last != 'A']
	}
	for _, tc := range []struct {
		name    string
		session bool
		cred    string
		program string
		at      time.Time
		ok      bool
	}{
		{"token", false, cur.Token("gala", exp, "j1"), "gala", now, true},
		{"token of the previous key", false, old.Token("gala", exp, "j1"), "gala", now, true},
		{"token at its expiry", false, cur.Token("gala", exp, "j1"), "gala", exp, false},
		{"token of another program", false, cur.Token("opera", exp, "j1"), "gala", now, false},
		{"token tampered", false, flip(cur.Token("gala", exp, "j1")), "gala", now, false},
		{"token with its expiry moved", false, strings.Replace(cur.Token("gala", exp, "j1"), ".1796", ".1896", 1), "gala", now, false},
		{"token of an unknown key with a known id", false, other.Token("gala", exp, "j1"), "gala", now, false},
		{"session as token", false, cur.Session("gala", exp, "j1"), "gala", now, false},
		{"session", true, cur.Session("gala", exp, "j1"), "gala", now, true},
		{"session of the previous key", true, old.Session("gala", exp, "j1"), "gala", now, true},
		{"session expired", true, cur.Session("gala", exp, "j1"), "gala", exp.Add(time.Second), false},
		{"session of another program", true, cur.Session("opera", exp, "j1"), "gala", now, false},
		{"session tampered", true, flip(cur.Session("gala", exp, "j1")), "gala", now, false},
		{"token as session", true, strings.Replace(cur.Token("gala", exp, "j1"), ".gala", "", 1), "gala", now, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			verify := ks.VerifyToken
			if tc.session {
				verify = ks.VerifySession
			}
			gotExp, jti, err := verify(tc.cred, tc.program, tc.at)
			switch {
			case tc.ok && (err != nil || !gotExp.Equal(exp) || jti != "j1"):
				t.Errorf("verify %q: %v, %v, %v; want %v, j1", tc.cred, gotExp, jti, err, exp)
			case !tc.ok && !errors.Is(err, edgetoken.ErrInvalid):
				t.Errorf("verify %q: %v; want ErrInvalid", tc.cred, err)
			}
		})
	}
}

func TestNewKey(t *testing.T) {
	for _, id := range []string{"", "a.b", strings.Repeat("k", 33)} {
		if _, err := edgetoken.NewKey(id); err == nil {
			t.Errorf("NewKey(%q): no error", id)
		}
	}
	a, b := mustKey(t, "k"), mustKey(t, "k")
	if len(a.Secret) != 43 || a.Secret == b.Secret {
		t.Errorf("secrets %q, %q: want 43 random characters each", a.Secret, b.Secret)
	}
}
