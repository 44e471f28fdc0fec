// Package config reads the service's settings from the environment, once
// per cold start, and fails fast with a clear message on a bad value.
package config

import (
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
	EnvTableName       = "TABLE_NAME"
	EnvPollTiers       = "POLL_TIERS"
	EnvPollPolicy      = "POLL_POLICY"
	EnvPollETA         = "POLL_ETA"
	EnvPollSteady      = "POLL_STEADY"
	EnvProgramCacheTTL = "PROGRAM_CACHE_TTL"
	EnvDynamoEndpoint  = "DYNAMODB_ENDPOINT"
	EnvLogLevel        = "LOG_LEVEL"
	// EnvMetricsNamespace is the CloudWatch namespace of the functions'
	// metrics (template parameter MetricsNamespace).
	EnvMetricsNamespace = "METRICS_NAMESPACE"

	// Admission passes (docs/admission-pass.md): their iss, a local KMS
	// endpoint, and the local server's PEM key files.
	EnvPassIssuer           = "PASS_ISSUER"
	EnvKMSEndpoint          = "KMS_ENDPOINT"
	EnvPassKeyFile          = "PASS_KEY_FILE"
	EnvPassPublishedKeyFile = "PASS_PUBLISHED_KEY_FILE"
	// The signing keyring (docs/design.md, "Pass signing keys"): the
	// symmetric KMS key that wraps its keys, and how long each key signs
	// (a Go duration, 1h to 720h; 24h when unset).
	EnvPassWrapKMSKeyID = "PASS_WRAP_KMS_KEY_ID"
	EnvPassKeyRotation  = "PASS_KEY_ROTATION"
	// EnvShuffleKMSKeyID is the KMS key (RSA_2048) whose signature seeds
	// a shuffled opening: the queue function's, at KMS_ENDPOINT when set.
	EnvShuffleKMSKeyID = "SHUFFLE_KMS_KEY_ID"
	// The proof-of-work challenges' secret: a Secrets Manager secret
	// (template.yaml: ChallengeSecret) read at cold start, at
	// SECRETS_ENDPOINT when set; or, on the local server, the secret
	// itself (at least 32 bytes; random at start when unset).
	EnvChallengeSecretARN = "CHALLENGE_SECRET_ARN"
	EnvSecretsEndpoint    = "SECRETS_ENDPOINT"
	EnvChallengeSecret    = "CHALLENGE_SECRET"

	// EnvPageLogoURL is the logo of the waiting-room page (template
	// parameter PageLogoUrl).
	EnvPageLogoURL = "WAITING_ROOM_LOGO_URL"
)

// Variables lists every environment variable FromEnv reads.
var Variables = []string{EnvTableName, EnvPollTiers, EnvPollPolicy, EnvPollETA, EnvPollSteady, EnvProgramCacheTTL, EnvDynamoEndpoint, EnvLogLevel, EnvMetricsNamespace,
	EnvPassIssuer, EnvPassWrapKMSKeyID, EnvPassKeyRotation, EnvKMSEndpoint, EnvPassKeyFile, EnvPassPublishedKeyFile, EnvShuffleKMSKeyID, EnvPageLogoURL,
	EnvChallengeSecretARN, EnvSecretsEndpoint, EnvChallengeSecret}

// Retired lists the variables FromEnv refuses: they configured what is
// gone (a fixed KMS key that signed each pass), and silently ignoring them
// would sign otherwise than the operator meant.
var Retired = []string{"PASS_KMS_KEY_ID", "PASS_KMS_PUBLISHED_KEY_ID"}

// DefaultProgramCacheTTL is how long a function instance reuses a program
// read on the poll path; MaxProgramCacheTTL bounds what may be configured.
const (
	DefaultProgramCacheTTL = time.Second
	MaxProgramCacheTTL     = 10 * time.Second
)

// Config is the service's configuration.
type Config struct {
	// TableName is the DynamoDB table; required unless RequireTable is false.
	TableName string
	// Tiers is the tiers polling policy (POLL_TIERS, default polling.DefaultTiersSpec).
	Tiers polling.Tiers
	// ETA is the rate-aware policy (POLL_ETA parameters over polling.DefaultETA),
	// falling back to Tiers.
	ETA polling.ETA
	// Steady is the policy for a steady rate (POLL_STEADY parameters over
	// polling.DefaultSteady), falling back to ETA.
	Steady polling.Steady
	// Policies are the polling policies a program may choose by name:
	// polling.Named(Tiers, ETA, Steady).
	Policies polling.Registry
	// Policy is the default polling policy of programs that choose none
	// (POLL_POLICY, one of Policies' names; polling.DefaultName when unset).
	Policy polling.Policy
	// PolicyName is Policy's name.
	PolicyName string
	// ProgramCacheTTL bounds how stale a poll's view of the program may be.
	ProgramCacheTTL time.Duration
	// DynamoEndpoint overrides the DynamoDB endpoint (local DynamoDB APIs).
	DynamoEndpoint string
	// LogLevel is the minimum level logged (LOG_LEVEL: debug, info, warn, error).
	LogLevel slog.Level
	// MetricsNamespace is the CloudWatch namespace of the EMF metrics
	// (METRICS_NAMESPACE, default metrics.DefaultNamespace).
	MetricsNamespace string
	// Pass is how admission passes are signed.
	Pass Pass
	// ShuffleKMSKeyID is the KMS key that signs shuffled openings' seeds
	// (SHUFFLE_KMS_KEY_ID: id, ARN or alias; at Pass.KMSEndpoint).
	ShuffleKMSKeyID string
	// ChallengeSecretARN, SecretsEndpoint and ChallengeSecret: see
	// EnvChallengeSecretARN.
	ChallengeSecretARN, SecretsEndpoint, ChallengeSecret string
	// PageLogoURL is the image above the waiting-room page's title: a path
	// on the API's origin or an https URL (WAITING_ROOM_LOGO_URL); none
	// when empty.
	PageLogoURL string
}

// Pass configures the signing of admission passes: a keyring wrapped by a
// KMS key (AWS), or local PEM key files, or a keyring of the process (the
// local server).
type Pass struct {
	// Issuer is the passes' iss (PASS_ISSUER, an absolute URL); empty
	// means the API's base URL.
	Issuer string
	// WrapKMSKeyID is the symmetric KMS key that wraps the keyring's
	// signing keys (PASS_WRAP_KMS_KEY_ID); KeyRotation how long each signs
	// (PASS_KEY_ROTATION).
	WrapKMSKeyID string
	KeyRotation  time.Duration
	// KMSEndpoint overrides the KMS endpoint (KMS_ENDPOINT: moto_server).
	KMSEndpoint string
	// KeyFile is a PEM P-256 private key that signs (PASS_KEY_FILE);
	// PublishedKeyFile another one only published
	// (PASS_PUBLISHED_KEY_FILE).
	KeyFile, PublishedKeyFile string
}

// FromEnv reads the configuration through getenv (os.Getenv in mains). With
// requireTable, TABLE_NAME must be set.
func FromEnv(getenv func(string) string, requireTable bool) (Config, error) {
	c := Config{
		TableName:        strings.TrimSpace(getenv(EnvTableName)),
		DynamoEndpoint:   strings.TrimSpace(getenv(EnvDynamoEndpoint)),
		ProgramCacheTTL:  DefaultProgramCacheTTL,
		MetricsNamespace: metrics.DefaultNamespace,
		ShuffleKMSKeyID:  strings.TrimSpace(getenv(EnvShuffleKMSKeyID)),

		ChallengeSecretARN: strings.TrimSpace(getenv(EnvChallengeSecretARN)),
		SecretsEndpoint:    strings.TrimSpace(getenv(EnvSecretsEndpoint)),
		ChallengeSecret:    getenv(EnvChallengeSecret),
	}
	var errs []error
	if requireTable && c.TableName == "" {
		errs = append(errs, fmt.Errorf("%s is required", EnvTableName))
	}
	errs = append(errs, c.pollingFromEnv(getenv)...)
	errs = append(errs, c.serviceFromEnv(getenv)...)
	var err error
	c.Pass, err = passFromEnv(getenv)
	if err != nil {
		errs = append(errs, err)
	}
	c.PageLogoURL = strings.TrimSpace(getenv(EnvPageLogoURL))
	if err := waitpage.CheckLogoURL(c.PageLogoURL); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", EnvPageLogoURL, err))
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// pollingFromEnv sets the polling policies and the one chosen from
// POLL_TIERS, POLL_ETA, POLL_STEADY and POLL_POLICY; it returns what is wrong.
func (c *Config) pollingFromEnv(getenv func(string) string) []error {
	var errs []error
	spec := getenv(EnvPollTiers)
	if strings.TrimSpace(spec) == "" {
		spec = polling.DefaultTiersSpec
	}
	tiers, err := polling.ParseTiers(spec)
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", EnvPollTiers, err))
	}
	c.Tiers = tiers
	eta, err := polling.ParseETA(getenv(EnvPollETA))
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", EnvPollETA, err))
	}
	eta.Fallback = tiers
	c.ETA = eta
	steady, err := polling.ParseSteady(getenv(EnvPollSteady))
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", EnvPollSteady, err))
	}
	steady.Fallback = eta
	c.Steady = steady
	c.Policies = polling.Named(tiers, eta, steady)
	c.PolicyName = strings.TrimSpace(getenv(EnvPollPolicy))
	if c.PolicyName == "" {
		c.PolicyName = polling.DefaultName
	}
	if c.Policy, err = c.Policies.Lookup(c.PolicyName); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", EnvPollPolicy, err))
	}
	return errs
}

// serviceFromEnv sets the program cache, the log level, the metrics
// namespace and checks the challenge secret; it returns what is wrong.
func (c *Config) serviceFromEnv(getenv func(string) string) []error {
	var errs []error
	if v := strings.TrimSpace(getenv(EnvProgramCacheTTL)); v != "" {
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %q is not a duration (e.g. 1s, 500ms)", EnvProgramCacheTTL, v))
		case d < 0 || d > MaxProgramCacheTTL:
			errs = append(errs, fmt.Errorf("%s: %s outside [0s, %s]", EnvProgramCacheTTL, d, MaxProgramCacheTTL))
		default:
			c.ProgramCacheTTL = d
		}
	}
	if v := strings.TrimSpace(getenv(EnvLogLevel)); v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not one of debug, info, warn, error", EnvLogLevel, v))
		}
	}
	switch {
	case c.ChallengeSecret != "" && len(c.ChallengeSecret) < challenge.MinSecretLen:
		errs = append(errs, fmt.Errorf("%s: %d bytes, want at least %d", EnvChallengeSecret, len(c.ChallengeSecret), challenge.MinSecretLen))
	case c.ChallengeSecret != "" && c.ChallengeSecretARN != "":
		errs = append(errs, fmt.Errorf("%s and %s: choose one", EnvChallengeSecret, EnvChallengeSecretARN))
	}
	if v := strings.TrimSpace(getenv(EnvMetricsNamespace)); v != "" {
		if err := metrics.ValidNamespace(v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvMetricsNamespace, err))
		}
		c.MetricsNamespace = v
	}
	return errs
}

// Bounds of PASS_KEY_ROTATION.
const (
	MinKeyRotation = time.Hour
	MaxKeyRotation = 30 * 24 * time.Hour
)

// passFromEnv reads the pass settings: a keyring's KMS key and key files
// exclude each other, and a published key file needs a signing one.
func passFromEnv(getenv func(string) string) (Pass, error) {
	p := Pass{
		Issuer:           strings.TrimSpace(getenv(EnvPassIssuer)),
		WrapKMSKeyID:     strings.TrimSpace(getenv(EnvPassWrapKMSKeyID)),
		KMSEndpoint:      strings.TrimSpace(getenv(EnvKMSEndpoint)),
		KeyFile:          strings.TrimSpace(getenv(EnvPassKeyFile)),
		PublishedKeyFile: strings.TrimSpace(getenv(EnvPassPublishedKeyFile)),
	}
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
	return p, errors.Join(errs...)
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
