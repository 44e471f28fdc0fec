package passverify_test

import (
	"context"
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

func TestGate(t *testing.T) {
	room := passtest.NewRoom(t)
	now := passtest.Admission.AdmittedAt.Add(time.Minute) // 10:13:01.456
	clock := passtest.NewClock(now)
	v := room.Verifier(t, clock, nil)
	a := passtest.Admission
	pass := room.Pass(t, a)
	expired := room.Pass(t, admissionpass.Admission{ProgramID: "gala", TokenID: a.TokenID, AdmittedAt: now.Add(-time.Hour), ExpiresAt: now.Add(-time.Minute)})
	otherProgram := room.Pass(t, admissionpass.Admission{ProgramID: "other", TokenID: a.TokenID, AdmittedAt: a.AdmittedAt, ExpiresAt: a.ExpiresAt})
	exp := a.ExpiresAt.Truncate(time.Second) // 10:22:01
	const maxAge = 540                       // 8m59.544s, rounded up

	passCookie := func(secure bool, path string) []cookieView {
		return []cookieView{{Name: "admission_pass", Value: pass, Path: path, MaxAge: maxAge, Expires: exp, HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode}}
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
		{"ValidCookie", "https://shop.example.com/seats?row=3", pass, nil, in},
		{"ExpiredCookie", "https://shop.example.com/seats", expired, nil,
			answer{Status: http.StatusSeeOther, Location: passtest.WaitingRoomURL, Cookies: deleted}},
		{"OtherProgramCookie", "https://shop.example.com/seats", otherProgram, nil,
			answer{Status: http.StatusSeeOther, Location: passtest.WaitingRoomURL, Cookies: deleted}},
		{"OtherCookieName", "https://shop.example.com/seats", pass, func(c *passverify.GateConfig) { c.CookieName = "seat_pass" }, toRoom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := passverify.GateConfig{WaitingRoomURL: passtest.WaitingRoomURL}
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
			if diff := cmp.Diff(tt.want, answerOf(rec)); diff != "" {
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
	gate, err := passverify.NewGate(room.Verifier(t, clock, nil), passverify.GateConfig{WaitingRoomURL: passtest.WaitingRoomURL})
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
	room.SetStatus(http.StatusBadGateway)
	clock := passtest.NewClock(passtest.Admission.AdmittedAt.Add(time.Minute))
	gate, err := passverify.NewGate(room.Verifier(t, clock, nil), passverify.GateConfig{WaitingRoomURL: passtest.WaitingRoomURL, ReplayGuard: failingGuard{}})
	if err != nil {
		t.Fatal(err)
	}
	pass := room.Pass(t, passtest.Admission)
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
	r.AddCookie(&http.Cookie{Name: passverify.DefaultCookieName, Value: pass})
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

func TestNewGateRefusesBadConfig(t *testing.T) {
	room := passtest.NewRoom(t)
	v := room.Verifier(t, passtest.NewClock(time.Now()), nil)
	for _, cfg := range []passverify.GateConfig{
		{},
		{WaitingRoomURL: "waiting-room/gala"},
		{WaitingRoomURL: "//evil.example.com/waiting-room/gala"},
		{WaitingRoomURL: `/\evil.example.com/waiting-room/gala`},
		{WaitingRoomURL: "javascript:alert(1)"},
		{WaitingRoomURL: "ftp://queue.example.com/waiting-room/gala"},
		{WaitingRoomURL: passtest.WaitingRoomURL, CookiePath: "shop"},
	} {
		if _, err := passverify.NewGate(v, cfg); err == nil {
			t.Errorf("NewGate took %+v", cfg)
		}
	}
	for _, room := range []string{passtest.WaitingRoomURL, "http://127.0.0.1:3000/waiting-room/gala", "/waiting-room/gala"} {
		if _, err := passverify.NewGate(v, passverify.GateConfig{WaitingRoomURL: room}); err != nil {
			t.Errorf("NewGate refused %q: %v", room, err)
		}
	}
	if _, err := passverify.NewGate(nil, passverify.GateConfig{WaitingRoomURL: passtest.WaitingRoomURL}); err == nil {
		t.Error("NewGate took no Verifier")
	}
}
