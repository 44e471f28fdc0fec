package queue

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/example/waitingroom/internal/api"
)

// Bounds of a list of programs.
const (
	DefaultProgramsLimit = 50
	MaxProgramsLimit     = 200
	// listReaders bounds the program reads one list makes at once.
	listReaders = 16
)

// DeletedRetention is how long a deleted program's id stays taken: longer
// than any of its records lives (docs/design.md, "The operator's records").
const DeletedRetention = 7 * 24 * time.Hour

// incarnationMargin is how much earlier than its program a token may seem
// issued (instances' clocks differ) and still be its: a token of a deleted
// namesake is DeletedRetention older.
const incarnationMargin = DeletedRetention / 2

// ProgramList is a page of programs, in id order.
type ProgramList struct {
	Programs []Counters
	// Next is the cursor of the following page; "" on the last.
	Next string
}

// ListPrograms returns up to limit (0: DefaultProgramsLimit) programs in id
// order, from cursor ("" for the first), each read fresh.
func (s *Service) ListPrograms(ctx context.Context, cursor string, limit int) (ProgramList, error) {
	if limit == 0 {
		limit = DefaultProgramsLimit
	}
	if limit < 1 || limit > MaxProgramsLimit {
		return ProgramList{}, errInvalidLimit(MaxProgramsLimit)
	}
	after, ok := decodeProgramCursor(cursor)
	if !ok {
		return ProgramList{}, errInvalidCursor()
	}
	ids, more, err := s.store.ListPrograms(ctx, after, limit)
	if err != nil {
		return ProgramList{}, storeError("list programs", err)
	}
	read := make([]*Program, len(ids))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(listReaders)
	for i, id := range ids {
		g.Go(func() error {
			p, err := s.store.GetProgram(gctx, id)
			if errors.Is(err, ErrNotFound) {
				return nil // listed by a creation that failed, or deleted since
			}
			read[i] = &p
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return ProgramList{}, storeError("list programs", err)
	}
	now := s.clock.Now()
	l := ProgramList{Programs: make([]Counters, 0, len(ids))}
	for _, p := range read {
		if p != nil {
			l.Programs = append(l.Programs, p.counters(now))
		}
	}
	if more && len(ids) > 0 {
		l.Next = base64.RawURLEncoding.EncodeToString([]byte(ids[len(ids)-1]))
	}
	return l, nil
}

// decodeProgramCursor reads a cursor ListPrograms gave: the last id of a
// page.
func decodeProgramCursor(c string) (string, bool) {
	if c == "" {
		return "", true
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	return string(b), err == nil && ValidProgramID(string(b))
}

// DeleteProgram deletes a closed program (closed, or past its closesAt): it is then PROGRAM_NOT_FOUND
// everywhere (within a cache TTL on other instances), its id is taken for
// DeletedRetention, and its tokens go when the store's TTL removes them.
// An open one is PROGRAM_NOT_CLOSED.
func (s *Service) DeleteProgram(ctx context.Context, programID string) error {
	if !ValidProgramID(programID) {
		return errInvalidProgramID()
	}
	ctx, cancel := context.WithTimeout(ctx, adminDeadline)
	defer cancel()
	for range maxAdminTrials {
		p, err := s.store.GetProgram(ctx, programID)
		if err != nil {
			return programReadError("get program", err)
		}
		now := s.clock.Now()
		if p.takesEntries(now) {
			return Errorf(KindConflict, api.CodeProgramNotClosed, "Close the program (closed: true) before you delete it.")
		}
		err = s.store.DeleteProgram(ctx, p, now.Add(DeletedRetention))
		switch {
		case err == nil:
			s.cache.forget(programID)
			s.logger().LogAttrs(ctx, slog.LevelInfo, "program deleted", slog.String("programId", programID), slog.String("actor", ActorOf(ctx)), slog.Int64("version", p.Version))
			return nil
		case !errors.Is(err, ErrConflict):
			return storeError("delete program", err)
		}
		if err := s.clock.Sleep(ctx, s.jitter(maxConflictBackoff)); err != nil {
			break
		}
	}
	return errBusy(time.Second)
}

func errInvalidLimit(most int) error {
	return Errorf(KindInvalid, api.CodeInvalidLimit, "limit must be a whole number between 1 and %d.", most)
}

func errInvalidCursor() error {
	return Errorf(KindInvalid, api.CodeInvalidCursor, "The cursor is not one this API gave; start again without it.")
}
