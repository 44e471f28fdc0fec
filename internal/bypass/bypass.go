// Package bypass signs an admin's bypass passes: admission passes to a
// program without a place in its queue (docs/design.md, "Bypass passes").
//
// Invariants:
//   - All or nothing: Sign returns every pass or none, so a failed signing
//     reserves nothing and a failed reservation throws every pass away.
//   - Bounded: at most Signers signatures in flight (the account's KMS
//     quota is shared with the admissions' passes), within SignBudget, and
//     always leaving the request the time its admin change needs.
//   - Each pass has a fresh subject, never a token's, so it grants no place
//     in the queue and can be told from an admission.
package bypass

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
)

// Bounds of an issuance.
const (
	MaxCount    = 1000
	MinValidity = time.Minute
	MaxValidity = 24 * time.Hour
	// Signers bounds the signatures of one issuance in flight.
	Signers = 8
	// SignBudget bounds the signing of one issuance.
	SignBudget = 5 * time.Second
)

// Pass is one bypass pass to sign, its subject the fresh id ID.
type Pass struct {
	ProgramID, ID       string
	IssuedAt, ExpiresAt time.Time
}

// Signer signs bypass passes; a queue.PassSigner that is one lets the
// service issue them.
type Signer interface {
	SignBypass(ctx context.Context, b Pass) (string, error)
}

// Sign signs n passes to programID valid from now to expires, subjects from
// newID, within SignBudget and leaving reserve of ctx's time.
func Sign(ctx context.Context, s Signer, programID string, n int64, now, expires time.Time, reserve time.Duration, newID func() string) ([]string, error) {
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-reserve))
		defer cancel()
	}
	ctx, cancel := context.WithTimeout(ctx, SignBudget)
	defer cancel()
	passes := make([]string, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(Signers)
	for i := range passes {
		g.Go(func() error {
			pass, err := s.SignBypass(gctx, Pass{ProgramID: programID, ID: newID(), IssuedAt: now, ExpiresAt: expires})
			if err != nil {
				return fmt.Errorf("sign bypass pass %d of %d: %w", i+1, n, err)
			}
			passes[i] = pass
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return passes, nil
}
