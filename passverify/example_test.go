package passverify_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/tools/localkeys"
	"github.com/example/waitingroom/passverify"
)

// A ticketing site on its own origin, protected by the waiting room at
// https://queue.example.com for its program "gala". The waiting room sends
// admitted people to https://shop.example.com/seats?admissionPass=…; the
// site exchanges the pass for a cookie and lets them in.
func Example() {
	room, pass := startWaitingRoom() // the waiting room's API, and a pass it gave
	defer room.Close()

	// At start: one Verifier and one Gate per protected program.
	v, err := passverify.New(passverify.Config{
		JWKSURL:   room.URL + "/.well-known/jwks.json", // https://queue.example.com/.well-known/jwks.json
		Issuer:    "https://queue.example.com",
		ProgramID: "gala",
	})
	if err != nil {
		log.Fatal(err)
	}
	// The site's cookie secret: in production the same random bytes on
	// every instance, from the site's secret store.
	secret := make([]byte, passverify.MinCookieSecretSize)
	if _, err := rand.Read(secret); err != nil {
		log.Fatal(err)
	}
	gate, err := passverify.NewGate(v, passverify.GateConfig{
		WaitingRoomURL: "https://queue.example.com/waiting-room/gala",
		CookieSecrets:  [][]byte{secret},
		ReplayGuard:    passverify.NewMemoryGuard(0), // each pass admits one browser
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /seats", gate.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		claims, _ := passverify.FromContext(r.Context())
		fmt.Fprintf(w, "Welcome, ticket %d.", claims.Ticket)
	})))
	site := httptest.NewServer(mux)
	defer site.Close()

	// A browser comes from the waiting room with its pass.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get(site.URL + "/seats?" + passverify.Param + "=" + pass)
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Request.URL.RequestURI(), string(body))

	// Someone else, without a pass, is sent to the waiting room.
	stranger := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = stranger.Get(site.URL + "/seats")
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("Location"))

	// Nor does a copy of the pass help: the cookie is no copy of it.
	req, _ := http.NewRequest(http.MethodGet, site.URL+"/seats", nil)
	req.AddCookie(&http.Cookie{Name: passverify.DefaultCookieName, Value: pass})
	resp, err = stranger.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("Location"))

	// Output:
	// 200 /seats Welcome, ticket 42.
	// 303 https://queue.example.com/waiting-room/gala
	// 303 https://queue.example.com/waiting-room/gala
}

// startWaitingRoom stands in for the waiting room: it serves the JWKS and
// returns a pass for ticket 42, admitted now.
func startWaitingRoom() (*httptest.Server, string) {
	key, err := localkeys.Generate()
	if err != nil {
		log.Fatal(err)
	}
	issuer, err := localkeys.FixedIssuer("https://queue.example.com", key)
	if err != nil {
		log.Fatal(err)
	}
	now := time.Now()
	pass, err := issuer.Issue(context.Background(), admissionpass.Admission{
		ProgramID: "gala", TokenID: "qa2AFEZ5uMUwGcoY2YV5zg", Ticket: 42, AdmittedAt: now, ExpiresAt: now.Add(10 * time.Minute),
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /.well-known/jwks.json", issuer.JWKSHandler(nil, nil))
	return httptest.NewServer(mux), pass
}

// protect puts the waiting room's gate in front of shop, the site's handler.
func protect(shop http.Handler, cookieSecret []byte) (http.Handler, error) {
	v, err := passverify.New(passverify.Config{
		JWKSURL:   "https://queue.example.com/.well-known/jwks.json", // the stack's JwksUrl output
		Issuer:    "https://queue.example.com",
		ProgramID: "gala",
	})
	if err != nil {
		return nil, err
	}
	gate, err := passverify.NewGate(v, passverify.GateConfig{
		WaitingRoomURL: "https://queue.example.com/waiting-room/gala",
		CookieSecrets:  [][]byte{cookieSecret},       // ≥ 32 random bytes, the same on every instance
		ReplayGuard:    passverify.NewMemoryGuard(0), // single use; dynamoreplay.Guard across instances
	})
	if err != nil {
		return nil, err
	}
	return gate.Wrap(shop), nil
}

// The README's snippet, protect: a site's shop behind the gate, which
// sends a request without a pass or a cookie to the waiting room. Before
// that it reads the JWKS for a break-glass; here, with the waiting room
// unreachable and no copy of its JWKS, it knows of none.
func ExampleNewGate() {
	shop := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		claims, _ := passverify.FromContext(r.Context())
		fmt.Fprintf(w, "Welcome, ticket %d.", claims.Ticket)
	})
	// In production: the same random bytes on every instance, from the
	// site's secret store.
	secret := make([]byte, passverify.MinCookieSecretSize)
	rand.Read(secret) // crypto/rand's Read never fails
	h, err := protect(shop, secret)
	if err != nil {
		log.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "https://shop.example.com/seats", nil))
	fmt.Println(rec.Code, rec.Header().Get("Location"))
	// Output:
	// 303 https://queue.example.com/waiting-room/gala
}

// During a program's break-glass (its failOpenUntil, which the waiting
// room's JWKS lists in failOpen), the Gate lets in the visitors it would
// send to the waiting room, and tells the site so.
func ExampleFailOpenFromContext() {
	key, err := localkeys.Generate()
	if err != nil {
		log.Fatal(err)
	}
	issuer, err := localkeys.FixedIssuer("https://queue.example.com", key)
	if err != nil {
		log.Fatal(err)
	}
	// The waiting room: gala's break-glass is on for the next half hour.
	until := time.Now().Add(30 * time.Minute).Truncate(time.Second)
	room := httptest.NewServer(issuer.JWKSHandler(nil, &admissionpass.FailOpen{
		List: func(context.Context) (map[string]time.Time, error) { return map[string]time.Time{"gala": until}, nil },
	}))
	defer room.Close()

	v, err := passverify.New(passverify.Config{JWKSURL: room.URL, Issuer: "https://queue.example.com", ProgramID: "gala"})
	if err != nil {
		log.Fatal(err)
	}
	secret := make([]byte, passverify.MinCookieSecretSize)
	rand.Read(secret) // crypto/rand's Read never fails
	gate, err := passverify.NewGate(v, passverify.GateConfig{WaitingRoomURL: "https://queue.example.com/waiting-room/gala", CookieSecrets: [][]byte{secret}})
	if err != nil {
		log.Fatal(err)
	}
	shop := gate.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if end, ok := passverify.FailOpenFromContext(r.Context()); ok {
			fmt.Fprintf(w, "Welcome: no queue for another %v.", time.Until(end).Round(time.Minute))
			return
		}
		claims, _ := passverify.FromContext(r.Context())
		fmt.Fprintf(w, "Welcome, ticket %d.", claims.Ticket)
	}))
	rec := httptest.NewRecorder()
	shop.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "https://shop.example.com/seats", nil))
	fmt.Println(rec.Code, rec.Body)
	// Output:
	// 200 Welcome: no queue for another 30m0s.
}

// TestREADMESnippet: the README's passverify snippet is protect, as
// compiled and run above, character for character.
func TestREADMESnippet(t *testing.T) {
	fset := token.NewFileSet()
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(fset, "example_test.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var want string
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "protect" {
			want = string(src[fset.Position(fn.Doc.Pos()).Offset:fset.Position(fn.End()).Offset])
		}
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)\n```").FindAllSubmatch(readme, -1)
	for _, b := range blocks {
		if strings.Contains(string(b[1]), "passverify.New(") {
			if got := string(b[1]); got != want {
				t.Errorf("README.md's passverify snippet:\n%s\nwant protect of example_test.go:\n%s", got, want)
			}
			return
		}
	}
	t.Errorf("README.md has no go block with passverify.New; want protect of example_test.go:\n%s", want)
}
