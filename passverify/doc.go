// Package passverify lets a protected site check the waiting room's
// admission passes (ES256 JWTs) offline against its cached JWKS: a Verifier
// checks one pass, a Gate is net/http middleware that exchanges a pass for a
// session cookie (and lets everyone in during the program's break-glass,
// which the JWKS lists), and EndSession ends an admission.
// docs/admission-pass.md lists the claims and the checks.
package passverify
