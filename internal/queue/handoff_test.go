package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/enqueue"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/queuetest"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/simclock"
)

func TestNormalizeHandoffCode(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"K7QM3XWD9P2HRT5A", "K7QM3XWD9P2HRT5A", true},
		{"k7qm-3xwd 9p2h-rt5a", "K7QM3XWD9P2HRT5A", true},
		{"KIQL3XWD9P2HRTOA", "K1Q13XWD9P2HRT0A", true}, // I, L: 1; O: 0
		{"K7QM3XWD9P2HRT5", "", false},                 // 15
		{"K7QM3XWD9P2HRT5AA", "", false},               // 17
		{"K7QM3XWD9P2HRT5U", "", false},                // U is no letter of the alphabet
		{"K7QM3XWD9P2HRT5*", "", false},
		{strings.Repeat("-", 65), "", false},
	} {
		got, ok := queue.NormalizeHandoffCode(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("NormalizeHandoffCode(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestHandoff drives a handoff's refusals: a second code within the gap, a
// replaced or expired code, a place admitted meanwhile, an account's place,
// and what a moved token still answers.
func TestHandoff(t *testing.T) {
	ctx := t.Context()
	svc, clk := newService(t, queue.WithEnqueue(queuetest.Accounts{}))
	paused := true
	if _, _, err := svc.PutProgram(ctx, "gala", queuetest.TakingAccounts(api.ProgramSettings{Paused: &paused})); err != nil {
		t.Fatal(err)
	}
	enter := func(e queue.Entry) queue.View {
		t.Helper()
		v, _, err := svc.Enter(ctx, "gala", e)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	a := enter(queue.Entry{})
	first, _, err := svc.MakeHandoff(ctx, "gala", a.TokenID)
	if err != nil || len(first) != 16 {
		t.Fatalf("MakeHandoff = %q, %v", first, err)
	}
	_, _, err = svc.MakeHandoff(ctx, "gala", a.TokenID)
	var qe *queue.Error
	if !errors.As(err, &qe) || qe.Code != api.CodeHandoffTooSoon || qe.RetryAfter != queue.HandoffGap {
		t.Errorf("a second code at once: %v, want HANDOFF_TOO_SOON after %v", err, queue.HandoffGap)
	}
	clk.Advance(queue.HandoffGap)
	second, expires, err := svc.MakeHandoff(ctx, "gala", a.TokenID)
	if err != nil || second == first || !expires.Equal(clk.Now().Add(queue.HandoffLife)) {
		t.Fatalf("MakeHandoff after the gap = %q until %v, %v", second, expires, err)
	}
	redeem := func(code string) error {
		_, _, err := svc.Redeem(ctx, "gala", code, "a-device-redeem-key-1")
		return err
	}
	for _, tc := range []struct{ name, code, want string }{
		{"the replaced code", first, api.CodeHandoffNotFound},
		{"a code of no handoff", "0000000000000000", api.CodeHandoffNotFound},
		{"a malformed code", "ABC", api.CodeInvalidHandoffCode},
	} {
		if got := codeOf(redeem(tc.code)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	if _, _, err := svc.Redeem(ctx, "gala", second, "short"); codeOf(err) != api.CodeInvalidIdempotencyKey {
		t.Errorf("a redeem with a short key: %v", err)
	}
	if _, _, err := svc.Redeem(ctx, "other", second, "a-device-redeem-key-1"); codeOf(err) != api.CodeHandoffNotFound {
		t.Errorf("a redeem in another program: %v, want HANDOFF_NOT_FOUND", err)
	}
	clk.Advance(queue.HandoffLife)
	if got := codeOf(redeem(second)); got != api.CodeHandoffNotFound {
		t.Errorf("an expired code: %s, want HANDOFF_NOT_FOUND", got)
	}

	// A place admitted after its code was made stays where it is.
	b := enter(queue.Entry{})
	code, _, err := svc.MakeHandoff(ctx, "gala", b.TokenID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Admit(ctx, "gala", 2); err != nil {
		t.Fatal(err)
	}
	if v, err := svc.Poll(ctx, "gala", b.TokenID); err != nil || v.Status != queue.StatusAdmitted {
		t.Fatalf("poll after admission: %+v, %v", v, err)
	}
	if got := codeOf(redeem(code)); got != api.CodeNotWaiting {
		t.Errorf("a code of a place admitted since: %s, want NOT_WAITING", got)
	}
	if _, _, err := svc.MakeHandoff(ctx, "gala", b.TokenID); codeOf(err) != api.CodeNotWaiting {
		t.Errorf("a code for an admitted token: %v, want NOT_WAITING", err)
	}
	acct := enter(queue.Entry{Enqueue: "account:alice"})
	if _, _, err := svc.MakeHandoff(ctx, "gala", acct.TokenID); codeOf(err) != api.CodeHandoffRefused {
		t.Errorf("a code for an account's place: %v, want HANDOFF_REFUSED", err)
	}

	// A moved token: MOVED, no subscription, no leave, and an enter with it takes a new place.
	c := enter(queue.Entry{})
	code, _, err = svc.MakeHandoff(ctx, "gala", c.TokenID)
	if err != nil {
		t.Fatal(err)
	}
	moved, created, err := svc.Redeem(ctx, "gala", code, "a-device-redeem-key-2")
	if err != nil || !created || moved.Ticket != c.Ticket {
		t.Fatalf("Redeem = %+v, %v, %v", moved, created, err)
	}
	if err := svc.Leave(ctx, "gala", c.TokenID); err != nil {
		t.Errorf("Leave of a moved token: %v", err)
	}
	if v, err := svc.Poll(ctx, "gala", moved.TokenID); err != nil || v.Status != queue.StatusWaiting {
		t.Errorf("the place after the old token's leave: %+v, %v; want WAITING", v, err)
	}
	if v, err := svc.Poll(ctx, "gala", c.TokenID); err != nil || v.Status != queue.StatusMoved || v.MovedAt.IsZero() || v.Position != 0 {
		t.Errorf("the old token: %+v, %v; want MOVED", v, err)
	}
	again, created, err := svc.Enter(ctx, "gala", queue.Entry{Token: c.TokenID})
	if err != nil || !created || again.TokenID == c.TokenID || again.Ticket <= moved.Ticket {
		t.Errorf("an enter with the moved token: %+v, created %v, %v; want a new place", again, created, err)
	}
}

// TestHandoffChain: a place moves at most MaxMoves times, each next code no
// sooner than HandoffGap after its move; a retry after the code is swept
// still answers the moved place; and revoking any id it had revokes it.
func TestHandoffChain(t *testing.T) {
	ctx := t.Context()
	store := memstore.New()
	clk := simclock.NewFake(t0)
	svc := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(clk))
	mustPut(t, svc, "gala", 1, true)
	first, _, err := svc.Enter(ctx, "gala", queue.Entry{})
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{first.TokenID}
	var code string
	for i := range queue.MaxMoves {
		if code, _, err = svc.MakeHandoff(ctx, "gala", ids[i]); err != nil {
			t.Fatalf("move %d: MakeHandoff: %v", i+1, err)
		}
		v, created, err := svc.Redeem(ctx, "gala", code, fmt.Sprintf("redeem-key-of-move-%d", i))
		if err != nil || !created || v.Ticket != first.Ticket {
			t.Fatalf("move %d: Redeem = %+v, %v, %v", i+1, v, created, err)
		}
		ids = append(ids, v.TokenID)
		if _, _, err := svc.MakeHandoff(ctx, "gala", v.TokenID); i+1 < queue.MaxMoves && codeOf(err) != api.CodeHandoffTooSoon {
			t.Errorf("move %d: a code at once from the new token: %v, want HANDOFF_TOO_SOON", i+1, err)
		}
		clk.Advance(queue.HandoffGap)
	}
	if _, _, err := svc.MakeHandoff(ctx, "gala", ids[queue.MaxMoves]); codeOf(err) != api.CodeHandoffRefused {
		t.Errorf("a code after %d moves: %v, want HANDOFF_REFUSED", queue.MaxMoves, err)
	}
	clk.Advance(queue.HandoffLife + time.Hour)
	store.Sweep(clk.Now())
	last := fmt.Sprintf("redeem-key-of-move-%d", queue.MaxMoves-1)
	if v, created, err := svc.Redeem(ctx, "gala", code, last); err != nil || created || v.TokenID != ids[queue.MaxMoves] {
		t.Errorf("a late retry of the last redeem = %s, %v, %v; want %s", v.TokenID, created, err, ids[queue.MaxMoves])
	}
	if _, _, err := svc.Redeem(ctx, "gala", code, "another-device-redeem-key"); codeOf(err) != api.CodeHandoffNotFound {
		t.Errorf("another device with the swept code: %v, want HANDOFF_NOT_FOUND", err)
	}
	if err := svc.RevokeToken(ctx, "gala", first.TokenID); err != nil {
		t.Fatal(err)
	}
	if v, err := svc.Poll(ctx, "gala", ids[queue.MaxMoves]); err != nil || v.Status != queue.StatusRevoked {
		t.Errorf("the place after its first id was revoked: %+v, %v; want REVOKED", v, err)
	}
}

// keysDown is a site whose keys cannot be read.
type keysDown struct{}

func (keysDown) Verify(context.Context, string, string, string, string) (string, error) {
	return "", fmt.Errorf("fetch: %w", enqueue.ErrKeysUnavailable)
}

// TestEnqueueRefusals: each way an enter's enqueue token is refused answers its code.
func TestEnqueueRefusals(t *testing.T) {
	ctx := t.Context()
	svc, _ := newService(t, queue.WithEnqueue(queuetest.Accounts{}))
	down, _ := newService(t, queue.WithEnqueue(keysDown{}))
	required, paused := true, true
	for _, s := range []*queue.Service{svc, down} {
		if _, _, err := s.PutProgram(ctx, "shop", queuetest.TakingAccounts(api.ProgramSettings{Paused: &paused, RequireEnqueueToken: &required})); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.PutProgram(ctx, "open", api.ProgramSettings{Paused: &paused}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		svc     *queue.Service
		program string
		e       queue.Entry
		want    string
	}{
		{"none where required", svc, "shop", queue.Entry{}, api.CodeEnqueueTokenRequired},
		{"a token held, none sent", svc, "shop", queue.Entry{Token: "AAAAAAAAAAAAAAAAAAAAAA"}, api.CodeEnqueueTokenRequired},
		{"a bad one", svc, "shop", queue.Entry{Enqueue: "forged"}, api.CodeInvalidEnqueueToken},
		{"one where none is taken", svc, "open", queue.Entry{Enqueue: "account:alice"}, api.CodeInvalidEnqueueToken},
		{"the site's keys down", down, "shop", queue.Entry{Enqueue: "account:alice"}, api.CodeKeysUnavailable},
		{"an unknown program", svc, "nope", queue.Entry{Enqueue: "account:alice"}, api.CodeProgramNotFound},
		{"an account", svc, "shop", queue.Entry{Enqueue: "account:alice"}, ""},
	} {
		if _, _, err := tc.svc.Enter(ctx, tc.program, tc.e); codeOf(err) != tc.want {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, _, err := svc.PutProgram(ctx, "bare", api.ProgramSettings{RequireEnqueueToken: &required}); codeOf(err) != api.CodeInvalidSettings {
		t.Errorf("requireEnqueueToken without keys: %v, want INVALID_SETTINGS", err)
	}
}

// accountSigner records the accounts of the passes it signs.
type accountSigner struct{ accounts []string }

func (s *accountSigner) SignPass(_ context.Context, t queue.Token) (string, error) {
	s.accounts = append(s.accounts, t.Account)
	return "pass-" + t.ID, nil
}

// TestAccountPlace: an account's enters from any device answer one token,
// whose admission's pass carries the account; an admin finds it by account.
func TestAccountPlace(t *testing.T) {
	ctx := t.Context()
	signer := &accountSigner{}
	svc, clk := newService(t, queue.WithEnqueue(queuetest.Accounts{}), queue.WithPassSigner(signer))
	paused := true
	if _, _, err := svc.PutProgram(ctx, "shop", queuetest.TakingAccounts(api.ProgramSettings{Paused: &paused})); err != nil {
		t.Fatal(err)
	}
	laptop, created, err := svc.Enter(ctx, "shop", queue.Entry{Enqueue: "account:alice"})
	if err != nil || !created || !laptop.Account {
		t.Fatalf("enter = %+v, %v, %v", laptop, created, err)
	}
	other, _, _ := svc.Enter(ctx, "shop", queue.Entry{Enqueue: "account:bob"})
	phone, created, err := svc.Enter(ctx, "shop", queue.Entry{Enqueue: "account:alice", Token: other.TokenID})
	if err != nil || created || phone.TokenID != laptop.TokenID || phone.Ticket != laptop.Ticket {
		t.Errorf("the phone's enter = %+v, created %v, %v; want the laptop's token", phone, created, err)
	}
	l, err := svc.AccountToken(ctx, "shop", "alice")
	if err != nil || l.Token.ID != laptop.TokenID || l.Token.Account != "alice" {
		t.Errorf("AccountToken = %+v, %v", l.Token, err)
	}
	if _, err := svc.AccountToken(ctx, "shop", "carol"); codeOf(err) != api.CodeTokenNotFound {
		t.Errorf("AccountToken of no place: %v", err)
	}
	if _, err := svc.Admit(ctx, "shop", 2); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if v, err := svc.Poll(ctx, "shop", laptop.TokenID); err != nil || v.Status != queue.StatusAdmitted {
		t.Fatalf("poll = %+v, %v", v, err)
	}
	if d := cmp.Diff([]string{"alice"}, signer.accounts); d != "" {
		t.Errorf("accounts of the passes signed (-want +got):\n%s", d)
	}
}

// failFirstPut is a store whose first PutToken of a token with Moves fails
// (a redeem's second write), once.
type failFirstPut struct {
	*memstore.Store
	failed bool
}

func (s *failFirstPut) PutToken(ctx context.Context, t queue.Token) error {
	if t.Moves > 0 && !s.failed {
		s.failed = true
		return errors.New("store down")
	}
	return s.Store.PutToken(ctx, t)
}

// TestRevokeBetweenMoveWrites: a revoke that comes between a redeem's two
// writes (the old token moved, the new one not stored yet) stores the
// place under its new id revoked; the device's retry then finds it REVOKED.
func TestRevokeBetweenMoveWrites(t *testing.T) {
	ctx := t.Context()
	store := &failFirstPut{Store: memstore.New()}
	svc := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(simclock.NewFake(t0)))
	mustPut(t, svc, "gala", 1, true)
	v, _, err := svc.Enter(ctx, "gala", queue.Entry{})
	if err != nil {
		t.Fatal(err)
	}
	code, _, err := svc.MakeHandoff(ctx, "gala", v.TokenID)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Redeem(ctx, "gala", code, "a-device-redeem-key-1"); codeOf(err) != api.CodeUnavailable {
		t.Fatalf("the redeem whose second write fails: %v, want STORE_UNAVAILABLE", err)
	}
	if err := svc.RevokeToken(ctx, "gala", v.TokenID); err != nil {
		t.Fatalf("revoke between the writes: %v", err)
	}
	got, _, err := svc.Redeem(ctx, "gala", code, "a-device-redeem-key-1")
	if err != nil || got.Status != queue.StatusRevoked || got.Ticket != v.Ticket {
		t.Errorf("the device's retry = %+v, %v; want its place, REVOKED", got, err)
	}
}
