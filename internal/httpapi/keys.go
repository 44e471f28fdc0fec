package httpapi

import (
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/example/waitingroom/internal/admissionpass"
	wire "github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/queue"
)

// The answers of the key routes that are not the keyring's.
var (
	errNoKeyring = queue.Errorf(queue.KindConflict, wire.CodeNoKeyring,
		"Passes are signed with fixed key files (PASS_KEY_FILE), not with a keyring: there are no keys to list, rotate or revoke; a fixed key is rotated by a restart.")
	errInvalidKeyID = queue.Errorf(queue.KindInvalid, wire.CodeInvalidKeyID,
		"The key id must be a keyId as the key list shows it: 43 characters of A-Z, a-z, 0-9, '-' and '_'.")
	errKeyNotFound = queue.Errorf(queue.KindNotFound, wire.CodeKeyNotFound, "No signing key has this id.")
)

// keysError is err, of the keyring, as a 503 worth a retry; the cause goes to the log only.
func keysError(err error) error {
	return &queue.Error{Kind: queue.KindUnavailable, Code: wire.CodeKeysUnavailable, Message: "The signing keys are briefly unavailable; retry shortly.", Err: err}
}

// withKeyring serves a key route with serve, or answers 409 NO_KEYRING with fixed keys.
func withKeyring(serve func(*api, http.ResponseWriter, *http.Request) error) func(*api, http.ResponseWriter, *http.Request) error {
	return func(a *api, w http.ResponseWriter, r *http.Request) error {
		if a.keys == nil {
			return errNoKeyring
		}
		return serve(a, w, r)
	}
}

// listKeys answers every key of the keyring, newest first, with its state.
func (a *api) listKeys(w http.ResponseWriter, r *http.Request) error {
	keys, err := a.keys.Keys(r.Context())
	if err != nil {
		return keysError(err)
	}
	body := wire.SigningKeys{RotationSeconds: int64(a.keys.Rotation() / time.Second), Keys: make([]wire.SigningKey, len(keys))}
	for i, k := range keys {
		body.Keys[i] = signingKeyOf(k.StoredKey, wire.KeyState(k.State))
	}
	return answer(w, http.StatusOK, body, nil)
}

// rotateKey makes a key that signs a lead from now: 201 with the key, next until then.
func (a *api) rotateKey(w http.ResponseWriter, r *http.Request) error {
	k, err := a.keys.Rotate(r.Context())
	if err != nil {
		return keysError(err)
	}
	a.logKeyChange(r, "rotate-key", slog.String("keyId", k.KeyID), slog.Time("signFrom", k.SignFrom))
	return answer(w, http.StatusCreated, wire.KeyRotation{Key: signingKeyOf(k, wire.KeyNext)}, nil)
}

// revokeKey revokes the key keyId: 200 with, when it was the signing key, the key that
// signs in its place from now.
func (a *api) revokeKey(w http.ResponseWriter, r *http.Request) error {
	kid := r.PathValue("keyId")
	if !validKeyID(kid) {
		return errInvalidKeyID
	}
	k, made, err := a.keys.Revoke(r.Context(), kid)
	switch {
	case errors.Is(err, admissionpass.ErrKeyNotFound):
		return errKeyNotFound
	case err != nil: // a retry revokes again and answers which key signs
		return keysError(err)
	}
	body := wire.KeyRevocation{Revoked: kid}
	attrs := []slog.Attr{slog.String("keyId", kid)}
	if made { // it signs from the revocation: now
		rep := signingKeyOf(k, wire.KeySigning)
		body.Replacement = &rep
		attrs = append(attrs, slog.String("replacement", k.KeyID))
	}
	a.logKeyChange(r, "revoke-key", attrs...)
	return answer(w, http.StatusOK, body, nil)
}

// logKeyChange logs a change of the keyring at info level, with its actor.
func (a *api) logKeyChange(r *http.Request, action string, attrs ...slog.Attr) {
	ctx := r.Context()
	a.log.LogAttrs(ctx, slog.LevelInfo, "admin change", append([]slog.Attr{slog.String("action", action),
		slog.String("actor", history.ActorOf(ctx)), slog.String("requestId", requestID(ctx))}, attrs...)...)
}

// signingKeyOf is k, in state, as the wire's SigningKey.
func signingKeyOf(k admissionpass.StoredKey, state wire.KeyState) wire.SigningKey {
	return wire.SigningKey{KeyID: k.KeyID, State: state, SignFrom: wire.TimeOf(k.SignFrom), CreatedAt: wire.TimeOf(k.Created), RevokedAt: wire.TimeOf(k.Revoked)}
}

// validKeyID reports whether kid is a SHA-256 thumbprint in canonical unpadded base64url
// (43 characters: the decoder would skip newlines).
func validKeyID(kid string) bool {
	b, err := base64.RawURLEncoding.Strict().DecodeString(kid)
	return len(kid) == 43 && err == nil && len(b) == 32
}
