package passverify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Defaults of Config's optional fields.
const (
	DefaultLeeway             = 30 * time.Second
	DefaultFetchTimeout       = 5 * time.Second
	DefaultCacheTTL           = 5 * time.Minute
	DefaultMinCacheTTL        = time.Minute
	DefaultMaxCacheTTL        = 24 * time.Hour
	DefaultMinRefreshInterval = 10 * time.Second
)

// maxPassSize bounds the pass a Verifier reads; a real one is under 1 KiB.
const maxPassSize = 4096

// Config configures a Verifier. JWKSURL, Issuer and ProgramID are
// required; the other fields have defaults.
type Config struct {
	// JWKSURL is the waiting room's JWKS, e.g.
	// https://queue.example.com/.well-known/jwks.json.
	JWKSURL string
	// Issuer is the iss the waiting room puts in its passes (by default
	// its API's base URL).
	Issuer string
	// ProgramID is the program this site protects: a pass's aud must
	// name it.
	ProgramID string

	// Leeway is how far exp and nbf may be off, for clock skew.
	// Default DefaultLeeway; a negative value means none.
	Leeway time.Duration
	// HTTPClient fetches the JWKS. Default: a client with a
	// FetchTimeout timeout.
	HTTPClient *http.Client
	// FetchTimeout bounds one JWKS fetch. Default DefaultFetchTimeout.
	FetchTimeout time.Duration
	// MinCacheTTL and MaxCacheTTL bound how long a fetched JWKS is used:
	// its Cache-Control max-age, or DefaultCacheTTL without one, is kept
	// within them. Defaults DefaultMinCacheTTL and DefaultMaxCacheTTL.
	MinCacheTTL, MaxCacheTTL time.Duration
	// MinRefreshInterval is the least time between two fetches that a
	// pass with an unknown kid, or a failed fetch, may start, so that
	// forged kids cannot flood the JWKS. Default
	// DefaultMinRefreshInterval.
	MinRefreshInterval time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Verifier checks admission passes against a JWKS that it fetches and
// caches. It is safe for concurrent use; build one per protected program
// and keep it.
type Verifier struct {
	issuer    string
	programID string
	leeway    time.Duration
	now       func() time.Time
	keys      *keyCache
}

// New returns a Verifier for cfg. It fetches nothing until the first
// Verify.
func New(cfg Config) (*Verifier, error) {
	u, err := url.Parse(cfg.JWKSURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("passverify: JWKSURL %q is not an absolute http(s) URL", cfg.JWKSURL)
	}
	if cfg.Issuer == "" || cfg.ProgramID == "" {
		return nil, errors.New("passverify: Issuer and ProgramID are required")
	}
	switch {
	case cfg.Leeway == 0:
		cfg.Leeway = DefaultLeeway
	case cfg.Leeway < 0:
		cfg.Leeway = 0
	}
	if cfg.FetchTimeout <= 0 {
		cfg.FetchTimeout = DefaultFetchTimeout
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: cfg.FetchTimeout}
	}
	if cfg.MinCacheTTL <= 0 {
		cfg.MinCacheTTL = DefaultMinCacheTTL
	}
	if cfg.MaxCacheTTL <= 0 {
		cfg.MaxCacheTTL = DefaultMaxCacheTTL
	}
	if cfg.MaxCacheTTL < cfg.MinCacheTTL {
		return nil, fmt.Errorf("passverify: MaxCacheTTL %v is below MinCacheTTL %v", cfg.MaxCacheTTL, cfg.MinCacheTTL)
	}
	if cfg.MinRefreshInterval <= 0 {
		cfg.MinRefreshInterval = DefaultMinRefreshInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Verifier{
		issuer:    cfg.Issuer,
		programID: cfg.ProgramID,
		leeway:    cfg.Leeway,
		now:       cfg.Now,
		keys: &keyCache{
			url:             cfg.JWKSURL,
			client:          cfg.HTTPClient,
			fetchTimeout:    cfg.FetchTimeout,
			minTTL:          cfg.MinCacheTTL,
			maxTTL:          cfg.MaxCacheTTL,
			refreshInterval: cfg.MinRefreshInterval,
			now:             cfg.Now,
		},
	}, nil
}

// ProgramID returns the program the Verifier admits to.
func (v *Verifier) ProgramID() string { return v.programID }

// Claims are what a valid pass attests.
type Claims struct {
	Issuer    string // iss
	ProgramID string // aud
	TokenID   string // sub: the queue token that was admitted
	Ticket    int64  // ticket: the token's ticket number
	JTI       string // jti: unique per pass
	// AdmittedAt is the admission (iat and nbf), to the second.
	AdmittedAt time.Time
	// ExpiresAt is the end of the admission window (exp), to the second.
	ExpiresAt time.Time
	// Bypass is the bypass claim: the waiting room's admin issued the
	// pass without a place in the queue (Ticket is then 0).
	Bypass bool
}

// ErrInvalid is matched (errors.Is) by every refusal of a pass itself:
// ErrMalformed, ErrAlgorithm, ErrUnknownKey, ErrSignature, ErrIssuer,
// ErrAudience, ErrExpired, ErrNotYetValid, ErrReplayed, and ErrCookie.
var ErrInvalid = errors.New("passverify: invalid admission pass")

// Reasons for refusing a pass; each matches ErrInvalid.
var (
	ErrMalformed   error = &refusal{"malformed admission pass"}
	ErrAlgorithm   error = &refusal{"admission pass not signed with ES256"}
	ErrUnknownKey  error = &refusal{"admission pass signed with an unknown key"}
	ErrSignature   error = &refusal{"admission pass signature does not verify"}
	ErrIssuer      error = &refusal{"admission pass from another issuer"}
	ErrAudience    error = &refusal{"admission pass for another program"}
	ErrExpired     error = &refusal{"admission pass expired"}
	ErrNotYetValid error = &refusal{"admission pass not valid yet"}
	ErrReplayed    error = &refusal{"admission pass already used"}
	// ErrCookie is a Gate's cookie that the Gate did not make under one
	// of its CookieSecrets: a raw pass, an altered cookie, or garbage.
	ErrCookie error = &refusal{"admission cookie not made by this site"}
)

// ErrKeysUnavailable means the JWKS could not be fetched and no copy of it
// is at hand: the pass could not be checked, which says nothing of it.
var ErrKeysUnavailable = errors.New("passverify: the waiting room's keys are unavailable")

type refusal struct{ msg string }

func (r *refusal) Error() string        { return "passverify: " + r.msg }
func (r *refusal) Is(target error) bool { return target == ErrInvalid }

// payload is a pass's claims as signed.
type payload struct {
	jwt.Claims
	Ticket *int64 `json:"ticket"`
	Bypass bool   `json:"bypass"`
}

// Verify checks pass: signed with ES256 by a key of the JWKS, issued by
// the configured issuer for the configured program, and valid now within
// the leeway. Its error matches ErrInvalid (and the reason) for a pass
// that is refused, or ErrKeysUnavailable.
func (v *Verifier) Verify(ctx context.Context, pass string) (Claims, error) {
	c, _, err := v.verify(ctx, pass)
	return c, err
}

// verify is Verify, also returning the kid of the key that signed pass.
func (v *Verifier) verify(ctx context.Context, pass string) (Claims, string, error) {
	if len(pass) > maxPassSize {
		return Claims{}, "", fmt.Errorf("%w: %d bytes", ErrMalformed, len(pass))
	}
	jws, err := jose.ParseSignedCompact(pass, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		if algErr := (*jose.ErrUnexpectedSignatureAlgorithm)(nil); errors.As(err, &algErr) {
			return Claims{}, "", fmt.Errorf("%w: alg %q", ErrAlgorithm, algErr.Got)
		}
		return Claims{}, "", fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if len(jws.Signatures) != 1 {
		return Claims{}, "", fmt.Errorf("%w: %d signatures", ErrMalformed, len(jws.Signatures))
	}
	kid := jws.Signatures[0].Header.KeyID
	if kid == "" {
		return Claims{}, "", fmt.Errorf("%w: no kid", ErrUnknownKey)
	}
	key, err := v.keys.get(ctx, kid)
	if err != nil {
		return Claims{}, "", err
	}
	raw, err := jws.Verify(key)
	if err != nil {
		return Claims{}, "", fmt.Errorf("%w: %v", ErrSignature, err)
	}
	var p payload
	if err := json.Unmarshal(raw, &p); err != nil {
		return Claims{}, "", fmt.Errorf("%w: claims: %v", ErrMalformed, err)
	}
	if p.Issuer == "" || p.Subject == "" || p.ID == "" || len(p.Audience) == 0 ||
		p.Expiry == nil || p.NotBefore == nil || p.IssuedAt == nil || p.Ticket == nil {
		return Claims{}, "", fmt.Errorf("%w: want iss, sub, aud, jti, exp, nbf, iat and ticket", ErrMalformed)
	}
	err = p.ValidateWithLeeway(jwt.Expected{Issuer: v.issuer, AnyAudience: jwt.Audience{v.programID}, Time: v.now()}, v.leeway)
	switch {
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return Claims{}, "", fmt.Errorf("%w: %q", ErrIssuer, p.Issuer)
	case errors.Is(err, jwt.ErrInvalidAudience):
		return Claims{}, "", fmt.Errorf("%w: %q", ErrAudience, []string(p.Audience))
	case errors.Is(err, jwt.ErrExpired):
		return Claims{}, "", fmt.Errorf("%w: at %v", ErrExpired, p.Expiry.Time().UTC())
	case errors.Is(err, jwt.ErrNotValidYet), errors.Is(err, jwt.ErrIssuedInTheFuture):
		return Claims{}, "", fmt.Errorf("%w: from %v", ErrNotYetValid, p.NotBefore.Time().UTC())
	case err != nil:
		return Claims{}, "", fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return Claims{
		Issuer:     p.Issuer,
		ProgramID:  v.programID,
		TokenID:    p.Subject,
		Ticket:     *p.Ticket,
		JTI:        p.ID,
		AdmittedAt: p.IssuedAt.Time().UTC(),
		ExpiresAt:  p.Expiry.Time().UTC(),
		Bypass:     p.Bypass,
	}, kid, nil
}
