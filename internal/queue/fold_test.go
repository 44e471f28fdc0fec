package queue_test

import (
	"errors"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/queue"
)

// foldRig is a capped program in a memstore, folded by hand.
type foldRig struct {
	t     *testing.T
	store *memstore.Store
	id    string
}

func newFoldRig(t *testing.T, p queue.Program) foldRig {
	s := memstore.New()
	if err := s.CreateProgram(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	return foldRig{t, s, p.ID}
}

func (r foldRig) program() queue.Program {
	p, err := r.store.GetProgram(r.t.Context(), r.id)
	if err != nil {
		r.t.Fatal(err)
	}
	return p
}

// fold folds the stored program at at, with a 2 s change delay.
func (r foldRig) fold(at time.Duration) queue.Capacity {
	r.t.Helper()
	c, err := queue.Fold(r.t.Context(), r.store, r.program(), t0.Add(at), 2*time.Second)
	if err != nil {
		r.t.Fatalf("Fold at +%v: %v", at, err)
	}
	return c
}

func (r foldRig) sight(places ...int64) {
	r.t.Helper()
	for _, p := range places {
		if _, err := r.store.Sight(r.t.Context(), r.id, p); err != nil {
			r.t.Fatalf("Sight(%d): %v", p, err)
		}
	}
}

// end records place's end in the index the program's last fold left open.
func (r foldRig) end(place int64) {
	r.t.Helper()
	q := r.program().Capacity.EndsThrough + 1
	if _, err := r.store.EndPlace(r.t.Context(), r.id, place, q); err != nil {
		r.t.Fatal(err)
	}
	if err := r.store.AddEnd(r.t.Context(), r.id, q, int(place%queue.EndShards), place); err != nil {
		r.t.Fatal(err)
	}
}

// TestFoldFreesSlots: ended sessions and no-shows raise the ceiling, each
// once, after the change delay; a no-show can no longer be sighted.
func TestFoldFreesSlots(t *testing.T) {
	p := program(100, 0, 100, false)
	p.ID, p.MaxActiveUsers, p.NoShowSeconds, p.AdmissionWindow = "capped", 10, 5, time.Minute
	r := newFoldRig(t, p)
	if got := r.program().Serving(t0.Add(time.Second)); got != 10 {
		t.Fatalf("Serving at +1s = %d, want the cap, 10", got)
	}
	r.fold(time.Second) // the first mark: 10 admitted
	r.sight(1, 2, 3, 4, 5, 6, 7)
	r.end(1)
	r.end(2)
	c := r.fold(2 * time.Second)
	if c.Ended != 2 || c.NoShows != 0 {
		t.Fatalf("after the ends: ended %d, no-shows %d; want 2, 0", c.Ended, c.NoShows)
	}
	// Twice the same fold (a request that read the program before): the
	// first wins, nothing is counted twice.
	stale := r.program()
	r.end(3)
	first, err := queue.Fold(t.Context(), r.store, stale, t0.Add(3*time.Second), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := queue.Fold(t.Context(), r.store, stale, t0.Add(3100*time.Millisecond), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := r.program().Capacity; got.Ended != 3 || got.FoldedAtMs != first.FoldedAtMs {
		t.Fatalf("after two folds from one read: ended %d, folded at %d; want 3, %d", got.Ended, got.FoldedAtMs, first.FoldedAtMs)
	}
	for _, tt := range []struct {
		at   time.Duration
		want int64
	}{
		{4999 * time.Millisecond, 12}, // the first 2 freed at +4 s (fold at +2 s, δ 2 s)
		{5010 * time.Millisecond, 13}, // the third from +5 s, at the rate
	} {
		if got := r.program().Serving(t0.Add(tt.at)); got != tt.want {
			t.Errorf("Serving at +%v = %d, want %d", tt.at, got, tt.want)
		}
	}
	// Places 8, 9, 10 never showed: 5 s after the +1 s mark (and the
	// margin) they are sealed, and counted once.
	c = r.fold(7100 * time.Millisecond)
	if c.NoShows != 3 || c.NoShowThrough != 10 {
		t.Fatalf("no-shows %d through %d, want 3 through 10", c.NoShows, c.NoShowThrough)
	}
	if _, err := r.store.Sight(t.Context(), r.id, 9); !errors.Is(err, queue.ErrSealed) {
		t.Errorf("a no-show's late sighting: %v, want ErrSealed", err)
	}
	c = r.fold(8200 * time.Millisecond)
	if c.NoShows != 3 || c.Ended != 3 {
		t.Errorf("a later fold counted again: no-shows %d, ended %d", c.NoShows, c.Ended)
	}
	if got := r.program().Serving(t0.Add(10 * time.Second)); got != 16 {
		t.Errorf("Serving at +10s = %d, want 10 + 3 ended + 3 no-shows", got)
	}
}

// TestFoldExpiresWindows: a group whose windows are all over frees the
// slots of those who showed and did not end.
func TestFoldExpiresWindows(t *testing.T) {
	const maxActive = queue.GroupSize + 10
	p := program(1000, 0, 1000, false)
	p.ID, p.MaxActiveUsers, p.NoShowSeconds, p.AdmissionWindow = "windows", maxActive, 5, time.Minute
	r := newFoldRig(t, p)
	r.fold(time.Second) // mark: cap admitted
	for place := int64(1); place <= queue.GroupSize; place++ {
		if place%4 != 0 { // a quarter never shows
			r.sight(place)
		}
	}
	r.end(1)
	c := r.fold(7 * time.Second) // seals the first group, and the 10 of the next, unseen
	if c.NoShows != queue.GroupSize/4+10 || c.Ended != 1 {
		t.Fatalf("no-shows %d, ended %d; want %d, 1", c.NoShows, c.Ended, queue.GroupSize/4+10)
	}
	c = r.fold(7*time.Second + time.Minute) // the window is over, not the margin
	if c.Expired != 0 {
		t.Fatalf("expired %d before the margin", c.Expired)
	}
	c = r.fold(7*time.Second + 2*time.Minute + time.Millisecond)
	if want := int64(queue.GroupSize*3/4 - 1); c.Expired != want || c.ExpiredThrough != maxActive {
		t.Fatalf("expired %d through place %d, want %d through %d", c.Expired, c.ExpiredThrough, want, maxActive)
	}
	if _, err := r.store.EndPlace(t.Context(), r.id, 2, c.EndsThrough+1); !errors.Is(err, queue.ErrSealed) {
		t.Errorf("an end after the expiry: %v, want ErrSealed", err)
	}
	c = r.fold(7*time.Second + 3*time.Minute)
	if c.Expired != queue.GroupSize*3/4-1 {
		t.Errorf("a later fold expired again: %d", c.Expired)
	}
}
