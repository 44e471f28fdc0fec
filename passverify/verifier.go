package passverify

import (
	"cmp"
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
	cfg  Config // with the defaults filled in
	keys keyCache
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
	cfg.FetchTimeout = positiveOr(cfg.FetchTimeout, DefaultFetchTimeout)
	cfg.MinCacheTTL = positiveOr(cfg.MinCacheTTL, DefaultMinCacheTTL)
	cfg.MaxCacheTTL = positiveOr(cfg.MaxCacheTTL, DefaultMaxCacheTTL)
	cfg.MinRefreshInterval = positiveOr(cfg.MinRefreshInterval, DefaultMinRefreshInterval)
	if cfg.MaxCacheTTL < cfg.MinCacheTTL {
		return nil, fmt.Errorf("passverify: MaxCacheTTL %v is below MinCacheTTL %v", cfg.MaxCacheTTL, cfg.MinCacheTTL)
	}
	cfg.HTTPClient = cmp.Or(cfg.HTTPClient, &http.Client{Timeout: cfg.FetchTimeout})
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	v := &Verifier{cfg: cfg}
	v.keys.cfg = &v.cfg
	return v, nil
}

func positiveOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// ProgramID returns the program the Verifier admits to.
func (v *Verifier) ProgramID() string { return v.cfg.ProgramID }

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
	Bypass bool   `json:"bypass,omitempty"`
}

// Verify checks pass: signed with ES256 by a key of the JWKS, issued by
// the configured issuer for the configured program, and valid now within
// the leeway. Its error matches ErrInvalid (and the reason) for a pass
// that is refused, or ErrKeysUnavailable.
func (v *Verifier) Verify(ctx context.Context, pass string) (Claims, error) {
	c, _, err := v.verify(ctx, pass)
	return c, err
}

// verify is Verify, also returning the session a Gate's cookie holds.
func (v *Verifier) verify(ctx context.Context, pass string) (Claims, session, error) {
	if len(pass) > maxPassSize {
		return Claims{}, session{}, fmt.Errorf("%w: %d bytes", ErrMalformed, len(pass))
	}
	jws, err := jose.ParseSignedCompact(pass, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		if algErr := (*jose.ErrUnexpectedSignatureAlgorithm)(nil); errors.As(err, &algErr) {
			return Claims{}, session{}, fmt.Errorf("%w: alg %q", ErrAlgorithm, algErr.Got)
		}
		return Claims{}, session{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if len(jws.Signatures) != 1 {
		return Claims{}, session{}, fmt.Errorf("%w: %d signatures", ErrMalformed, len(jws.Signatures))
	}
	s := session{KeyID: jws.Signatures[0].Header.KeyID}
	if s.KeyID == "" {
		return Claims{}, session{}, fmt.Errorf("%w: no kid", ErrUnknownKey)
	}
	key, err := v.keys.get(ctx, s.KeyID)
	if err != nil {
		return Claims{}, session{}, err
	}
	raw, err := jws.Verify(key)
	if err != nil {
		return Claims{}, session{}, fmt.Errorf("%w: %v", ErrSignature, err)
	}
	if err := json.Unmarshal(raw, &s.payload); err != nil {
		return Claims{}, session{}, fmt.Errorf("%w: claims: %v", ErrMalformed, err)
	}
	if p := s.payload; p.Issuer == "" || p.Subject == "" || p.ID == "" || len(p.Audience) == 0 ||
		p.Expiry == nil || p.NotBefore == nil || p.IssuedAt == nil || p.Ticket == nil {
		return Claims{}, session{}, fmt.Errorf("%w: want iss, sub, aud, jti, exp, nbf, iat and ticket", ErrMalformed)
	}
	c, err := v.check(s.payload)
	soon := v.cfg.Now().Add(v.cfg.Leeway)
	if err == nil && (soon.Before(s.NotBefore.Time()) || soon.Before(s.IssuedAt.Time())) {
		return Claims{}, session{}, fmt.Errorf("%w: from %v", ErrNotYetValid, s.NotBefore.Time().UTC())
	}
	return c, s, err
}

// check returns p's Claims if p is for v's issuer and program and has not
// expired, with the leeway; p has the claims that verify requires.
func (v *Verifier) check(p payload) (Claims, error) {
	switch {
	case p.Issuer != v.cfg.Issuer:
		return Claims{}, fmt.Errorf("%w: %q", ErrIssuer, p.Issuer)
	case !p.Audience.Contains(v.cfg.ProgramID):
		return Claims{}, fmt.Errorf("%w: %q", ErrAudience, []string(p.Audience))
	case v.cfg.Now().Add(-v.cfg.Leeway).After(p.Expiry.Time()):
		return Claims{}, fmt.Errorf("%w: at %v", ErrExpired, p.Expiry.Time().UTC())
	}
	return Claims{
		Issuer:     p.Issuer,
		ProgramID:  v.cfg.ProgramID,
		TokenID:    p.Subject,
		Ticket:     *p.Ticket,
		JTI:        p.ID,
		AdmittedAt: p.IssuedAt.Time().UTC(),
		ExpiresAt:  p.Expiry.Time().UTC(),
		Bypass:     p.Bypass,
	}, nil
}
