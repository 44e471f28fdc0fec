package demosite_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/demosite"
	"github.com/example/waitingroom/internal/testing/passtest"
)

func TestDemoSite(t *testing.T) {
	room := passtest.NewRoom(t)
	api := strings.TrimSuffix(room.JWKSURL(), "/.well-known/jwks.json")
	if _, err := demosite.New(demosite.Config{API: api}); err == nil {
		t.Error("New without an Issuer: no error")
	}
	h, err := demosite.New(demosite.Config{API: api, Issuer: passtest.Issuer, MaxPrograms: 2})
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
	tests := []struct {
		name, path   string
		wantStatus   int
		wantLocation string
	}{
		{"NoPassGoesToTheWaitingRoom", "/demo-site/gala", 303, "/waiting-room/gala"},
		{"AnotherProgram", "/demo-site/other", 303, "/waiting-room/other"},
		{"BadProgramID", "/demo-site/-x", 404, ""},
		{"BeyondMaxPrograms", "/demo-site/third", 404, ""},
		{"OtherPath", "/demo-site/gala/more", 404, ""},
	}
	for _, tt := range tests {
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
