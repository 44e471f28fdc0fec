package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	wire "github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/catalog"
	"github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/queue"
)

func (a *api) listPrograms(w http.ResponseWriter, r *http.Request) {
	limit, err := limitOf(r, catalog.MaxLimit)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	l, err := a.svc.ListPrograms(r.Context(), r.URL.Query().Get("cursor"), limit)
	body := wire.ProgramList{Programs: make([]wire.Program, len(l.Programs)), NextCursor: l.Next}
	for i, c := range l.Programs {
		body.Programs[i] = programOf(c)
	}
	a.answer(w, r, http.StatusOK, body, err)
}

func (a *api) deleteProgram(w http.ResponseWriter, r *http.Request) {
	a.answer(w, r, http.StatusNoContent, nil, a.svc.DeleteProgram(r.Context(), r.PathValue("programId")))
}

func (a *api) history(w http.ResponseWriter, r *http.Request) {
	limit, err := limitOf(r, history.MaxLimit)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	h, err := a.svc.History(r.Context(), r.PathValue("programId"), r.URL.Query().Get("cursor"), limit)
	body := wire.ChangeList{Changes: make([]wire.Change, len(h.Changes)), NextCursor: h.Next}
	for i, c := range h.Changes {
		body.Changes[i] = changeOf(c)
	}
	a.answer(w, r, http.StatusOK, body, err)
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

// limitOf reads the limit query parameter: 0 when absent, INVALID_LIMIT
// naming most when it is not a positive whole number (the service checks
// the upper bound).
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
