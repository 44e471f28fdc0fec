// Package config reads the service's settings from the environment, once
// per cold start, and fails fast with a clear message on a bad value.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

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
	EnvProgramCacheTTL = "PROGRAM_CACHE_TTL"
	EnvDynamoEndpoint  = "DYNAMODB_ENDPOINT"
	EnvLogLevel        = "LOG_LEVEL"
	// EnvMetricsNamespace is the CloudWatch namespace of the functions'
	// metrics (template parameter MetricsNamespace).
	EnvMetricsNamespace = "METRICS_NAMESPACE"
	// EnvPageLogoURL is the logo of the waiting-room page (template
	// parameter PageLogoUrl).
	EnvPageLogoURL = "WAITING_ROOM_LOGO_URL"
)

// Variables lists every environment variable FromEnv reads.
var Variables = []string{EnvTableName, EnvPollTiers, EnvPollPolicy, EnvPollETA, EnvProgramCacheTTL, EnvDynamoEndpoint, EnvLogLevel, EnvMetricsNamespace, EnvPageLogoURL}

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
	// Tiers is the seed polling policy (POLL_TIERS, default polling.DefaultTiersSpec).
	Tiers polling.Tiers
	// ETA is the rate-aware policy (POLL_ETA parameters over polling.DefaultETA),
	// falling back to Tiers.
	ETA polling.ETA
	// Policies are the polling policies a program may choose by name:
	// polling.Named(Tiers, ETA).
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
	// PageLogoURL is the image above the waiting-room page's title: a path
	// on the API's origin or an https URL (WAITING_ROOM_LOGO_URL); none
	// when empty.
	PageLogoURL string
}

// FromEnv reads the configuration through getenv (os.Getenv in mains). With
// requireTable, TABLE_NAME must be set.
func FromEnv(getenv func(string) string, requireTable bool) (Config, error) {
	c := Config{
		TableName:        strings.TrimSpace(getenv(EnvTableName)),
		DynamoEndpoint:   strings.TrimSpace(getenv(EnvDynamoEndpoint)),
		ProgramCacheTTL:  DefaultProgramCacheTTL,
		MetricsNamespace: metrics.DefaultNamespace,
	}
	var errs []error
	if requireTable && c.TableName == "" {
		errs = append(errs, fmt.Errorf("%s is required", EnvTableName))
	}
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
	c.Policies = polling.Named(tiers, eta)
	c.PolicyName = strings.TrimSpace(getenv(EnvPollPolicy))
	if c.PolicyName == "" {
		c.PolicyName = polling.DefaultName
	}
	if c.Policy, err = c.Policies.Lookup(c.PolicyName); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", EnvPollPolicy, err))
	}
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
	if v := strings.TrimSpace(getenv(EnvMetricsNamespace)); v != "" {
		if err := metrics.ValidNamespace(v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvMetricsNamespace, err))
		}
		c.MetricsNamespace = v
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
