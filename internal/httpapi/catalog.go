package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	wire "github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/queue"
)

func (a *api) listPrograms(w http.ResponseWriter, r *http.Request) {
	limit, ok := limitOf(r)
	if !ok {
		a.writeError(w, r, queue.Errorf(queue.KindInvalid, wire.CodeInvalidLimit, "limit must be a whole number between 1 and %d.", queue.MaxProgramsLimit))
		return
	}
	l, err := a.svc.ListPrograms(r.Context(), r.URL.Query().Get("cursor"), limit)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	body := wire.ProgramList{Programs: make([]wire.Program, len(l.Programs)), NextCursor: l.Next}
	for i, c := range l.Programs {
		body.Programs[i] = programOf(c)
	}
	writeJSON(w, http.StatusOK, body)
}

func (a *api) deleteProgram(w http.ResponseWriter, r *http.Request) {
	if err := a.svc.DeleteProgram(r.Context(), r.PathValue("programId")); err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusNoContent, nil)
}

func (a *api) history(w http.ResponseWriter, r *http.Request) {
	limit, ok := limitOf(r)
	if !ok {
		a.writeError(w, r, queue.Errorf(queue.KindInvalid, wire.CodeInvalidLimit, "limit must be a whole number between 1 and %d.", queue.MaxChangesLimit))
		return
	}
	h, err := a.svc.History(r.Context(), r.PathValue("programId"), r.URL.Query().Get("cursor"), limit)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	body := wire.ChangeList{Changes: make([]wire.Change, len(h.Changes)), NextCursor: h.Next}
	for i, c := range h.Changes {
		body.Changes[i] = changeOf(c)
	}
	writeJSON(w, http.StatusOK, body)
}

// changeOf is c on the wire.
func changeOf(c queue.Change) wire.Change {
	out := wire.Change{ChangeID: c.ID, At: wire.TimeOf(c.At), EffectiveAt: wire.TimeOf(c.EffectiveAt), Actor: c.Actor, Action: c.Action}
	if c.EffectiveAt.IsZero() {
		out.EffectiveAt = out.At
	}
	if err := json.Unmarshal(c.Fields, &out.Fields); err != nil || out.Fields == nil {
		out.Fields = map[string]any{}
	}
	return out
}

// limitOf reads the limit query parameter: 0 when absent, false when it
// is not a positive whole number (the service checks its upper bound).
func limitOf(r *http.Request) (int, bool) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 0, true
	}
	n, err := strconv.Atoi(v)
	return n, err == nil && n > 0
}
