package metrics

import (
	"cmp"
	"context"
	"net/http"

	"github.com/felixge/httpsnoop"
)

type requestKey struct{}

// Middleware passes obs one Request per request next answers, with op(r) and what the
// handler set through Note; op runs after next, so r.Pattern is that of next's ServeMux.
func Middleware(obs Observer, op func(r *http.Request) Op) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := &Request{}
			r = r.WithContext(context.WithValue(r.Context(), requestKey{}, rec))
			m := httpsnoop.CaptureMetrics(next, w, r)
			rec.Duration, rec.Method, rec.Status = m.Duration, r.Method, m.Code
			rec.ProgramID = cmp.Or(rec.ProgramID, r.PathValue("programId"))
			rec.Op = cmp.Or(rec.Op, op(r))
			obs.Observe(*rec)
		})
	}
}

// Note returns the Request being recorded for ctx's request, for the handler to fill in;
// outside Middleware, one that nobody reads.
func Note(ctx context.Context) *Request {
	if r, ok := ctx.Value(requestKey{}).(*Request); ok {
		return r
	}
	return &Request{}
}
