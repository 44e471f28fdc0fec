// Package history keeps each program's history of admin changes ("who
// paused at 10:02?"): a Change per item, keyed by its instant and id, with
// its actor (WithActor) and what it set (docs/design.md, "The operator's
// records"). Package queue writes one beside every admin change.
//
// Invariants:
//   - Every change applied is shown once, and no other, without
//     transactions: a change is stored uncommitted before its program's
//     write (Begin), after committing the program's previous latest
//     change, so at most one uncommitted change per program is applied,
//     its latest; a read (Read) shows an uncommitted change only when it
//     was applied: the program's latest, at its version, or a revoke
//     whose token the caller finds revoked at its instant.
//   - The history's order is the order the changes were made in: each
//     change's instant is after its program's previous one (NextAt).
//   - A program remembers its last MaxRecent change ids with the version
//     each made (Push), so a write retried after a lost answer recognises
//     its own (Applied), or knows that it cannot tell.
package history

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/example/waitingroom/internal/pace"
)

// Change is one admin change in a program's history.
type Change struct {
	ID string
	// At is when the change was made, to the millisecond (NextAt).
	At time.Time
	// EffectiveAt is when the change takes effect everywhere; zero: at once.
	EffectiveAt time.Time
	Actor       string
	// Action is what the change did: one of the Action constants.
	Action string
	// Fields is a JSON object of what it set: {name: new value}.
	Fields json.RawMessage
	// Version is the program version the change made (0 for a revoke).
	Version int64
	// Committed is set once the change is known applied.
	Committed bool
}

// Actions of a Change.
const (
	ActionCreate = "create"
	ActionUpdate = "update"
	ActionAdmit  = "admit"
	// ActionReadmit is the service giving no-shows' admissions back.
	ActionReadmit = "readmit"
	ActionRevoke  = "revoke"
	ActionBypass  = "bypass"
)

// SystemActor is the actor of the changes the service makes itself.
const SystemActor = "system"

// Key orders a program's changes: by At, then ID.
type Key struct {
	At time.Time
	ID string
}

// Key is c's Key.
func (c Change) Key() Key { return Key{c.At, c.ID} }

// Bounds of the history's reads and of an actor's name.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
	maxActorLen  = 512
	// Retention is how long a store keeps a change.
	Retention = 400 * 24 * time.Hour
)

// Store keeps the programs' histories.
type Store interface {
	// PutChange stores c in programID's history, replacing its namesake.
	PutChange(ctx context.Context, programID string, c Change) error
	// CommitChange marks programID's change (at, id), if any, committed.
	CommitChange(ctx context.Context, programID string, at time.Time, id string) error
	// Changes returns up to limit of programID's changes before from
	// (newest first; zero Key: the newest), and whether more follow.
	Changes(ctx context.Context, programID string, from Key, limit int) ([]Change, bool, error)
}

type actorKey struct{}

// WithActor returns ctx naming actor as the caller of its admin changes.
func WithActor(ctx context.Context, actor string) context.Context {
	if len(actor) > maxActorLen {
		actor = actor[:maxActorLen]
	}
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorOf is the actor ctx names, or "unknown".
func ActorOf(ctx context.Context) string {
	if a, _ := ctx.Value(actorKey{}).(string); a != "" {
		return a
	}
	return "unknown"
}

// Fields is v's JSON, the fields of a change.
func Fields(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return b
}

// Begin commits programID's latest change (of recent) and stores c
// uncommitted, in parallel with alongside; on error nothing is to be written.
func Begin(ctx context.Context, s Store, programID string, recent []string, c Change, alongside ...func() error) error {
	c.Committed = false
	var g errgroup.Group
	if k, _, ok := Latest(recent); ok {
		g.Go(func() error {
			if err := s.CommitChange(ctx, programID, k.At, k.ID); err != nil {
				return fmt.Errorf("commit the previous change: %w", err)
			}
			return nil
		})
	}
	g.Go(func() error {
		if err := s.PutChange(ctx, programID, c); err != nil {
			return fmt.Errorf("record the change: %w", err)
		}
		return nil
	})
	for _, f := range alongside {
		g.Go(f)
	}
	return g.Wait()
}

// MaxRecent is how many of its latest change ids a program remembers.
const MaxRecent = 8

// Push returns recent with change id, made as version v at at, in front,
// keeping MaxRecent entries "version/id/atMs".
func Push(recent []string, v int64, id string, at time.Time) []string {
	e := strconv.FormatInt(v, 10) + "/" + id + "/" + strconv.FormatInt(pace.UnixMs(at), 10)
	return append([]string{e}, recent[:min(len(recent), MaxRecent-1)]...)
}

// parse reads an entry of Push (at zero for an old "version/id").
func parse(e string) (v int64, id string, at time.Time, ok bool) {
	parts := strings.SplitN(e, "/", 3)
	v, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || len(parts) < 2 {
		return 0, "", time.Time{}, false
	}
	if len(parts) == 3 {
		ms, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil {
			return 0, "", time.Time{}, false
		}
		at = pace.FromUnixMs(ms)
	}
	return v, parts[1], at, true
}

// Applied tells whether recent, of a program at version current, records
// change id as made version v: yes, no, or unknown (forgotten since).
func Applied(recent []string, id string, v, current int64) (applied, known bool) {
	oldest := int64(-1)
	for _, e := range recent {
		n, got, _, ok := parse(e)
		if !ok {
			continue
		}
		if n == v {
			return got == id, true
		}
		if oldest < 0 || n < oldest {
			oldest = n
		}
	}
	// No change made version v: applied only if it fell off the list.
	return false, len(recent) < MaxRecent || oldest < v || current < v
}

// Latest is the Key and version of the newest of recent, if it has an instant.
func Latest(recent []string) (Key, int64, bool) {
	if len(recent) == 0 {
		return Key{}, 0, false
	}
	v, id, at, ok := parse(recent[0])
	return Key{at, id}, v, ok && !at.IsZero()
}

// NextAt is the instant of a change made at now after those of recent.
func NextAt(recent []string, now time.Time) time.Time {
	ms := pace.UnixMs(now)
	if k, _, ok := Latest(recent); ok {
		ms = max(ms, pace.UnixMs(k.At)+1)
	}
	return pace.FromUnixMs(ms)
}

// Page is a page of a program's changes, newest first.
type Page struct {
	Changes []Change
	// Next is the cursor of the following page; "" on the last.
	Next string
}

// maxReads bounds the store pages one Read takes.
const maxReads = 4

// Read returns up to limit of programID's applied changes before from
// (zero Key: the newest), newest first, none made before born; revoked
// confirms an uncommitted revoke.
func Read(ctx context.Context, s Store, programID string, recent []string, born time.Time, from Key, limit int, revoked func(Change) (bool, error)) (Page, error) {
	latest, latestV, _ := Latest(recent)
	shown := func(c Change) (bool, error) {
		switch {
		case c.At.Before(born):
			return false, nil
		case c.Committed:
			return true, nil
		case c.Action == ActionRevoke:
			return revoked(c)
		}
		return c.Key() == latest && c.Version == latestV, nil
	}
	var p Page
	for range maxReads {
		page, more, err := s.Changes(ctx, programID, from, limit-len(p.Changes))
		if err != nil {
			return Page{}, err
		}
		for _, c := range page {
			from = c.Key()
			ok, err := shown(c)
			if err != nil {
				return Page{}, err
			}
			if ok {
				p.Changes = append(p.Changes, c)
			}
		}
		if !more {
			return p, nil
		}
		if len(p.Changes) == limit {
			break
		}
	}
	p.Next = encodeCursor(from)
	return p, nil
}

// changeIDPattern is the shape of a change id (queue.NewTokenID).
var changeIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)

func encodeCursor(k Key) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(pace.UnixMs(k.At), 10) + "/" + k.ID))
}

// DecodeCursor reads a Page's Next ("": the zero Key), false if not one.
func DecodeCursor(c string) (Key, bool) {
	if c == "" {
		return Key{}, true
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(c) > 128 {
		return Key{}, false
	}
	ms, id, ok := strings.Cut(string(b), "/")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil || n < 0 || !changeIDPattern.MatchString(id) {
		return Key{}, false
	}
	return Key{pace.FromUnixMs(n), id}, true
}
