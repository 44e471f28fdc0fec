package edge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/edge"
	"github.com/example/waitingroom/internal/edgekv"
	"github.com/example/waitingroom/internal/edgetoken"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/settings"
	"github.com/example/waitingroom/internal/tools/localkvs"
	"github.com/example/waitingroom/internal/tools/simclock"
)

var t0 = time.Date(2026, 12, 4, 20, 0, 0, 0, time.UTC)

// newStore is the SDK's client of an emulated store on loopback, and the store.
func newStore(t *testing.T) (*edgekv.Client, *localkvs.Server) {
	t.Helper()
	emu := localkvs.New("")
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")}
	return edgekv.New(edgekv.NewAPI(cfg, srv.URL), emu.ARN()), emu
}

// newPublisher is a Publisher through the SDK to an emulated store on loopback.
func newPublisher(t *testing.T) (*edge.Publisher, *localkvs.Server, *simclock.Fake) {
	t.Helper()
	kv, emu := newStore(t)
	clk := simclock.NewFake(t0)
	return edge.NewPublisher(kv, edge.DefaultSite(), nil, clk), emu, clk
}

func read[T any](t *testing.T, emu *localkvs.Server, key string) T {
	t.Helper()
	var v T
	s, ok := emu.Get(key)
	if !ok {
		t.Fatalf("%s not published", key)
	}
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return v
}

func counters(id string, e settings.Edge) admission.Counters {
	return admission.Counters{ProgramID: id, Options: settings.Options{Edge: e}}
}

func TestProgramAndRoutes(t *testing.T) {
	pub, emu, _ := newPublisher(t)
	ctx := t.Context()
	gala := counters("gala", settings.Edge{Mode: settings.EdgeOn, Paths: []string{"/", "/tickets/gala"}, SessionSeconds: 600, FailOpenUntil: t0.Add(time.Hour)})
	opera := counters("opera", settings.Edge{Mode: settings.EdgeStandby, Paths: []string{"/tickets/"}})
	quiet := counters("quiet", settings.Edge{Paths: []string{"/quiet/"}})                // off: no route
	zeta := counters("zeta", settings.Edge{Mode: settings.EdgeOn, Paths: []string{"/"}}) // claims gala's path
	for _, c := range []admission.Counters{gala, opera, quiet} {
		if err := pub.Program(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Routes(ctx, []admission.Counters{zeta, gala, opera, quiet}); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]edge.Program{
		"gala":  {Mode: "on", FailOpenUntil: t0.Add(time.Hour).Unix(), Session: 600},
		"opera": {Mode: "standby", Session: 3600},
		"quiet": {Mode: "off", Session: 3600},
	} {
		if diff := cmp.Diff(want, read[edge.Program](t, emu, edge.ProgramKey(id))); diff != "" {
			t.Errorf("p.%s (-want +got):\n%s", id, diff)
		}
	}
	want := edge.DefaultSite()
	// Longest first; of two programs on one path, the first id.
	want.Routes = [][2]string{{"/tickets/gala", "gala"}, {"/tickets/", "opera"}, {"/", "gala"}, {"/", "zeta"}}
	if diff := cmp.Diff(want, read[edge.Site](t, emu, edge.SiteKey)); diff != "" {
		t.Errorf("site (-want +got):\n%s", diff)
	}
}

func TestRotateKeys(t *testing.T) {
	pub, emu, clk := newPublisher(t)
	ctx := t.Context()
	ks, err := pub.Keys(ctx)
	if err != nil || ks.Current.ID != "" {
		t.Fatalf("keys before any rotation: %+v, %v", ks, err)
	}
	first, err := pub.RotateKeys(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if first.Previous != nil || first.Signing(clk.Now()).ID != first.Current.ID {
		t.Errorf("first key %+v: want it alone, signing at once (nothing to wait for)", first)
	}
	clk.Advance(time.Hour)
	second, err := pub.RotateKeys(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case second.Previous == nil || second.Previous.ID != first.Current.ID:
		t.Errorf("after a rotation: previous %+v, want %s", second.Previous, first.Current.ID)
	case second.Signing(clk.Now()).ID != first.Current.ID:
		t.Errorf("the new key signs at once; want the old one until it has propagated")
	case second.Signing(clk.Now().Add(edge.Propagation)).ID != second.Current.ID:
		t.Errorf("the new key does not sign after %v", edge.Propagation)
	}
	if diff := cmp.Diff(second, read[edgetoken.Keys](t, emu, edge.KeysKey)); diff != "" {
		t.Errorf("published keys (-returned +stored):\n%s", diff)
	}
	clk.Advance(time.Hour)
	dropped, err := pub.RotateKeys(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if dropped.Previous != nil || dropped.Signing(clk.Now()).ID != dropped.Current.ID || dropped.Current.ID == second.Current.ID {
		t.Errorf("a rotation with drop: %+v; want one new key, signing at once", dropped)
	}
}

// TestRotateTwiceAtOnce: two rotations in one instant make two keys, and
// what the signing key makes verifies (the ids must differ).
func TestRotateTwiceAtOnce(t *testing.T) {
	pub, _, clk := newPublisher(t)
	a, err := pub.RotateKeys(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := pub.RotateKeys(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	tok := b.Signing(clk.Now()).Token("gala", clk.Now().Add(time.Minute), "j")
	if a.Current.ID == b.Current.ID {
		t.Errorf("two keys named %s", a.Current.ID)
	}
	// Rotated again before the new key signs: the key that signs stays.
	clk.Advance(10 * time.Second)
	sess := b.Signing(clk.Now()).Session("gala", clk.Now().Add(time.Hour), "j")
	c, err := pub.RotateKeys(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	if c.Signing(clk.Now()).ID != b.Signing(clk.Now()).ID || c.Current.ID == b.Current.ID {
		t.Errorf("a rotation while the last one is pending: signing %s, want %s still; current %s", c.Signing(clk.Now()).ID, b.Signing(clk.Now()).ID, c.Current.ID)
	}
	if _, _, err := c.VerifySession(sess, "gala", clk.Now()); err != nil {
		t.Errorf("a session of the signing key after a second rotation: %v", err)
	}
	if _, _, err := b.VerifyToken(tok, "gala", clk.Now()); err != nil {
		t.Errorf("a token of the signing key after two rotations: %v", err)
	}
}

func TestPublishFails(t *testing.T) {
	pub, emu, _ := newPublisher(t)
	emu.FailPuts(func(int) bool { return true })
	if err := pub.Program(t.Context(), counters("gala", settings.Edge{Mode: settings.EdgeOn})); err == nil {
		t.Error("Program: no error when every write conflicts")
	}
	if _, err := pub.RotateKeys(t.Context(), false); err == nil {
		t.Error("RotateKeys: no error when every write conflicts")
	}
}

// lister lists fixed programs, on one page.
type lister []admission.Counters

func (l lister) ListPrograms(context.Context, string, int) (queue.ProgramList, error) {
	return queue.ProgramList{Programs: l}, nil
}

func TestChanged(t *testing.T) {
	kv, emu := newStore(t)
	gala := counters("gala", settings.Edge{Mode: settings.EdgeOn, Paths: []string{"/gala/"}})
	var many lister
	for i := range 40 {
		many = append(many, counters(fmt.Sprintf("program-%02d", i), settings.Edge{Mode: settings.EdgeOn, Paths: []string{fmt.Sprintf("/tickets/program-%02d/", i)}}))
	}
	crowded := edge.NewPublisher(kv, edge.DefaultSite(), append(many, gala), simclock.NewFake(t0))
	newcomer := counters("newcomer", settings.Edge{Mode: settings.EdgeOn, Paths: []string{"/newcomer/"}})
	if err := crowded.Fits(t.Context(), newcomer, newcomer.Edge); !errors.Is(err, edge.ErrRoutesTooLong) {
		t.Errorf("Fits of one more program with routes over 1 KB: %v, want ErrRoutesTooLong", err)
	}
	if err := crowded.Fits(t.Context(), gala, settings.Edge{}); err != nil {
		t.Errorf("Fits of gala off, which shortens routes still over 1 KB: %v, want nil (how to recover)", err)
	}
	if err := edge.NewPublisher(kv, edge.DefaultSite(), many[:10], simclock.NewFake(t0)).Fits(t.Context(), gala, gala.Edge); err != nil {
		t.Errorf("Fits with ten programs: %v", err)
	}
	// The program's entry still gets through (its mode, its break-glass); the routes do not.
	if err := crowded.Changed(t.Context(), gala); !errors.Is(err, edge.ErrRoutesTooLong) {
		t.Fatalf("Changed with routes over 1 KB: %v, want ErrRoutesTooLong", err)
	}
	if _, ok := emu.Get(edge.SiteKey); ok || read[edge.Program](t, emu, "p.gala").Mode != "on" {
		t.Errorf("routes over 1 KB: site written %v, p.gala %+v; want no site and gala's entry", ok, read[edge.Program](t, emu, "p.gala"))
	}
	pub := edge.NewPublisher(kv, edge.DefaultSite(), lister{gala}, simclock.NewFake(t0))
	if err := pub.Changed(t.Context(), gala); err != nil {
		t.Fatal(err)
	}
	if ks, err := pub.Keys(t.Context()); err != nil || ks.Current.ID == "" || read[edge.Program](t, emu, "p.gala").Mode != "on" {
		t.Errorf("after Changed: keys %+v (%v), p.gala %q; want a first key and mode on", ks, err, read[edge.Program](t, emu, "p.gala").Mode)
	}
}

// changing lists programs that change between two listings, as when
// another admin's change is saved while this one publishes.
type changing struct {
	calls atomic.Int64
	pages [][]admission.Counters
}

func (c *changing) ListPrograms(context.Context, string, int) (queue.ProgramList, error) {
	i := min(int(c.calls.Add(1))-1, len(c.pages)-1)
	return queue.ProgramList{Programs: c.pages[i]}, nil
}

// TestPublishRaces: a write that meets another's (forced on the store's
// N-th put) is computed again from fresh reads, so two publishers at once
// lose neither's routes nor keys.
func TestPublishRaces(t *testing.T) {
	kv, emu := newStore(t)
	gala := counters("gala", settings.Edge{Mode: settings.EdgeOn, Paths: []string{"/gala/"}})
	opera := counters("opera", settings.Edge{Mode: settings.EdgeOn, Paths: []string{"/opera/"}})
	progs := &changing{pages: [][]admission.Counters{{gala}, {gala, opera}}}
	pub := edge.NewPublisher(kv, edge.DefaultSite(), progs, simclock.NewFake(t0))

	// Put 1 is gala's entry; put 2, the routes listed without opera, meets
	// opera's publisher: they are listed again, and opera is in them.
	emu.FailPut(2)
	if err := pub.Changed(t.Context(), gala); err != nil {
		t.Fatal(err)
	}
	if got := read[edge.Site](t, emu, edge.SiteKey).Routes; len(got) != 2 || progs.calls.Load() != 2 {
		t.Errorf("routes %v after %d listings; want gala's and opera's, listed twice", got, progs.calls.Load())
	}

	// A rotation that meets another computes again from the keys then published.
	first, err := pub.Keys(t.Context())
	if err != nil || first.Current.ID == "" {
		t.Fatalf("keys after Changed: %+v, %v", first, err)
	}
	emu.FailPut(1)
	ks, err := pub.RotateKeys(t.Context(), false)
	if err != nil || ks.Previous == nil || ks.Previous.ID != first.Current.ID {
		t.Errorf("a rotation that met another write: %+v, %v; want the first key kept as previous", ks, err)
	}
	if err := pub.EnsureKeys(t.Context()); err != nil {
		t.Fatal(err)
	}
	if again, _ := pub.Keys(t.Context()); again.Current.ID != ks.Current.ID {
		t.Errorf("EnsureKeys with keys published changed them: %s, want %s", again.Current.ID, ks.Current.ID)
	}
}
