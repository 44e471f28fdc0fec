package passverify_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/example/waitingroom/passverify"
)

// TestEndSession: the DELETE the waiting room expects, and its answers
// read back: 204 is done, an error body becomes a SessionError.
func TestEndSession(t *testing.T) {
	var got *http.Request
	answer := func(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		answer(w)
	}))
	defer srv.Close()
	if err := passverify.EndSession(t.Context(), srv.Client(), srv.URL+"/", "gala night", "the.pass.jwt"); err != nil {
		t.Fatalf("EndSession: %v", err)
	}
	if got.Method != http.MethodDelete || got.URL.EscapedPath() != "/api/v1/queues/programs/gala%20night/session" || got.Header.Get("X-Admission-Pass") != "the.pass.jwt" {
		t.Errorf("request %s %s, pass %q", got.Method, got.URL.EscapedPath(), got.Header.Get("X-Admission-Pass"))
	}
	for _, tt := range []struct {
		status     int
		body, code string
	}{
		{http.StatusForbidden, `{"code":"PASS_EXPIRED","message":"The admission pass has expired."}`, "PASS_EXPIRED"},
		{http.StatusBadGateway, `<html>bad gateway</html>`, ""},
	} {
		answer = func(w http.ResponseWriter) {
			w.WriteHeader(tt.status)
			_, _ = w.Write([]byte(tt.body))
		}
		err := passverify.EndSession(t.Context(), srv.Client(), srv.URL, "gala", "p")
		var se *passverify.SessionError
		if !errors.As(err, &se) || se.Status != tt.status || se.Code != tt.code {
			t.Errorf("answer %d %s: %v", tt.status, tt.body, err)
		}
	}
}
