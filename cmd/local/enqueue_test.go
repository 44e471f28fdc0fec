package main

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// fetch GETs (or method) url and returns the status, the Content-Type and the body.
func fetch(t *testing.T, method, url string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// part decodes the base64url JSON of a JWT's header or claims.
func part(t *testing.T, seg string) map[string]any {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(seg)
	var m map[string]any
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		t.Fatalf("JWT part %q: %v", seg, err)
	}
	return m
}

// TestLocalDemoEnqueueTokens: the local server's demo site signs enqueue
// tokens (ES256, its kid in its JWKS on loopback http, for the account and
// program asked, 5 minutes) that the real service accepts: a program with
// the demo site's keys and issuer refuses an enter without one, and the
// account's two enters, as from two devices, answer one token and ticket.
func TestLocalDemoEnqueueTokens(t *testing.T) {
	const secret = "s3cret"
	base, out := startOut(t, map[string]string{"ADMIN_TOKEN": secret})
	jwksURL, issuer := base+"/demo/.well-known/enqueue-jwks.json", base+"/demo"
	if want := "demo site's enqueue tokens: iss " + issuer + ", keys at " + jwksURL; !strings.Contains(out.String(), want) {
		t.Errorf("start-up lacks %q:\n%s", want, out)
	}

	code, ctype, body := fetch(t, "GET", jwksURL)
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal([]byte(body), &set); code != 200 || ctype != "application/jwk-set+json" || err != nil || len(set.Keys) != 1 {
		t.Fatalf("JWKS: %d %s %s (%v); want one key", code, ctype, body, err)
	}
	key := set.Keys[0]
	if _, private := key["d"]; key["kty"] != "EC" || key["crv"] != "P-256" || key["alg"] != "ES256" || private {
		t.Errorf("JWKS key %v; want a public P-256 ES256 key", key)
	}

	token := func(account string) string {
		t.Helper()
		code, ctype, body := fetch(t, "GET", base+"/demo/enqueue-token?program=fans&account="+account)
		if code != 200 || !strings.HasPrefix(ctype, "text/plain") {
			t.Fatalf("enqueue token: %d %s %s", code, ctype, body)
		}
		return strings.TrimSpace(body)
	}
	tok := token("alice")
	segs := strings.Split(tok, ".")
	if len(segs) != 3 {
		t.Fatalf("enqueue token %q is no compact JWS", tok)
	}
	if h := part(t, segs[0]); h["alg"] != "ES256" || h["kid"] != key["kid"] {
		t.Errorf("header %v; want ES256 under the JWKS's kid %v", h, key["kid"])
	}
	c := part(t, segs[1])
	exp, iat := c["exp"].(float64), c["iat"].(float64)
	aud, _ := json.Marshal(c["aud"])
	if c["iss"] != issuer || string(aud) != `"fans"` && string(aud) != `["fans"]` || c["sub"] != "alice" || exp-iat != (5*time.Minute).Seconds() {
		t.Errorf("claims %v; want iss %s, aud fans, sub alice, valid 5 minutes", c, issuer)
	}
	// The demo site sends its visitor to the waiting page with a token in the fragment.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(base + "/demo/enter?program=fans&account=alice")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, found := strings.CutPrefix(resp.Header.Get("Location"), "/waiting-room/fans#enqueue=")
	if resp.StatusCode != http.StatusSeeOther || !found || part(t, strings.Split(loc, ".")[1])["sub"] != "alice" {
		t.Errorf("enter: %d Location %q; want 303 to the waiting page with alice's token", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, tc := range []struct{ method, path string }{
		{"GET", "/demo/enter?program=fans"},
		{"GET", "/demo/enqueue-token?program=fans"},
		{"GET", "/demo/enqueue-token?account=alice"},
		{"POST", "/demo/enqueue-token?program=fans&account=alice"},
		{"GET", "/demo/other"},
	} {
		if code, _, body := fetch(t, tc.method, base+tc.path); code < 400 || code >= 500 {
			t.Errorf("%s %s: %d %s; want a refusal", tc.method, tc.path, code, body)
		}
	}

	// The real service takes the demo site's tokens.
	settings := `{"paused": true, "requireEnqueueToken": true, "enqueueIssuer": "` + issuer + `", "enqueueJwksUrl": "` + jwksURL + `"}`
	if code, body := call(t, "PUT", base+"/api/v1/admin/programs/fans", "", secret, settings); code != 201 || body["enqueueJwksUrl"] != jwksURL {
		t.Fatalf("put fans: %d %v", code, body)
	}
	if code, body := call(t, "POST", base+"/api/v1/queues/programs/fans", "", "", ""); code != 403 || body["code"] != "ENQUEUE_TOKEN_REQUIRED" {
		t.Errorf("enter without a token: %d %v; want 403 ENQUEUE_TOKEN_REQUIRED", code, body)
	}
	enter := func(enqueueToken string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/api/v1/queues/programs/fans", nil)
		req.Header.Set("X-Enqueue-Token", enqueueToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	code1, laptop := enter(tok)
	code2, phone := enter(token("alice"))
	if code1 != 201 || code2 != 200 || laptop["tokenId"] != phone["tokenId"] || laptop["ticket"] != 1.0 || phone["ticket"] != 1.0 {
		t.Errorf("alice's enters: %d %v, then %d %v; want 201 then 200, one token with ticket 1", code1, laptop, code2, phone)
	}
	if code, bob := enter(token("bob")); code != 201 || bob["ticket"] != 2.0 {
		t.Errorf("bob's enter: %d %v; want 201 with ticket 2", code, bob)
	}
	forged, i := []byte(tok), len(segs[0])+len(segs[1])+12 // a character of the signature, changed
	if forged[i] = 'A'; tok[i] == 'A' {
		forged[i] = 'B'
	}
	if code, body := enter(string(forged)); code != 403 || body["code"] != "INVALID_ENQUEUE_TOKEN" {
		t.Errorf("enter with a forged signature: %d %v; want 403 INVALID_ENQUEUE_TOKEN", code, body)
	}
	if code, body := call(t, "GET", base+"/api/v1/admin/programs/fans/accounts/alice", "", secret, ""); code != 200 || body["tokenId"] != laptop["tokenId"] || body["account"] != "alice" {
		t.Errorf("alice's place as an admin sees it: %d %v", code, body)
	}
}
