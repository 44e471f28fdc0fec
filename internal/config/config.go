// Package config reads the service's settings from the environment, once
// per cold start, and fails fast with a clear message on a bad value.
package config

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/challenge"
	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/settings"
	"github.com/example/waitingroom/internal/waitpage"
)

// Environment variable names, shared by template.yaml and the local server.
const (
	EnvTableName        = "TABLE_NAME"
	EnvPollTiers        = "POLL_TIERS"
	EnvPollPolicy       = "POLL_POLICY"
	EnvPollETA          = "POLL_ETA"
	EnvPollSteady       = "POLL_STEADY"
	EnvProgramCacheTTL  = "PROGRAM_CACHE_TTL"
	EnvDynamoEndpoint   = "DYNAMODB_ENDPOINT"
	EnvLogLevel         = "LOG_LEVEL"
	EnvMetricsNamespace = "METRICS_NAMESPACE"
	EnvMetricsInterval  = "METRICS_INTERVAL"

	// Admission passes: their iss, a local KMS endpoint, and the local server's PEM key files.
	EnvPassIssuer           = "PASS_ISSUER"
	EnvKMSEndpoint          = "KMS_ENDPOINT"
	EnvPassKeyFile          = "PASS_KEY_FILE"
	EnvPassPublishedKeyFile = "PASS_PUBLISHED_KEY_FILE"
	// The signing keyring: the symmetric KMS key that wraps its keys, and how long each signs.
	EnvPassWrapKMSKeyID = "PASS_WRAP_KMS_KEY_ID"
	EnvPassKeyRotation  = "PASS_KEY_ROTATION"
	// EnvShuffleKMSKeyID is the KMS key (RSA_2048) whose signature seeds a shuffled opening.
	EnvShuffleKMSKeyID = "SHUFFLE_KMS_KEY_ID"
	// The challenges' secret: a Secrets Manager secret read at cold start (at SECRETS_ENDPOINT
	// when set); or, locally, the secret itself (random when unset).
	EnvChallengeSecretARN = "CHALLENGE_SECRET_ARN"
	EnvSecretsEndpoint    = "SECRETS_ENDPOINT"
	EnvChallengeSecret    = "CHALLENGE_SECRET"
	EnvPageLogoURL        = "WAITING_ROOM_LOGO_URL"
	// The edge gate's KeyValueStore, and a local emulator's endpoint for it.
	EnvEdgeKVSARN      = "EDGE_KVS_ARN"
	EnvEdgeKVSEndpoint = "EDGE_KVS_ENDPOINT"
	// The VAPID subject (mailto: or https:) of the pushes; unset: no push.
	EnvPushSubject = "PUSH_SUBJECT"
)

// Variables lists every environment variable FromEnv reads.
var Variables = []string{EnvTableName, EnvPollTiers, EnvPollPolicy, EnvPollETA, EnvPollSteady, EnvProgramCacheTTL, EnvDynamoEndpoint, EnvLogLevel, EnvMetricsNamespace, EnvMetricsInterval,
	EnvPassIssuer, EnvPassWrapKMSKeyID, EnvPassKeyRotation, EnvKMSEndpoint, EnvPassKeyFile, EnvPassPublishedKeyFile, EnvShuffleKMSKeyID, EnvPageLogoURL,
	EnvChallengeSecretARN, EnvSecretsEndpoint, EnvChallengeSecret, EnvEdgeKVSARN, EnvEdgeKVSEndpoint, EnvPushSubject}

// Retired lists the variables FromEnv refuses: they configured a fixed KMS key, now gone.
var Retired = []string{"PASS_KMS_KEY_ID", "PASS_KMS_PUBLISHED_KEY_ID"}

// DefaultProgramCacheTTL is how long an instance reuses a program read on the poll path;
// MaxProgramCacheTTL bounds what may be configured.
const (
	DefaultProgramCacheTTL = time.Second
	MaxProgramCacheTTL     = 10 * time.Second
)

// DefaultMetricsInterval is how long an instance aggregates its metrics unless
// METRICS_INTERVAL says otherwise (at most a minute).
const DefaultMetricsInterval = 10 * time.Second

// Config is the service's configuration.
type Config struct {
	TableName string // the DynamoDB table; required with FromEnv's requireTable
	// Tiers, ETA and Steady are the polling policies, each falling back to the one before;
	// Policies names them for programs to choose.
	Tiers    polling.Tiers
	ETA      polling.ETA
	Steady   polling.Steady
	Policies polling.Registry
	// Policy, named PolicyName, is the default polling policy (POLL_POLICY).
	Policy           polling.Policy
	PolicyName       string
	ProgramCacheTTL  time.Duration // how stale a poll's view of the program may be
	DynamoEndpoint   string        // overrides the DynamoDB endpoint
	LogLevel         slog.Level    // LOG_LEVEL: debug, info, warn, error
	MetricsNamespace string        // the CloudWatch namespace of the EMF metrics
	MetricsInterval  time.Duration // how long an instance aggregates its EMF metrics (0: a line per request)
	Pass             Pass
	ShuffleKMSKeyID  string // the KMS key that signs shuffled openings' seeds (at Pass.KMSEndpoint)
	PageLogoURL      string // the image above the waiting-room page's title
	// ChallengeSecretARN, SecretsEndpoint and ChallengeSecret: see EnvChallengeSecretARN.
	ChallengeSecretARN, SecretsEndpoint, ChallengeSecret string
	// EdgeKVSARN is the edge gate's KeyValueStore ("": no gate), at EdgeKVSEndpoint when set.
	EdgeKVSARN, EdgeKVSEndpoint string
	// PushSubject is the contact pushes name to push services ("": no push).
	PushSubject string
}

// Pass configures the signing of admission passes: a keyring wrapped by a
// KMS key (AWS), local PEM key files, or a keyring of the process (local).
type Pass struct {
	Issuer       string // an absolute URL; empty means the API's base URL
	WrapKMSKeyID string // the symmetric KMS key that wraps the keyring's keys
	KeyRotation  time.Duration
	KMSEndpoint  string
	// KeyFile is a PEM P-256 private key that signs; PublishedKeyFile another, only published.
	KeyFile, PublishedKeyFile string
}

// Bounds of PASS_KEY_ROTATION.
const (
	MinKeyRotation = time.Hour
	MaxKeyRotation = 30 * 24 * time.Hour
)

// FromEnv reads the configuration through getenv, reporting every bad value at once; with
// requireTable, TABLE_NAME must be set.
func FromEnv(getenv func(string) string, requireTable bool) (Config, error) {
	env := func(name string) string { return strings.TrimSpace(getenv(name)) }
	c := Config{
		TableName:          env(EnvTableName),
		DynamoEndpoint:     env(EnvDynamoEndpoint),
		ProgramCacheTTL:    DefaultProgramCacheTTL,
		MetricsInterval:    DefaultMetricsInterval,
		MetricsNamespace:   cmp.Or(env(EnvMetricsNamespace), metrics.DefaultNamespace),
		ShuffleKMSKeyID:    env(EnvShuffleKMSKeyID),
		ChallengeSecretARN: env(EnvChallengeSecretARN),
		SecretsEndpoint:    env(EnvSecretsEndpoint),
		ChallengeSecret:    getenv(EnvChallengeSecret),
		PageLogoURL:        env(EnvPageLogoURL),
		EdgeKVSARN:         env(EnvEdgeKVSARN),
		EdgeKVSEndpoint:    env(EnvEdgeKVSEndpoint),
		PushSubject:        env(EnvPushSubject),
		PolicyName:         cmp.Or(env(EnvPollPolicy), polling.DefaultName),
		Pass: Pass{
			Issuer:           env(EnvPassIssuer),
			WrapKMSKeyID:     env(EnvPassWrapKMSKeyID),
			KMSEndpoint:      env(EnvKMSEndpoint),
			KeyFile:          env(EnvPassKeyFile),
			PublishedKeyFile: env(EnvPassPublishedKeyFile),
		},
	}
	var errs problems
	if requireTable && c.TableName == "" {
		errs = append(errs, fmt.Errorf("%s is required", EnvTableName))
	}
	c.readPolling(getenv, &errs)
	var err error
	if v := env(EnvProgramCacheTTL); v != "" {
		c.ProgramCacheTTL, err = boundedDuration(v, DefaultProgramCacheTTL, MaxProgramCacheTTL)
		errs.check(EnvProgramCacheTTL, err)
	}
	if v := env(EnvMetricsInterval); v != "" {
		c.MetricsInterval, err = boundedDuration(v, DefaultMetricsInterval, time.Minute)
		errs.check(EnvMetricsInterval, err)
	}
	if v := env(EnvLogLevel); v != "" && c.LogLevel.UnmarshalText([]byte(v)) != nil {
		errs.check(EnvLogLevel, fmt.Errorf("%q is not one of debug, info, warn, error", v))
	}
	switch {
	case c.ChallengeSecret != "" && len(c.ChallengeSecret) < challenge.MinSecretLen:
		errs.check(EnvChallengeSecret, fmt.Errorf("%d bytes, want at least %d", len(c.ChallengeSecret), challenge.MinSecretLen))
	case c.ChallengeSecret != "" && c.ChallengeSecretARN != "":
		errs = append(errs, fmt.Errorf("%s and %s: choose one", EnvChallengeSecret, EnvChallengeSecretARN))
	}
	errs.check(EnvMetricsNamespace, metrics.ValidNamespace(c.MetricsNamespace))
	c.Pass.read(getenv, &errs)
	errs.check(EnvPageLogoURL, waitpage.CheckLogoURL(c.PageLogoURL))
	if s := c.PushSubject; s != "" && !strings.HasPrefix(s, "mailto:") && !strings.HasPrefix(s, "https://") {
		errs.check(EnvPushSubject, fmt.Errorf("%q must be a mailto: or https: URL (RFC 8292)", s))
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// CheckIssuer accepts an issuer for the passes: an absolute https URL without credentials,
// query or fragment (http only for a loopback host).
func CheckIssuer(iss string) error {
	u, err := url.Parse(iss)
	switch {
	case err != nil || u.Host == "" || u.Opaque != "" || strings.ContainsAny(iss, " \t\r\n\\"):
		return fmt.Errorf("%q is not an absolute URL such as https://queue.example.com", iss)
	case u.User != nil || u.RawQuery != "" || strings.Contains(iss, "?") || strings.Contains(iss, "#"):
		return fmt.Errorf("%q must have no credentials, query or fragment", iss)
	case settings.SecureURL(u):
		return nil
	}
	return fmt.Errorf("%q must use https (http only for a loopback host)", iss)
}

// problems collects what is wrong with the configuration.
type problems []error

// check adds err, if any, as the problem of variable name.
func (p *problems) check(name string, err error) {
	if err != nil {
		*p = append(*p, fmt.Errorf("%s: %w", name, err))
	}
}

// read sets p.KeyRotation from PASS_KEY_ROTATION and adds what is wrong with the pass
// variables to errs.
func (p *Pass) read(getenv func(string) string, errs *problems) {
	if p.Issuer != "" {
		errs.check(EnvPassIssuer, CheckIssuer(p.Issuer))
	}
	if v := strings.TrimSpace(getenv(EnvPassKeyRotation)); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < MinKeyRotation || d > MaxKeyRotation || d%time.Minute != 0 {
			errs.check(EnvPassKeyRotation, fmt.Errorf("%q must be whole minutes from %v to %v, such as 24h", v, MinKeyRotation, MaxKeyRotation))
		}
		p.KeyRotation = d
	}
	for _, old := range Retired {
		if getenv(old) != "" {
			*errs = append(*errs, fmt.Errorf("%s is no longer read: passes are signed by a keyring whose keys the symmetric KMS key %s wraps (docs/operations.md, Upgrade notes)", old, EnvPassWrapKMSKeyID))
		}
	}
	switch {
	case p.WrapKMSKeyID != "" && (p.KeyFile != "" || p.PublishedKeyFile != ""):
		*errs = append(*errs, fmt.Errorf("%s excludes %s and %s: choose one way to sign", EnvPassWrapKMSKeyID, EnvPassKeyFile, EnvPassPublishedKeyFile))
	case p.PublishedKeyFile != "" && p.KeyFile == "":
		*errs = append(*errs, fmt.Errorf("%s needs %s (the key that signs)", EnvPassPublishedKeyFile, EnvPassKeyFile))
	}
	if p.KMSEndpoint != "" {
		if u, err := url.Parse(p.KMSEndpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs.check(EnvKMSEndpoint, fmt.Errorf("%q is not an http(s) URL", p.KMSEndpoint))
		}
	}
}

// readPolling sets the polling policies and the default one from POLL_TIERS, POLL_ETA,
// POLL_STEADY and POLL_POLICY, and adds what is wrong to errs.
func (c *Config) readPolling(getenv func(string) string, errs *problems) {
	spec := getenv(EnvPollTiers)
	if strings.TrimSpace(spec) == "" {
		spec = polling.DefaultTiersSpec
	}
	var err error
	c.Tiers, err = polling.ParseTiers(spec)
	errs.check(EnvPollTiers, err)
	c.ETA, err = polling.ParseETA(getenv(EnvPollETA))
	errs.check(EnvPollETA, err)
	c.ETA.Fallback = c.Tiers
	c.Steady, err = polling.ParseSteady(getenv(EnvPollSteady))
	errs.check(EnvPollSteady, err)
	c.Steady.Fallback = c.ETA
	c.Policies = polling.Named(c.Tiers, c.ETA, c.Steady)
	c.Policy, err = c.Policies.Lookup(c.PolicyName)
	errs.check(EnvPollPolicy, err)
}

// boundedDuration parses v as a duration in [0, most], else returns def and why.
func boundedDuration(v string, def, most time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return def, fmt.Errorf("%q is not a duration (e.g. 1s, 500ms)", v)
	case d < 0 || d > most:
		return def, fmt.Errorf("%s outside [0s, %s]", d, most)
	}
	return d, nil
}
