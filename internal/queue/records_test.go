package queue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/catalog"
	"github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/simclock"
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
	c := simclock.NewFake(t0)
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
	svc, c, ids := followed(t, "cap1", api.ProgramSettings{
		AdmissionRatePerSecond: new(api.Rate(10)), MaxActiveUsers: new(int64(1)),
	}, 2)
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
	c := simclock.NewFake(t0)
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
	svc := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(simclock.NewFake(t0)), queue.WithPassSigner(&countingSigner{}))
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{Paused: new(true)}); err != nil {
		t.Fatal(err)
	}
	const n = 40
	ids := enterN(t, svc, "gala", n)
	if _, err := svc.Admit(ctx, "gala", n); err != nil {
		t.Fatal(err)
	}
	svc = queue.NewService(store, polling.DefaultTiers(), queue.WithClock(simclock.NewFake(t0.Add(time.Hour))), queue.WithPassSigner(&countingSigner{}))
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
	clk := simclock.NewFake(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	svc := queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(clk))
	ctx := history.WithActor(context.Background(), "arn:aws:iam::123456789012:user/support")
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

// historyOf is programID's history as "actor action" lines, newest first.
func historyOf(t *testing.T, svc *queue.Service, programID string) []history.Change {
	t.Helper()
	h, err := svc.History(context.Background(), programID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	return h.Changes
}

// failingChanges fails PutChange while fail is set, CommitChange while
// failCommit is.
type failingChanges struct {
	*memstore.Store
	fail, failCommit atomic.Bool
}

func (s *failingChanges) CommitChange(ctx context.Context, programID string, at time.Time, id string) error {
	if s.failCommit.Load() {
		return errors.New("injected: commit change failed")
	}
	return s.Store.CommitChange(ctx, programID, at, id)
}

func (s *failingChanges) PutChange(ctx context.Context, programID string, c history.Change) error {
	if s.fail.Load() {
		return errors.New("injected: put change failed")
	}
	return s.Store.PutChange(ctx, programID, c)
}

// TestRevokeAppliedIsInHistory: a revoke the store applied is an admin
// change applied, so it must be in the history even when recording it
// fails (the write of a program change is recorded before it is made; a
// revoke is recorded after, so a failure or a crash between hides it).
func TestRevokeAppliedIsInHistory(t *testing.T) {
	store := &failingChanges{Store: memstore.New()}
	svc := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(simclock.NewFake(t0)))
	ctx := history.WithActor(context.Background(), "arn:aws:iam::1:user/support")
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{Paused: new(true)}); err != nil {
		t.Fatal(err)
	}
	v, _, err := svc.Enter(ctx, "gala", queue.Entry{})
	if err != nil {
		t.Fatal(err)
	}
	store.fail.Store(true)
	err = svc.RevokeToken(ctx, "gala", v.TokenID)
	store.fail.Store(false)
	if err == nil {
		t.Fatal("revoke with the history failing answered no error")
	}
	look, lerr := svc.Token(ctx, "gala", v.TokenID)
	if lerr != nil {
		t.Fatal(lerr)
	}
	revoked := look.View.Status == queue.StatusRevoked
	inHistory := false
	for _, ch := range historyOf(t, svc, "gala") {
		inHistory = inHistory || ch.Action == history.ActionRevoke
	}
	if revoked != inHistory {
		t.Errorf("token revoked: %v, revoke in the history: %v; an applied change must be in the history", revoked, inHistory)
	}
}

// TestRevokeUncommittedIsInHistory: a revoke stored whose history entry
// was left uncommitted (the commit failed, or the instance died) is in the
// history once, with its actor, as a committed one is: alice revokes a
// token; bob's second revoke of it changes nothing ("revoking it again is
// not an error"), so the history names alice alone, not bob.
func TestRevokeUncommittedIsInHistory(t *testing.T) {
	for _, failCommit := range []bool{false, true} {
		t.Run(fmt.Sprintf("commit fails %v", failCommit), func(t *testing.T) {
			store := &failingChanges{Store: memstore.New()}
			c := simclock.NewFake(t0)
			svc := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(c))
			ctx := context.Background()
			mustPut(t, svc, "gala", 1, true)
			v, _, err := svc.Enter(ctx, "gala", queue.Entry{})
			if err != nil {
				t.Fatal(err)
			}
			c.Advance(time.Second)
			store.failCommit.Store(failCommit)
			if err := svc.RevokeToken(history.WithActor(ctx, "arn:aws:iam::1:user/alice"), "gala", v.TokenID); err != nil {
				t.Fatalf("alice's revoke: %v (the revoke is stored; the commit is not needed)", err)
			}
			store.failCommit.Store(false)
			c.Advance(time.Minute)
			if err := svc.RevokeToken(history.WithActor(ctx, "arn:aws:iam::1:user/bob"), "gala", v.TokenID); err != nil {
				t.Fatal(err)
			}
			var revokes []string
			for _, ch := range historyOf(t, svc, "gala") {
				if ch.Action == history.ActionRevoke {
					revokes = append(revokes, ch.Actor)
				}
			}
			if len(revokes) != 1 || revokes[0] != "arn:aws:iam::1:user/alice" {
				t.Errorf("revokes in the history by %q; want one, by alice (bob's repeat applied nothing)", revokes)
			}
		})
	}
}

// TestDeletedProgramTokensAre404: once a program is deleted it is 404
// everywhere (issue 20), its tokens' admin routes included: a lookup or a
// revoke must not answer, nor write a change for a program that is gone.
func TestDeletedProgramTokensAre404(t *testing.T) {
	svc, c := newService(t)
	ctx := context.Background()
	mustPut(t, svc, "gala", 1, true)
	v, _, err := svc.Enter(ctx, "gala", queue.Entry{})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Leave(ctx, "gala", v.TokenID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{Closed: new(true)}); err != nil {
		t.Fatal(err)
	}
	c.Advance(3 * time.Second)
	if err := svc.DeleteProgram(ctx, "gala"); err != nil {
		t.Fatal(err)
	}
	if l, err := svc.Token(ctx, "gala", v.TokenID); !hasCode(err, api.CodeProgramNotFound) {
		t.Errorf("lookup of a deleted program's token = %+v, %v; want PROGRAM_NOT_FOUND", l.View, err)
	}
	if err := svc.RevokeToken(ctx, "gala", v.TokenID); !hasCode(err, api.CodeProgramNotFound) {
		t.Errorf("revoke of a deleted program's token = %v; want PROGRAM_NOT_FOUND", err)
	}
}

// TestHistoryRecordsEveryAction: creations, settings, admissions and bypass
// issuances are in the history once each, newest first, with their actor
// and what they set; a refused change is not.
func TestHistoryRecordsEveryAction(t *testing.T) {
	svc, c := newService(t, queue.WithPassSigner(newSigner(t)))
	ctx := history.WithActor(t.Context(), "arn:aws:iam::123456789012:user/ops")
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		c.Advance(3 * time.Second) // past the change delay
	}
	_, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(5)), Paused: new(true)})
	step("create", err)
	_, _, err = svc.PutProgram(ctx, "gala", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(-1))})
	if queue.ErrorKind(err) != queue.KindInvalid {
		t.Fatalf("a refused change: %v", err)
	}
	_, err = svc.Admit(ctx, "gala", 7)
	step("admit", err)
	_, err = svc.IssueBypass(history.WithActor(ctx, "arn:aws:iam::123456789012:user/support"), "gala", 2, time.Hour)
	step("bypass", err)
	_, _, err = svc.PutProgram(ctx, "gala", api.ProgramSettings{Paused: new(false), Notice: new("Doors open")})
	step("resume", err)

	h, err := svc.History(ctx, "gala", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ch := range h.Changes {
		got = append(got, ch.Actor+" "+ch.Action+" "+string(ch.Fields))
	}
	want := []string{
		`arn:aws:iam::123456789012:user/ops update {"paused":false,"notice":"Doors open"}`,
		`arn:aws:iam::123456789012:user/support bypass {"count":2,"validSeconds":3600}`,
		`arn:aws:iam::123456789012:user/ops admit {"count":7}`,
		`arn:aws:iam::123456789012:user/ops create {"admissionRatePerSecond":5,"paused":true}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	if h.Next != "" {
		t.Errorf("one page holds it all, but Next = %q", h.Next)
	}
	// Paged one at a time, the same changes in the same order.
	var paged []string
	for cursor := ""; ; {
		page, err := svc.History(ctx, "gala", cursor, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range page.Changes {
			paged = append(paged, ch.Actor+" "+ch.Action+" "+string(ch.Fields))
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	if diff := cmp.Diff(want, paged); diff != "" {
		t.Errorf("history a change a page (-want +got):\n%s", diff)
	}
}

// TestDeleteProgram: open programs are refused; a program closed by its
// closesAt deletes as a closed one; then it is gone and its id taken.
func TestDeleteProgram(t *testing.T) {
	svc, c := newService(t)
	ctx := t.Context()
	closesAt := c.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{ClosesAt: &closesAt}); err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteProgram(ctx, "gala"); !hasCode(err, api.CodeProgramNotClosed) {
		t.Fatalf("delete before closesAt = %v, want PROGRAM_NOT_CLOSED", err)
	}
	c.Advance(time.Hour)
	if err := svc.DeleteProgram(ctx, "gala"); err != nil {
		t.Fatalf("delete at closesAt = %v", err)
	}
	if _, err := svc.Program(ctx, "gala"); !hasCode(err, api.CodeProgramNotFound) {
		t.Errorf("read after delete = %v, want PROGRAM_NOT_FOUND", err)
	}
	if _, _, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{}); !hasCode(err, api.CodeProgramDeleted) {
		t.Errorf("create again within a week = %v, want PROGRAM_DELETED", err)
	}
	c.Advance(catalog.DeletedRetention)
	if _, created, err := svc.PutProgram(ctx, "gala", api.ProgramSettings{}); err != nil || !created {
		t.Errorf("create again after a week = created %v, %v", created, err)
	}
	if l, err := svc.ListPrograms(ctx, "", 0); err != nil || len(l.Programs) != 1 {
		t.Errorf("list = %+v, %v; want the new gala", l, err)
	}
	h, err := svc.History(ctx, "gala", "", 0)
	if err != nil || len(h.Changes) != 1 || h.Changes[0].Action != history.ActionCreate {
		t.Errorf("history of the new gala = %+v, %v; want its creation only, not its namesake's", h, err)
	}
}
