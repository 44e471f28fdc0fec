package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sync/errgroup"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/queue"
)

func subscription(n int) queue.Subscription {
	return queue.Subscription{Endpoint: fmt.Sprintf("https://push.example/%d", n), P256DH: "BK", Auth: "au"}
}

func testPush(t *testing.T, s queue.Store) {
	ctx := t.Context()
	ps := s.(queue.PushStore)
	var toks []queue.Token
	for i := range 5 {
		toks = append(toks, waiting(int64(10+i)))
	}
	other := waiting(11)
	other.ProgramID = "other"
	putTokens(t, s, append(toks, other)...)
	for i, tok := range append(toks, other) {
		want := tok
		want.Push = subscription(i)
		checkCall(t, "Subscribe", answer(ps.Subscribe(ctx, tok, subscription(i))), want)
	}
	list := func(after, through int64, limit int) []queue.PushEntry {
		t.Helper()
		return answer(ps.Subscribed(ctx, "prog", after, through, limit)).must(t, "Subscribed")
	}
	entry := func(i int) queue.PushEntry { return queue.PushEntry{TokenID: toks[i].ID, Ticket: toks[i].Ticket} }
	check(t, "Subscribed(all)", list(0, 100, 0), []queue.PushEntry{entry(0), entry(1), entry(2), entry(3), entry(4)})
	check(t, "Subscribed(11, 13]", list(11, 13, 0), []queue.PushEntry{entry(2), entry(3)})
	check(t, "Subscribed limit 2", list(0, 100, 2), []queue.PushEntry{entry(0), entry(1)})

	// A claim wins for its owner, again on a retry, and for nobody else at that stage.
	got := answer(ps.ClaimPush(ctx, toks[0].ID, queue.PushReady, "a", t0)).must(t, "ClaimPush")
	check(t, "claimed", [3]any{got.PushStage, got.PushOwner, got.PushedAt}, [3]any{queue.PushReady, "a", t0})
	got = answer(ps.ClaimPush(ctx, toks[0].ID, queue.PushReady, "a", t0.Add(ms(5)))).must(t, "ClaimPush retry")
	check(t, "retried", got.PushOwner, "a")
	got = answer(ps.ClaimPush(ctx, toks[0].ID, queue.PushReady, "b", t0)).must(t, "ClaimPush other")
	check(t, "another owner's claim of a told stage", got.PushOwner, "a")
	got = answer(ps.ClaimPush(ctx, toks[0].ID, queue.PushTurn, "b", t0.Add(ms(9)))).must(t, "ClaimPush turn")
	check(t, "turn by b", [2]any{got.PushStage, got.PushOwner}, [2]any{queue.PushTurn, "b"})
	got = answer(ps.ClaimPush(ctx, toks[0].ID, queue.PushReady, "c", t0)).must(t, "ClaimPush back")
	check(t, "a stage never goes back", got.PushStage, queue.PushTurn)
	check(t, "the turn unlists", list(0, 100, 0), []queue.PushEntry{entry(1), entry(2), entry(3), entry(4)})
	resub := answer(ps.Subscribe(ctx, toks[0], subscription(9))).must(t, "Subscribe after the turn")
	check(t, "no subscription after the turn", resub.Push, subscription(0))

	// A token admitted, left or unsubscribed is not claimed nor subscribed.
	adm := answer(s.MarkAdmitted(ctx, admitted(toks[1]))).must(t, "MarkAdmitted")
	got = answer(ps.ClaimPush(ctx, toks[1].ID, queue.PushTurn, "a", t0)).must(t, "ClaimPush admitted")
	check(t, "admitted: not claimed", got.PushStage, queue.PushNone)
	check(t, "admitted: not subscribed again", answer(ps.Subscribe(ctx, toks[1], subscription(7))).must(t, "Subscribe").Push, adm.Push)
	checkErr(t, "Unsubscribe", ps.Unsubscribe(ctx, toks[2].ID), nil)
	got = answer(ps.ClaimPush(ctx, toks[2].ID, queue.PushReady, "a", t0)).must(t, "ClaimPush unsubscribed")
	check(t, "unsubscribed: not claimed", [2]any{got.PushStage, got.Push}, [2]any{queue.PushNone, queue.Subscription{}})
	checkErr(t, "Unsubscribe unknown", ps.Unsubscribe(ctx, queue.NewTokenID()), nil)
	checkErr(t, "ClaimPush unknown", errOf(ps.ClaimPush(ctx, queue.NewTokenID(), queue.PushReady, "a", t0)), queue.ErrNotFound)
	check(t, "listed", list(0, 100, 0), []queue.PushEntry{entry(1), entry(3), entry(4)})

	// A subscription names the ticket it is for.
	stale := toks[3]
	stale.Ticket++
	got = answer(ps.Subscribe(ctx, stale, subscription(8))).must(t, "Subscribe another ticket")
	check(t, "another ticket: not subscribed", got.Push, subscription(3))
}

// testPushConcurrent races owners for each stage of one token: exactly one
// claims each.
func testPushConcurrent(t *testing.T, s queue.Store) {
	ctx := t.Context()
	ps := s.(queue.PushStore)
	tok := waiting(3)
	putTokens(t, s, tok)
	if _, err := ps.Subscribe(ctx, tok, subscription(1)); err != nil {
		t.Fatal(err)
	}
	for _, stage := range []queue.PushStage{queue.PushReady, queue.PushTurn} {
		won := make([]bool, workers)
		var g errgroup.Group
		for i := range workers {
			g.Go(func() error {
				owner := fmt.Sprint("owner-", i)
				got, err := ps.ClaimPush(context.WithoutCancel(ctx), tok.ID, stage, owner, t0)
				won[i] = err == nil && got.PushOwner == owner && got.PushStage == stage
				return err
			})
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, w := range won {
			if w {
				n++
			}
		}
		if n != 1 {
			t.Errorf("stage %v: %d of %d owners claimed it, want 1", stage, n, workers)
		}
	}
}

// vapidStore is notify.KeyStore.
type vapidStore interface {
	VAPIDKey(ctx context.Context) (admissionpass.StoredKey, error)
	PutVAPIDKey(ctx context.Context, k admissionpass.StoredKey) (admissionpass.StoredKey, error)
}

// testVAPIDKey: the first key stored stays, whoever races to store one.
func testVAPIDKey(t *testing.T, s queue.Store) {
	ctx := t.Context()
	ks := s.(vapidStore)
	checkErr(t, "VAPIDKey before any", errOf(ks.VAPIDKey(ctx)), queue.ErrNotFound)
	keys := make([]admissionpass.StoredKey, workers)
	got := make([]admissionpass.StoredKey, workers)
	var g errgroup.Group
	for i := range workers {
		keys[i] = admissionpass.StoredKey{Public: []byte{byte(i), 1}, Wrapped: []byte{byte(i), 2}, Created: t0.Add(ms(int64(i)))}
		g.Go(func() (err error) {
			got[i], err = ks.PutVAPIDKey(context.WithoutCancel(ctx), keys[i])
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	stored := answer(ks.VAPIDKey(ctx)).must(t, "VAPIDKey")
	if !slices.ContainsFunc(keys, func(k admissionpass.StoredKey) bool { return cmp.Equal(k, stored) }) {
		t.Fatalf("stored %+v, none of the keys put", stored)
	}
	for i := range got {
		check(t, fmt.Sprint("PutVAPIDKey ", i), got[i], stored)
	}
}
