package queue

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/enqueue"
)

// EnqueueVerifier checks a site's enqueue token: its sub, or an error
// (enqueue.ErrKeysUnavailable when the site's keys cannot be read).
type EnqueueVerifier interface {
	Verify(ctx context.Context, jwksURL, issuer, programID, raw string) (account string, err error)
}

// WithEnqueue makes the Service take the places of accounts named by enqueue tokens that v checks.
func WithEnqueue(v EnqueueVerifier) Option { return func(s *Service) { s.enqueue = v } }

// account is the account raw (an X-Enqueue-Token) names in programID: ""
// without one where none is required, else its refusal.
func (s *Service) account(ctx context.Context, programID, raw string) (string, error) {
	if raw == "" {
		p, err := s.program(ctx, programID, s.clock.Now())
		if err == nil && p.Enqueue.Required {
			err = Errorf(KindForbidden, api.CodeEnqueueTokenRequired, "This queue takes people signed in on the site: enter from the site's own link.")
		}
		return "", err
	}
	p, err := s.program(ctx, programID, s.clock.Now())
	if err != nil {
		return "", err
	}
	if s.enqueue == nil || !p.Enqueue.Accepts() {
		return "", errInvalidEnqueue("this program takes no enqueue tokens", nil)
	}
	account, err := s.enqueue.Verify(ctx, p.Enqueue.JWKSURL, p.Enqueue.Issuer, programID, raw)
	switch {
	case errors.Is(err, enqueue.ErrKeysUnavailable):
		return "", &Error{Kind: KindUnavailable, Code: api.CodeKeysUnavailable, Message: "The site's keys could not be read just now; retry shortly.", Err: err}
	case err != nil:
		return "", errInvalidEnqueue("it is expired, for another program or issuer, or not signed by the site", err)
	}
	return account, nil
}

// errInvalidEnqueue is INVALID_ENQUEUE_TOKEN for why, with its cause for the logs.
func errInvalidEnqueue(why string, err error) error {
	return &Error{Kind: KindForbidden, Code: api.CodeInvalidEnqueueToken, Message: fmt.Sprintf("The enqueue token was refused: %s. Enter again from the site.", why), Err: err}
}

// AccountTokenID is the token id of account's place in programID, keyed by
// the Service's secret, so that nobody can compute another's.
func (s *Service) AccountTokenID(programID, account string) string {
	mac := hmac.New(sha256.New, s.secret)
	mac.Write([]byte("waitingroom/account/v1\x00" + programID + "\x00" + account))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:16])
}

// AccountToken looks up the place of account in programID for an admin, as Token does.
func (s *Service) AccountToken(ctx context.Context, programID, account string) (Lookup, error) {
	if account == "" || utf8.RuneCountInString(account) > enqueue.MaxAccountSize {
		return Lookup{}, Errorf(KindInvalid, api.CodeInvalidToken, "An account is 1 to %d characters.", enqueue.MaxAccountSize)
	}
	return s.Token(ctx, programID, s.AccountTokenID(programID, account))
}
