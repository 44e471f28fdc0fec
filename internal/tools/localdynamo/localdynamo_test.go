package localdynamo_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/example/waitingroom/internal/tools/localdynamo"
)

// TestIsMoto: moto_server answers /moto-api/data.json with a JSON object;
// dynalite answers every GET 200 with a plain-text health line, and must
// not pass for moto (it needs no serialising proxy).
func TestIsMoto(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   bool
	}{
		{"moto, empty", 200, `{}`, true},
		{"moto, with data", 200, `{"dynamodb":{"tables":[]}}`, true},
		{"dynalite", 200, "healthy: dynamodb.us-east-1.amazonaws.com ", false},
		{"DynamoDB Local", 400, `{"__type":"com.amazonaws.dynamodb.v20120810#MissingAuthenticationToken"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			if got := localdynamo.IsMoto(t.Context(), srv.URL); got != tc.want {
				t.Errorf("IsMoto = %v, want %v", got, tc.want)
			}
		})
	}
}
