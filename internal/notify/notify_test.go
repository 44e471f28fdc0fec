package notify_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/notify"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/dynamotest"
	"github.com/example/waitingroom/internal/testing/faultinject"
	"github.com/example/waitingroom/internal/testing/pushtest"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/simclock"
	"github.com/example/waitingroom/internal/webpush"
)

func TestMain(m *testing.M) {
	dynamotest.Server = "dynalite" // locks items as DynamoDB does: the races are real
	dynamotest.Main(m)
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// store is what a rig runs on: a queue store that keeps subscriptions.
type store interface {
	queue.Store
	notify.Store
}

// rig is a program, its service on a fake clock, a push service of the
// test's own, and senders.
type rig struct {
	clock *simclock.Fake
	store store
	svc   *queue.Service
	push  *pushtest.Service
	key   *ecdsa.PrivateKey
}

func newRig(t *testing.T, st store, set api.ProgramSettings) *rig {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{clock: simclock.NewFake(t0), store: st, key: key, push: pushtest.New(t, &key.PublicKey)}
	r.svc = queue.NewService(st, polling.DefaultTiers(), queue.WithClock(r.clock), queue.WithPush(r.hosts()))
	ctx := history.WithActor(t.Context(), history.SystemActor)
	if _, _, err := r.svc.PutProgram(ctx, "gala", set); err != nil {
		t.Fatal(err)
	}
	return r
}

// hosts are the push services of r: its own, and a domain that never
// resolves (RFC 6761's .invalid).
func (r *rig) hosts() webpush.Hosts { return webpush.Hosts{r.push.Host(), ".nx.invalid"} }

// sender is a sender of its own (its own claims) on r.
func (r *rig) sender() *notify.Sender {
	client := &webpush.Client{HTTP: r.push.Client(), VAPID: webpush.NewVAPID(r.key, "mailto:ops@example.com", time.Now), Hosts: r.hosts()}
	return notify.New(r.svc, r.store, client, r.clock, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// enter enters n people subscribed to push and returns their subscriptions by token.
func (r *rig) enter(t *testing.T, n int) (map[string]pushtest.Sub, []string) {
	t.Helper()
	subs := map[string]pushtest.Sub{}
	var ids []string
	for range n {
		sub := r.push.Subscribe()
		var wire api.PushSubscription
		if err := json.Unmarshal([]byte(sub.JSON()), &wire); err != nil {
			t.Fatal(err)
		}
		v, _, err := r.svc.Enter(t.Context(), "gala", queue.Entry{Push: &wire})
		if err != nil {
			t.Fatal(err)
		}
		subs[v.TokenID] = sub
		ids = append(ids, v.TokenID)
	}
	return subs, ids
}

// tick moves the clock a second and ticks every sender at once.
func (r *rig) tick(t *testing.T, senders ...*notify.Sender) {
	t.Helper()
	r.clock.Advance(time.Second)
	var wg sync.WaitGroup
	for _, s := range senders {
		wg.Go(func() {
			if err := s.Tick(t.Context()); err != nil {
				t.Errorf("Tick: %v", err)
			}
		})
	}
	wg.Wait()
}

// stages are the stages pushed to sub, decrypted, in order.
func (r *rig) stages(t *testing.T, sub pushtest.Sub) []string {
	t.Helper()
	var out []string
	for _, p := range r.push.Received(sub.Endpoint) {
		var pl notify.Payload
		if err := json.Unmarshal(p.Payload, &pl); err != nil {
			t.Fatalf("payload %q: %v", p.Payload, err)
		}
		if pl.Program != "Gala" {
			t.Errorf("payload names %q, want the display name Gala", pl.Program)
		}
		out = append(out, pl.Stage)
	}
	return out
}

var gala = api.ProgramSettings{
	AdmissionRatePerSecond: new(api.Rate(1)), Paused: new(false), DisplayName: new("Gala"),
	PushLeadSeconds: new(int64(30)),
}

// TestTwoSendersTellEachStageOnce: two senders tick together over 60
// subscribers admitted at 1/s; each hears "ready" once when its admission
// comes within the lead, and its turn once, at the first tick that finds
// it admitted.
func TestTwoSendersTellEachStageOnce(t *testing.T) {
	t.Parallel()
	for name, st := range map[string]func(t *testing.T) store{
		"memstore": func(*testing.T) store { return memstore.New() },
		"dynalite": func(t *testing.T) store {
			client := dynamotest.NewClient(t, dynamotest.Endpoint(t), nil)
			return dynamostore.New(client, dynamotest.NewTable(t, client))
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, st(t), gala)
			subs, ids := r.enter(t, 60)
			a, b := r.sender(), r.sender()
			turnAt := map[string]time.Time{}
			for range 90 {
				before := map[string]int{}
				for id, sub := range subs {
					before[id] = len(r.push.Received(sub.Endpoint))
				}
				r.tick(t, a, b)
				p, err := r.svc.PushProgram(t.Context(), "gala", r.clock.Now())
				if err != nil {
					t.Fatal(err)
				}
				for id, sub := range subs {
					got := r.stages(t, sub)
					if len(got) > before[id] && got[len(got)-1] == "turn" {
						turnAt[id] = r.clock.Now()
						tok, _ := r.store.GetToken(t.Context(), id)
						if queue.StageAt(p, tok.Ticket, r.clock.Now().Add(-time.Second)) == queue.PushTurn {
							t.Errorf("%s: turn told a tick late", id)
						}
					}
				}
			}
			for i, id := range ids {
				got := r.stages(t, subs[id])
				want := []string{"ready", "turn"}
				if i == 0 {
					want = []string{"turn"} // admitted at the first tick
				}
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("ticket %d (-want +got):\n%s", i+1, d)
				}
			}
			// Each push was one sender's; the other found claims taken.
			if turns := a.Counts.Turn + b.Counts.Turn; turns != 60 || a.Counts.TakenFirst+b.Counts.TakenFirst == 0 {
				t.Errorf("a %+v, b %+v: want 60 turns, and claims found taken", a.Counts, b.Counts)
			}
		})
	}
}

// TestLostClaimAnswers: every claim's first three attempts are applied
// and their answers lost, so the store call fails; the sender's retry
// under the same owner wins, and each stage is pushed once.
func TestLostClaimAnswers(t *testing.T) {
	t.Parallel()
	ft := faultinject.New(http.DefaultTransport.(*http.Transport).Clone(), 1)
	client := dynamotest.NewClient(t, dynamotest.Lease(t), ft)
	r := newRig(t, dynamostore.New(client, dynamotest.NewTable(t, client)), gala)
	subs, _ := r.enter(t, 5)
	ft.SetRules(faultinject.Rule{Op: "UpdateItem", BodyContains: "pushOwner", Count: 3, Action: faultinject.DropResponse})
	s := r.sender()
	for range 10 {
		r.tick(t, s)
	}
	if n := ft.Faults("UpdateItem"); n != 3 {
		t.Fatalf("%d claims faulted, want 3", n)
	}
	for id, sub := range subs {
		tok, _ := r.store.GetToken(t.Context(), id)
		want := []string{"ready", "turn"}
		if tok.Ticket == 1 {
			want = []string{"turn"}
		}
		if d := cmp.Diff(want, r.stages(t, sub)); d != "" {
			t.Errorf("ticket %d (-want +got):\n%s", tok.Ticket, d)
		}
	}
}

// TestGoneIsDropped: a push service's 410 ends the subscription; a 503
// is sent again once its Retry-After passed, still once.
func TestGoneIsDropped(t *testing.T) {
	t.Parallel()
	r := newRig(t, memstore.New(), gala)
	subs, ids := r.enter(t, 1)
	r.push.Gone(subs[ids[0]].Endpoint)
	s := r.sender()
	r.tick(t, s)
	tok, _ := r.store.GetToken(t.Context(), ids[0])
	if tok.Push != (queue.Subscription{}) || s.Counts.Gone != 1 {
		t.Errorf("gone: subscription %+v, Gone %d; want none and 1", tok.Push, s.Counts.Gone)
	}
}

// TestRetriedOnce: a push answered 503 is sent again once its Retry-After
// (1 s) has passed, and heard once.
func TestRetriedOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t, memstore.New(), gala)
	subs, ids := r.enter(t, 1)
	r.push.FailNext(1, http.StatusServiceUnavailable)
	s := r.sender()
	for range 3 {
		r.tick(t, s)
	}
	if got := r.stages(t, subs[ids[0]]); !cmp.Equal(got, []string{"turn"}) || s.Counts.Retried != 1 {
		t.Errorf("after a 503: %v, retried %d; want [turn] and 1", got, s.Counts.Retried)
	}
}

// TestPushIsTheSighting: under a cap with a time to show, a person told
// their turn by push who comes after that time still finds their pass; one
// not subscribed is a no-show.
func TestPushIsTheSighting(t *testing.T) {
	t.Parallel()
	set := gala
	set.MaxActiveUsers, set.NoShowSeconds = new(int64(10)), new(int64(5))
	r := newRig(t, memstore.New(), set)
	_, ids := r.enter(t, 1)
	plain, _, err := r.svc.Enter(t.Context(), "gala", queue.Entry{})
	if err != nil {
		t.Fatal(err)
	}
	s := r.sender()
	for range 3 {
		r.tick(t, s)
	}
	for range 60 { // past the time to show; each enter runs the folds that seal the no-shows
		r.clock.Advance(time.Second)
		if _, _, err := r.svc.Enter(t.Context(), "gala", queue.Entry{}); err != nil {
			t.Fatal(err)
		}
	}
	for id, want := range map[string]queue.Status{ids[0]: queue.StatusAdmitted, plain.TokenID: queue.StatusExpired} {
		v, err := r.svc.Poll(t.Context(), "gala", id)
		if err != nil || v.Status != want {
			t.Errorf("poll %s: %v, %v; want %v", id, v.Status, err, want)
		}
	}
}

// TestSubscribedSleepsLonger: a subscribed person's answer is the policy's
// delay stretched to the earliest admission (polling.Pushed).
func TestSubscribedSleepsLonger(t *testing.T) {
	t.Parallel()
	r := newRig(t, memstore.New(), gala)
	r.enter(t, 200)
	_, ids := r.enter(t, 1)
	plain, _, _ := r.svc.Enter(t.Context(), "gala", queue.Entry{})
	v, err := r.svc.Poll(t.Context(), "gala", ids[0])
	if err != nil || !v.Push {
		t.Fatalf("poll: %+v, %v", v, err)
	}
	p, _ := r.svc.PushProgram(t.Context(), "gala", r.clock.Now())
	if want := polling.Pushed(p.Situation(v.Ticket, r.clock.Now(), 0), 0, nil); v.RetryAfter < want-5*time.Second || v.RetryAfter > want {
		t.Errorf("retry %v, want about %v", v.RetryAfter, want)
	}
	if w, _ := r.svc.Poll(t.Context(), "gala", plain.TokenID); w.Push || w.RetryAfter >= v.RetryAfter {
		t.Errorf("the unsubscribed neighbour: push %v, retry %v", w.Push, w.RetryAfter)
	}
}

// TestRunTicksEachSecond: a run ticks on each second until its end, and
// tells every turn that comes within it.
func TestRunTicksEachSecond(t *testing.T) {
	t.Parallel()
	r := newRig(t, memstore.New(), gala)
	subs, _ := r.enter(t, 5)
	s := r.sender()
	start := r.clock.Now()
	if err := s.Run(t.Context(), start.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := r.clock.Now(); got.Before(start.Add(9*time.Second)) || got.After(start.Add(10*time.Second)) {
		t.Errorf("the run ended %v after its start, want within its 10 s", got.Sub(start))
	}
	for _, sub := range subs {
		if got := r.stages(t, sub); len(got) == 0 || got[len(got)-1] != "turn" {
			t.Errorf("%s: %v, want the turn told", sub.Endpoint, got)
		}
	}
}

// TestTurnTakenOverAfterTheLease: a sender whose turn's push failed and
// which then stopped leaves the turn to another once its claim's lease is
// over; the turn is heard once, and the first sender, back, sends nothing.
func TestTurnTakenOverAfterTheLease(t *testing.T) {
	t.Parallel()
	r := newRig(t, memstore.New(), gala)
	subs, ids := r.enter(t, 1)
	a, b := r.sender(), r.sender()
	r.push.FailNext(1, http.StatusServiceUnavailable)
	r.tick(t, a) // a claims the turn; its push is to send again
	if a.Counts.Retried != 1 {
		t.Fatalf("a: %+v, want its push to send again", a.Counts)
	}
	for i := 1; ; i++ {
		r.tick(t, b)
		got := r.stages(t, subs[ids[0]])
		if i <= int(notify.Lease/time.Second)-2 && len(got) > 0 {
			t.Fatalf("b sent %v %d s into a's lease of %v", got, i, notify.Lease)
		}
		if len(got) > 0 || i > 40 {
			break
		}
	}
	for range 5 {
		r.tick(t, a, b)
	}
	if got := r.stages(t, subs[ids[0]]); !cmp.Equal(got, []string{"turn"}) || b.Counts.Turn != 1 || a.Counts.Turn != 0 {
		t.Errorf("pushes %v, a %+v, b %+v: want the turn once, by b", got, a.Counts, b.Counts)
	}
}

// TestGivenUp: a push service that fails every push gets MaxPushTries
// tries of the turn, then the subscription is dropped and its token polls
// as everyone does.
func TestGivenUp(t *testing.T) {
	t.Parallel()
	r := newRig(t, memstore.New(), gala)
	subs, ids := r.enter(t, 1)
	r.push.FailNext(1000, http.StatusServiceUnavailable)
	a, b := r.sender(), r.sender()
	for range 200 {
		r.tick(t, a, b)
	}
	tok, _ := r.store.GetToken(t.Context(), ids[0])
	if tok.Push != (queue.Subscription{}) || tok.PushTries[queue.PushTurn] != queue.MaxPushTries || len(r.stages(t, subs[ids[0]])) != 0 {
		t.Errorf("token %+v, a %+v, b %+v: want %d tries, then no subscription", tok, a.Counts, b.Counts, queue.MaxPushTries)
	}
	if a.Counts.Dropped+b.Counts.Dropped == 0 {
		t.Errorf("a %+v, b %+v: want the subscription dropped", a.Counts, b.Counts)
	}
}

// TestUnresolvableIsGone: an endpoint whose host does not resolve is
// dropped at its first push, as a 410 is.
func TestUnresolvableIsGone(t *testing.T) {
	t.Parallel()
	r := newRig(t, memstore.New(), gala)
	v, _, err := r.svc.Enter(t.Context(), "gala", queue.Entry{Push: &api.PushSubscription{Endpoint: "https://x.nx.invalid/push/1",
		Keys: api.PushKeys{P256DH: "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4", Auth: "BTBZMqHH6r4Tts7J_aSIgg"}}})
	if err != nil || !v.Push {
		t.Fatalf("enter: %+v, %v", v, err)
	}
	s := r.sender()
	r.tick(t, s)
	if tok, _ := r.store.GetToken(t.Context(), v.TokenID); tok.Push != (queue.Subscription{}) || s.Counts.Gone != 1 || s.Counts.Retried != 0 {
		t.Errorf("token %+v, counts %+v: want the subscription dropped as gone", tok, s.Counts)
	}
}

// TestResumeHeardAtOnce: subscribers of a paused program, none due, are
// told their turn at the first tick after the resume admits them.
func TestResumeHeardAtOnce(t *testing.T) {
	t.Parallel()
	set := gala
	set.Paused = new(true)
	r := newRig(t, memstore.New(), set)
	subs, ids := r.enter(t, 3)
	s := r.sender()
	for range 5 {
		r.tick(t, s)
	}
	ctx := history.WithActor(t.Context(), history.SystemActor)
	if _, _, err := r.svc.PutProgram(ctx, "gala", api.ProgramSettings{Paused: new(false)}); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		r.tick(t, s)
		p, _ := r.svc.PushProgram(t.Context(), "gala", r.clock.Now())
		tok, _ := r.store.GetToken(t.Context(), ids[0])
		if p.Admits(tok.Ticket, r.clock.Now()) {
			if got := r.stages(t, subs[ids[0]]); len(got) == 0 || got[len(got)-1] != "turn" {
				t.Fatalf("admitted, pushes %v: want the turn at this tick", got)
			}
			return
		}
	}
	t.Fatal("not admitted 10 s after the resume")
}

// TestRunEndsIdle: a run that finds nobody subscribed anywhere ends at
// once rather than idling out its minute.
func TestRunEndsIdle(t *testing.T) {
	t.Parallel()
	r := newRig(t, memstore.New(), gala)
	if _, _, err := r.svc.Enter(t.Context(), "gala", queue.Entry{}); err != nil {
		t.Fatal(err)
	}
	start := r.clock.Now()
	if err := r.sender().Run(t.Context(), start.Add(notify.RunFor)); err != nil {
		t.Fatal(err)
	}
	if d := r.clock.Now().Sub(start); d > time.Second {
		t.Errorf("an idle run lasted %v, want one tick", d)
	}
}

// TestReadySpentTurnStill: a "ready" whose every try failed is given up;
// the turn is still told.
func TestReadySpentTurnStill(t *testing.T) {
	t.Parallel()
	r := newRig(t, memstore.New(), gala)
	for range 39 { // ahead, not subscribed: the turn comes 40 s in
		if _, _, err := r.svc.Enter(t.Context(), "gala", queue.Entry{}); err != nil {
			t.Fatal(err)
		}
	}
	subs, ids := r.enter(t, 1)
	r.push.FailNext(queue.MaxPushTries, http.StatusServiceUnavailable)
	s := r.sender()
	for range 60 {
		r.tick(t, s)
	}
	if got := r.stages(t, subs[ids[0]]); !cmp.Equal(got, []string{"turn"}) {
		t.Errorf("pushes %v (counts %+v), want the turn after the ready's tries were spent", got, s.Counts)
	}
}

// TestTurnAfterAReadyToRetry: a "ready" to send again does not hold back
// the turn that comes before its retry.
func TestTurnAfterAReadyToRetry(t *testing.T) {
	t.Parallel()
	r := newRig(t, memstore.New(), gala)
	if _, _, err := r.svc.Enter(t.Context(), "gala", queue.Entry{}); err != nil {
		t.Fatal(err)
	}
	subs, ids := r.enter(t, 1)
	r.push.FailNext(1, http.StatusServiceUnavailable) // the ready's first try
	s := r.sender()
	for range 5 {
		r.tick(t, s)
		p, _ := r.svc.PushProgram(t.Context(), "gala", r.clock.Now())
		if tok, _ := r.store.GetToken(t.Context(), ids[0]); p.Admits(tok.Ticket, r.clock.Now()) {
			if got := r.stages(t, subs[ids[0]]); !cmp.Equal(got, []string{"turn"}) {
				t.Fatalf("admitted, pushes %v: want the turn at this tick", got)
			}
			return
		}
	}
	t.Fatal("not admitted in 5 s")
}

// unrecordingStore fails the record of the first n turns told.
type unrecordingStore struct {
	*memstore.Store
	n atomic.Int32
}

func (s *unrecordingStore) PushTold(ctx context.Context, id string, stage queue.PushStage, owner string) error {
	if s.n.Add(-1) >= 0 {
		return errors.New("store down")
	}
	return s.Store.PushTold(ctx, id, stage, owner)
}

// TestTurnRecordRetried: a turn sent whose record failed is not sent again:
// its record is retried until written.
func TestTurnRecordRetried(t *testing.T) {
	t.Parallel()
	st := &unrecordingStore{Store: memstore.New()}
	st.n.Store(3)
	r := newRig(t, st, gala)
	subs, ids := r.enter(t, 1)
	s := r.sender()
	for range 60 {
		r.clock.Advance(time.Second)
		_ = s.Tick(t.Context()) // the failed records are its errors
	}
	tok, _ := st.GetToken(t.Context(), ids[0])
	if got := r.stages(t, subs[ids[0]]); !cmp.Equal(got, []string{"turn"}) || tok.PushTold != queue.PushTurn {
		t.Errorf("pushes %v, told %v: want the turn once, recorded", got, tok.PushTold)
	}
}

// TestRunAfterAnIdleRun: a run that ended idle leaves nothing that stops
// the next from looking afresh at once, however soon it starts.
func TestRunAfterAnIdleRun(t *testing.T) {
	t.Parallel()
	r := newRig(t, memstore.New(), gala)
	s := r.sender()
	if err := s.Run(t.Context(), r.clock.Now().Add(notify.RunFor)); err != nil {
		t.Fatal(err)
	}
	subs, ids := r.enter(t, 1) // due at once: ticket 1
	r.clock.Advance(2 * time.Second)
	if err := s.Run(t.Context(), r.clock.Now().Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := r.stages(t, subs[ids[0]]); !cmp.Equal(got, []string{"turn"}) {
		t.Errorf("pushes %v, want the turn in the run after the idle one", got)
	}
}

// TestReadiesBoundedPerTick: a wave of readies due at once is spread over
// ticks, MaxReadies a tick, so that turns are not held behind it.
func TestReadiesBoundedPerTick(t *testing.T) {
	t.Parallel()
	set := gala
	set.AdmissionRatePerSecond = new(api.Rate(100))
	r := newRig(t, memstore.New(), set)
	r.enter(t, 3*notify.MaxReadies) // all within the lead of 30 s
	s := r.sender()
	r.tick(t, s)
	if s.Counts.Ready > notify.MaxReadies || s.Counts.Ready == 0 {
		t.Errorf("readies in the first tick: %d, want at most %d", s.Counts.Ready, notify.MaxReadies)
	}
	r.tick(t, s)
	if s.Counts.Ready <= notify.MaxReadies {
		t.Errorf("readies after two ticks: %d, want the rest sent", s.Counts.Ready)
	}
}
