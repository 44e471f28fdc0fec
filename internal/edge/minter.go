package edge

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/edgekv"
	"github.com/example/waitingroom/internal/edgetoken"
)

// KeysTTL is how long a Minter uses the keys it read before it reads them again.
const KeysTTL = time.Minute

// ErrNoKeys is the error of a Minter when the store holds no keys.
var ErrNoKeys = errors.New("edge: no edge keys are published (rotate them: wrctl edge-keys rotate)")

// Minter mints the edge tokens of admissions with the keys the store
// holds, read at most once a KeysTTL; when a read fails it mints with the
// keys it read last, if any. It is safe for concurrent use.
type Minter struct {
	kv    edgekv.Store
	clock clock.Clock

	mu      sync.Mutex
	keys    edgetoken.Keys
	readAt  time.Time // of the last read, failed or not
	reading bool      // a read is under way: the others mint with the keys they have
}

// NewMinter returns a Minter of the keys in kv, on clk's time.
func NewMinter(kv edgekv.Store, clk clock.Clock) *Minter { return &Minter{kv: kv, clock: clk} }

// EdgeToken returns the token of the admission to programID whose pass
// (a compact JWS of package admissionpass) expires at exp.
func (m *Minter) EdgeToken(ctx context.Context, programID string, exp time.Time, pass string) (string, error) {
	now := m.clock.Now()
	ks, err := m.read(ctx, now)
	if err != nil {
		return "", err
	}
	jti := passJTI(pass)
	if jti == "" {
		return "", errors.New("edge: the admission pass has no jti")
	}
	return ks.Signing(now).Token(programID, exp, jti), nil
}

// read returns the keys, read again once a KeysTTL after the last read
// (failed or not) by one caller while the others use those it has.
func (m *Minter) read(ctx context.Context, now time.Time) (edgetoken.Keys, error) {
	m.mu.Lock()
	if have := m.keys.Current.ID != ""; have && (m.reading || now.Sub(m.readAt) < KeysTTL) {
		defer m.mu.Unlock()
		return m.keys, nil
	}
	m.reading = true
	m.mu.Unlock()
	ks, err := ReadKeys(ctx, m.kv)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reading, m.readAt = false, now
	switch {
	case err == nil && ks.Current.ID != "":
		m.keys = ks
	case m.keys.Current.ID != "":
		// Stale keys still verify at the edge: better than no token.
	case err != nil:
		return ks, err
	default:
		return ks, ErrNoKeys
	}
	return m.keys, nil
}

// passJTI is the jti claim of a compact JWS we signed ("" if it has none).
func passJTI(pass string) string {
	parts := strings.Split(pass, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	var claims struct {
		JTI string `json:"jti"`
	}
	if err != nil || json.Unmarshal(payload, &claims) != nil {
		return ""
	}
	return claims.JTI
}
