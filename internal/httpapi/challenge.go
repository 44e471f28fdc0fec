package httpapi

import (
	"net/http"

	wire "github.com/example/waitingroom/internal/api"
)

// challenge hands out a proof-of-work challenge for an enter (200, also
// with bits 0 when the program asks for none; never cached).
func (a *api) challenge(w http.ResponseWriter, r *http.Request) {
	c, err := a.svc.Challenge(r.Context(), r.PathValue("programId"))
	a.answer(w, r, http.StatusOK, wire.Challenge{Challenge: c.Challenge, Bits: c.Bits, ExpiresAt: wire.TimeOf(c.ExpiresAt)}, err)
}
