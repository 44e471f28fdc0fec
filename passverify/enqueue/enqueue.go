// Package enqueue is for sites that let only their signed-in visitors enter a
// program's queue: a site signs each visitor an enqueue token with Sign, sends
// them to the waiting page with it (…/waiting-room/ID#enqueue=TOKEN), whose
// enter carries it as X-Enqueue-Token, and serves JWKS at enqueueJwksUrl.
package enqueue

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// MaxTTL is the longest a token may be valid.
const MaxTTL = 10 * time.Minute

// Sign makes an enqueue token for account on programID, valid for ttl (at most
// 10 min), signed by key (ES256 for *ecdsa.PrivateKey P-256, RS256 for
// *rsa.PrivateKey of at least 2048 bits) under kid.
func Sign(key crypto.Signer, kid, issuer, programID, account string, ttl time.Duration) (string, error) {
	switch {
	case kid == "" || issuer == "" || programID == "" || account == "":
		return "", errors.New("enqueue: kid, issuer, programID and account are required")
	case ttl <= 0 || ttl > MaxTTL:
		return "", fmt.Errorf("enqueue: ttl %v not within (0, %v]", ttl, MaxTTL)
	}
	alg, err := algorithm(key.Public())
	if err != nil {
		return "", err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", fmt.Errorf("enqueue: %w", err)
	}
	now := time.Now()
	return jwt.Signed(signer).Claims(jwt.Claims{
		Issuer: issuer, Audience: jwt.Audience{programID}, Subject: account,
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(ttl)),
	}).Serialize()
}

// JWKS is the JSON Web Key Set a site serves at its enqueueJwksUrl for the
// public keys given by kid (*ecdsa.PublicKey P-256 or *rsa.PublicKey).
func JWKS(keys map[string]crypto.PublicKey) ([]byte, error) {
	var set jose.JSONWebKeySet
	for _, kid := range slices.Sorted(maps.Keys(keys)) {
		alg, err := algorithm(keys[kid])
		if err != nil {
			return nil, fmt.Errorf("%w (kid %q)", err, kid)
		}
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: keys[kid], KeyID: kid, Algorithm: string(alg), Use: "sig"})
	}
	return json.Marshal(set)
}

// algorithm is the signature algorithm of the public key pub.
func algorithm(pub crypto.PublicKey) (jose.SignatureAlgorithm, error) {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P256() {
			return jose.ES256, nil
		}
	case *rsa.PublicKey:
		if k.N.BitLen() >= 2048 {
			return jose.RS256, nil
		}
	}
	return "", fmt.Errorf("enqueue: %T is not a P-256 ECDSA or 2048-bit RSA public key", pub)
}
