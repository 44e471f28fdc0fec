package demosite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/passtest"
	"github.com/example/waitingroom/internal/tools/demosite"
)

// programs is a demosite.Programs that knows the programs it holds; to
// any other it answers err, or PROGRAM_NOT_FOUND.
type programs struct {
	names map[string]bool
	err   error
}

func (p programs) Showing(_ context.Context, id string) (queue.Showing, error) {
	switch {
	case p.names[id]:
		return queue.Showing{}, nil
	case p.err != nil:
		return queue.Showing{}, p.err
	}
	return queue.Showing{}, queue.Errorf(queue.KindNotFound, api.CodeProgramNotFound, "No such program.")
}

// gala holds programs "gala" and "other".
var gala = programs{names: map[string]bool{"gala": true, "other": true}}

func TestDemoSite(t *testing.T) {
	room := passtest.NewRoom(t)
	api := strings.TrimSuffix(room.JWKSURL(), "/.well-known/jwks.json")
	for _, cfg := range []demosite.Config{
		{API: api, Programs: gala},
		{API: api, Issuer: passtest.Issuer},
		{API: "ftp://x", Issuer: passtest.Issuer, Programs: gala},
	} {
		if _, err := demosite.New(cfg); err == nil {
			t.Errorf("New(%+v): no error", cfg)
		}
	}
	h, err := demosite.New(demosite.Config{API: api, Issuer: passtest.Issuer, Programs: gala})
	if err != nil {
		t.Fatal(err)
	}
	site := httptest.NewServer(h)
	defer site.Close()
	a := passtest.Admission
	a.AdmittedAt = time.Now()
	a.ExpiresAt = a.AdmittedAt.Add(10 * time.Minute)
	pass := room.Pass(t, a)

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get(passtest.WithPass(demosite.URL(site.URL, "gala"), pass))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(body)
	for _, want := range []string{`<html lang="en">`, "<h1>You're in</h1>", "<strong data-ticket>4242</strong>", `<time datetime="` + a.ExpiresAt.UTC().Format(time.RFC3339) + `"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s:\n%s", want, page)
		}
	}
	if resp.StatusCode != 200 || resp.Request.URL.RawQuery != "" || resp.Header.Get("Cache-Control") != "private, no-store" {
		t.Errorf("%d at %s, Cache-Control %q: want 200 at the clean URL, never cached by shared caches", resp.StatusCode, resp.Request.URL, resp.Header.Get("Cache-Control"))
	}

	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tt := range []struct {
		name, path, wantLocation string
		wantStatus               int
	}{
		{"NoPassGoesToTheWaitingRoom", "/demo-site/gala", "/waiting-room/gala", 303},
		{"AnotherProgram", "/demo-site/other", "/waiting-room/other", 303},
		{"BadProgramID", "/demo-site/-x", "", 404},
		{"UnknownProgram", "/demo-site/third", "", 404},
		{"OtherPath", "/demo-site/gala/more", "", 404},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := noFollow.Get(site.URL + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus || resp.Header.Get("Location") != tt.wantLocation {
				t.Errorf("%d Location %q, want %d %q", resp.StatusCode, resp.Header.Get("Location"), tt.wantStatus, tt.wantLocation)
			}
		})
	}
}

// TestDemoSiteRefusesFraming: every answer of the demo site forbids
// framing, the page, the gate's redirects and the 404s alike.
func TestDemoSiteRefusesFraming(t *testing.T) {
	room := passtest.NewRoom(t)
	h, err := demosite.New(demosite.Config{API: strings.TrimSuffix(room.JWKSURL(), "/.well-known/jwks.json"), Issuer: passtest.Issuer, Programs: gala})
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"/demo-site/gala", "/demo-site/-x", "/demo-site/gala/more", passtest.WithPass("/demo-site/gala", "forged")} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		if got := rec.Header().Get("X-Frame-Options"); got != "DENY" {
			t.Errorf("%s: X-Frame-Options %q, want DENY", target, got)
		}
		if got := rec.Header().Get("Content-Security-Policy"); !strings.Contains(got, "frame-ancestors 'none'") {
			t.Errorf("%s: Content-Security-Policy %q, want frame-ancestors 'none'", target, got)
		}
	}
}

// TestDemoSiteMadeUpPrograms: requests for programs that do not exist
// build no gate, and never crowd out a program that does.
func TestDemoSiteMadeUpPrograms(t *testing.T) {
	room := passtest.NewRoom(t)
	h, err := demosite.New(demosite.Config{API: strings.TrimSuffix(room.JWKSURL(), "/.well-known/jwks.json"), Issuer: passtest.Issuer, Programs: gala})
	if err != nil {
		t.Fatal(err)
	}
	serve := func(path string) *http.Response {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Result()
	}
	let := 0
	for i := range 150 {
		if resp := serve(fmt.Sprintf("/demo-site/made-up-%d", i)); resp.StatusCode != http.StatusNotFound {
			let++
		}
	}
	if let != 0 {
		t.Errorf("%d of 150 made-up programs were not answered 404", let)
	}
	if resp := serve("/demo-site/gala"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/waiting-room/gala" {
		t.Errorf("gala after 150 made-up programs: %s Location %q, want 303 to /waiting-room/gala", resp.Status, resp.Header.Get("Location"))
	}
}

// TestDemoSiteProgramsUnavailable: when the store cannot say whether a
// program exists, the demo site answers 503 with Retry-After, not 404.
func TestDemoSiteProgramsUnavailable(t *testing.T) {
	room := passtest.NewRoom(t)
	down := programs{err: queue.Errorf(queue.KindUnavailable, "STORE_UNAVAILABLE", "The store is unavailable.")}
	h, err := demosite.New(demosite.Config{API: strings.TrimSuffix(room.JWKSURL(), "/.well-known/jwks.json"), Issuer: passtest.Issuer, Programs: down})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/demo-site/gala", nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || strings.Contains(rec.Body.String(), "STORE") {
		t.Errorf("%d Retry-After %q %q, want 503 with Retry-After and no internals", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
}

// TestDemoSiteBreakGlass: while the room's JWKS says the program fails
// open, the demo page lets a visitor without a pass in, and says so.
func TestDemoSiteBreakGlass(t *testing.T) {
	room := passtest.NewRoom(t)
	res, err := http.Get(room.JWKSURL())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	err = json.NewDecoder(res.Body).Decode(&doc)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	doc["failOpen"] = map[string]string{"gala": until.Format(time.RFC3339)}
	b, _ := json.Marshal(doc)
	room.PublishDocument(b)
	h, err := demosite.New(demosite.Config{API: strings.TrimSuffix(room.JWKSURL(), "/.well-known/jwks.json"), Issuer: passtest.Issuer, Programs: gala})
	if err != nil {
		t.Fatal(err)
	}
	site := httptest.NewServer(h)
	defer site.Close()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for id, want := range map[string]string{
		"gala":  "Let in by the break-glass, until " + until.Format(time.RFC3339),
		"other": "", // not its program's break-glass: sent to the room
	} {
		res, err := noRedirect.Get(demosite.URL(site.URL, id))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		switch {
		case want != "" && (res.StatusCode != 200 || !strings.Contains(string(body), want)):
			t.Errorf("%s: %d %q, want 200 with %q", id, res.StatusCode, body, want)
		case want == "" && res.StatusCode != http.StatusSeeOther:
			t.Errorf("%s: %d, want 303 to the room", id, res.StatusCode)
		}
	}
}
