package httpapi

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	wire "github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/queue"
)

// TestEveryKindHasAStatus: an error kind without a row in statusOf would
// answer 500 for what may be a client's mistake.
func TestEveryKindHasAStatus(t *testing.T) {
	for k := queue.KindInternal; k <= queue.KindUnavailable; k++ {
		if _, ok := statusOf[k]; !ok {
			t.Errorf("kind %d has no HTTP status in statusOf", k)
		}
	}
}

// TestRetryAfterOfUnavailable: a 503 tells the retry delay its error
// carries (a BUSY admin change: until the pending one takes effect),
// rounded up to whole seconds, and the default delay otherwise.
func TestRetryAfterOfUnavailable(t *testing.T) {
	a := &api{log: slog.New(slog.DiscardHandler), unavRetry: 2 * time.Second}
	withDelay := func(d time.Duration) error {
		e := queue.Errorf(queue.KindUnavailable, wire.CodeBusy, "busy")
		e.RetryAfter = d
		return e
	}
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{"default", queue.Errorf(queue.KindUnavailable, wire.CodeUnavailable, "down"), "2"},
		{"the error's delay, rounded up", withDelay(4200 * time.Millisecond), "5"},
		{"at least a second", withDelay(time.Millisecond), "1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			a.writeError(w, httptest.NewRequest(http.MethodPut, "/", nil), tt.err)
			if got := w.Header().Get("Retry-After"); w.Code != http.StatusServiceUnavailable || got != tt.want {
				t.Errorf("status %d, Retry-After %q; want 503, %q", w.Code, got, tt.want)
			}
		})
	}
}
