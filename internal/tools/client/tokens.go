package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/example/waitingroom/internal/api"
)

// The admin calls on one token.
const (
	OpGetToken    Op = "GET token"
	OpRevokeToken Op = "DELETE token"
)

// TokenAnswer is a token lookup's answer: the record, and the body as the
// server sent it, including any field this client does not know.
type TokenAnswer struct {
	api.TokenRecord
	Raw json.RawMessage
}

func tokenPath(programID, token string) string {
	return strings.NewReplacer("{programId}", url.PathEscape(programID), "{tokenId}", url.PathEscape(token)).Replace(api.TokenPath)
}

// Token looks up token in programID as an admin: what its holder would be
// told (without the pass), and the times it stores. It records nothing.
func (c *Client) Token(ctx context.Context, programID, token string) (TokenAnswer, error) {
	var t TokenAnswer
	_, raw, err := c.do(ctx, request{OpGetToken, http.MethodGet, tokenPath(programID, token), nil, nil, []int{http.StatusOK}}, &t.TokenRecord)
	if err == nil {
		t.Raw = raw
	}
	return t, err
}

// RevokeToken revokes token in programID: it then reads REVOKED, with no
// place, admission or pass. Revoking it again is no error.
func (c *Client) RevokeToken(ctx context.Context, programID, token string) error {
	_, _, err := c.do(ctx, request{OpRevokeToken, http.MethodDelete, tokenPath(programID, token), nil, nil, []int{http.StatusNoContent}}, nil)
	return err
}
