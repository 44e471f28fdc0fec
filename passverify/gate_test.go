package passverify_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/testing/passtest"
	"github.com/example/waitingroom/passverify"
)

// cookieView is what a test checks of a Set-Cookie.
type cookieView struct {
	Name, Value, Path string
	MaxAge            int
	Expires           time.Time
	HttpOnly, Secure  bool
	SameSite          http.SameSite
}

// answer is what a test checks of a Gate's answer.
type answer struct {
	Status   int
	Location string
	Cookies  []cookieView
	Body     string
}

func answerOf(rec *httptest.ResponseRecorder) answer {
	resp := rec.Result()
	a := answer{Status: resp.StatusCode, Location: resp.Header.Get("Location")}
	for _, c := range resp.Cookies() {
		a.Cookies = append(a.Cookies, cookieView{Name: c.Name, Value: c.Value, Path: c.Path, MaxAge: c.MaxAge, Expires: c.Expires.UTC(),
			HttpOnly: c.HttpOnly, Secure: c.Secure, SameSite: c.SameSite})
	}
	if a.Status == http.StatusOK {
		a.Body = rec.Body.String()
	}
	return a
}

// site is the protected handler: it says who came in.
var site = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	c, ok := passverify.FromContext(r.Context())
	if !ok {
		http.Error(w, "no claims", http.StatusInternalServerError)
		return
	}
	fmt.Fprintf(w, "in: %s ticket %d until %s", c.TokenID, c.Ticket, c.ExpiresAt.Format(time.RFC3339))
})

// newSecret returns a random cookie secret.
func newSecret(t *testing.T) []byte {
	t.Helper()
	b := make([]byte, passverify.MinCookieSecretSize)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// serve answers a GET of target by gate, with cookie as its cookie if not
// empty.
func serve(gate *passverify.Gate, target, cookie string) answer {
	r := httptest.NewRequest(http.MethodGet, target, nil)
	if cookie != "" {
		r.AddCookie(&http.Cookie{Name: passverify.DefaultCookieName, Value: cookie})
	}
	rec := httptest.NewRecorder()
	gate.Wrap(site).ServeHTTP(rec, r)
	return answerOf(rec)
}

func TestGate(t *testing.T) {
	room := passtest.NewRoom(t)
	now := passtest.Admission.AdmittedAt.Add(time.Minute) // 10:13:01.456
	clock := passtest.NewClock(now)
	v := room.Verifier(t, clock, nil)
	a := passtest.Admission
	pass := room.Pass(t, a)
	expired := room.Pass(t, admissionpass.Admission{ProgramID: "gala", TokenID: a.TokenID, AdmittedAt: now.Add(-time.Hour), ExpiresAt: now.Add(-time.Minute)})
	secret := newSecret(t)
	otherProgram := room.Pass(t, admissionpass.Admission{ProgramID: "other", TokenID: a.TokenID, AdmittedAt: a.AdmittedAt, ExpiresAt: a.ExpiresAt})
	exp := a.ExpiresAt.Truncate(time.Second) // 10:22:01
	const maxAge = 540                       // 8m59.544s, rounded up

	passCookie := func(secure bool, path string) []cookieView {
		// Value: checked apart, by the entry it gives.
		return []cookieView{{Name: "admission_pass", Path: path, MaxAge: maxAge, Expires: exp, HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode}}
	}
	deleted := []cookieView{{Name: "admission_pass", Path: "/", MaxAge: -1, HttpOnly: true, Secure: true, SameSite: http.SameSiteLaxMode}}
	toRoom := answer{Status: http.StatusSeeOther, Location: passtest.WaitingRoomURL}
	in := answer{Status: http.StatusOK, Body: "in: " + a.TokenID + " ticket 4242 until 2026-05-19T10:22:01Z"}

	tests := []struct {
		name   string
		target string
		cookie string // the pass cookie's value, if any
		config func(*passverify.GateConfig)
		want   answer
	}{
		{"ExchangeKeepsOtherParams", "https://shop.example.com/seats?event=7&" + passverify.Param + "=" + pass + "&row=3&row=4", "", nil,
			answer{Status: http.StatusSeeOther, Location: "/seats?event=7&row=3&row=4", Cookies: passCookie(true, "/")}},
		{"ExchangeOnlyParam", passtest.WithPass("https://shop.example.com/seats/", pass), "", nil,
			answer{Status: http.StatusSeeOther, Location: "/seats/", Cookies: passCookie(true, "/")}},
		{"ExchangeKeepsEncoding", "https://shop.example.com/a%2Fb/seats?q=a%20b&" + passverify.Param + "=" + pass, "", nil,
			answer{Status: http.StatusSeeOther, Location: "/a%2Fb/seats?q=a%20b", Cookies: passCookie(true, "/")}},
		{"ExchangeNoOpenRedirect", "https://shop.example.com//evil.example.com/x?" + passverify.Param + "=" + pass, "", nil,
			answer{Status: http.StatusSeeOther, Location: "/evil.example.com/x", Cookies: passCookie(true, "/")}},
		{"ExchangeOverCookie", passtest.WithPass("https://shop.example.com/", pass), expired, nil,
			answer{Status: http.StatusSeeOther, Location: "/", Cookies: passCookie(true, "/")}},
		{"PlainHTTPLocalhost", passtest.WithPass("http://localhost:8080/seats", pass), "", nil,
			answer{Status: http.StatusSeeOther, Location: "/seats", Cookies: passCookie(false, "/")}},
		{"PlainHTTPLoopbackIPv4", passtest.WithPass("http://127.0.0.1:8080/seats", pass), "", nil,
			answer{Status: http.StatusSeeOther, Location: "/seats", Cookies: passCookie(false, "/")}},
		{"PlainHTTPLoopbackIPv6", passtest.WithPass("http://[::1]:8080/seats", pass), "", nil,
			answer{Status: http.StatusSeeOther, Location: "/seats", Cookies: passCookie(false, "/")}},
		{"PlainHTTPOtherHost", passtest.WithPass("http://shop.example.com/seats", pass), "", nil, // behind a TLS proxy
			answer{Status: http.StatusSeeOther, Location: "/seats", Cookies: passCookie(true, "/")}},
		{"HTTPSLocalhost", passtest.WithPass("https://localhost:8443/seats", pass), "", nil,
			answer{Status: http.StatusSeeOther, Location: "/seats", Cookies: passCookie(true, "/")}},
		{"CookiePath", passtest.WithPass("https://shop.example.com/shop/seats", pass), "", func(c *passverify.GateConfig) { c.CookiePath = "/shop" },
			answer{Status: http.StatusSeeOther, Location: "/shop/seats", Cookies: passCookie(true, "/shop")}},
		{"InvalidPassInQuery", passtest.WithPass("https://shop.example.com/seats", "forged"), "", nil, toRoom},
		{"TamperedPassInQuery", passtest.WithPass("https://shop.example.com/seats", pass[:len(pass)-4]+"AAAA"), "", nil, toRoom},
		{"ExpiredPassInQuery", passtest.WithPass("https://shop.example.com/seats", expired), "", nil, toRoom},
		{"OtherProgramPassInQuery", passtest.WithPass("https://shop.example.com/seats", otherProgram), "", nil, toRoom},
		{"InvalidPassInQueryWithCookie", passtest.WithPass("https://shop.example.com/seats", "forged"), pass, nil, toRoom},
		{"NoPass", "https://shop.example.com/seats", "", nil, toRoom},
		{"NoPassSameOriginRoom", "https://shop.example.com/seats", "", func(c *passverify.GateConfig) { c.WaitingRoomURL = "/waiting-room/gala" },
			answer{Status: http.StatusSeeOther, Location: "/waiting-room/gala"}},
		{"RawPassAsCookie", "https://shop.example.com/seats?row=3", pass, nil,
			answer{Status: http.StatusSeeOther, Location: passtest.WaitingRoomURL, Cookies: deleted}},
		{"GarbageCookie", "https://shop.example.com/seats", "v1.e30.AAAA", nil,
			answer{Status: http.StatusSeeOther, Location: passtest.WaitingRoomURL, Cookies: deleted}},
		{"OtherCookieName", "https://shop.example.com/seats", pass, func(c *passverify.GateConfig) { c.CookieName = "seat_pass" }, toRoom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := passverify.GateConfig{WaitingRoomURL: passtest.WaitingRoomURL, CookieSecrets: [][]byte{secret}}
			if tt.config != nil {
				tt.config(&cfg)
			}
			gate, err := passverify.NewGate(v, cfg)
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest(http.MethodGet, tt.target, nil)
			if tt.cookie != "" {
				r.AddCookie(&http.Cookie{Name: passverify.DefaultCookieName, Value: tt.cookie})
			}
			rec := httptest.NewRecorder()
			gate.Wrap(site).ServeHTTP(rec, r)
			got := answerOf(rec)
			for i, c := range got.Cookies {
				if c.Value == "" {
					continue
				}
				// The cookie is no copy of the pass, and it lets in.
				if strings.Contains(c.Value, pass) || strings.Contains(c.Value, strings.Split(pass, ".")[2]) {
					t.Errorf("cookie %q holds the pass", c.Value)
				}
				if entry := serve(gate, "https://shop.example.com/seats", c.Value); !cmp.Equal(entry, in) {
					t.Errorf("with the cookie of the exchange: %+v, want %+v", entry, in)
				}
				got.Cookies[i].Value = ""
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if tt.want.Status != http.StatusOK && rec.Header().Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control %q on the gate's own answer, want no-store", rec.Header().Get("Cache-Control"))
			}
			if setCookie := rec.Header().Get("Set-Cookie"); setCookie != "" && !strings.Contains(setCookie, "SameSite=Lax") {
				t.Errorf("Set-Cookie %q lacks SameSite=Lax", setCookie)
			}
		})
	}
}

// TestGateCookieRoundTrip: the cookie a browser gets from the exchange
// lets it in.
func TestGateCookieRoundTrip(t *testing.T) {
	room := passtest.NewRoom(t)
	clock := passtest.NewClock(passtest.Admission.AdmittedAt.Add(time.Minute))
	gate, err := passverify.NewGate(room.Verifier(t, clock, nil), passverify.GateConfig{WaitingRoomURL: passtest.WaitingRoomURL, CookieSecrets: [][]byte{newSecret(t)}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gate.Wrap(site))
	defer srv.Close()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Jar: jar}
	resp, err := client.Get(passtest.WithPass(srv.URL+"/seats?row=3", room.Pass(t, passtest.Admission)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.RawQuery != "row=3" {
		t.Errorf("after the exchange: %s at %s, want 200 at ?row=3", resp.Status, resp.Request.URL)
	}
}

func TestGateUnavailable(t *testing.T) {
	room := passtest.NewRoom(t)
	clock := passtest.NewClock(passtest.Admission.AdmittedAt.Add(time.Minute))
	pass := room.Pass(t, passtest.Admission)
	// A cookie made while the JWKS answers, by another instance of the
	// site (the same secret).
	secrets := [][]byte{newSecret(t)}
	other, err := passverify.NewGate(room.Verifier(t, clock, nil), passverify.GateConfig{WaitingRoomURL: passtest.WaitingRoomURL, CookieSecrets: secrets})
	if err != nil {
		t.Fatal(err)
	}
	exchanged := serve(other, passtest.WithPass("https://shop.example.com/", pass), "")
	if len(exchanged.Cookies) != 1 {
		t.Fatalf("exchange: %+v, want a cookie", exchanged)
	}
	room.SetStatus(http.StatusBadGateway)
	gate, err := passverify.NewGate(room.Verifier(t, clock, nil), passverify.GateConfig{WaitingRoomURL: passtest.WaitingRoomURL, CookieSecrets: secrets, ReplayGuard: failingGuard{}})
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, r *http.Request) {
		t.Helper()
		rec := httptest.NewRecorder()
		gate.Wrap(site).ServeHTTP(rec, r)
		got := answerOf(rec)
		if got.Status != http.StatusServiceUnavailable || len(got.Cookies) != 0 || rec.Header().Get("Retry-After") == "" {
			t.Errorf("%s: %+v, Retry-After %q; want 503 with Retry-After and no cookie", name, got, rec.Header().Get("Retry-After"))
		}
	}
	check("pass in query, no JWKS", httptest.NewRequest(http.MethodGet, passtest.WithPass("https://shop.example.com/", pass), nil))
	r := httptest.NewRequest(http.MethodGet, "https://shop.example.com/", nil)
	r.AddCookie(&http.Cookie{Name: passverify.DefaultCookieName, Value: exchanged.Cookies[0].Value})
	check("cookie, no JWKS", r)

	clock.Advance(passverify.DefaultMinRefreshInterval)
	room.SetStatus(http.StatusOK)
	check("pass in query, guard failing", httptest.NewRequest(http.MethodGet, passtest.WithPass("https://shop.example.com/", pass), nil))
}

type failingGuard struct{}

func (failingGuard) FirstUse(context.Context, string, time.Time) (bool, error) {
	return false, errors.New("table unavailable")
}

func TestGateRefusedHook(t *testing.T) {
	room := passtest.NewRoom(t)
	clock := passtest.NewClock(passtest.Admission.AdmittedAt.Add(time.Hour))
	var reasons []error
	gate, err := passverify.NewGate(room.Verifier(t, clock, nil), passverify.GateConfig{
		WaitingRoomURL: passtest.WaitingRoomURL,
		CookieSecrets:  [][]byte{newSecret(t)},
		Refused: func(w http.ResponseWriter, _ *http.Request, err error) {
			reasons = append(reasons, err)
			w.WriteHeader(http.StatusUnauthorized)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"https://shop.example.com/", passtest.WithPass("https://shop.example.com/", room.Pass(t, passtest.Admission))} {
		rec := httptest.NewRecorder()
		gate.Wrap(site).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want the hook's 401", target, rec.Code)
		}
	}
	if len(reasons) != 2 || reasons[0] != nil || !errors.Is(reasons[1], passverify.ErrExpired) {
		t.Errorf("reasons %v, want [nil, ErrExpired]", reasons)
	}
}

// TestGateExchangedHookAndForget: the Exchanged hook gets each pass the
// Gate exchanges, once, with its claims (a site keeps it to end the
// admission later); Forget drops the cookie.
func TestGateExchangedHookAndForget(t *testing.T) {
	room := passtest.NewRoom(t)
	clock := passtest.NewClock(passtest.Admission.AdmittedAt.Add(time.Minute))
	type seen struct{ jti, pass string }
	var got []seen
	gate, err := passverify.NewGate(room.Verifier(t, clock, nil), passverify.GateConfig{
		WaitingRoomURL: passtest.WaitingRoomURL,
		CookieSecrets:  [][]byte{newSecret(t)},
		Exchanged:      func(_ context.Context, c passverify.Claims, pass string) { got = append(got, seen{c.JTI, pass}) },
	})
	if err != nil {
		t.Fatal(err)
	}
	pass := room.Pass(t, passtest.Admission)
	// A POST never exchanges a pass (a stranger's form would swap the
	// browser's session): without a cookie it is refused.
	post := httptest.NewRecorder()
	gate.Wrap(site).ServeHTTP(post, httptest.NewRequest(http.MethodPost, passtest.WithPass("https://shop.example.com/done", pass), nil))
	if post.Code != http.StatusSeeOther || len(post.Result().Cookies()) != 0 || len(got) != 0 {
		t.Fatalf("a POST with a pass: %d, cookies %v, hook %v; want refused, nothing exchanged", post.Code, post.Result().Cookies(), got)
	}
	exchanged := serve(gate, passtest.WithPass("https://shop.example.com/", pass), "")
	if exchanged.Status != http.StatusSeeOther || len(got) != 1 || got[0].pass != pass || got[0].jti == "" {
		t.Fatalf("exchange: %+v; hook saw %+v", exchanged, got)
	}
	if a := serve(gate, "https://shop.example.com/", ""); a.Status != http.StatusSeeOther || len(got) != 1 {
		t.Errorf("a request without a pass called the hook: %+v", got)
	}
	rec := httptest.NewRecorder()
	gate.Forget(rec, httptest.NewRequest(http.MethodPost, "https://shop.example.com/done", nil))
	if c := rec.Result().Cookies(); len(c) != 1 || c[0].Name != passverify.DefaultCookieName || c[0].MaxAge != -1 || !c[0].HttpOnly {
		t.Errorf("Forget set %v, want the cookie deleted", c)
	}
}

func TestNewGateRefusesBadConfig(t *testing.T) {
	room := passtest.NewRoom(t)
	v := room.Verifier(t, passtest.NewClock(time.Now()), nil)
	secrets := [][]byte{newSecret(t)}
	for _, cfg := range []passverify.GateConfig{
		{CookieSecrets: secrets},
		{WaitingRoomURL: "waiting-room/gala", CookieSecrets: secrets},
		{WaitingRoomURL: "//evil.example.com/waiting-room/gala", CookieSecrets: secrets},
		{WaitingRoomURL: `/\evil.example.com/waiting-room/gala`, CookieSecrets: secrets},
		{WaitingRoomURL: "javascript:alert(1)", CookieSecrets: secrets},
		{WaitingRoomURL: "ftp://queue.example.com/waiting-room/gala", CookieSecrets: secrets},
		{WaitingRoomURL: passtest.WaitingRoomURL, CookieSecrets: secrets, CookiePath: "shop"},
		{WaitingRoomURL: passtest.WaitingRoomURL},
		{WaitingRoomURL: passtest.WaitingRoomURL, CookieSecrets: [][]byte{}},
		{WaitingRoomURL: passtest.WaitingRoomURL, CookieSecrets: [][]byte{secrets[0], []byte("too short: 31 bytes, not a key!")}},
	} {
		if _, err := passverify.NewGate(v, cfg); err == nil {
			t.Errorf("NewGate took %+v", cfg)
		}
	}
	for _, room := range []string{passtest.WaitingRoomURL, "http://127.0.0.1:3000/waiting-room/gala", "/waiting-room/gala"} {
		if _, err := passverify.NewGate(v, passverify.GateConfig{WaitingRoomURL: room, CookieSecrets: secrets}); err != nil {
			t.Errorf("NewGate refused %q: %v", room, err)
		}
	}
	if _, err := passverify.NewGate(nil, passverify.GateConfig{WaitingRoomURL: passtest.WaitingRoomURL, CookieSecrets: secrets}); err == nil {
		t.Error("NewGate took no Verifier")
	}
}

// TestGateCookie: the cookie is a session bound to the pass under the
// site's secret. Only the cookie of an exchange lets in, with the pass's
// claims: until the pass's exp plus the leeway, for the Gate's program,
// under a secret the Gate holds, while the pass's key is in the JWKS.
func TestGateCookie(t *testing.T) {
	room := passtest.NewRoom(t)
	a := passtest.Admission
	pass := room.Pass(t, a)
	otherPass := room.Pass(t, admissionpass.Admission{ProgramID: "other", TokenID: a.TokenID, AdmittedAt: a.AdmittedAt, ExpiresAt: a.ExpiresAt})
	oldSecret, nextSecret := newSecret(t), newSecret(t)
	want, err := room.Verifier(t, passtest.NewClock(a.AdmittedAt), nil).Verify(t.Context(), pass)
	if err != nil {
		t.Fatal(err)
	}

	// A site: a Gate of program on its own clock, which records why it
	// refuses and which claims it lets in.
	type site struct {
		gate    *passverify.Gate
		clock   *passtest.Clock
		refused error
		claims  passverify.Claims
	}
	newSite := func(program string, secrets ...[]byte) *site {
		s := &site{clock: passtest.NewClock(a.AdmittedAt.Add(time.Minute))}
		v := room.Verifier(t, s.clock, func(c *passverify.Config) { c.ProgramID = program })
		s.gate, err = passverify.NewGate(v, passverify.GateConfig{
			WaitingRoomURL: passtest.WaitingRoomURL,
			CookieSecrets:  secrets,
			Refused: func(w http.ResponseWriter, _ *http.Request, err error) {
				s.refused = err
				w.WriteHeader(http.StatusSeeOther)
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// get answers a GET with cookie.
	get := func(s *site, cookie string) (int, []*http.Cookie) {
		s.refused, s.claims = nil, passverify.Claims{}
		r := httptest.NewRequest(http.MethodGet, "https://shop.example.com/seats", nil)
		r.AddCookie(&http.Cookie{Name: passverify.DefaultCookieName, Value: cookie})
		rec := httptest.NewRecorder()
		s.gate.Wrap(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			s.claims, _ = passverify.FromContext(r.Context())
		})).ServeHTTP(rec, r)
		return rec.Code, rec.Result().Cookies()
	}
	// exchange returns the cookie s gives for p.
	exchange := func(s *site, p string) string {
		t.Helper()
		got := serve(s.gate, passtest.WithPass("https://shop.example.com/seats", p), "")
		if len(got.Cookies) != 1 || got.Cookies[0].Value == "" {
			t.Fatalf("exchange: %+v, want the cookie", got)
		}
		return got.Cookies[0].Value
	}
	// refused checks that s refuses cookie for reason, and deletes it.
	refused := func(s *site, cookie string, reason error) {
		t.Helper()
		code, cookies := get(s, cookie)
		if code != http.StatusSeeOther || !errors.Is(s.refused, reason) || !errors.Is(s.refused, passverify.ErrInvalid) {
			t.Errorf("%d, refused for %v; want a refusal for %v", code, s.refused, reason)
		}
		if len(cookies) != 1 || cookies[0].MaxAge != -1 {
			t.Errorf("cookies %v, want the cookie deleted", cookies)
		}
	}
	in := func(s *site, cookie string) {
		t.Helper()
		if code, _ := get(s, cookie); code != http.StatusOK || s.claims != want {
			t.Errorf("%d (refused for %v) with claims %+v; want 200 with %+v", code, s.refused, s.claims, want)
		}
	}

	t.Run("Exchanged", func(t *testing.T) {
		s := newSite("gala", oldSecret)
		in(s, exchange(s, pass))
	})
	t.Run("RawPass", func(t *testing.T) {
		s := newSite("gala", oldSecret)
		exchange(s, pass)
		refused(s, pass, passverify.ErrCookie)
	})
	t.Run("WrongMAC", func(t *testing.T) {
		s := newSite("gala", oldSecret)
		c := exchange(s, pass)
		dot := strings.LastIndex(c, ".")
		sum, err := base64.RawURLEncoding.DecodeString(c[dot+1:])
		if err != nil {
			t.Fatal(err)
		}
		sum[0] ^= 1
		refused(s, c[:dot+1]+base64.RawURLEncoding.EncodeToString(sum), passverify.ErrCookie)
		refused(s, c[:dot], passverify.ErrCookie)
	})
	t.Run("AlteredClaims", func(t *testing.T) {
		s := newSite("gala", oldSecret)
		parts := strings.Split(exchange(s, pass), ".")
		body, err := base64.RawURLEncoding.DecodeString(parts[1])
		if err != nil {
			t.Fatal(err)
		}
		altered := strings.Replace(string(body), `"ticket":4242`, `"ticket":1`, 1)
		if altered == string(body) {
			t.Fatalf("no ticket in %s", body)
		}
		refused(s, parts[0]+"."+base64.RawURLEncoding.EncodeToString([]byte(altered))+"."+parts[2], passverify.ErrCookie)
	})
	t.Run("AnotherSecret", func(t *testing.T) {
		refused(newSite("gala", nextSecret), exchange(newSite("gala", oldSecret), pass), passverify.ErrCookie)
	})
	t.Run("AnotherProgram", func(t *testing.T) {
		refused(newSite("gala", oldSecret), exchange(newSite("other", oldSecret), otherPass), passverify.ErrAudience)
	})
	t.Run("Expired", func(t *testing.T) {
		s := newSite("gala", oldSecret)
		c := exchange(s, pass)
		s.clock.Advance(want.ExpiresAt.Add(passverify.DefaultLeeway).Sub(s.clock.Now())) // the last instant
		in(s, c)
		s.clock.Advance(time.Second)
		refused(s, c, passverify.ErrExpired)
	})
	t.Run("SecretRotation", func(t *testing.T) {
		before, during, after := newSite("gala", oldSecret), newSite("gala", nextSecret, oldSecret), newSite("gala", nextSecret)
		old := exchange(before, pass)
		in(during, old)
		in(after, exchange(during, pass))
		refused(after, old, passverify.ErrCookie)
	})
	t.Run("KeyDropped", func(t *testing.T) {
		s := newSite("gala", oldSecret)
		c := exchange(s, pass)
		room.Publish(t, passtest.NewKey(t))
		t.Cleanup(func() { room.Publish(t, room.Key) })
		s.clock.Advance(passverify.DefaultCacheTTL)
		refused(s, c, passverify.ErrUnknownKey)
	})
}

// TestEndSession: the DELETE the waiting room expects, and its answers
// read back: 204 is done, an error body becomes a SessionError.
func TestEndSession(t *testing.T) {
	var got *http.Request
	answer := func(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		answer(w)
	}))
	defer srv.Close()
	if err := passverify.EndSession(t.Context(), srv.Client(), srv.URL+"/", "gala night", "the.pass.jwt"); err != nil {
		t.Fatalf("EndSession: %v", err)
	}
	if got.Method != http.MethodDelete || got.URL.EscapedPath() != "/api/v1/queues/programs/gala%20night/session" || got.Header.Get("X-Admission-Pass") != "the.pass.jwt" {
		t.Errorf("request %s %s, pass %q", got.Method, got.URL.EscapedPath(), got.Header.Get("X-Admission-Pass"))
	}
	for _, tt := range []struct {
		status     int
		body, code string
	}{
		{http.StatusForbidden, `{"code":"PASS_EXPIRED","message":"The admission pass has expired."}`, "PASS_EXPIRED"},
		{http.StatusBadGateway, `<html>bad gateway</html>`, ""},
	} {
		answer = func(w http.ResponseWriter) {
			w.WriteHeader(tt.status)
			_, _ = w.Write([]byte(tt.body))
		}
		err := passverify.EndSession(t.Context(), srv.Client(), srv.URL, "gala", "p")
		var se *passverify.SessionError
		if !errors.As(err, &se) || se.Status != tt.status || se.Code != tt.code {
			t.Errorf("answer %d %s: %v", tt.status, tt.body, err)
		}
	}
}

func TestMemoryGuard(t *testing.T) {
	passtest.ReplayGuardContract(t, func(*testing.T) passverify.ReplayGuard { return passverify.NewMemoryGuard(0) })
}

// TestMemoryGuardBounds: passes are forgotten when they expire; a full
// guard refuses rather than forgets an unexpired one.
func TestMemoryGuardBounds(t *testing.T) {
	clock := passtest.NewClock(time.Date(2026, 5, 19, 10, 0, 0, 0, time.UTC))
	g := passverify.NewMemoryGuard(2)
	passverify.SetGuardClock(g, clock.Now)
	use := func(jti string, until time.Duration) (bool, error) {
		return g.FirstUse(t.Context(), jti, clock.Now().Add(until))
	}
	steps := []struct {
		name    string
		advance time.Duration
		jti     string
		until   time.Duration
		want    bool
		wantErr error
	}{
		{"a", 0, "a", time.Minute, true, nil},
		{"b", 0, "b", 2 * time.Minute, true, nil},
		{"a again", 0, "a", time.Minute, false, nil},
		{"c while full", 0, "c", time.Minute, false, passverify.ErrGuardFull},
		{"a again while full", 0, "a", time.Minute, false, nil},
		{"c once a expired", time.Minute, "c", time.Minute, true, nil},
		{"a after it expired", 0, "a", time.Minute, false, passverify.ErrGuardFull},
		{"b still held", 0, "b", time.Minute, false, nil},
		{"a once b expired", time.Minute, "a", time.Minute, true, nil},
	}
	for _, s := range steps {
		clock.Advance(s.advance)
		got, err := use(s.jti, s.until)
		if got != s.want || !errors.Is(err, s.wantErr) || (s.wantErr == nil && err != nil) {
			t.Errorf("%s: FirstUse = %v, %v; want %v, %v", s.name, got, err, s.want, s.wantErr)
		}
	}
}
