package queue

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
)

// Change is one admin change in a program's history (docs/design.md, "The
// operator's records").
type Change struct {
	ID string
	// At is when the change was made, to the millisecond, after its
	// program's previous change; with ID it keys the change (ChangeKey).
	At time.Time
	// EffectiveAt is when the change takes effect everywhere; zero: at once.
	EffectiveAt time.Time
	Actor       string
	// Action is what the change did: one of the Action constants.
	Action string
	// Fields is a JSON object of what it set: {name: new value}.
	Fields json.RawMessage
	// Version is the program version the change made; 0 for an action
	// that writes no program (a token revoked).
	Version int64
	// Committed is set once the change is known applied; a change not yet
	// committed is applied only if it is its program's latest.
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

// ChangeKey orders a program's changes: by At, then ID.
type ChangeKey struct {
	At time.Time
	ID string
}

// Key is c's ChangeKey.
func (c Change) Key() ChangeKey { return ChangeKey{c.At, c.ID} }

// Bounds of the history's reads and of an actor's name.
const (
	DefaultChangesLimit = 100
	MaxChangesLimit     = 1000
	maxActorLen         = 512
	// changeRetention is how long a change stays in the history.
	changeRetention = 400 * 24 * time.Hour
)

// ChangeRetention is how long a store keeps a change.
const ChangeRetention = changeRetention

type actorKey struct{}

// WithActor returns ctx naming actor (an IAM ARN, "local-admin") as the
// caller of the admin changes made with it.
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

// changeEntry is the Program.Changes entry of change id made as version v
// at at: "version/id/atMs".
func changeEntry(v int64, id string, at time.Time) string {
	return strconv.FormatInt(v, 10) + "/" + id + "/" + strconv.FormatInt(UnixMs(at), 10)
}

// parseChangeEntry reads a Program.Changes entry; at is zero for the
// entries written before the history ("version/id").
func parseChangeEntry(e string) (v int64, id string, at time.Time, ok bool) {
	ver, rest, ok := strings.Cut(e, "/")
	if !ok {
		return 0, "", time.Time{}, false
	}
	v, err := strconv.ParseInt(ver, 10, 64)
	if err != nil {
		return 0, "", time.Time{}, false
	}
	id, ms, hasAt := strings.Cut(rest, "/")
	if hasAt {
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil {
			return 0, "", time.Time{}, false
		}
		at = FromUnixMs(n)
	}
	return v, id, at, true
}

// latestChange is the ChangeKey and version of p's latest admin change.
func (p Program) latestChange() (ChangeKey, int64, bool) {
	if len(p.Changes) == 0 {
		return ChangeKey{}, 0, false
	}
	v, id, at, ok := parseChangeEntry(p.Changes[0])
	return ChangeKey{at, id}, v, ok && !at.IsZero()
}

// changeAt is the instant of a change made at now over read: now to the
// millisecond, after read's latest change, so that the history's order is
// the order the changes were made in.
func changeAt(read Program, now time.Time) time.Time {
	ms := UnixMs(now)
	if k, _, ok := read.latestChange(); ok {
		ms = max(ms, UnixMs(k.At)+1)
	}
	return FromUnixMs(ms)
}

// fieldsOf is v's JSON, the fields of a change.
func fieldsOf(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return b
}

// beginChange makes rec, the change that writes p over read (the zero
// Program for a creation), recoverable from the history: it commits read's
// latest change, so that only the latest can be uncommitted, then stores
// rec uncommitted. An error means nothing is to be written.
func (s *Service) beginChange(ctx context.Context, read, p Program, rec *Change) error {
	return s.beginChangeListed(ctx, read, p, rec, false)
}

// beginChangeListed is beginChange, also listing the program when list is
// set; the writes go side by side, the admin deadline being short.
func (s *Service) beginChangeListed(ctx context.Context, read, p Program, rec *Change, list bool) error {
	rec.Version = p.Version
	rec.EffectiveAt = time.Time{}
	if p.Next.AnchorMs != 0 && p.Pending(rec.At) {
		rec.EffectiveAt = FromUnixMs(p.Next.AnchorMs)
	}
	rec.Committed = false
	put := *rec
	var g errgroup.Group
	if k, _, ok := read.latestChange(); ok {
		g.Go(func() error {
			if err := s.store.CommitChange(ctx, read.ID, k.At, k.ID); err != nil {
				return fmt.Errorf("commit the previous change: %w", err)
			}
			return nil
		})
	}
	g.Go(func() error {
		if err := s.store.PutChange(ctx, p.ID, put); err != nil {
			return fmt.Errorf("record the change: %w", err)
		}
		return nil
	})
	if list {
		g.Go(func() error {
			if err := s.store.IndexProgram(ctx, p.ID); err != nil {
				return fmt.Errorf("list the program: %w", err)
			}
			return nil
		})
	}
	return g.Wait()
}

// endChange logs rec, once written, with its actor. It stays uncommitted
// until the next change commits it (beginChange): reads know it applied
// as its program's latest.
func (s *Service) endChange(ctx context.Context, programID string, rec Change) {
	s.logger().LogAttrs(ctx, slog.LevelInfo, "admin change",
		slog.String("programId", programID), slog.String("changeId", rec.ID), slog.String("action", rec.Action),
		slog.String("actor", rec.Actor), slog.Int64("version", rec.Version), slog.String("fields", string(rec.Fields)))
}

// History is a page of a program's changes, newest first.
type History struct {
	Changes []Change
	// Next is the cursor of the following page; "" on the last.
	Next string
}

// maxHistoryReads bounds the store pages one History read takes to fill
// a page past the changes it hides.
const maxHistoryReads = 4

// History returns up to limit (0: DefaultChangesLimit) of programID's
// changes, newest first, from cursor ("" for the newest): every admin
// change applied, once, and none that was not.
func (s *Service) History(ctx context.Context, programID, cursor string, limit int) (History, error) {
	if !ValidProgramID(programID) {
		return History{}, errInvalidProgramID()
	}
	if limit == 0 {
		limit = DefaultChangesLimit
	}
	if limit < 1 || limit > MaxChangesLimit {
		return History{}, errInvalidLimit(MaxChangesLimit)
	}
	from, ok := decodeChangeCursor(cursor)
	if !ok {
		return History{}, errInvalidCursor()
	}
	p, err := s.store.GetProgram(ctx, programID)
	if err != nil {
		return History{}, programReadError("get program", err)
	}
	latest, latestV, _ := p.latestChange()
	// A change older than the program is its deleted namesake's.
	born := p.CreatedAt.Add(-adminDeadline)
	var h History
	for range maxHistoryReads {
		page, more, err := s.store.Changes(ctx, programID, from, limit-len(h.Changes))
		if err != nil {
			return History{}, storeError("read changes", err)
		}
		for _, c := range page {
			from = c.Key()
			shown, err := s.applied(ctx, programID, c, latest, latestV)
			if err != nil {
				return History{}, storeError("read changes", err)
			}
			if shown && !c.At.Before(born) {
				h.Changes = append(h.Changes, c)
			}
		}
		if !more {
			return h, nil
		}
		if len(h.Changes) == limit {
			break
		}
	}
	h.Next = encodeChangeCursor(from)
	return h, nil
}

// applied reports whether change c of programID was applied: committed,
// or the program's latest change (latest, made as version latestV), or a
// revoke whose token was revoked at its instant.
func (s *Service) applied(ctx context.Context, programID string, c Change, latest ChangeKey, latestV int64) (bool, error) {
	switch {
	case c.Committed:
		return true, nil
	case c.Action == ActionRevoke:
		return s.revokeApplied(ctx, programID, c)
	}
	return c.Key() == latest && c.Version == latestV, nil
}

// programReadError is err reading a program for op as the client sees it.
func programReadError(op string, err error) error {
	if errors.Is(err, ErrNotFound) {
		return errProgramNotFound()
	}
	return storeError(op, err)
}

func encodeChangeCursor(k ChangeKey) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(UnixMs(k.At), 10) + "/" + k.ID))
}

// decodeChangeCursor reads a cursor of encodeChangeCursor; "" is the zero
// key.
func decodeChangeCursor(c string) (ChangeKey, bool) {
	if c == "" {
		return ChangeKey{}, true
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(c) > 128 {
		return ChangeKey{}, false
	}
	ms, id, ok := strings.Cut(string(b), "/")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil || n < 0 || !ValidTokenID(id) {
		return ChangeKey{}, false
	}
	return ChangeKey{FromUnixMs(n), id}, true
}
