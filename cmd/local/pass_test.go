package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/testing/kmstest"
	"github.com/example/waitingroom/internal/testing/passtest"
	"github.com/example/waitingroom/internal/tools/localkeys"
)

// admitted walks a new token of program to ADMITTED through the API
// (manual admission) and returns its ADMITTED answer.
func admitted(t *testing.T, base, secret, program string) map[string]any {
	t.Helper()
	admin := base + "/api/v1/admin/programs/" + program
	queue := base + "/api/v1/queues/programs/" + program
	if code, body := call(t, "PUT", admin, "", secret, `{"admissionRatePerSecond": 0}`); code != 201 {
		t.Fatalf("create %s: %d %v", program, code, body)
	}
	code, body := call(t, "POST", queue, "", "", "")
	if code != 201 || body["status"] != "WAITING" {
		t.Fatalf("enter %s: %d %v", program, code, body)
	}
	token := body["tokenId"].(string)
	if _, ok := body["admissionPass"]; ok {
		t.Errorf("a WAITING answer carries a pass: %v", body)
	}
	if code, body := call(t, "POST", admin+"/admissions", "", secret, `{"count": 1}`); code != 200 {
		t.Fatalf("admit: %d %v", code, body)
	}
	// No program cache (startOut): the next poll sees the admission.
	code, body = call(t, "GET", queue, token, "", "")
	if code != 200 || body["status"] != "ADMITTED" {
		t.Fatalf("poll after the admission: %d %v, want ADMITTED", code, body)
	}
	return body
}

// noRedirects is a client that shows each answer, redirects included.
func noRedirects(jar http.CookieJar) *http.Client {
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, target string, cookie *http.Cookie) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	return send(t, c, req)
}

// send sends req with c and returns the answer and its body, failing t
// on an error.
func send(t *testing.T, c *http.Client, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestLocalAdmissionPass is issue 9's "done when", through the local
// server over real HTTP: a token walked to ADMITTED carries a pass that an
// independent JOSE implementation (jwx) verifies against the published
// JWKS, with the token's claims; the demo site exchanges it for a cookie
// and lets the person in; and no changed or foreign pass ever gets a 200
// from the demo site.
func TestLocalAdmissionPass(t *testing.T) {
	t.Parallel()
	// A key file, so that this test can also sign passes with the
	// server's own key (expired, not yet valid, another issuer).
	key := must(localkeys.Generate())
	keyPEM := must(localkeys.PEM(key))
	keyFile := filepath.Join(t.TempDir(), "pass-key.pem")
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	base, out := startOut(t, map[string]string{"ADMIN_TOKEN": "s3cret"}, "-pass-key", keyFile)
	if want := "admission passes: iss " + base + ", key " + keyFile; !strings.Contains(out.String(), want) {
		t.Errorf("start-up output %q, want %q", out, want)
	}
	if want := "demo site: " + base + "/demo-site/demo"; !strings.Contains(out.String(), want) {
		t.Errorf("start-up output %q, want %q", out, want)
	}
	if code, body := call(t, "GET", base+"/api/v1/admin/programs/demo", "", "s3cret", ""); code != 200 || body["targetUrl"] != base+"/demo-site/demo" {
		t.Errorf("demo program: %d %v, want targetUrl %s/demo-site/demo", code, body, base)
	}

	tok := admitted(t, base, "s3cret", "gala")
	pass, _ := tok["admissionPass"].(string)
	if pass == "" {
		t.Fatalf("ADMITTED answer without an admissionPass: %v", tok)
	}
	again := call2(t, base, "gala", tok["tokenId"].(string))
	if again["admissionPass"] != pass {
		t.Errorf("a later poll answers another pass: the pass is signed once and kept")
	}

	// jwx, against the JWKS the server publishes.
	resp, jwksDoc := get(t, http.DefaultClient, base+"/.well-known/jwks.json", nil)
	if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != "public, max-age=300" || resp.Header.Get("Content-Type") != "application/jwk-set+json" {
		t.Errorf("JWKS: %d Cache-Control %q Content-Type %q", resp.StatusCode, resp.Header.Get("Cache-Control"), resp.Header.Get("Content-Type"))
	}
	set, err := jwk.Parse([]byte(jwksDoc))
	if err != nil {
		t.Fatalf("jwx cannot parse the JWKS: %v: %s", err, jwksDoc)
	}
	parsed, err := jwt.ParseString(pass, jwt.WithKeySet(set), jwt.WithValidate(true), jwt.WithIssuer(base), jwt.WithAudience("gala"))
	if err != nil {
		t.Fatalf("jwx refuses the pass: %v", err)
	}
	msg, err := jws.Parse([]byte(pass))
	if err != nil {
		t.Fatal(err)
	}
	alg, _ := msg.Signatures()[0].ProtectedHeaders().Algorithm()
	type claims struct {
		Alg, Iss, Sub string
		Aud           []string
		Iat, Nbf, Exp time.Time
		Ticket        float64
	}
	got := claims{Alg: alg.String()}
	got.Iss, _ = parsed.Issuer()
	got.Sub, _ = parsed.Subject()
	got.Aud, _ = parsed.Audience()
	got.Iat, _ = parsed.IssuedAt()
	got.Nbf, _ = parsed.NotBefore()
	got.Exp, _ = parsed.Expiration()
	if err := parsed.Get("ticket", &got.Ticket); err != nil {
		t.Error(err)
	}
	admittedAt, _ := time.Parse(time.RFC3339, tok["admittedAt"].(string))
	expiresAt, _ := time.Parse(time.RFC3339, tok["expiresAt"].(string))
	want := claims{
		Alg: "ES256", Iss: base, Sub: tok["tokenId"].(string), Aud: []string{"gala"},
		Iat: admittedAt.Truncate(time.Second), Nbf: admittedAt.Truncate(time.Second), Exp: expiresAt.Truncate(time.Second),
		Ticket: tok["ticket"].(float64),
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("pass claims (-want +got):\n%s", diff)
	}

	// The demo site lets it in: 303 to the clean URL with the cookie,
	// then the page with the ticket.
	site := base + "/demo-site/gala"
	jar, _ := cookiejar.New(nil)
	browser := noRedirects(jar)
	resp, _ = get(t, browser, site+"?admissionPass="+url.QueryEscape(pass)+"&seat=12", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/demo-site/gala?seat=12" {
		t.Fatalf("exchange: %d Location %q, want 303 to /demo-site/gala?seat=12", resp.StatusCode, resp.Header.Get("Location"))
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("exchange set %d cookies, want 1", len(cookies))
	}
	c := cookies[0]
	if c.Value == "" || strings.Contains(c.Value, pass) || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/demo-site/gala" || c.Secure {
		t.Errorf("cookie %+v, want a session (not the pass), HttpOnly, SameSite=Lax, Path=/demo-site/gala, not Secure on loopback http", c)
	}
	for _, h := range []string{"X-Frame-Options", "Content-Security-Policy"} {
		if resp.Header.Get(h) == "" {
			t.Errorf("exchange: no %s: the demo site can be framed", h)
		}
	}
	resp, page := get(t, browser, site+"?seat=12", nil)
	if resp.StatusCode != 200 || !strings.Contains(page, "<strong data-ticket>1</strong>") || !strings.Contains(page, expiresAt.UTC().Format("15:04:05")) {
		t.Errorf("page: %d %s, want 200 with ticket 1 and the end of the window", resp.StatusCode, page)
	}

	// Never a 200 for a changed or foreign pass, in the URL or as the
	// cookie, for a browser that has no valid cookie of its own.
	other := admitted(t, base, "s3cret", "other")["admissionPass"].(string)
	now := time.Now()
	signed := func(iss string, a admissionpass.Admission) string {
		return passtest.IssuePass(t, iss, passtest.Key{Key: key}, a)
	}
	adm := admissionpass.Admission{ProgramID: "gala", TokenID: tok["tokenId"].(string), Ticket: 1, AdmittedAt: now, ExpiresAt: now.Add(10 * time.Minute)}
	expired, notYet := adm, adm
	expired.AdmittedAt, expired.ExpiresAt = now.Add(-20*time.Minute), now.Add(-10*time.Minute)
	notYet.AdmittedAt, notYet.ExpiresAt = now.Add(10*time.Minute), now.Add(20*time.Minute)
	stranger := must(localkeys.FixedIssuer(base, must(localkeys.Generate())))
	foreignSigned := must(stranger.Issue(context.Background(), adm))
	header, payload, sig := splitPass(t, pass)
	otherHeader, otherPayload, otherSig := splitPass(t, other)
	pubDER, err := x509.MarshalPKIXPublicKey(must(key.PublicKey(context.Background())))
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	hs256 := encodeJSON(t, map[string]any{"alg": "HS256", "kid": kidOf(t, header), "typ": "JWT"}) + "." + payload
	mac := hmac.New(sha256.New, pubPEM)
	mac.Write([]byte(hs256))
	hs256 += "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))

	refused := map[string]string{
		"AnotherProgram":        other,
		"TamperedTicket":        header + "." + editClaims(t, payload, func(c map[string]any) { c["ticket"] = 0 }) + "." + sig,
		"OtherMadeGala":         otherHeader + "." + editClaims(t, otherPayload, func(c map[string]any) { c["aud"] = "gala" }) + "." + otherSig,
		"TamperedExpiry":        header + "." + editClaims(t, payload, func(c map[string]any) { c["exp"] = c["exp"].(float64) + 86400 }) + "." + sig,
		"TamperedSignature":     header + "." + payload + "." + flipLast(sig),
		"SignatureOfAnother":    header + "." + payload + "." + otherSig,
		"Expired":               signed(base, expired),
		"NotYetValid":           signed(base, notYet),
		"AnotherIssuer":         signed("https://queue.example.com", adm),
		"ForeignKey":            foreignSigned,
		"ForeignKeyOwnKid":      header + "." + strings.Split(foreignSigned, ".")[1] + "." + strings.Split(foreignSigned, ".")[2],
		"AlgNone":               encodeJSON(t, map[string]any{"alg": "none", "typ": "JWT"}) + "." + payload + ".",
		"AlgNoneKid":            encodeJSON(t, map[string]any{"alg": "none", "kid": kidOf(t, header), "typ": "JWT"}) + "." + payload + ".",
		"HS256WithPublicKey":    hs256,
		"Garbage":               "not-a-pass",
		"Empty":                 "",
		"TwoPassesConcatenated": pass + pass,
	}
	for name, p := range refused {
		t.Run(name, func(t *testing.T) {
			fresh := noRedirects(nil)
			resp, body := get(t, fresh, site+"?admissionPass="+url.QueryEscape(p), nil)
			if resp.StatusCode == 200 || resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/waiting-room/gala" {
				t.Errorf("pass in the URL: %d Location %q %s, want 303 to /waiting-room/gala", resp.StatusCode, resp.Header.Get("Location"), body)
			}
			for _, c := range resp.Cookies() {
				if c.Value != "" {
					t.Errorf("pass in the URL: cookie %s set to a refused pass", c.Name)
				}
			}
			resp, body = get(t, fresh, site, &http.Cookie{Name: "admission_pass", Value: p})
			if resp.StatusCode == 200 || resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/waiting-room/gala" {
				t.Errorf("pass as the cookie: %d Location %q %s, want 303 to /waiting-room/gala", resp.StatusCode, resp.Header.Get("Location"), body)
			}
		})
	}
	// Control: the server's key, the right issuer and program, valid now:
	// let in, so the refusals above are the changes' doing.
	controlJar, _ := cookiejar.New(nil)
	if resp, _ := get(t, &http.Client{Jar: controlJar}, site+"?admissionPass="+url.QueryEscape(signed(base, adm)), nil); resp.StatusCode != 200 {
		t.Errorf("a valid pass signed with the server's key: %d, want 200", resp.StatusCode)
	}
	// Single use: another browser bringing the pass already exchanged.
	if resp, _ := get(t, noRedirects(nil), site+"?admissionPass="+url.QueryEscape(pass), nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a pass already exchanged, from another browser: %d, want 403", resp.StatusCode)
	}
	// The cookie is no bearer copy of the pass: another browser that sets
	// the pass, already used, as its cookie by hand is sent to the
	// waiting room, again and again; the browser that exchanged it stays
	// in.
	for i := range 3 {
		resp, body := get(t, noRedirects(nil), site, &http.Cookie{Name: "admission_pass", Value: pass})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/waiting-room/gala" {
			t.Errorf("the used pass as a hand-made cookie, try %d: %d Location %q %.80s, want 303 to /waiting-room/gala", i, resp.StatusCode, resp.Header.Get("Location"), body)
		}
	}
	if resp, _ := get(t, browser, site, nil); resp.StatusCode != 200 {
		t.Errorf("the browser that exchanged the pass, afterwards: %d, want 200", resp.StatusCode)
	}
	// Made-up programs get no gate (404), and never crowd out a real one.
	for i := range 120 {
		if resp, _ := get(t, noRedirects(nil), base+"/demo-site/made-up-"+strconv.Itoa(i), nil); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("made-up program %d: %d, want 404", i, resp.StatusCode)
		}
	}
	// No pass at all: to the waiting room.
	if resp, _ := get(t, noRedirects(nil), site, nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/waiting-room/gala" {
		t.Errorf("no pass: %d Location %q, want 303 to /waiting-room/gala", resp.StatusCode, resp.Header.Get("Location"))
	}
	// The Done button: the site ends the admission with the pass it kept
	// (DELETE …/session), drops its cookie, and the token reads LEFT.
	if !strings.Contains(page, `action="/demo-site/gala/done"`) {
		t.Errorf("the page has no Done button:\n%s", page)
	}
	u, _ := url.Parse(site)
	kept := jar.Cookies(u) // a copy made before Done
	done := func(fetchSite string) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, site+"/done", nil)
		for _, c := range kept {
			req.AddCookie(c)
		}
		if fetchSite != "" {
			req.Header.Set("Sec-Fetch-Site", fetchSite)
		}
		return req
	}
	if resp, err := browser.Do(done("same-site")); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("Done posted from a sibling origin: %v %v, want 403", resp.StatusCode, err)
	}
	resp, body := send(t, browser, done("same-origin"))
	if resp.StatusCode != 200 || !strings.Contains(body, "has ended") {
		t.Fatalf("Done: %d %s", resp.StatusCode, body)
	}
	if cs := resp.Cookies(); len(cs) != 1 || cs[0].MaxAge >= 0 {
		t.Errorf("Done set cookies %v, want the session cookie deleted", cs)
	}
	if got := call2(t, base, "gala", tok["tokenId"].(string)); got["status"] != "LEFT" {
		t.Errorf("after Done the token reads %v, want LEFT", got)
	}
	// The site stops honouring that session, even with a cookie kept from
	// before.
	var old *http.Cookie
	for _, c := range kept {
		old = c
	}
	if resp, page := get(t, noRedirects(nil), site, old); resp.StatusCode != 200 || strings.Contains(page, "data-ticket") || !strings.Contains(page, "has ended") {
		t.Errorf("the page with a cookie from before Done: %d %s", resp.StatusCode, page)
	}
	// Without a pass the route refuses, with its own code.
	if code, body := call(t, "DELETE", base+"/api/v1/queues/programs/gala/session", "", "", ""); code != 400 || body["code"] != "MISSING_PASS" {
		t.Errorf("no pass: %d %v, want 400 MISSING_PASS", code, body)
	}
}

// call2 polls token of program.
func call2(t *testing.T, base, program, token string) map[string]any {
	t.Helper()
	code, body := call(t, "GET", base+"/api/v1/queues/programs/"+program, token, "", "")
	if code != 200 {
		t.Fatalf("poll: %d %v", code, body)
	}
	return body
}

// must returns v, and panics on err: for steps that cannot fail in a
// working build.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func splitPass(t *testing.T, pass string) (header, payload, sig string) {
	t.Helper()
	parts := strings.Split(pass, ".")
	if len(parts) != 3 {
		t.Fatalf("pass %q is not a compact JWS", pass)
	}
	return parts[0], parts[1], parts[2]
}

func encodeJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// editClaims returns payload with edit applied to its claims.
func editClaims(t *testing.T, payload string, edit func(map[string]any)) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	edit(c)
	return encodeJSON(t, c)
}

func kidOf(t *testing.T, header string) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil {
		t.Fatal(err)
	}
	var h struct{ Kid string }
	if err := json.Unmarshal(b, &h); err != nil || h.Kid == "" {
		t.Fatalf("header %s: no kid (%v)", b, err)
	}
	return h.Kid
}

// flipLast changes the last character of a base64url string to another
// that changes the decoded bytes.
func flipLast(s string) string {
	b, _ := base64.RawURLEncoding.DecodeString(s)
	b[len(b)-1] ^= 0x01
	return base64.RawURLEncoding.EncodeToString(b)
}

// TestLocalKeyringPasses: with PASS_WRAP_KMS_KEY_ID (and KMS_ENDPOINT, here
// moto behind kmstest's proxy, which adds GenerateDataKeyPair), the local
// server signs as the queue function does: with keys KMS made and wrapped,
// one KMS call for any number of passes.
func TestLocalKeyringPasses(t *testing.T) {
	t.Parallel()
	proxy := kmstest.NewProxy(t)
	keyID := kmstest.NewWrapKey(t, kmstest.ClientFor(t, proxy.URL()))
	base, out := startOut(t, map[string]string{"ADMIN_TOKEN": "s3cret", "PASS_WRAP_KMS_KEY_ID": keyID, "KMS_ENDPOINT": proxy.URL()})
	if want := "keyring wrapped by KMS key " + keyID; !strings.Contains(out.String(), want) {
		t.Errorf("start-up output %q, want it to name the %s", out, want)
	}
	before := proxy.Total()
	for _, program := range []string{"gala", "gala-2", "gala-3"} {
		pass := admitted(t, base, "s3cret", program)["admissionPass"].(string)
		jar, _ := cookiejar.New(nil)
		resp, page := get(t, &http.Client{Jar: jar}, base+"/demo-site/"+program+"?admissionPass="+url.QueryEscape(pass), nil)
		if resp.StatusCode != 200 || !strings.Contains(page, "You're in") {
			t.Errorf("demo site with a keyring pass: %d %s", resp.StatusCode, page)
		}
	}
	if got, made := proxy.Total()-before, proxy.Calls("GenerateDataKeyPair"); got != 1 || made != 1 {
		t.Errorf("%d KMS calls (%d GenerateDataKeyPair) for 3 passes, want the one that made the key", got, made)
	}
	if err := run(t.Context(), seams{}, []string{"-addr", "127.0.0.1:0", "-pass-key", "k.pem"}, func(k string) string {
		return map[string]string{"PASS_WRAP_KMS_KEY_ID": keyID}[k]
	}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "choose one") {
		t.Errorf("-pass-key with PASS_WRAP_KMS_KEY_ID: err %v, want a refusal", err)
	}
}
