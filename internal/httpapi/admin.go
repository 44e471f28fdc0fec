package httpapi

import (
	"cmp"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/example/waitingroom/internal/admission"
	wire "github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/bypass"
	"github.com/example/waitingroom/internal/catalog"
	"github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/settings"
)

// errNoCount answers a body without its count.
var errNoCount = queue.Errorf(queue.KindInvalid, wire.CodeInvalidCount, "count is required.")

func (a *api) getProgram(w http.ResponseWriter, r *http.Request) error {
	c, err := a.svc.Program(r.Context(), r.PathValue("programId"))
	return writeCounters(w, r, http.StatusOK, c, err)
}

func (a *api) putProgram(w http.ResponseWriter, r *http.Request) error {
	var b wire.ProgramSettings
	if err := decodeObject(r, &b); err != nil {
		return err
	}
	if err := a.edgeFits(r.Context(), r.PathValue("programId"), b); err != nil {
		return err
	}
	c, created, err := a.svc.PutProgram(r.Context(), r.PathValue("programId"), b)
	if err == nil && b.Edge() {
		err = a.publishEdge(r.Context(), c)
	}
	return writeCounters(w, r, okOrCreated(created), c, err)
}

func (a *api) admit(w http.ResponseWriter, r *http.Request) error {
	var b wire.Admission
	if err := decodeObject(r, &b); err != nil {
		return err
	}
	if b.Count == nil {
		return errNoCount
	}
	c, err := a.svc.Admit(r.Context(), r.PathValue("programId"), *b.Count)
	return writeCounters(w, r, http.StatusOK, c, err)
}

// issueBypass answers 200 {"passes": […]}: nothing addressable is created.
func (a *api) issueBypass(w http.ResponseWriter, r *http.Request) error {
	var b wire.BypassRequest
	if err := decodeObject(r, &b); err != nil {
		return err
	}
	switch {
	case b.Count == nil:
		return errNoCount
	case b.ValidSeconds == nil:
		return queue.Errorf(queue.KindInvalid, wire.CodeInvalidValidity, "validSeconds is required.")
	}
	// Kept within a Duration: one second past the bound is as invalid.
	seconds := min(max(*b.ValidSeconds, -1), int64(bypass.MaxValidity/time.Second)+1)
	passes, err := a.svc.IssueBypass(r.Context(), r.PathValue("programId"), *b.Count, time.Duration(seconds)*time.Second)
	metrics.Note(r.Context()).BypassPasses = int64(len(passes))
	return answer(w, http.StatusOK, wire.BypassPasses{Passes: passes}, err)
}

func (a *api) listPrograms(w http.ResponseWriter, r *http.Request) error {
	limit, err := limitOf(r, catalog.MaxLimit)
	if err != nil {
		return err
	}
	l, err := a.svc.ListPrograms(r.Context(), r.URL.Query().Get("cursor"), limit)
	return answer(w, http.StatusOK, wire.ProgramList{Programs: mapped(l.Programs, programOf), NextCursor: l.Next}, err)
}

func (a *api) deleteProgram(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("programId")
	err := a.svc.DeleteProgram(r.Context(), id)
	if err == nil || queue.ErrorKind(err) == queue.KindNotFound {
		// Also when already gone: a DELETE sent again publishes what a 503 left out.
		err = cmp.Or(a.publishEdge(r.Context(), admission.Counters{ProgramID: id}), err)
	}
	return answer(w, http.StatusNoContent, nil, err)
}

func (a *api) history(w http.ResponseWriter, r *http.Request) error {
	limit, err := limitOf(r, history.MaxLimit)
	if err != nil {
		return err
	}
	h, err := a.svc.History(r.Context(), r.PathValue("programId"), r.URL.Query().Get("cursor"), limit)
	return answer(w, http.StatusOK, wire.ChangeList{Changes: mapped(h.Changes, changeOf), NextCursor: h.Next}, err)
}

// report answers the program's report (queue.Service.Report).
func (a *api) report(w http.ResponseWriter, r *http.Request) error {
	rep, err := a.svc.Report(r.Context(), r.PathValue("programId"))
	return answer(w, http.StatusOK, rep, err)
}

// getToken answers what a token's holder would be told, without the pass.
func (a *api) getToken(w http.ResponseWriter, r *http.Request) error {
	l, err := a.svc.Token(r.Context(), r.PathValue("programId"), r.PathValue("tokenId"))
	return answer(w, http.StatusOK, tokenRecordOf(l), err)
}

// accountToken looks up an account's place, as getToken a token's.
func (a *api) accountToken(w http.ResponseWriter, r *http.Request) error {
	l, err := a.svc.AccountToken(r.Context(), r.PathValue("programId"), r.PathValue("account"))
	return answer(w, http.StatusOK, tokenRecordOf(l), err)
}

func (a *api) revokeToken(w http.ResponseWriter, r *http.Request) error {
	return answer(w, http.StatusNoContent, nil, a.svc.RevokeToken(r.Context(), r.PathValue("programId"), r.PathValue("tokenId")))
}

// releaseSession is endSession for the site, as an admin.
func (a *api) releaseSession(w http.ResponseWriter, r *http.Request) error {
	err := a.svc.ReleaseSession(r.Context(), r.PathValue("programId"), r.Header.Get(wire.HeaderAdmissionPass))
	return answer(w, http.StatusNoContent, nil, err)
}

// limitOf reads the limit query parameter: 0 when absent, INVALID_LIMIT
// naming most when not a positive whole number (the service checks most).
func limitOf(r *http.Request, most int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 0, nil
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return n, nil
	}
	return 0, queue.Errorf(queue.KindInvalid, wire.CodeInvalidLimit, "limit must be a whole number between 1 and %d.", most)
}

// writeCounters answers c as a Program with status, or returns err.
func writeCounters(w http.ResponseWriter, r *http.Request, status int, c admission.Counters, err error) error {
	if err != nil {
		return err
	}
	n := metrics.Note(r.Context())
	n.Waiting, n.WaitingKnown = c.Waiting, true
	writeJSON(w, status, programOf(c))
	return nil
}

// mapped is f of each element of s, never nil.
func mapped[S, T any](s []S, f func(S) T) []T {
	out := make([]T, len(s))
	for i, v := range s {
		out[i] = f(v)
	}
	return out
}

// programOf is c as the wire's Program.
func programOf(c admission.Counters) wire.Program {
	view := wire.Program{
		ProgramID:              c.ProgramID,
		Issued:                 c.Issued,
		Admitted:               c.Admitted,
		Waiting:                c.Waiting,
		AdmissionRatePerSecond: c.Rate,
		Paused:                 c.Paused,
		Closed:                 c.Closed,
		AdmissionWindowSeconds: int64(c.AdmissionWindow / time.Second),
		CreatedAt:              wire.TimeOf(c.CreatedAt),
		PollingPolicy:          c.Policy,
		EffectiveAt:            wire.TimeOf(c.EffectiveAt),
		OpensAt:                wire.TimeOf(c.OpensAt),
		ClosesAt:               wire.TimeOf(c.ClosesAt),
		ShuffleAtOpen:          c.Shuffle,
		MaxWaiting:             c.MaxWaiting,
		MaxActiveUsers:         c.MaxActiveUsers,
		NoShowSeconds:          c.NoShowSeconds,
		ChallengeBits:          c.ChallengeBits,
		PushLeadSeconds:        c.PushLeadSeconds,
		EnqueueJWKSURL:         c.Enqueue.JWKSURL,
		EnqueueIssuer:          c.Enqueue.Issuer,
		RequireEnqueueToken:    c.Enqueue.Required,
		ShuffleCommitment:      c.ShuffleCommitment,
		BypassHeld:             c.BypassHeld,
		Edge: wire.Edge{EdgeMode: c.Edge.Mode, EdgePaths: c.Edge.Paths, EdgeSessionSeconds: c.Edge.SessionSeconds,
			FailOpenUntil: wire.TimeOf(c.Edge.FailOpenUntil)},
		Profile: profileOf(c.Profile),
	}
	if c.PrequeueFixed {
		view.Prequeue = &c.Prequeue
	}
	if c.Followed {
		view.Active, view.Ended, view.NoShows = &c.Active, &c.Ended, &c.NoShows
		view.TurnoverPerSecond, view.TurnoverSpreadPerSecond, view.TurnoverBoundPerSecond = &c.Turnover, &c.Spread, &c.Bound
		view.HeldBack = &c.HeldBack
	}
	return view
}

// profileOf is p as the wire's Profile.
func profileOf(p settings.Profile) wire.Profile {
	out := wire.Profile{DisplayName: p.DisplayName, Message: p.Message, Notice: p.Notice, TargetURL: p.TargetURL}
	if len(p.Translations) > 0 {
		out.Translations = make(map[string]wire.Texts, len(p.Translations))
		for lang, t := range p.Translations {
			out.Translations[lang] = wire.Texts(t)
		}
	}
	return out
}

// changeOf is c on the wire.
func changeOf(c history.Change) wire.Change {
	out := wire.Change{ChangeID: c.ID, At: wire.TimeOf(c.At), EffectiveAt: wire.TimeOf(c.EffectiveAt), Actor: c.Actor, Action: c.Action}
	if c.EffectiveAt.IsZero() {
		out.EffectiveAt = out.At
	}
	if err := json.Unmarshal(c.Fields, &out.Fields); err != nil || out.Fields == nil {
		out.Fields = map[string]any{}
	}
	return out
}

// tokenRecordOf is l as the wire's TokenRecord: every time it stores, never a pass.
func tokenRecordOf(l queue.Lookup) wire.TokenRecord {
	tok, t := TokenOf(l.View), l.Token
	tok.AdmittedAt, tok.ExpiresAt = wire.TimeOf(t.AdmittedAt), wire.TimeOf(t.AdmissionExpiresAt)
	tok.LeftAt, tok.RevokedAt, tok.MovedAt = wire.TimeOf(t.LeftAt), wire.TimeOf(t.RevokedAt), wire.TimeOf(t.MovedAt)
	tok.AdmissionPass = ""
	return wire.TokenRecord{Token: tok, RetainedUntil: wire.TimeOf(t.ExpiresAt), Account: t.Account}
}
