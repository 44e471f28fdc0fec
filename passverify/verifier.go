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

	"github.com/example/waitingroom/passverify/jwks"
)

// Defaults of Config's optional fields of the same names.
const (
	DefaultLeeway             = 30 * time.Second
	DefaultFetchTimeout       = 5 * time.Second
	DefaultCacheTTL           = 5 * time.Minute
	DefaultMinCacheTTL        = time.Minute
	DefaultMaxCacheTTL        = 24 * time.Hour
	DefaultMinRefreshInterval = 10 * time.Second
)

// maxPassSize bounds the pass, or the Gate's cookie, that is read.
const maxPassSize = 4096

// Config configures a Verifier; JWKSURL, Issuer and ProgramID are required.
type Config struct {
	JWKSURL   string // the waiting room's JWKS, e.g. https://queue.example.com/.well-known/jwks.json
	Issuer    string // the iss of its passes (by default its API's base URL)
	ProgramID string // the program this site protects: a pass's aud must name it

	// Leeway is how far exp, nbf and iat may be off; a negative value means none.
	Leeway time.Duration
	// HTTPClient fetches the JWKS. Default: a client with a FetchTimeout timeout.
	HTTPClient *http.Client
	// FetchTimeout bounds one JWKS fetch.
	FetchTimeout time.Duration
	// MinCacheTTL and MaxCacheTTL bound how long a fetched JWKS is used:
	// its Cache-Control max-age, or DefaultCacheTTL without one.
	MinCacheTTL, MaxCacheTTL time.Duration
	// MinRefreshInterval is the least time between two fetches for an
	// unknown kid or after a failed fetch.
	MinRefreshInterval time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Verifier checks admission passes against a JWKS that it fetches and
// caches; build one per protected program. It is safe for concurrent use.
type Verifier struct {
	cfg Config // with the defaults filled in

	keys *jwks.Cache // the JWKS's usable keys, and the program's failOpen end in it
}

// New returns a Verifier for cfg; it fetches nothing until the first Verify.
func New(cfg Config) (*Verifier, error) {
	u, err := url.Parse(cfg.JWKSURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("passverify: JWKSURL %q is not an absolute http(s) URL", cfg.JWKSURL)
	}
	if cfg.Issuer == "" || cfg.ProgramID == "" {
		return nil, errors.New("passverify: Issuer and ProgramID are required")
	}
	cfg.Leeway = max(cmp.Or(cfg.Leeway, DefaultLeeway), 0)
	cfg.FetchTimeout = cmp.Or(max(cfg.FetchTimeout, 0), DefaultFetchTimeout)
	cfg.MinCacheTTL = cmp.Or(max(cfg.MinCacheTTL, 0), DefaultMinCacheTTL)
	cfg.MaxCacheTTL = cmp.Or(max(cfg.MaxCacheTTL, 0), DefaultMaxCacheTTL)
	cfg.MinRefreshInterval = cmp.Or(max(cfg.MinRefreshInterval, 0), DefaultMinRefreshInterval)
	if cfg.MaxCacheTTL < cfg.MinCacheTTL {
		return nil, fmt.Errorf("passverify: MaxCacheTTL %v is below MinCacheTTL %v", cfg.MaxCacheTTL, cfg.MinCacheTTL)
	}
	cfg.HTTPClient = cmp.Or(cfg.HTTPClient, &http.Client{Timeout: cfg.FetchTimeout})
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	v := &Verifier{cfg: cfg}
	v.keys = jwks.New(jwks.Config{
		URL: cfg.JWKSURL, Client: cfg.HTTPClient, FetchTimeout: cfg.FetchTimeout, Now: cfg.Now,
		DefaultTTL: DefaultCacheTTL, MinTTL: cfg.MinCacheTTL, MaxTTL: cfg.MaxCacheTTL, MinRefresh: cfg.MinRefreshInterval,
		Usable: usable, Extra: v.failOpenIn,
	})
	return v, nil
}

// FailingOpen reports whether the program's break-glass lets everyone in now,
// and until when, by the failOpen member of the last JWKS fetched (fetched
// again past its max-age, as for a key); with no JWKS ever fetched, it is off.
func (v *Verifier) FailingOpen(ctx context.Context) (until time.Time, ok bool) {
	until, _ = v.keys.Extra(ctx).(time.Time)
	if !v.cfg.Now().Before(until) {
		return time.Time{}, false
	}
	return until, true
}

// ProgramID returns the program the Verifier admits to.
func (v *Verifier) ProgramID() string { return v.cfg.ProgramID }

// Claims are what a valid pass attests.
type Claims struct {
	Issuer     string    // iss
	ProgramID  string    // aud
	TokenID    string    // sub: the queue token that was admitted
	Ticket     int64     // ticket: the token's ticket number
	JTI        string    // jti: unique per pass
	AdmittedAt time.Time // iat and nbf: the admission, to the second
	ExpiresAt  time.Time // exp: the end of the admission window, to the second
	Bypass     bool      // bypass: the admin issued the pass without a place in the queue (Ticket 0)
	Account    string    // acct: the site's account whose place it was, from its enqueue token ("": none)
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
	// ErrCookie is a Gate's cookie not made under one of its CookieSecrets.
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
	Acct   string `json:"acct,omitempty"`
}

// Verify checks that pass is signed with ES256 by a key of the JWKS, for
// the configured issuer and program, and valid now within the leeway. Its
// error matches ErrInvalid and the reason, or ErrKeysUnavailable.
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
	key, err := v.key(ctx, s.KeyID)
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
	return c, s, err
}

// check returns p's Claims if p is for v's issuer and program and valid now;
// a cookie's p has no nbf (its pass was checked at the exchange).
func (v *Verifier) check(p payload) (Claims, error) {
	now := v.cfg.Now()
	late, soon := now.Add(-v.cfg.Leeway), now.Add(v.cfg.Leeway)
	switch {
	case p.Issuer != v.cfg.Issuer:
		return Claims{}, fmt.Errorf("%w: %q", ErrIssuer, p.Issuer)
	case !p.Audience.Contains(v.cfg.ProgramID):
		return Claims{}, fmt.Errorf("%w: %q", ErrAudience, []string(p.Audience))
	case late.After(p.Expiry.Time()):
		return Claims{}, fmt.Errorf("%w: at %v", ErrExpired, p.Expiry.Time().UTC())
	case p.NotBefore != nil && (soon.Before(p.NotBefore.Time()) || soon.Before(p.IssuedAt.Time())):
		return Claims{}, fmt.Errorf("%w: from %v", ErrNotYetValid, p.NotBefore.Time().UTC())
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
		Account:    p.Acct,
	}, nil
}
