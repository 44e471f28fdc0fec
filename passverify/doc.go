// Package passverify lets a protected site check the waiting room's
// admission passes (ES256 JWTs) offline, against the waiting room's JWKS,
// which it fetches and caches.
//
// A Verifier checks one pass and returns its Claims. A Gate is net/http
// middleware that exchanges a pass in the URL (?admissionPass=…) for a
// signed session cookie, lets in requests with a valid cookie and sends the
// others to the waiting room; with a ReplayGuard each pass is exchanged
// once. EndSession tells the waiting room the site is done with a person,
// with the pass a Gate's Exchanged hook kept. docs/admission-pass.md lists
// the claims and the checks.
package passverify
