// Package config reads the service's settings from the environment, once
// per cold start, and fails fast with a clear message on a bad value.
package config

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/challenge"
	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/polling"
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

	// Admission passes (docs/admission-pass.md): their iss, a local KMS
	// endpoint, and the local server's PEM key files.
	EnvPassIssuer           = "PASS_ISSUER"
	EnvKMSEndpoint          = "KMS_ENDPOINT"
	EnvPassKeyFile          = "PASS_KEY_FILE"
	EnvPassPublishedKeyFile = "PASS_PUBLISHED_KEY_FILE"
	// The signing keyring: the symmetric KMS key that wraps its keys, and
	// how long each key signs (whole minutes, 1h to 720h; 24h when unset).
	EnvPassWrapKMSKeyID = "PASS_WRAP_KMS_KEY_ID"
	EnvPassKeyRotation  = "PASS_KEY_ROTATION"
	// EnvShuffleKMSKeyID is the KMS key (RSA_2048) whose signature seeds
	// a shuffled opening: the queue function's, at KMS_ENDPOINT when set.
	EnvShuffleKMSKeyID = "SHUFFLE_KMS_KEY_ID"
	// The proof-of-work challenges' secret: a Secrets Manager secret read
	// at cold start (at SECRETS_ENDPOINT when set); or, locally, the secret
	// itself (at least 32 bytes; random when unset).
	EnvChallengeSecretARN = "CHALLENGE_SECRET_ARN"
	EnvSecretsEndpoint    = "SECRETS_ENDPOINT"
	EnvChallengeSecret    = "CHALLENGE_SECRET"
	EnvPageLogoURL        = "WAITING_ROOM_LOGO_URL"
)

// Variables lists every environment variable FromEnv reads.
var Variables = []string{EnvTableName, EnvPollTiers, EnvPollPolicy, EnvPollETA, EnvPollSteady, EnvProgramCacheTTL, EnvDynamoEndpoint, EnvLogLevel, EnvMetricsNamespace,
	EnvPassIssuer, EnvPassWrapKMSKeyID, EnvPassKeyRotation, EnvKMSEndpoint, EnvPassKeyFile, EnvPassPublishedKeyFile, EnvShuffleKMSKeyID, EnvPageLogoURL,
	EnvChallengeSecretARN, EnvSecretsEndpoint, EnvChallengeSecret}

// Retired lists the variables FromEnv refuses: they configured a fixed
// KMS key that signed each pass, which is gone.
var Retired = []string{"PASS_KMS_KEY_ID", "PASS_KMS_PUBLISHED_KEY_ID"}

// DefaultProgramCacheTTL is how long a function instance reuses a program
// read on the poll path; MaxProgramCacheTTL bounds what may be configured.
const (
	DefaultProgramCacheTTL = time.Second
	MaxProgramCacheTTL     = 10 * time.Second
)

// Config is the service's configuration.
type Config struct {
	TableName string // the DynamoDB table; required with FromEnv's requireTable
	// Tiers, ETA and Steady are the polling policies (POLL_TIERS, POLL_ETA,
	// POLL_STEADY over their defaults), each falling back to the one before;
	// Policies names them for programs to choose.
	Tiers    polling.Tiers
	ETA      polling.ETA
	Steady   polling.Steady
	Policies polling.Registry
	// Policy, named PolicyName, is the default polling policy (POLL_POLICY;
	// polling.DefaultName when unset).
	Policy          polling.Policy
	PolicyName      string
	ProgramCacheTTL time.Duration // how stale a poll's view of the program may be
	DynamoEndpoint  string        // overrides the DynamoDB endpoint
	LogLevel        slog.Level    // LOG_LEVEL: debug, info, warn, error
	// MetricsNamespace is the CloudWatch namespace of the EMF metrics
	// (default metrics.DefaultNamespace).
	MetricsNamespace string
	Pass             Pass
	// ShuffleKMSKeyID is the KMS key that signs shuffled openings' seeds
	// (id, ARN or alias; at Pass.KMSEndpoint).
	ShuffleKMSKeyID string
	// ChallengeSecretARN, SecretsEndpoint and ChallengeSecret: see
	// EnvChallengeSecretARN.
	ChallengeSecretARN, SecretsEndpoint, ChallengeSecret string
	// PageLogoURL is the image above the waiting-room page's title: a path
	// on the API's origin or an https URL; none when empty.
	PageLogoURL string
}

// Pass configures the signing of admission passes: a keyring wrapped by a
// KMS key (AWS), local PEM key files, or a keyring of the process (local).
type Pass struct {
	Issuer       string // an absolute URL; empty means the API's base URL
	WrapKMSKeyID string // the symmetric KMS key that wraps the keyring's keys
	KeyRotation  time.Duration
	KMSEndpoint  string
	// KeyFile is a PEM P-256 private key that signs; PublishedKeyFile
	// another one only published.
	KeyFile, PublishedKeyFile string
}

// Bounds of PASS_KEY_ROTATION.
const (
	MinKeyRotation = time.Hour
	MaxKeyRotation = 30 * 24 * time.Hour
)

// FromEnv reads the configuration through getenv (os.Getenv in mains),
// reporting every bad value at once. With requireTable, TABLE_NAME must be
// set.
func FromEnv(getenv func(string) string, requireTable bool) (Config, error) {
	env := func(name string) string { return strings.TrimSpace(getenv(name)) }
	c := Config{
		TableName:          env(EnvTableName),
		DynamoEndpoint:     env(EnvDynamoEndpoint),
		ProgramCacheTTL:    DefaultProgramCacheTTL,
		MetricsNamespace:   cmp.Or(env(EnvMetricsNamespace), metrics.DefaultNamespace),
		ShuffleKMSKeyID:    env(EnvShuffleKMSKeyID),
		ChallengeSecretARN: env(EnvChallengeSecretARN),
		SecretsEndpoint:    env(EnvSecretsEndpoint),
		ChallengeSecret:    getenv(EnvChallengeSecret),
		PageLogoURL:        env(EnvPageLogoURL),
		PolicyName:         cmp.Or(env(EnvPollPolicy), polling.DefaultName),
		Pass: Pass{
			Issuer:           env(EnvPassIssuer),
			WrapKMSKeyID:     env(EnvPassWrapKMSKeyID),
			KMSEndpoint:      env(EnvKMSEndpoint),
			KeyFile:          env(EnvPassKeyFile),
			PublishedKeyFile: env(EnvPassPublishedKeyFile),
		},
	}
	var errs []error
	check := func(name string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	if requireTable && c.TableName == "" {
		errs = append(errs, fmt.Errorf("%s is required", EnvTableName))
	}

	errs = append(errs, c.readPolling(getenv)...)

	if v := env(EnvProgramCacheTTL); v != "" {
		ttl, err := programCacheTTL(v)
		c.ProgramCacheTTL = ttl
		check(EnvProgramCacheTTL, err)
	}
	if v := env(EnvLogLevel); v != "" && c.LogLevel.UnmarshalText([]byte(v)) != nil {
		errs = append(errs, fmt.Errorf("%s: %q is not one of debug, info, warn, error", EnvLogLevel, v))
	}
	switch {
	case c.ChallengeSecret != "" && len(c.ChallengeSecret) < challenge.MinSecretLen:
		errs = append(errs, fmt.Errorf("%s: %d bytes, want at least %d", EnvChallengeSecret, len(c.ChallengeSecret), challenge.MinSecretLen))
	case c.ChallengeSecret != "" && c.ChallengeSecretARN != "":
		errs = append(errs, fmt.Errorf("%s and %s: choose one", EnvChallengeSecret, EnvChallengeSecretARN))
	}
	check(EnvMetricsNamespace, metrics.ValidNamespace(c.MetricsNamespace))

	errs = append(errs, c.Pass.read(getenv)...)
	check(EnvPageLogoURL, waitpage.CheckLogoURL(c.PageLogoURL))
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// CheckIssuer accepts an issuer for the passes: an absolute https URL
// without credentials, query or fragment (http only for a loopback host,
// the local server).
func CheckIssuer(iss string) error {
	u, err := url.Parse(iss)
	switch {
	case err != nil || u.Host == "" || u.Opaque != "" || strings.ContainsAny(iss, " \t\r\n\\"):
		return fmt.Errorf("%q is not an absolute URL such as https://queue.example.com", iss)
	case u.User != nil || u.RawQuery != "" || strings.Contains(iss, "?") || strings.Contains(iss, "#"):
		return fmt.Errorf("%q must have no credentials, query or fragment", iss)
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && loopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%q must use https (http only for a loopback host)", iss)
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// read sets p.KeyRotation from PASS_KEY_ROTATION and returns what is wrong
// with p and the pass variables.
func (p *Pass) read(getenv func(string) string) []error {
	var errs []error
	if p.Issuer != "" {
		if err := CheckIssuer(p.Issuer); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvPassIssuer, err))
		}
	}
	if v := strings.TrimSpace(getenv(EnvPassKeyRotation)); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < MinKeyRotation || d > MaxKeyRotation || d%time.Minute != 0 {
			errs = append(errs, fmt.Errorf("%s: %q must be whole minutes from %v to %v, such as 24h", EnvPassKeyRotation, v, MinKeyRotation, MaxKeyRotation))
		}
		p.KeyRotation = d
	}
	for _, old := range Retired {
		if getenv(old) != "" {
			errs = append(errs, fmt.Errorf("%s is no longer read: passes are signed by a keyring whose keys the symmetric KMS key %s wraps (docs/operations.md, Upgrade notes)", old, EnvPassWrapKMSKeyID))
		}
	}
	switch {
	case p.WrapKMSKeyID != "" && (p.KeyFile != "" || p.PublishedKeyFile != ""):
		errs = append(errs, fmt.Errorf("%s excludes %s and %s: choose one way to sign", EnvPassWrapKMSKeyID, EnvPassKeyFile, EnvPassPublishedKeyFile))
	case p.PublishedKeyFile != "" && p.KeyFile == "":
		errs = append(errs, fmt.Errorf("%s needs %s (the key that signs)", EnvPassPublishedKeyFile, EnvPassKeyFile))
	}
	if p.KMSEndpoint != "" {
		if u, err := url.Parse(p.KMSEndpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s: %q is not an http(s) URL", EnvKMSEndpoint, p.KMSEndpoint))
		}
	}
	return errs
}

// readPolling sets the polling policies and the default one from POLL_TIERS,
// POLL_ETA, POLL_STEADY and POLL_POLICY, and returns what is wrong.
func (c *Config) readPolling(getenv func(string) string) []error {
	var errs []error
	check := func(name string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	spec := getenv(EnvPollTiers)
	if strings.TrimSpace(spec) == "" {
		spec = polling.DefaultTiersSpec
	}
	var err error
	c.Tiers, err = polling.ParseTiers(spec)
	check(EnvPollTiers, err)
	c.ETA, err = polling.ParseETA(getenv(EnvPollETA))
	check(EnvPollETA, err)
	c.ETA.Fallback = c.Tiers
	c.Steady, err = polling.ParseSteady(getenv(EnvPollSteady))
	check(EnvPollSteady, err)
	c.Steady.Fallback = c.ETA
	c.Policies = polling.Named(c.Tiers, c.ETA, c.Steady)
	c.Policy, err = c.Policies.Lookup(c.PolicyName)
	check(EnvPollPolicy, err)
	return errs
}

// programCacheTTL parses PROGRAM_CACHE_TTL's value v.
func programCacheTTL(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return DefaultProgramCacheTTL, fmt.Errorf("%q is not a duration (e.g. 1s, 500ms)", v)
	case d < 0 || d > MaxProgramCacheTTL:
		return DefaultProgramCacheTTL, fmt.Errorf("%s outside [0s, %s]", d, MaxProgramCacheTTL)
	}
	return d, nil
}
