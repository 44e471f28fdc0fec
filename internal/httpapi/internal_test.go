package httpapi

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
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

// TestRecoverPanics: a panic before anything is written is answered with
// the API's 500; after the handler has written, the answer is left as it
// is (no second status, nothing appended); http.ErrAbortHandler is
// passed on; the request log sees the status that was sent.
func TestRecoverPanics(t *testing.T) {
	var logs bytes.Buffer
	a := newAPI(nil, []Option{WithLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))})
	for _, tc := range []struct {
		name       string
		handler    http.HandlerFunc
		wantStatus int
		wantBody   string
	}{
		{"before writing", func(http.ResponseWriter, *http.Request) { panic("boom") }, 500, `{"code":"INTERNAL","message":"Internal error."}`},
		{"after WriteHeader", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted); panic("boom") }, 202, ""},
		{"after Write", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("partial")); panic("boom") }, 200, "partial"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs.Reset()
			rec := httptest.NewRecorder()
			a.logRequests(a.recoverPanics(tc.handler)).ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
			if body := strings.TrimSpace(rec.Body.String()); rec.Code != tc.wantStatus || body != tc.wantBody {
				t.Errorf("answer %d %q, want %d %q", rec.Code, body, tc.wantStatus, tc.wantBody)
			}
			if want := fmt.Sprintf(`"status":%d`, tc.wantStatus); !strings.Contains(logs.String(), want) {
				t.Errorf("request log without %s: %s", want, logs.String())
			}
		})
	}
	defer func() {
		if v := recover(); v != http.ErrAbortHandler {
			t.Errorf("recovered %v, want http.ErrAbortHandler passed on", v)
		}
	}()
	a.recoverPanics(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })).
		ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil))
}
