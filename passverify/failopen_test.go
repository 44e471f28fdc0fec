package passverify_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/testing/passtest"
	"github.com/example/waitingroom/internal/tools/localkeys"
	"github.com/example/waitingroom/passverify"
)

// publishFailOpen makes room's JWKS its key's with member, raw JSON, as
// its failOpen ("": none).
func publishFailOpen(t *testing.T, room *passtest.Room, member string) {
	t.Helper()
	iss, err := localkeys.FixedIssuer(passtest.Issuer, room.Key.Key)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := iss.JWKS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if member != "" {
		doc = fmt.Appendf(doc[:len(doc)-1:len(doc)-1], `,"failOpen":%s}`, member)
	}
	room.PublishDocument(doc)
}

// openSite is the protected handler: it says who came in, and how.
var openSite = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if until, ok := passverify.FailOpenFromContext(r.Context()); ok {
		fmt.Fprintf(w, "open until %s", until.Format(time.RFC3339))
		return
	}
	c, _ := passverify.FromContext(r.Context())
	fmt.Fprintf(w, "in: ticket %d", c.Ticket)
})

// gateAnswer is what a test checks of a Gate's answer: the status, its
// Location, the site's body, and whether it deletes the cookie.
type gateAnswer struct {
	Status   int
	Location string
	Body     string
	Forgets  bool
}

// through answers r by gate in front of openSite.
func through(gate *passverify.Gate, r *http.Request) gateAnswer {
	rec := httptest.NewRecorder()
	gate.Wrap(openSite).ServeHTTP(rec, r)
	a := gateAnswer{Status: rec.Code, Location: rec.Header().Get("Location")}
	if a.Status == http.StatusOK {
		a.Body = rec.Body.String()
	}
	for _, c := range rec.Result().Cookies() {
		a.Forgets = a.Forgets || c.MaxAge < 0
	}
	return a
}

// get is a GET of target, with cookie as the Gate's cookie if not empty.
func get(target, cookie string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, target, nil)
	if cookie != "" {
		r.AddCookie(&http.Cookie{Name: passverify.DefaultCookieName, Value: cookie})
	}
	return r
}

// TestGateFailOpen: during its program's break-glass, by the JWKS's
// failOpen, the Gate lets in what it would turn away, marked; a valid
// pass or cookie goes on as ever; a break-glass ended, at its end, of
// another program, or unreadable lets nobody in.
func TestGateFailOpen(t *testing.T) {
	a := passtest.Admission
	now := a.AdmittedAt.Add(time.Minute) // 10:13:01.456
	const until = `"2026-05-19T10:23:00Z"`
	on := `{"gala":` + until + `}`
	secret := newSecret(t)
	open := gateAnswer{Status: http.StatusOK, Body: "open until 2026-05-19T10:23:00Z"}
	toRoom := gateAnswer{Status: http.StatusSeeOther, Location: passtest.WaitingRoomURL}

	// cookie is a cookie of a's pass, made by a Gate with secret.
	room := passtest.NewRoom(t)
	var cookie string
	{
		gate, err := passverify.NewGate(room.Verifier(t, passtest.NewClock(now), nil), passverify.GateConfig{WaitingRoomURL: passtest.WaitingRoomURL, CookieSecrets: [][]byte{secret}})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		gate.Wrap(openSite).ServeHTTP(rec, get(passtest.WithPass("https://shop.example.com/", room.Pass(t, a)), ""))
		cookie = rec.Result().Cookies()[0].Value
	}

	tests := []struct {
		name     string
		failOpen string // the JWKS's member, raw
		request  *http.Request
		want     gateAnswer
	}{
		{"NoPass", on, get("https://shop.example.com/seats", ""), open},
		{"NoPassPost", on, httptest.NewRequest(http.MethodPost, "https://shop.example.com/seats", nil), open},
		{"InvalidPass", on, get(passtest.WithPass("https://shop.example.com/seats", "forged"), ""), open},
		{"InvalidCookie", on, get("https://shop.example.com/seats", "v1.e30.AAAA"),
			gateAnswer{Status: http.StatusOK, Body: open.Body, Forgets: true}},
		{"ValidPassExchanged", on, get(passtest.WithPass("https://shop.example.com/seats", room.Pass(t, a)), ""), gateAnswer{Status: http.StatusSeeOther, Location: "/seats"}},
		{"ValidCookie", on, get("https://shop.example.com/seats", cookie),
			gateAnswer{Status: http.StatusOK, Body: "in: ticket 4242"}},
		{"NoFailOpen", "", get("https://shop.example.com/seats", ""), toRoom},
		{"Ended", `{"gala":"2026-05-19T10:13:01Z"}`, get("https://shop.example.com/seats", ""), toRoom},
		{"EndsNow", `{"gala":"2026-05-19T10:13:01.456Z"}`, get("https://shop.example.com/seats", ""), toRoom},
		{"OtherProgram", `{"other":` + until + `}`, get("https://shop.example.com/seats", ""), toRoom},
		{"NotATime", `{"gala":"soon"}`, get("https://shop.example.com/seats", ""), toRoom},
		{"NotAMap", `[` + until + `]`, get("https://shop.example.com/seats", ""), toRoom},
		{"NotAMapKeysStillRead", `[` + until + `]`, get(passtest.WithPass("https://shop.example.com/seats", room.Pass(t, a)), ""), gateAnswer{Status: http.StatusSeeOther, Location: "/seats"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			publishFailOpen(t, room, tt.failOpen)
			v := room.Verifier(t, passtest.NewClock(now), nil)
			gate, err := passverify.NewGate(v, passverify.GateConfig{WaitingRoomURL: passtest.WaitingRoomURL, CookieSecrets: [][]byte{secret}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, through(gate, tt.request)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestGateFailOpenCached: the break-glass comes from the last JWKS fetched,
// kept as its keys are: fetched once per max-age, used while the JWKS is
// unreachable but never past its end, and off until a first fetch.
func TestGateFailOpenCached(t *testing.T) {
	room := passtest.NewRoom(t)
	start := passtest.Admission.AdmittedAt // 10:12:01.456
	publishFailOpen(t, room, `{"gala":"2026-05-19T10:30:00Z"}`)
	clock := passtest.NewClock(start)
	v := room.Verifier(t, clock, nil)
	gate, err := passverify.NewGate(v, passverify.GateConfig{WaitingRoomURL: passtest.WaitingRoomURL, CookieSecrets: [][]byte{newSecret(t)}})
	if err != nil {
		t.Fatal(err)
	}
	open := gateAnswer{Status: http.StatusOK, Body: "open until 2026-05-19T10:30:00Z"}
	toRoom := gateAnswer{Status: http.StatusSeeOther, Location: passtest.WaitingRoomURL}
	at := func(hms string) time.Time {
		t, err := time.Parse(time.RFC3339Nano, "2026-05-19T"+hms+"Z")
		if err != nil {
			panic(err)
		}
		return t
	}
	steps := []struct {
		name        string
		at          time.Time
		status      int    // the JWKS's from this step on
		failOpen    string // the JWKS's member from this step on, if not "-"
		want        gateAnswer
		wantFetches int
	}{
		{"First", start, http.StatusOK, "-", open, 1},
		{"Cached", at("10:17:00.456"), http.StatusOK, "", open, 1},
		{"Unreachable", at("10:17:02.456"), http.StatusBadGateway, "-", open, 2},
		{"UnreachableNoRetryYet", at("10:17:03.456"), http.StatusBadGateway, "-", open, 2},
		{"UnreachableRetried", at("10:17:13.456"), http.StatusBadGateway, "-", open, 3},
		{"BackWithoutIt", at("10:17:23.456"), http.StatusOK, "", toRoom, 4},
		{"BackWithIt", at("10:22:23.456"), http.StatusOK, `{"gala":"2026-05-19T10:30:00Z"}`, open, 5},
		{"UnreachableLastInstant", at("10:29:59.999"), http.StatusBadGateway, "-", open, 6},
		{"UnreachableAtTheEnd", at("10:30:00"), http.StatusBadGateway, "-", toRoom, 6},
	}
	for _, s := range steps {
		clock.Advance(s.at.Sub(clock.Now()))
		room.SetStatus(s.status)
		if s.failOpen != "-" {
			publishFailOpen(t, room, s.failOpen)
		}
		if diff := cmp.Diff(s.want, through(gate, get("https://shop.example.com/seats", ""))); diff != "" {
			t.Errorf("%s: (-want +got):\n%s", s.name, diff)
		}
		if got := room.Fetches(); got != s.wantFetches {
			t.Errorf("%s: %d fetches, want %d", s.name, got, s.wantFetches)
		}
	}
	if until, ok := v.FailingOpen(t.Context()); ok {
		t.Errorf("FailingOpen at the end = %v, true; want off", until)
	}
}

// TestGateFailOpenNeverFetched: a Gate that never read the JWKS knows of no
// break-glass: closed, as without one.
func TestGateFailOpenNeverFetched(t *testing.T) {
	room := passtest.NewRoom(t)
	publishFailOpen(t, room, `{"gala":"2026-05-19T10:30:00Z"}`)
	room.SetStatus(http.StatusBadGateway)
	clock := passtest.NewClock(passtest.Admission.AdmittedAt)
	v := room.Verifier(t, clock, nil)
	gate, err := passverify.NewGate(v, passverify.GateConfig{WaitingRoomURL: passtest.WaitingRoomURL, CookieSecrets: [][]byte{newSecret(t)}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(gateAnswer{Status: http.StatusSeeOther, Location: passtest.WaitingRoomURL}, through(gate, get("https://shop.example.com/seats", ""))); diff != "" {
		t.Errorf("no pass (-want +got):\n%s", diff)
	}
	if got := through(gate, get(passtest.WithPass("https://shop.example.com/seats", room.Pass(t, passtest.Admission)), "")); got.Status != http.StatusServiceUnavailable {
		t.Errorf("a pass: %+v, want 503", got)
	}
	if until, ok := v.FailingOpen(t.Context()); ok {
		t.Errorf("FailingOpen = %v, true; want off", until)
	}
}

// TestFailingOpenDoesNotWait: while a fetch of the JWKS is under way, the
// break-glass is read from the copy at hand (none here) without waiting.
func TestFailingOpenDoesNotWait(t *testing.T) {
	room := passtest.NewRoom(t)
	publishFailOpen(t, room, `{"gala":"2026-05-19T10:30:00Z"}`)
	v := room.Verifier(t, passtest.NewClock(passtest.Admission.AdmittedAt), nil)
	var waits atomic.Int32
	passverify.OnFetchWait(v, func() { waits.Add(1) })
	arrived, release := room.Hold()
	defer release()
	first := make(chan bool)
	go func() {
		_, ok := v.FailingOpen(t.Context())
		first <- ok
	}()
	<-arrived
	if until, ok := v.FailingOpen(t.Context()); ok || waits.Load() != 1 {
		t.Errorf("during the first fetch: FailingOpen = %v, %v after %d waits; want off, 1 wait (the first's)", until, ok, waits.Load())
	}
	release()
	if !<-first {
		t.Error("the first lookup, once fetched: off, want on")
	}
}
