package httpapi

import (
	"net/http"
	"time"

	"github.com/example/waitingroom/internal/admission"
	wire "github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/bypass"
	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/settings"
)

// errNoCount answers a body without its count.
var errNoCount = queue.Errorf(queue.KindInvalid, wire.CodeInvalidCount, "count is required.")

func (a *api) getProgram(w http.ResponseWriter, r *http.Request) {
	c, err := a.svc.Program(r.Context(), r.PathValue("programId"))
	a.writeCounters(w, r, http.StatusOK, c, err)
}

func (a *api) putProgram(w http.ResponseWriter, r *http.Request) {
	var b wire.ProgramSettings
	if err := decodeObject(r, &b); err != nil {
		a.writeError(w, r, err)
		return
	}
	c, created, err := a.svc.PutProgram(r.Context(), r.PathValue("programId"), b)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	a.writeCounters(w, r, status, c, err)
}

func (a *api) admit(w http.ResponseWriter, r *http.Request) {
	var b wire.Admission
	if err := decodeObject(r, &b); err != nil {
		a.writeError(w, r, err)
		return
	}
	if b.Count == nil {
		a.writeError(w, r, errNoCount)
		return
	}
	c, err := a.svc.Admit(r.Context(), r.PathValue("programId"), *b.Count)
	a.writeCounters(w, r, http.StatusOK, c, err)
}

// issueBypass answers 200 {"passes": […]}: nothing addressable is
// created, as for an admission.
func (a *api) issueBypass(w http.ResponseWriter, r *http.Request) {
	var b wire.BypassRequest
	if err := decodeObject(r, &b); err != nil {
		a.writeError(w, r, err)
		return
	}
	switch {
	case b.Count == nil:
		a.writeError(w, r, errNoCount)
		return
	case b.ValidSeconds == nil:
		a.writeError(w, r, queue.Errorf(queue.KindInvalid, wire.CodeInvalidValidity, "validSeconds is required."))
		return
	}
	// Kept within a Duration: one second past the bound is as invalid.
	seconds := min(max(*b.ValidSeconds, -1), int64(bypass.MaxValidity/time.Second)+1)
	passes, err := a.svc.IssueBypass(r.Context(), r.PathValue("programId"), *b.Count, time.Duration(seconds)*time.Second)
	metrics.Note(r.Context()).BypassPasses = int64(len(passes))
	a.answer(w, r, http.StatusOK, wire.BypassPasses{Passes: passes}, err)
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
		ShuffleCommitment:      c.ShuffleCommitment,
		BypassHeld:             c.BypassHeld,
		Profile:                profileOf(c.Profile),
	}
	if c.PrequeueFixed {
		view.Prequeue = &c.Prequeue
	}
	if c.Followed {
		view.Active, view.Ended, view.NoShows = &c.Active, &c.Ended, &c.NoShows
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

// writeCounters answers c as a Program with status, or err.
func (a *api) writeCounters(w http.ResponseWriter, r *http.Request, status int, c admission.Counters, err error) {
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	n := metrics.Note(r.Context())
	n.Waiting, n.WaitingKnown = c.Waiting, true
	writeJSON(w, status, programOf(c))
}
