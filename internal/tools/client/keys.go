package client

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/example/waitingroom/internal/api"
)

// The admin calls on the keyring of the pass signing keys.
const (
	OpListKeys  Op = "GET keys"
	OpRotateKey Op = "POST keys"
	OpRevokeKey Op = "DELETE key"
)

// Keys lists the keyring's signing keys, newest first, with their states.
// A deployment that signs with fixed keys answers 409 NO_KEYRING.
func (c *Client) Keys(ctx context.Context) (api.SigningKeys, error) {
	var l api.SigningKeys
	_, _, err := c.do(ctx, request{OpListKeys, http.MethodGet, api.KeysPath, nil, nil, []int{http.StatusOK}}, &l)
	return l, err
}

// RotateKey makes a new signing key, published at once, that signs from
// 15 minutes from now. It is not repeated after a 503: the key may have
// been made (Keys tells).
func (c *Client) RotateKey(ctx context.Context) (api.SigningKey, error) {
	var r api.KeyRotation
	_, _, err := c.do(ctx, request{OpRotateKey, http.MethodPost, api.KeysPath, nil, nil, []int{http.StatusCreated}}, &r)
	return r.Key, err
}

// RevokeKey revokes the signing key kid: it leaves the JWKS and signs no
// more; when it was the key that signs, the answer's Replacement signs in
// its place from now. Revoking it again is no error.
func (c *Client) RevokeKey(ctx context.Context, kid string) (api.KeyRevocation, error) {
	var r api.KeyRevocation
	path := strings.Replace(api.KeyPath, "{keyId}", url.PathEscape(kid), 1)
	_, _, err := c.do(ctx, request{OpRevokeKey, http.MethodDelete, path, nil, nil, []int{http.StatusOK}}, &r)
	return r, err
}
