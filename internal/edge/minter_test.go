package edge_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/edge"
	"github.com/example/waitingroom/internal/edgekv"
	"github.com/example/waitingroom/internal/edgetoken"
	"github.com/example/waitingroom/internal/tools/simclock"
)

// countingKV is a store of one value whose reads are counted and, while
// fail is set, fail; hold, when set, holds each read (which first says so
// on arrived) until it is closed.
type countingKV struct {
	value   string
	reads   atomic.Int64
	fail    atomic.Bool
	hold    chan struct{}
	arrived chan struct{}
}

func (s *countingKV) Get(context.Context, string) (string, error) {
	s.reads.Add(1)
	if s.hold != nil {
		s.arrived <- struct{}{}
		<-s.hold
	}
	if s.fail.Load() {
		return "", errors.New("store down")
	}
	if s.value == "" {
		return "", edgekv.ErrNotFound
	}
	return s.value, nil
}

func (s *countingKV) Put(context.Context, string, string) error { return nil }

// pass is a compact JWS whose payload holds jti.
func pass(jti string) string {
	b, _ := json.Marshal(map[string]string{"jti": jti})
	return "h." + base64.RawURLEncoding.EncodeToString(b) + ".s"
}

func TestMinter(t *testing.T) {
	key, err := edgetoken.NewKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := json.Marshal(edgetoken.Keys{Current: key})
	kv := &countingKV{}
	clk := simclock.NewFake(t0)
	m := edge.NewMinter(kv, clk)
	exp := t0.Add(10 * time.Minute)

	if _, err := m.EdgeToken(t.Context(), "gala", exp, pass("j1")); !errors.Is(err, edge.ErrNoKeys) {
		t.Fatalf("no keys published: %v, want ErrNoKeys", err)
	}
	kv.value = string(keys)
	tok, err := m.EdgeToken(t.Context(), "gala", exp, pass("j1"))
	if err != nil {
		t.Fatal(err)
	}
	if gotExp, jti, err := (edgetoken.Keys{Current: key}).VerifyToken(tok, "gala", t0); err != nil || jti != "j1" || !gotExp.Equal(exp) {
		t.Errorf("token %q: %v %q %v; want j1 until %v", tok, gotExp, jti, err, exp)
	}
	if _, err := m.EdgeToken(t.Context(), "gala", exp, "not a pass"); err == nil {
		t.Error("a pass without a jti minted a token")
	}

	// Within a KeysTTL no read; after it, one read, and a failed one is not
	// tried again before another KeysTTL: the last keys mint meanwhile.
	reads := kv.reads.Load()
	if _, err := m.EdgeToken(t.Context(), "gala", exp, pass("j2")); err != nil || kv.reads.Load() != reads {
		t.Errorf("within the TTL: %v, %d reads, want none", err, kv.reads.Load()-reads)
	}
	kv.fail.Store(true)
	clk.Advance(edge.KeysTTL)
	for range 3 {
		tok, err := m.EdgeToken(t.Context(), "gala", exp, pass("j3"))
		if _, _, verr := (edgetoken.Keys{Current: key}).VerifyToken(tok, "gala", clk.Now()); err != nil || verr != nil {
			t.Errorf("with the store down: %v, %v; want a token of the last keys", err, verr)
		}
	}
	if got := kv.reads.Load() - reads; got != 1 {
		t.Errorf("the store down, three mints: %d reads, want 1", got)
	}

	// While one caller reads, the others mint with the keys they have.
	kv.fail.Store(false)
	kv.hold, kv.arrived = make(chan struct{}), make(chan struct{}, 1)
	clk.Advance(edge.KeysTTL)
	reads = kv.reads.Load()
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = m.EdgeToken(t.Context(), "gala", exp, pass("j4")) })
	<-kv.arrived // the reader is at the store
	for range 5 {
		if _, err := m.EdgeToken(t.Context(), "gala", exp, pass("j5")); err != nil {
			t.Errorf("during a read: %v", err)
		}
	}
	close(kv.hold)
	wg.Wait()
	if got := kv.reads.Load() - reads; got != 1 {
		t.Errorf("six mints during one read: %d reads, want 1", got)
	}
}
