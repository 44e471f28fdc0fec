package metrics

import (
	"context"
	"net/http"

	"github.com/felixge/httpsnoop"
)

type requestKey struct{}

// Middleware observes every request next serves, once it is answered: the
// method, the status, the time taken, the program of the path
// ({programId}), what op says the request was, and whatever the handler
// noted through Note. op is called after next, so that r.Pattern and
// r.PathValue are those of the ServeMux that next is (or wraps without
// copying the request).
func Middleware(obs Observer, op func(r *http.Request) Op) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := &Request{}
			r = r.WithContext(context.WithValue(r.Context(), requestKey{}, rec))
			m := httpsnoop.CaptureMetrics(next, w, r)
			rec.Duration, rec.Method, rec.Status = m.Duration, r.Method, m.Code
			if rec.ProgramID == "" {
				rec.ProgramID = r.PathValue("programId")
			}
			if rec.Op == "" {
				rec.Op = op(r)
			}
			obs.Observe(*rec)
		})
	}
}

// Note returns the Request being recorded for ctx's request, for the
// handler to fill in what only it knows: the error Code, TokenStatus,
// Admitted, RetryAfter, EstimatedWait, Waiting. Outside Middleware it
// returns a Request that nobody reads.
func Note(ctx context.Context) *Request {
	if r, ok := ctx.Value(requestKey{}).(*Request); ok {
		return r
	}
	return &Request{}
}
