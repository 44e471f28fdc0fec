package queue

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/settings"
	"github.com/example/waitingroom/internal/shuffle"
)

// PrequeueStore is a Store that can fix a shuffled program's pre-queue.
type PrequeueStore interface {
	// FixPrequeue applies admission.Program.WithPrequeueFixed at now and
	// returns the program after it; ErrNotFound if it does not exist.
	FixPrequeue(ctx context.Context, programID string, now time.Time) (admission.Program, error)
}

// WithShuffleKey makes key sign the seeds of shuffled openings.
func WithShuffleKey(key shuffle.Key) Option { return func(s *Service) { s.shuffle.key = key } }

// shuffleSeeds keeps an instance's shuffle seeds, by message, and the key's public half.
type shuffleSeeds struct {
	key shuffle.Key

	mu      sync.Mutex
	pub     string
	seeds   map[string]string // by shuffle.Message
	retryAt time.Time         // after a failed KMS call, none before this
}

// shuffleKeyBackoff is how long the shuffle key is left alone after a failure.
const shuffleKeyBackoff = 2 * time.Second

// withShuffle returns a shuffled p with ShufflePublicKey and, once its
// pre-queue is fixed, ShuffleSeed (signing failed: KEYS_UNAVAILABLE).
func (s *Service) withShuffle(ctx context.Context, p admission.Program) (admission.Program, error) {
	if !p.Shuffle {
		return p, nil
	}
	ss := &s.shuffle
	if ss.key == nil {
		if !p.PrequeueFixed {
			return p, nil
		}
		return admission.Program{}, &Error{Kind: KindInternal, Code: api.CodeKeysUnavailable, Message: "The opening's draw cannot be made.", Err: errors.New("no shuffle key")}
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	now := s.clock.Now()
	if ss.pub == "" && !now.Before(ss.retryAt) {
		if pub, err := ss.key.PublicKey(ctx); err == nil {
			ss.pub, _ = shuffle.EncodePublicKey(pub)
		} else {
			ss.retryAt = now.Add(shuffleKeyBackoff)
		}
	}
	p.ShufflePublicKey = ss.pub
	if !p.PrequeueFixed {
		return p, nil
	}
	msg := shuffle.Message(p.ID, p.ShuffleNonce)
	if seed, ok := ss.seeds[msg]; ok {
		p.ShuffleSeed = seed
		return p, nil
	}
	unavailable := func(err error) error {
		return &Error{Kind: KindUnavailable, Code: api.CodeKeysUnavailable, Message: "The opening's draw cannot be made just now; retry shortly.", Err: err, RetryAfter: ss.retryAt.Sub(now)}
	}
	if now.Before(ss.retryAt) {
		return admission.Program{}, unavailable(errors.New("shuffle key failed recently"))
	}
	seed, err := shuffle.SignSeed(ctx, ss.key, p.ID, p.ShuffleNonce)
	if err != nil {
		ss.retryAt = now.Add(shuffleKeyBackoff)
		return admission.Program{}, unavailable(err)
	}
	if ss.seeds == nil {
		ss.seeds = map[string]string{}
	}
	p.ShuffleSeed, ss.seeds[msg] = seed, seed
	return p, nil
}

// errEntriesClosed is the PROGRAM_CLOSED answer to an enter in p at now.
func errEntriesClosed(p admission.Program, now time.Time) error {
	if !p.Closed && p.ClosedAt(now) {
		return Errorf(KindConflict, api.CodeProgramClosed, "The program's queue closed to new entries at %s.", p.ClosesAt.UTC().Format(time.RFC3339))
	}
	return errProgramClosed
}

// checkSchedule checks set's opening, shuffle and close against p at now,
// for a change taking effect delay later.
func checkSchedule(p admission.Program, set api.ProgramSettings, now time.Time, delay time.Duration) error {
	opensAt, err := moved("opensAt", set.OpensAt, p.OpensAt, now, delay,
		Errorf(KindConflict, api.CodeNotOpen, "The program opens at %s (or has opened): its opening can no longer change.", p.OpensAt.UTC().Format(time.RFC3339)))
	if err != nil {
		return err
	}
	shuffle := p.Shuffle
	if set.ShuffleAtOpen != nil {
		if p.PrequeueFixed && *set.ShuffleAtOpen != p.Shuffle {
			return Errorf(KindConflict, api.CodeNotOpen, "The pre-queue was shuffled at the opening: shuffleAtOpen can no longer change.")
		}
		if *set.ShuffleAtOpen && !p.Shuffle && p.Issued > 0 {
			return Errorf(KindConflict, api.CodeInvalidSettings, "shuffleAtOpen must be set before anyone enters: its commitment is published before the pre-queue starts.")
		}
		shuffle = *set.ShuffleAtOpen
	}
	if shuffle && !p.PrequeueFixed && (opensAt.IsZero() || !opensAt.After(now.Add(delay))) {
		return Errorf(KindInvalid, api.CodeInvalidSettings, "shuffleAtOpen needs an opensAt more than %v from now.", delay)
	}
	closesAt, err := moved("closesAt", set.ClosesAt, p.ClosesAt, now, delay,
		Errorf(KindConflict, api.CodeInvalidSettings, "The program closes at %s (or has closed): its closing can no longer change.", p.ClosesAt.UTC().Format(time.RFC3339)))
	if err != nil {
		return err
	}
	if !closesAt.IsZero() && !opensAt.IsZero() && !closesAt.After(opensAt) {
		return invalidSetting("closesAt", "must be after opensAt ("+opensAt.UTC().Format(time.RFC3339)+")")
	}
	return nil
}

// moved is the instant v sets in field (nil: cur), refused unless cur and
// it are more than delay ahead of now when it moves (passed once cur came).
func moved(field string, v *string, cur, now time.Time, delay time.Duration, passed *Error) (time.Time, error) {
	if v == nil {
		return cur, nil
	}
	next, _ := settings.ParseOpening(*v) // checked by PutProgram
	effective := now.Add(delay)
	switch {
	case next.Equal(cur):
	case !cur.IsZero() && !cur.After(effective):
		return next, passed
	case !next.IsZero() && !next.After(effective):
		return next, Errorf(KindInvalid, api.CodeInvalidSettings, "%s must be more than %v from now.", field, delay)
	}
	return next, nil
}
