package queue_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/google/go-cmp/cmp"
)

// TestRevokeToken: a revoked token reads REVOKED whatever it was, with no
// place, admission or pass; revoking again, or leaving, changes nothing;
// its pass ends no session (TOKEN_REVOKED); an enter with it gets a new
// place.
func TestRevokeToken(t *testing.T) {
	ctx := t.Context()
	svc, c := newService(t, queue.WithPassSigner(newSigner(t)))
	mustPut(t, svc, "gala", 1, false)
	enter := func() queue.View {
		t.Helper()
		v, _, err := svc.Enter(ctx, "gala", queue.Entry{})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	adm := enter()
	c.Advance(time.Second)
	adm, err := svc.Poll(ctx, "gala", adm.TokenID)
	if err != nil || adm.Status != queue.StatusAdmitted {
		t.Fatalf("not admitted: %+v, %v", adm, err)
	}
	left := enter()
	if err := svc.Leave(ctx, "gala", left.TokenID); err != nil {
		t.Fatal(err)
	}
	waiting := enter()
	for _, v := range []queue.View{adm, left, waiting} {
		for range 2 { // the second revoke changes nothing
			if err := svc.RevokeToken(ctx, "gala", v.TokenID); err != nil {
				t.Fatalf("revoke %s: %v", v.Status, err)
			}
		}
		c.Advance(time.Second)
		if err := svc.Leave(ctx, "gala", v.TokenID); err != nil {
			t.Errorf("leave after the revoke of a %s token: %v", v.Status, err)
		}
		got, err := svc.Poll(ctx, "gala", v.TokenID)
		want := queue.View{TokenID: v.TokenID, Status: queue.StatusRevoked, IssuedAt: v.IssuedAt, Ticket: v.Ticket, RevokedAt: got.RevokedAt}
		if err != nil || !cmp.Equal(got, want) || got.RevokedAt.IsZero() {
			t.Errorf("poll of the revoked %s token = %+v, %v; want %+v", v.Status, got, err, want)
		}
	}
	wantCode(t, "session end with a revoked token's pass", svc.EndSession(ctx, "gala", adm.AdmissionPass), api.CodeTokenRevoked)
	wantCode(t, "release with a revoked token's pass", svc.ReleaseSession(ctx, "gala", adm.AdmissionPass), api.CodeTokenRevoked)
	if v, created, err := svc.Enter(ctx, "gala", queue.Entry{Token: waiting.TokenID}); err != nil || !created || v.TokenID == waiting.TokenID {
		t.Errorf("enter with a revoked token = %+v, created %v, %v; want a new place", v, created, err)
	}

	mustPut(t, svc, "other", 1, false)
	for _, tc := range []struct{ what, program, token, code string }{
		{"unknown token", "gala", queue.NewTokenID(), api.CodeTokenNotFound},
		{"another program's token", "other", waiting.TokenID, api.CodeTokenNotFound},
		{"malformed token", "gala", "not a token", api.CodeInvalidToken},
		{"malformed program", "-gala", waiting.TokenID, api.CodeInvalidProgramID},
	} {
		wantCode(t, "revoke of an "+tc.what, svc.RevokeToken(ctx, tc.program, tc.token), tc.code)
		_, err := svc.Token(ctx, tc.program, tc.token)
		wantCode(t, "lookup of an "+tc.what, err, tc.code)
	}
}

// TestTokenLookup: an admin's lookup answers what the holder would be
// told, but records nothing: an admission nobody has seen yet stays
// unseen (no sighting, no pass signed), and the holder's next poll is
// still the first sighting. No lookup carries a pass.
func TestTokenLookup(t *testing.T) {
	ctx := t.Context()
	signer := &countingSigner{}
	store := memstore.New()
	c := clock.NewFake(t0)
	svc := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(c), queue.WithPassSigner(signer))
	mustPut(t, svc, "gala", 1, false)
	ids := enterN(t, svc, "gala", 3)
	c.Advance(time.Second) // ticket 1 admitted
	lookup := func(i int) queue.Lookup {
		t.Helper()
		l, err := svc.Token(ctx, "gala", ids[i])
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if l := lookup(2); l.View.Status != queue.StatusWaiting || l.View.Position != 2 {
		t.Errorf("lookup of ticket 3: %+v, want WAITING at position 2", l.View)
	}
	l := lookup(0)
	if l.View.Status != queue.StatusAdmitted || !l.View.AdmittedAt.IsZero() || l.View.AdmissionPass != "" || !l.Token.AdmittedAt.IsZero() {
		t.Errorf("lookup of an unseen admission: %+v; want ADMITTED, not seen, no pass", l)
	}
	if stored, err := store.GetToken(ctx, ids[0]); err != nil || !stored.AdmittedAt.IsZero() || signer.calls.Load() != 0 {
		t.Fatalf("after the lookup: stored %+v, %v, %d passes signed; want nothing recorded", stored, err, signer.calls.Load())
	}
	c.Advance(time.Second)
	v, err := svc.Poll(ctx, "gala", ids[0])
	if err != nil || !v.FirstSighting || v.AdmissionPass == "" {
		t.Fatalf("the holder's poll after the lookup: %+v, %v; want the first sighting, with a pass", v, err)
	}
	l = lookup(0)
	if l.View.Status != queue.StatusAdmitted || !l.View.AdmittedAt.Equal(v.AdmittedAt) || l.View.AdmissionPass != "" || l.Token.AdmissionPass != v.AdmissionPass {
		t.Errorf("lookup of a seen admission: %+v; want ADMITTED at %v, without the pass in the view", l, v.AdmittedAt)
	}
}

// TestRevokeFreesTheSlot: under a cap of one, revoking the admitted token
// frees its slot at once, as the site's release does: the next person is
// admitted within seconds, not after the revoked one's window.
func TestRevokeFreesTheSlot(t *testing.T) {
	ctx := t.Context()
	svc, c := newService(t, queue.WithPassSigner(newSigner(t)), queue.WithProgramCache(time.Second))
	if _, _, err := svc.PutProgram(ctx, "cap1", api.ProgramSettings{
		AdmissionRatePerSecond: new(api.Rate(10)), MaxActiveUsers: new(int64(1)),
	}); err != nil {
		t.Fatal(err)
	}
	ids := enterN(t, svc, "cap1", 2)
	c.Advance(time.Second)
	if v, err := svc.Poll(ctx, "cap1", ids[0]); err != nil || v.Status != queue.StatusAdmitted {
		t.Fatalf("first token: %+v, %v", v, err)
	}
	if err := svc.RevokeToken(ctx, "cap1", ids[0]); err != nil {
		t.Fatal(err)
	}
	for step := 1; step <= 50; step++ {
		c.Advance(100 * time.Millisecond)
		v, err := svc.Poll(ctx, "cap1", ids[1])
		if err != nil {
			t.Fatal(err)
		}
		if v.Status == queue.StatusAdmitted {
			return
		}
	}
	t.Errorf("the second token still waits 5 s after the revoke freed the only slot")
}

// revokingStore revokes each token just before its first sighting is
// stored: a revoke that lands between a poll's read and its write.
type revokingStore struct {
	queue.Store
}

func (s revokingStore) MarkAdmitted(ctx context.Context, t queue.Token) (queue.Token, error) {
	r := t
	r.RevokedAt = t.AdmittedAt
	if _, err := s.Store.RevokeToken(ctx, r); err != nil {
		return queue.Token{}, err
	}
	return s.Store.MarkAdmitted(ctx, t)
}

// TestRevokeRacesTheSighting: a revoke that lands after a poll read the
// token and signed its pass, but before the poll stored it, wins: the
// poll answers REVOKED, and the pass it signed is handed to nobody.
func TestRevokeRacesTheSighting(t *testing.T) {
	ctx := t.Context()
	signer := &countingSigner{}
	c := clock.NewFake(t0)
	svc := queue.NewService(revokingStore{memstore.New()}, polling.DefaultTiers(), queue.WithClock(c), queue.WithPassSigner(signer))
	mustPut(t, svc, "gala", 1, false)
	w, _, err := svc.Enter(ctx, "gala", queue.Entry{})
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Second)
	for range 2 {
		v, err := svc.Poll(ctx, "gala", w.TokenID)
		if err != nil || v.Status != queue.StatusRevoked || v.AdmissionPass != "" || v.FirstSighting {
			t.Errorf("poll racing the revoke = %+v, %v; want REVOKED without a pass", v, err)
		}
	}
	if signer.calls.Load() != 1 {
		t.Errorf("%d passes signed, want 1 (then thrown away)", signer.calls.Load())
	}
}

// TestRevokeConcurrent: a revoke and the holder's poll race. Either the
// poll's sighting lands first, and the poll answers ADMITTED with the pass
// then stored, whose admission the revoke then ends; or the revoke does,
// and the poll answers REVOKED. After both, the token reads REVOKED.
func TestRevokeConcurrent(t *testing.T) {
	ctx := t.Context()
	store := memstore.New()
	svc := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(clock.NewFake(t0)), queue.WithPassSigner(&countingSigner{}))
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{Paused: new(true)}); err != nil {
		t.Fatal(err)
	}
	const n = 40
	ids := enterN(t, svc, "gala", n)
	if _, err := svc.Admit(ctx, "gala", n); err != nil {
		t.Fatal(err)
	}
	svc = queue.NewService(store, polling.DefaultTiers(), queue.WithClock(clock.NewFake(t0.Add(time.Hour))), queue.WithPassSigner(&countingSigner{}))
	var wg sync.WaitGroup
	for _, id := range ids {
		var v queue.View
		var errP, errR error
		wg.Go(func() {
			var inner sync.WaitGroup
			inner.Go(func() { v, errP = svc.Poll(ctx, "gala", id) })
			inner.Go(func() { errR = svc.RevokeToken(ctx, "gala", id) })
			inner.Wait()
			stored, err := store.GetToken(ctx, id)
			if err := errors.Join(errP, errR, err); err != nil {
				t.Error(err)
				return
			}
			switch {
			case stored.RevokedAt.IsZero():
				t.Errorf("token not revoked: %+v", stored)
			case v.Status == queue.StatusAdmitted && (v.AdmissionPass == "" || v.AdmissionPass != stored.AdmissionPass || !stored.LeftAt.Equal(stored.RevokedAt)):
				t.Errorf("poll answered ADMITTED with %q; stored %+v: want the stored pass, its admission ended by the revoke", v.AdmissionPass, stored)
			case v.Status != queue.StatusAdmitted && (v.Status != queue.StatusRevoked || stored.AdmissionPass != ""):
				t.Errorf("poll answered %s; stored %+v: want REVOKED and no pass stored", v.Status, stored)
			}
			if again, err := svc.Poll(ctx, "gala", id); err != nil || again.Status != queue.StatusRevoked {
				t.Errorf("poll after both = %+v, %v; want REVOKED", again, err)
			}
		})
	}
	wg.Wait()
}

// TestTokenLookupNoShow: once the folds seal a place nobody came to see,
// its lookup reads EXPIRED, as its holder's poll then does; until then,
// ADMITTED without a window. The lookups themselves seal nothing.
func TestTokenLookupNoShow(t *testing.T) {
	ctx := t.Context()
	svc, c := newService(t, queue.WithProgramCache(time.Second))
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{
		AdmissionRatePerSecond: new(api.Rate(10)), NoShowSeconds: new(int64(5)),
	}); err != nil {
		t.Fatal(err)
	}
	ids := enterN(t, svc, "gala", 2)
	c.Advance(time.Second)
	status := func() queue.Status {
		t.Helper()
		l, err := svc.Token(ctx, "gala", ids[0])
		if err != nil {
			t.Fatal(err)
		}
		return l.View.Status
	}
	if s := status(); s != queue.StatusAdmitted {
		t.Fatalf("lookup of the unseen admission: %s, want ADMITTED", s)
	}
	for step := 1; step <= 150 && status() == queue.StatusAdmitted; step++ {
		c.Advance(100 * time.Millisecond)
		if _, _, err := svc.Enter(ctx, "gala", queue.Entry{}); err != nil { // newcomers drive the folds
			t.Fatal(err)
		}
	}
	if s := status(); s != queue.StatusExpired {
		t.Fatalf("lookup 15 s after the admission nobody saw: %s, want EXPIRED", s)
	}
	if v, err := svc.Poll(ctx, "gala", ids[0]); err != nil || v.Status != queue.StatusExpired || v.AdmissionPass != "" {
		t.Errorf("the holder's poll = %+v, %v; want EXPIRED, a no-show", v, err)
	}
}

// TestRevokeInHistory: a revoke is in the program's history once, with its
// actor, however often it is repeated.
func TestRevokeInHistory(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	svc := queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(clk))
	ctx := queue.WithActor(context.Background(), "arn:aws:iam::123456789012:user/support")
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{}); err != nil {
		t.Fatal(err)
	}
	v, _, err := svc.Enter(ctx, "gala", queue.Entry{})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		clk.Advance(time.Second)
		if err := svc.RevokeToken(ctx, "gala", v.TokenID); err != nil {
			t.Fatal(err)
		}
	}
	h, err := svc.History(ctx, "gala", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range h.Changes {
		got = append(got, c.Actor+" "+c.Action+" "+string(c.Fields))
	}
	want := []string{
		"arn:aws:iam::123456789012:user/support revoke {\"tokenId\":\"" + v.TokenID + "\"}",
		"arn:aws:iam::123456789012:user/support create {}",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
}
