package passverify

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/example/waitingroom/passverify/jwks"
)

// key returns the key kid, fetching the JWKS when needed and allowed.
func (v *Verifier) key(ctx context.Context, kid string) (any, error) {
	k, err := v.keys.Key(ctx, kid)
	switch {
	case errors.Is(err, jwks.ErrUnknownKey):
		return nil, fmt.Errorf("%w: kid %q", ErrUnknownKey, kid)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrKeysUnavailable, err)
	}
	return k.Key, nil
}

// usable reports whether k can verify ES256.
func usable(k jose.JSONWebKey) bool {
	pub, ok := k.Key.(*ecdsa.PublicKey)
	return ok && pub.Curve == elliptic.P256() &&
		(k.Use == "" || k.Use == "sig") && (k.Algorithm == "" || k.Algorithm == string(jose.ES256))
}

// failOpenIn is the program's break-glass end in a JWKS's failOpen member,
// {"<programId>": "<RFC 3339>", ...}; zero without a valid one (a bad one
// costs the break-glass, not the keys).
func (v *Verifier) failOpenIn(doc []byte) any {
	var set struct {
		FailOpen map[string]string `json:"failOpen"`
	}
	if json.Unmarshal(doc, &set) != nil {
		return time.Time{}
	}
	end, err := time.Parse(time.RFC3339, set.FailOpen[v.cfg.ProgramID])
	if err != nil {
		return time.Time{}
	}
	return end
}
