// Package passverify lets a protected site check the admission passes of
// the waiting room on its own, offline: a pass is an ES256 JWT that the
// waiting room signs when a token is admitted, and this package verifies
// it against the waiting room's JWKS, which it fetches and caches.
//
// A Verifier checks one pass: signature (ES256 only), issuer, audience
// (the program the site protects) and validity (nbf, exp, with a small
// leeway), and returns its Claims. A Gate is net/http middleware built on
// a Verifier: it exchanges a pass brought in the URL (?admissionPass=…)
// for an HttpOnly cookie, a session bound to the pass under the site's
// secret (never the pass itself), lets in requests with a valid cookie,
// and sends the others to the waiting room. With a ReplayGuard
// (MemoryGuard in memory, or package dynamoreplay on DynamoDB) each pass
// can be exchanged once only, so one pass lets one browser in.
//
// The pass is a standard JWT: a site in another language verifies it with
// any JOSE library that takes a JWKS; docs/admission-pass.md in this
// repository lists the claims and the checks.
package passverify
