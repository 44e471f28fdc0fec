package httpapi

import (
	"net/http"

	wire "github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/queue"
)

// getToken answers an admin's lookup of a token: what its holder would be
// told, without the pass, and the times it stores.
func (a *api) getToken(w http.ResponseWriter, r *http.Request) {
	l, err := a.svc.Token(r.Context(), r.PathValue("programId"), r.PathValue("tokenId"))
	a.answer(w, r, http.StatusOK, tokenRecordOf(l), err)
}

// revokeToken revokes a token: from then on it reads REVOKED.
func (a *api) revokeToken(w http.ResponseWriter, r *http.Request) {
	a.answer(w, r, http.StatusNoContent, nil, a.svc.RevokeToken(r.Context(), r.PathValue("programId"), r.PathValue("tokenId")))
}

// tokenRecordOf is l as the wire's TokenRecord: its view, with every time
// the token stores and never a pass.
func tokenRecordOf(l queue.Lookup) wire.TokenRecord {
	tok, t := TokenOf(l.View), l.Token
	tok.AdmittedAt, tok.ExpiresAt = wire.TimeOf(t.AdmittedAt), wire.TimeOf(t.AdmissionExpiresAt)
	tok.LeftAt, tok.RevokedAt = wire.TimeOf(t.LeftAt), wire.TimeOf(t.RevokedAt)
	tok.AdmissionPass = ""
	return wire.TokenRecord{Token: tok, RetainedUntil: wire.TimeOf(t.ExpiresAt)}
}
