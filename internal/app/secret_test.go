package app_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/config"
)

const secretARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:challenge-AbCdEf"

// secretsServer serves Secrets Manager's GetSecretValue of secretARN as
// value, and returns that ARN and the server's URL.
func secretsServer(t *testing.T, value string) (arn, endpoint string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ SecretId string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		if r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" || in.SecretId != secretARN {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"ResourceNotFoundException","message":"no such secret"}`))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"ARN": secretARN, "Name": "challenge", "SecretString": value})
	}))
	t.Cleanup(srv.Close)
	return secretARN, srv.URL
}

func TestChallengeSecret(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	long := strings.Repeat("k", 40)
	arn, endpoint := secretsServer(t, long)
	tests := []struct {
		name    string
		cfg     config.Config
		want    string
		wantErr string
	}{
		{"from Secrets Manager", config.Config{ChallengeSecretARN: arn, SecretsEndpoint: endpoint}, long, ""},
		{"unknown secret", config.Config{ChallengeSecretARN: arn + "x", SecretsEndpoint: endpoint}, "", "no such secret"},
		{"given", config.Config{ChallengeSecret: long}, long, ""},
		{"none: random per process", config.Config{}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := app.ChallengeSecret(t.Context(), tt.cfg)
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) || tt.wantErr == "" && err != nil {
				t.Fatalf("err %v, want %q", err, tt.wantErr)
			}
			if string(got) != tt.want {
				t.Errorf("secret %q, want %q", got, tt.want)
			}
		})
	}
	short, endpoint := secretsServer(t, "too short")
	if _, err := app.ChallengeSecret(t.Context(), config.Config{ChallengeSecretARN: short, SecretsEndpoint: endpoint}); err == nil {
		t.Error("a secret of 9 bytes was accepted")
	}
}
