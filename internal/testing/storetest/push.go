package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

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
	list := func(after, through int64, limit int) ([]queue.PushEntry, bool) {
		t.Helper()
		got, complete, err := ps.Subscribed(ctx, "prog", after, through, limit)
		checkErr(t, "Subscribed", err, nil)
		return got, complete
	}
	all := func() []queue.PushEntry { got, _ := list(0, 100, 0); return got }
	entry := func(i int) queue.PushEntry { return queue.PushEntry{TokenID: toks[i].ID, Ticket: toks[i].Ticket} }
	check(t, "Subscribed(all)", all(), []queue.PushEntry{entry(0), entry(1), entry(2), entry(3), entry(4)})
	got2, complete := list(11, 13, 0)
	check(t, "Subscribed(11, 13]", [2]any{got2, complete}, [2]any{[]queue.PushEntry{entry(2), entry(3)}, true})
	if got, complete := list(0, 100, 2); complete || len(got) == 0 || !slices.Equal(got, all()[:len(got)]) {
		t.Errorf("Subscribed limit 2: %v, complete %v; want a prefix, not complete", got, complete)
	}

	// A claim wins for its owner, again on a retry, and for nobody else at
	// that stage: for a ready, ever; for a turn, until it is stale.
	claim := func(i int, stage queue.PushStage, owner string, at, staleBefore time.Time) queue.Token {
		t.Helper()
		return answer(ps.ClaimPush(ctx, toks[i].ID, stage, owner, at, staleBefore)).must(t, "ClaimPush")
	}
	type claimed struct {
		Stage queue.PushStage
		Owner string
		At    time.Time
		Tries int8
	}
	of := func(tok queue.Token) claimed {
		return claimed{tok.PushStage, tok.PushOwner, tok.PushedAt, tok.PushTries[tok.PushStage]}
	}
	check(t, "ready claimed", of(claim(0, queue.PushReady, "a", t0, time.Time{})), claimed{queue.PushReady, "a", t0, 1})
	check(t, "ready retried", of(claim(0, queue.PushReady, "a", t0.Add(ms(5)), time.Time{})), claimed{queue.PushReady, "a", t0.Add(ms(5)), 2})
	check(t, "another's ready", of(claim(0, queue.PushReady, "b", t0.Add(time.Hour), time.Time{})), claimed{queue.PushReady, "a", t0.Add(ms(5)), 2})
	check(t, "turn by b", of(claim(0, queue.PushTurn, "b", t0.Add(ms(9)), t0)), claimed{queue.PushTurn, "b", t0.Add(ms(9)), 1})
	check(t, "a stage never goes back", of(claim(0, queue.PushReady, "c", t0.Add(ms(10)), time.Time{})).Stage, queue.PushTurn)
	check(t, "b's fresh turn", of(claim(0, queue.PushTurn, "c", t0.Add(ms(10)), t0)).Owner, "b")
	check(t, "b's stale turn taken over", of(claim(0, queue.PushTurn, "c", t0.Add(time.Minute), t0.Add(time.Second))), claimed{queue.PushTurn, "c", t0.Add(time.Minute), 2})
	checkErr(t, "PushTold by b, no longer its claim", ps.PushTold(ctx, toks[0].ID, queue.PushTurn, "b"), nil)
	check(t, "still listed", all()[0], entry(0))
	checkErr(t, "PushTold", ps.PushTold(ctx, toks[0].ID, queue.PushTurn, "c"), nil)
	check(t, "the turn told unlists", all(), []queue.PushEntry{entry(1), entry(2), entry(3), entry(4)})
	check(t, "no claim after it is told", of(claim(0, queue.PushTurn, "d", t0.Add(time.Hour), t0.Add(time.Hour))).Owner, "c")
	resub := answer(ps.Subscribe(ctx, toks[0], subscription(9))).must(t, "Subscribe after the turn")
	check(t, "no subscription after the turn", resub.Push, subscription(0))

	// At most MaxPushTries claims of a stage.
	for i := range queue.MaxPushTries {
		claim(4, queue.PushTurn, "a", t0.Add(ms(int64(i))), time.Time{})
	}
	check(t, "tries spent", of(claim(4, queue.PushTurn, "a", t0.Add(time.Second), time.Time{})), claimed{queue.PushTurn, "a", t0.Add(ms(queue.MaxPushTries - 1)), queue.MaxPushTries})
	answer(ps.Subscribe(ctx, toks[4], subscription(40))).must(t, "Subscribe again")
	check(t, "a new subscription, new tries", of(claim(4, queue.PushTurn, "a", t0.Add(time.Second), time.Time{})), claimed{queue.PushTurn, "a", t0.Add(time.Second), 1})

	// A token admitted, left or unsubscribed is not claimed nor subscribed.
	adm := answer(s.MarkAdmitted(ctx, admitted(toks[1]))).must(t, "MarkAdmitted")
	check(t, "admitted: not claimed", claim(1, queue.PushTurn, "a", t0, time.Time{}).PushStage, queue.PushNone)
	check(t, "admitted: not subscribed again", answer(ps.Subscribe(ctx, toks[1], subscription(7))).must(t, "Subscribe").Push, adm.Push)
	checkErr(t, "Unsubscribe another endpoint", ps.Unsubscribe(ctx, toks[2].ID, "https://push.example/other"), nil)
	check(t, "another endpoint's unsubscribe leaves it", answer(s.GetToken(ctx, toks[2].ID)).must(t, "GetToken").Push, subscription(2))
	checkErr(t, "Unsubscribe", ps.Unsubscribe(ctx, toks[2].ID, subscription(2).Endpoint), nil)
	got := claim(2, queue.PushReady, "a", t0, time.Time{})
	check(t, "unsubscribed: not claimed", [2]any{got.PushStage, got.Push}, [2]any{queue.PushNone, queue.Subscription{}})
	checkErr(t, "Unsubscribe unknown", ps.Unsubscribe(ctx, queue.NewTokenID(), ""), nil)
	checkErr(t, "ClaimPush unknown", errOf(ps.ClaimPush(ctx, queue.NewTokenID(), queue.PushReady, "a", t0, time.Time{})), queue.ErrNotFound)
	check(t, "listed", all(), []queue.PushEntry{entry(1), entry(3), entry(4)})

	// A subscription names the ticket it is for.
	stale := toks[3]
	stale.Ticket++
	got = answer(ps.Subscribe(ctx, stale, subscription(8))).must(t, "Subscribe another ticket")
	check(t, "another ticket: not subscribed", got.Push, subscription(3))
}

// testPushListed lists many subscribers in order, cut at a limit that
// still covers every ticket up to the last it lists.
func testPushListed(t *testing.T, s queue.Store) {
	ctx := t.Context()
	ps := s.(queue.PushStore)
	var want []queue.PushEntry
	for i := range int64(200) {
		tok := waiting(1000 + 3*i)
		putTokens(t, s, tok)
		if _, err := ps.Subscribe(ctx, tok, subscription(int(i))); err != nil {
			t.Fatal(err)
		}
		want = append(want, queue.PushEntry{TokenID: tok.ID, Ticket: tok.Ticket})
	}
	got, complete, err := ps.Subscribed(ctx, "prog", 0, 1<<40, 0)
	checkErr(t, "Subscribed", err, nil)
	check(t, "all, by ticket", [2]any{got, complete}, [2]any{want, true})
	got, complete, err = ps.Subscribed(ctx, "prog", 0, 1<<40, 64)
	checkErr(t, "Subscribed 64", err, nil)
	if complete || len(got) < 64 || !slices.Equal(got, want[:len(got)]) {
		t.Errorf("Subscribed with a limit of 64: %d entries, complete %v; want a prefix of at least 64", len(got), complete)
	}
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
				got, err := ps.ClaimPush(context.WithoutCancel(ctx), tok.ID, stage, owner, t0, time.Time{})
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
