package passtest

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/waitingroom/passverify"
)

// ReplayGuardContract checks what every passverify.ReplayGuard must do;
// newGuard returns a fresh guard.
func ReplayGuardContract(t *testing.T, newGuard func(t *testing.T) passverify.ReplayGuard) {
	until := time.Now().Add(time.Hour)

	t.Run("FirstUseOnce", func(t *testing.T) {
		g := newGuard(t)
		a, b := rand.Text(), rand.Text()
		for i, step := range []struct {
			jti  string
			want bool
		}{{a, true}, {a, false}, {b, true}, {a, false}, {b, false}} {
			got, err := g.FirstUse(t.Context(), step.jti, until)
			if err != nil || got != step.want {
				t.Errorf("step %d: FirstUse = %v, %v; want %v", i, got, err, step.want)
			}
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		g := newGuard(t)
		jti := rand.Text()
		const n = 8
		var wg sync.WaitGroup
		var firsts atomic.Int32
		for range n {
			wg.Go(func() {
				first, err := g.FirstUse(context.Background(), jti, until)
				if err != nil {
					t.Error(err)
				}
				if first {
					firsts.Add(1)
				}
			})
		}
		wg.Wait()
		if count := firsts.Load(); count != 1 {
			t.Errorf("%d of %d concurrent first uses succeeded, want 1", count, n)
		}
	})

	t.Run("GateSingleUse", func(t *testing.T) {
		// Real time: the guard may keep its own clock.
		room := NewRoom(t)
		clock := NewClock(time.Now())
		a := Admission
		a.AdmittedAt, a.ExpiresAt = clock.Now().Add(-time.Minute), clock.Now().Add(9*time.Minute)
		gate := of(passverify.NewGate(room.Verifier(t, clock, nil), passverify.GateConfig{WaitingRoomURL: WaitingRoomURL,
			CookieSecrets: [][]byte{[]byte(rand.Text() + rand.Text())}, ReplayGuard: newGuard(t)})).must(t)
		h := gate.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("in")) }))
		pass := room.Pass(t, a)
		target := WithPass("https://shop.example.com/seats", pass)
		do := func(target string, cookies ...*http.Cookie) *http.Response {
			r := httptest.NewRequest(http.MethodGet, target, nil)
			for _, c := range cookies {
				r.AddCookie(c)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			return rec.Result()
		}

		first := do(target)
		if first.StatusCode != http.StatusSeeOther || len(first.Cookies()) != 1 {
			t.Fatalf("first exchange: %s with %d cookies, want 303 and the cookie", first.Status, len(first.Cookies()))
		}
		cookie := first.Cookies()[0]
		if again := do(target); again.StatusCode != http.StatusForbidden || len(again.Cookies()) != 0 {
			t.Errorf("replay from another browser: %s with %d cookies, want 403 and none", again.Status, len(again.Cookies()))
		}
		raw := &http.Cookie{Name: cookie.Name, Value: pass}
		if forged := do("https://shop.example.com/seats", raw); forged.StatusCode == http.StatusOK {
			t.Errorf("the raw pass as the cookie, after the pass was used: %s, want a refusal", forged.Status)
		}
		if back := do(target, cookie); back.StatusCode != http.StatusSeeOther || len(back.Cookies()) != 1 {
			t.Errorf("same browser again: %s with %d cookies, want 303 and the cookie", back.Status, len(back.Cookies()))
		}
		if in := do("https://shop.example.com/seats", cookie); in.StatusCode != http.StatusOK {
			t.Errorf("with the cookie: %s, want 200", in.Status)
		}
		if other := do(WithPass("https://shop.example.com/seats", room.Pass(t, a))); other.StatusCode != http.StatusSeeOther {
			t.Errorf("a new pass of the token (another jti): %s, want 303", other.Status)
		}
	})
}
