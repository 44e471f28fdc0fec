// Package catalog keeps the list of programs an operator pages through, an
// entry per program in one partition, so that a page is one query
// (docs/design.md, "The operator's records").
//
// Invariants:
//   - A listed id may name no program (a creation that failed after
//     listing it, or a program deleted since): List leaves it out, so a
//     page holds at most limit programs, in id order.
//   - A deleted program's id stays taken for DeletedRetention, longer than
//     any of its records lives, so that no record of it passes for a
//     namesake's.
package catalog

import (
	"context"
	"encoding/base64"
	"time"

	"golang.org/x/sync/errgroup"
)

// Bounds of a page of programs.
const (
	DefaultLimit = 50
	MaxLimit     = 200
	// listReaders bounds the program reads one page makes at once.
	listReaders = 16
)

// DeletedRetention is how long a deleted program's id stays taken: longer
// than any of its records lives.
const DeletedRetention = 7 * 24 * time.Hour

// Store keeps the list of programs.
type Store interface {
	// IndexProgram adds id to the list of programs; it may already be there.
	IndexProgram(ctx context.Context, id string) error
	// ListPrograms returns up to limit listed ids in ascending order, each
	// after after ("" from the first), and whether more follow.
	ListPrograms(ctx context.Context, after string, limit int) (ids []string, more bool, err error)
}

// List reads up to limit listed ids after after, each with read (false:
// left out), in id order, and the next page's cursor ("" on the last).
func List[P any](ctx context.Context, s Store, after string, limit int, read func(ctx context.Context, id string) (P, bool, error)) ([]P, string, error) {
	ids, more, err := s.ListPrograms(ctx, after, limit)
	if err != nil {
		return nil, "", err
	}
	got := make([]P, len(ids))
	found := make([]bool, len(ids))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(listReaders)
	for i, id := range ids {
		g.Go(func() (err error) {
			got[i], found[i], err = read(gctx, id)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, "", err
	}
	page := make([]P, 0, len(ids))
	for i := range got {
		if found[i] {
			page = append(page, got[i])
		}
	}
	next := ""
	if more && len(ids) > 0 {
		next = base64.RawURLEncoding.EncodeToString([]byte(ids[len(ids)-1]))
	}
	return page, next, nil
}

// DecodeCursor reads a cursor List gave, false if c is not one.
func DecodeCursor(c string) (after string, ok bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	return string(b), err == nil
}
