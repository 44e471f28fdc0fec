package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/example/waitingroom/internal/admission"
	wire "github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/edge"
	"github.com/example/waitingroom/internal/edgetoken"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/settings"
)

// WithEdge publishes each program change to the edge gate's store through
// pub; without it (or with nil) the edge routes answer 409 NO_EDGE.
func WithEdge(pub *edge.Publisher) Option { return func(a *api) { a.edge = pub } }

var errNoEdge = queue.Errorf(queue.KindConflict, wire.CodeNoEdge,
	"No edge gate is deployed (template parameter GateOrigin): there are no edge keys to rotate.")

// edgeError is err, of the edge's store, as a 503 worth a retry; the cause goes to the log only.
func edgeError(err error, saved bool) error {
	msg := "The edge gate's store is briefly unavailable; retry shortly."
	if saved {
		msg = "The change is saved, but the edge gate did not get it: send the same request again to publish it."
	}
	return &queue.Error{Kind: queue.KindUnavailable, Code: wire.CodeEdgeUnavailable, Message: msg, Err: err}
}

// publishEdge publishes program c's change (of a deleted program: its ID
// alone) to the edge, when there is one.
func (a *api) publishEdge(ctx context.Context, c admission.Counters) error {
	if a.edge == nil {
		return nil
	}
	if err := a.edge.Changed(ctx, c); err != nil {
		return edgeError(err, true)
	}
	return nil
}

// edgeFits refuses, before it is saved, a change of the program's mode or
// paths after which the gate's routes would not fit in its store.
func (a *api) edgeFits(ctx context.Context, programID string, set wire.ProgramSettings) error {
	if a.edge == nil || set.EdgeMode == nil && set.EdgePaths == nil {
		return nil
	}
	c, err := a.svc.Program(ctx, programID)
	if err != nil && queue.ErrorKind(err) != queue.KindNotFound {
		return err
	}
	c.ProgramID = programID
	e := c.Options
	var seg pace.Segment
	if settings.Apply(wire.ProgramSettings{EdgeMode: set.EdgeMode, EdgePaths: set.EdgePaths}, &e, &seg, nil) != nil {
		return nil // the change's own problem, which PutProgram answers
	}
	switch err := a.edge.Fits(ctx, c, e.Edge); {
	case errors.Is(err, edge.ErrRoutesTooLong):
		return queue.Errorf(queue.KindInvalid, wire.CodeInvalidSettings,
			"edgePaths would put the gate's routes over the 1,024 bytes of its store: guard fewer or shorter paths.")
	case err != nil:
		return edgeError(err, false)
	}
	return nil
}

// edgeKeys answers the edge keys' ids and when each signs from, never their secrets.
func (a *api) edgeKeys(w http.ResponseWriter, r *http.Request) error {
	if a.edge == nil {
		return errNoEdge
	}
	ks, err := a.edge.Keys(r.Context())
	if err != nil {
		return edgeError(err, false)
	}
	return answer(w, http.StatusOK, edgeKeysOf(ks, a.edge.Now()), nil)
}

// rotateEdgeKeys makes a new edge key (with drop: at once, the others dropped): 201 with the keys.
func (a *api) rotateEdgeKeys(w http.ResponseWriter, r *http.Request) error {
	if a.edge == nil {
		return errNoEdge
	}
	var b wire.EdgeRotation
	if err := decodeObject(r, &b); err != nil {
		return err
	}
	ks, err := a.edge.RotateKeys(r.Context(), b.Drop)
	if err != nil {
		return edgeError(err, false)
	}
	a.logKeyChange(r, "rotate-edge-key", slog.String("keyId", ks.Current.ID), slog.Bool("drop", b.Drop))
	return answer(w, http.StatusCreated, edgeKeysOf(ks, a.edge.Now()), nil)
}

// edgeKeysOf is ks at now as the wire's EdgeKeys: ids, states and sign-from instants only.
func edgeKeysOf(ks edgetoken.Keys, now time.Time) wire.EdgeKeys {
	out := wire.EdgeKeys{Keys: []wire.EdgeKey{}}
	signing := ks.Signing(now).ID
	for _, k := range []*edgetoken.Key{&ks.Current, ks.Previous} {
		if k == nil || k.ID == "" {
			continue
		}
		state := "verifying"
		switch {
		case k.ID == signing:
			state = "signing"
		case k == &ks.Current:
			state = "next"
		}
		w := wire.EdgeKey{KeyID: k.ID, State: state}
		if k == &ks.Current && k.From > 0 {
			w.SignsFrom = wire.TimeOf(time.Unix(k.From, 0))
		}
		out.Keys = append(out.Keys, w)
	}
	return out
}
