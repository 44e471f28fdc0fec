package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"strings"

	"golang.org/x/text/language"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/settings"
	"github.com/example/waitingroom/internal/waitpage"
)

// pagePrograms is waitpage.Programs over the queue service.
type pagePrograms struct{ svc *queue.Service }

var _ waitpage.Programs = pagePrograms{}

// Page implements waitpage.Programs with the program's public side.
func (p pagePrograms) Page(ctx context.Context, programID, lang string) (waitpage.PageInfo, error) {
	s, err := p.svc.Showing(ctx, programID)
	if err != nil {
		return waitpage.PageInfo{}, pageError(ctx, err)
	}
	texts := s.Profile.In(pageLanguage(lang)...)
	return waitpage.PageInfo{DisplayName: texts.DisplayName, Message: texts.Message, TargetURL: s.Profile.TargetURL,
		Paused: s.Paused, Closed: s.Closed, ClosesAt: s.ClosesAt, EdgePaths: s.Edge.Paths}, nil
}

// Enter implements waitpage.Programs; a malformed token or key is dropped (a fresh place).
func (p pagePrograms) Enter(ctx context.Context, programID, tokenID, key, lang string) (waitpage.View, error) {
	if !queue.ValidTokenID(tokenID) {
		tokenID = ""
	}
	if !queue.ValidIdempotencyKey(key) {
		key = ""
	}
	v, _, err := p.svc.Enter(ctx, programID, queue.Entry{Token: tokenID, IdempotencyKey: key})
	return httpapi.TokenOf(v, pageLanguage(lang)...), pageError(ctx, err)
}

// Poll implements waitpage.Programs.
func (p pagePrograms) Poll(ctx context.Context, programID, tokenID, lang string) (waitpage.View, error) {
	v, err := p.svc.Poll(ctx, programID, tokenID)
	return httpapi.TokenOf(v, pageLanguage(lang)...), pageError(ctx, err)
}

// pageLanguage is the page's language as a preference: none if lang is no language tag.
func pageLanguage(lang string) []language.Tag {
	if tag, ok := settings.ParseLanguage(lang); ok {
		return []language.Tag{tag}
	}
	return nil
}

// pageSentinels are the page's errors for the queue's error codes.
var pageSentinels = map[string]error{
	api.CodeInvalidProgramID:  waitpage.ErrInvalidProgram,
	api.CodeProgramNotFound:   waitpage.ErrProgramNotFound,
	api.CodeTokenNotFound:     waitpage.ErrTokenNotFound,
	api.CodeInvalidToken:      waitpage.ErrTokenNotFound,
	api.CodeMissingToken:      waitpage.ErrTokenNotFound,
	api.CodeProgramClosed:     waitpage.ErrClosed,
	api.CodeQueueFull:         waitpage.ErrFull,
	api.CodeChallengeRequired: waitpage.ErrNeedsScript,
	api.CodeChallengeFailed:   waitpage.ErrNeedsScript,
}

// pageError wraps err in its page sentinel, if any, and notes its code in the metrics.
func pageError(ctx context.Context, err error) error {
	qe, ok := errors.AsType[*queue.Error](err)
	if !ok {
		return err
	}
	metrics.Note(ctx).Code = qe.Code
	if sentinel := pageSentinels[qe.Code]; sentinel != nil {
		return fmt.Errorf("%w: %w", sentinel, err)
	}
	return err
}

// newPage is the waiting-room page over svc with logoURL, or without it if refused.
func newPage(svc *queue.Service, logoURL string, pushKey func(context.Context) string, log *slog.Logger) *waitpage.Handler {
	opts := waitpage.Options{LogoURL: logoURL, Logger: log, PushKey: pushKey}
	h, err := waitpage.New(pagePrograms{svc}, opts)
	if err != nil {
		log.Error("waiting-room page: logo refused", "err", err)
		opts.LogoURL = ""
		h, _ = waitpage.New(pagePrograms{svc}, opts) // the zero options are valid
	}
	return h
}

// meteredPage is a's page, each request recorded in a.Metrics as OpPage.
func (a *App) meteredPage() http.Handler {
	return metrics.Middleware(a.Metrics, func(*http.Request) metrics.Op { return metrics.OpPage })(a.Page)
}

// withPage serves the waiting-room page's canonical paths with page, the rest with api.
func withPage(page, api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if strings.HasPrefix(p, waitpage.PathPrefix) && (path.Clean(p) == p || p == waitpage.PathPrefix) {
			page.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}
