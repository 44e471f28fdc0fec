package config_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/polling"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestFromEnv(t *testing.T) {
	tests := []struct {
		name         string
		vars         map[string]string
		requireTable bool
		wantErr      string // substring; "" for success
		check        func(t *testing.T, c config.Config)
	}{
		{"Defaults", map[string]string{"TABLE_NAME": "q"}, true, "", func(t *testing.T, c config.Config) {
			if c.TableName != "q" || c.Tiers.Spec() != polling.DefaultTiersSpec || c.ProgramCacheTTL != time.Second || c.LogLevel != slog.LevelInfo || c.MetricsInterval != 10*time.Second {
				t.Errorf("%+v", c)
			}
		}},
		{"Custom", map[string]string{"TABLE_NAME": "q", "POLL_TIERS": "50:2s,inf:20s+-2s", "PROGRAM_CACHE_TTL": "250ms", "LOG_LEVEL": "debug", "DYNAMODB_ENDPOINT": "http://127.0.0.1:8000"}, true, "", func(t *testing.T, c config.Config) {
			if c.Tiers.Spec() != "50:2s,inf:20s+-2s" || c.ProgramCacheTTL != 250*time.Millisecond || c.LogLevel != slog.LevelDebug || c.DynamoEndpoint != "http://127.0.0.1:8000" {
				t.Errorf("%+v", c)
			}
		}},
		{"CacheOff", map[string]string{"PROGRAM_CACHE_TTL": "0s"}, false, "", func(t *testing.T, c config.Config) {
			if c.ProgramCacheTTL != 0 {
				t.Errorf("%+v", c)
			}
		}},
		{"ETA", map[string]string{"POLL_POLICY": "eta", "POLL_ETA": "fraction=0.8,cap=2m"}, false, "", func(t *testing.T, c config.Config) {
			eta, ok := c.Policy.(polling.ETA)
			if !ok || c.PolicyName != "eta" || eta.Fraction != 0.8 || eta.Cap != 2*time.Minute || eta.Fallback == nil {
				t.Errorf("%+v", c)
			}
			if _, ok := c.Policies[polling.NameTiers]; !ok {
				t.Error("tiers not selectable per program")
			}
		}},
		{"ErrPolicy", map[string]string{"POLL_POLICY": "fastest"}, false, "POLL_POLICY", nil},
		{"ErrETA", map[string]string{"POLL_ETA": "fraction=2"}, false, "POLL_ETA", nil},
		{"ErrTableMissing", map[string]string{}, true, "TABLE_NAME is required", nil},
		{"ErrBadTiers", map[string]string{"TABLE_NAME": "q", "POLL_TIERS": "100:1s"}, true, "POLL_TIERS", nil},
		{"ErrBadTTL", map[string]string{"TABLE_NAME": "q", "PROGRAM_CACHE_TTL": "soon"}, true, "PROGRAM_CACHE_TTL", nil},
		{"ErrTTLTooLong", map[string]string{"TABLE_NAME": "q", "PROGRAM_CACHE_TTL": "1m"}, true, "outside", nil},
		{"MetricsEachRequest", map[string]string{"METRICS_INTERVAL": "0s"}, false, "", func(t *testing.T, c config.Config) {
			if c.MetricsInterval != 0 {
				t.Errorf("%+v", c)
			}
		}},
		{"ErrMetricsInterval", map[string]string{"METRICS_INTERVAL": "2m"}, false, "METRICS_INTERVAL", nil},
		{"MetricsNamespace", map[string]string{"METRICS_NAMESPACE": "WaitingRoom/prod"}, false, "", func(t *testing.T, c config.Config) {
			if c.MetricsNamespace != "WaitingRoom/prod" {
				t.Errorf("%+v", c)
			}
		}},
		{"PageLogo", map[string]string{"WAITING_ROOM_LOGO_URL": "https://cdn.example.com/logo.svg"}, false, "", func(t *testing.T, c config.Config) {
			if c.PageLogoURL != "https://cdn.example.com/logo.svg" {
				t.Errorf("%+v", c)
			}
		}},
		{"ErrPageLogo", map[string]string{"WAITING_ROOM_LOGO_URL": "http://cdn.example.com/logo.svg"}, false, "WAITING_ROOM_LOGO_URL", nil},
		{"DefaultMetricsNamespace", map[string]string{}, false, "", func(t *testing.T, c config.Config) {
			if c.MetricsNamespace != "WaitingRoom" {
				t.Errorf("%+v", c)
			}
		}},
		{"ErrMetricsNamespace", map[string]string{"METRICS_NAMESPACE": "AWS/Lambda"}, false, "METRICS_NAMESPACE", nil},
		{"ErrPassKMSKeyGone", map[string]string{"PASS_KMS_KEY_ID": "alias/pass"}, false, "PASS_KMS_KEY_ID is no longer read", nil},
		{"ErrPassKMSPublishedGone", map[string]string{"PASS_KMS_PUBLISHED_KEY_ID": "k"}, false, "PASS_KMS_PUBLISHED_KEY_ID is no longer read", nil},
		{"PassFiles", map[string]string{"PASS_KEY_FILE": "next.pem", "PASS_PUBLISHED_KEY_FILE": "prev.pem", "PASS_ISSUER": "http://127.0.0.1:3000"}, false, "", func(t *testing.T, c config.Config) {
			want := config.Pass{Issuer: "http://127.0.0.1:3000", KeyFile: "next.pem", PublishedKeyFile: "prev.pem"}
			if diff := cmp.Diff(want, c.Pass); diff != "" {
				t.Errorf("Pass (-want +got):\n%s", diff)
			}
		}},
		{"PassKeyring", map[string]string{"PASS_WRAP_KMS_KEY_ID": "alias/wrap", "PASS_KEY_ROTATION": "6h"}, false, "", func(t *testing.T, c config.Config) {
			want := config.Pass{WrapKMSKeyID: "alias/wrap", KeyRotation: 6 * time.Hour}
			if diff := cmp.Diff(want, c.Pass); diff != "" {
				t.Errorf("Pass (-want +got):\n%s", diff)
			}
		}},
		{"ErrPassWrapAndFile", map[string]string{"PASS_WRAP_KMS_KEY_ID": "w", "PASS_KEY_FILE": "k.pem"}, false, "choose one way to sign", nil},
		{"ErrPassRotationShort", map[string]string{"PASS_KEY_ROTATION": "30m"}, false, "PASS_KEY_ROTATION", nil},
		{"ErrPassRotationLong", map[string]string{"PASS_KEY_ROTATION": "721h"}, false, "PASS_KEY_ROTATION", nil},
		{"ErrPassRotationWord", map[string]string{"PASS_KEY_ROTATION": "daily"}, false, "PASS_KEY_ROTATION", nil},
		{"ErrPassRotationFraction", map[string]string{"PASS_KEY_ROTATION": "1h0.5ms"}, false, "PASS_KEY_ROTATION", nil},
		{"PassNone", map[string]string{}, false, "", func(t *testing.T, c config.Config) {
			if diff := cmp.Diff(config.Pass{}, c.Pass); diff != "" {
				t.Errorf("Pass (-want +got):\n%s", diff)
			}
		}},
		{"ErrPassPublishedFileAlone", map[string]string{"PASS_PUBLISHED_KEY_FILE": "k.pem"}, false, "PASS_PUBLISHED_KEY_FILE needs PASS_KEY_FILE", nil},
		{"ErrPassIssuerHTTP", map[string]string{"PASS_ISSUER": "http://queue.example.com"}, false, "PASS_ISSUER", nil},
		{"ErrPassIssuerRelative", map[string]string{"PASS_ISSUER": "queue.example.com"}, false, "PASS_ISSUER", nil},
		{"ErrPassIssuerQuery", map[string]string{"PASS_ISSUER": "https://queue.example.com/?a=b"}, false, "PASS_ISSUER", nil},
		{"ErrKMSEndpoint", map[string]string{"KMS_ENDPOINT": "127.0.0.1:5000"}, false, "KMS_ENDPOINT", nil},
		{"ErrLogLevel", map[string]string{"TABLE_NAME": "q", "LOG_LEVEL": "loud"}, true, "LOG_LEVEL", nil},
		{"AllErrorsAtOnce", map[string]string{"POLL_TIERS": "x", "PROGRAM_CACHE_TTL": "y"}, true, "TABLE_NAME", func(t *testing.T, c config.Config) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.FromEnv(env(tt.vars), tt.requireTable)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tt.wantErr)
				}
				if tt.name == "AllErrorsAtOnce" && (!strings.Contains(err.Error(), "POLL_TIERS") || !strings.Contains(err.Error(), "PROGRAM_CACHE_TTL")) {
					t.Errorf("err = %v, want every problem reported", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

// TestVariablesAreRead: the exported list is exactly what FromEnv reads
// (besides the retired ones it refuses), so the template test that relies
// on it cannot drift.
func TestVariablesAreRead(t *testing.T) {
	read := map[string]bool{}
	_, _ = config.FromEnv(func(k string) string { read[k] = true; return "" }, false)
	for _, v := range config.Variables {
		if !read[v] {
			t.Errorf("%s is listed but not read", v)
		}
		delete(read, v)
	}
	for _, v := range config.Retired {
		delete(read, v)
	}
	for v := range read {
		t.Errorf("%s is read but not listed in config.Variables", v)
	}
}
