package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/enqueue"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/enqueuetest"
	"github.com/example/waitingroom/internal/tools/client"
	"github.com/example/waitingroom/internal/tools/localkeys"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/simclock"
)

const secret = "s3cret"

// newServer serves the real API over the in-memory store.
func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(httpapi.New(queue.NewService(memstore.New(), polling.DefaultTiers()), httpapi.BearerAuth(secret)))
	t.Cleanup(srv.Close)
	return srv
}

// TestAgainstServer plays every call against the real handler: typed
// answers on success, typed errors with the API's codes otherwise, and one
// observed exchange per call.
func TestAgainstServer(t *testing.T) {
	srv := newServer(t)
	var mu sync.Mutex
	var seen []client.Exchange
	c := newClient(t, srv.URL+"/", client.WithAuth(client.BearerToken(secret)), client.WithHTTPClient(srv.Client()),
		client.WithObserver(func(e client.Exchange) { mu.Lock(); seen = append(seen, e); mu.Unlock() }))
	ctx := context.Background()

	p, created, err := c.PutProgram(ctx, "p1", api.ProgramSettings{Paused: new(true), PollingPolicy: new("")})
	if err != nil || !created || !p.Paused || p.ProgramID != "p1" {
		t.Fatalf("PutProgram = %+v, %v, %v; want created, paused", p, created, err)
	}
	a, created, err := c.Enter(ctx, "p1", client.Entry{IdempotencyKey: client.NewIdempotencyKey()})
	if err != nil || !created || a.Status != api.StatusWaiting || a.Position != 1 || a.RetryAfter() <= 0 || a.TokenID == "" {
		t.Fatalf("Enter = %+v, %v, %v; want a new WAITING place at position 1", a, created, err)
	}
	b, _, err := c.Enter(ctx, "p1", client.Entry{})
	if err != nil || b.Position != 2 {
		t.Fatalf("Enter without a key = %+v, %v; want position 2", b, err)
	}
	again, created, err := c.Enter(ctx, "p1", client.Entry{Token: b.TokenID})
	if err != nil || created || again.TokenID != b.TokenID || again.Position != 2 {
		t.Fatalf("Enter with a token = %+v, %v, %v; want the same token answered again", again, created, err)
	}
	if _, err := c.Admit(ctx, "p1", 1); err != nil {
		t.Fatal(err)
	}
	got, err := c.Poll(ctx, "p1", a.TokenID)
	if err != nil || got.Status != api.StatusAdmitted || got.AdmittedAt.IsZero() {
		t.Fatalf("Poll after Admit = %+v, %v; want ADMITTED", got, err)
	}
	if err := c.Leave(ctx, "p1", a.TokenID); err != nil {
		t.Errorf("Leave when admitted (ends the admission) = %v", err)
	}
	if got, err := c.Poll(ctx, "p1", a.TokenID); err != nil || got.Status != api.StatusLeft {
		t.Errorf("Poll after ending the admission = %+v, %v; want LEFT", got, err)
	}
	if err := c.Leave(ctx, "p1", b.TokenID); err != nil {
		t.Errorf("Leave = %v", err)
	}
	closed := true
	if _, _, err := c.PutProgram(ctx, "p1", api.ProgramSettings{Closed: &closed}); err != nil {
		t.Fatal(err)
	}
	_, _, err = c.Enter(ctx, "p1", client.Entry{})
	if ae := (*client.Error)(nil); !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != api.CodeProgramClosed || ae.Retryable() {
		t.Errorf("Enter when closed = %v; want 409 %s, not retryable", err, api.CodeProgramClosed)
	}
	gp, err := c.GetProgram(ctx, "p1")
	if err != nil || gp.Issued != 2 || gp.Admitted != 1 {
		t.Errorf("GetProgram = %+v, %v; want issued 2, admitted 1", gp, err)
	}
	_, err = c.Poll(ctx, "nope", a.TokenID)
	if ae := (*client.Error)(nil); !errors.As(err, &ae) || ae.Status != http.StatusNotFound || ae.Code == "" || ae.Message == "" {
		t.Errorf("Poll of an unknown program = %#v; want 404 with code and message", err)
	}
	_, err = newClient(t, srv.URL, client.WithAuth(client.BearerToken("wrong"))).GetProgram(ctx, "p1")
	if ae := (*client.Error)(nil); !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
		t.Errorf("GetProgram with a wrong token = %v; want 403", err)
	}

	var ops []string
	for _, e := range seen {
		ops = append(ops, string(e.Op)+" "+http.StatusText(e.Status))
		if e.Latency <= 0 || e.Sent.IsZero() || e.Canceled || (e.Status < 300) != (e.Err == nil) {
			t.Errorf("exchange %+v", e)
		}
	}
	want := []string{"PUT admin Created", "POST enter Created", "POST enter Created", "POST enter OK", "POST admissions OK", "GET poll OK",
		"DELETE leave No Content", "GET poll OK", "DELETE leave No Content", "PUT admin OK", "POST enter Conflict", "GET admin OK", "GET poll Not Found"}
	if diff := cmp.Diff(want, ops); diff != "" {
		t.Errorf("observed exchanges (-want +got):\n%s", diff)
	}
}

// TestRequests checks what goes on the wire: the idempotency key, the
// token and admin headers, the JSON bodies.
func TestRequests(t *testing.T) {
	type req struct{ Method, Path, Key, Token, Auth, Body string }
	var got []req
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, req{r.Method, r.URL.EscapedPath(), r.Header.Get("Idempotency-Key"), r.Header.Get("X-Queue-Token"), r.Header.Get("Authorization"), string(b)})
		switch r.Method {
		case http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		case http.MethodPost:
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"tokenId":"t","status":"WAITING","ticket":42,"position":3}`))
		default:
			_, _ = w.Write([]byte(`{"programId":"a b","tokenId":"t","status":"WAITING"}`))
		}
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, client.WithAuth(client.BearerToken("tok")))
	ctx := context.Background()
	a, created, err := c.Enter(ctx, "a b", client.Entry{IdempotencyKey: "key-1"})
	if err != nil || a.Ticket != 42 || a.Position != 3 || !created {
		t.Errorf("Enter = %+v, %v, %v; want ticket 42", a, created, err)
	}
	_, _, _ = c.Enter(ctx, "a b", client.Entry{Token: "t"})
	_, _ = c.Poll(ctx, "a b", "t")
	_ = c.Leave(ctx, "a b", "t")
	_, _, _ = c.PutProgram(ctx, "a b", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(2.5))})
	_, _ = c.Admit(ctx, "a b", 7)
	want := []req{
		{"POST", "/api/v1/queues/programs/a%20b", "key-1", "", "", ""},
		{"POST", "/api/v1/queues/programs/a%20b", "", "t", "", ""},
		{"GET", "/api/v1/queues/programs/a%20b", "", "t", "", ""},
		{"DELETE", "/api/v1/queues/programs/a%20b", "", "t", "", ""},
		{"PUT", "/api/v1/admin/programs/a%20b", "", "", "Bearer tok", `{"admissionRatePerSecond":2.5}`},
		{"POST", "/api/v1/admin/programs/a%20b/admissions", "", "", "Bearer tok", `{"count":7}`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestNew(t *testing.T) {
	for _, bad := range []string{"", "127.0.0.1:3000", "ftp://x", "http://", "http://x/?q=1"} {
		if _, err := client.New(bad, client.WithAuth(client.BearerToken("s"))); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
	if _, err := client.New("http://x", client.WithAuth(nil)); err == nil {
		t.Error("New with a nil Authorizer accepted")
	}
	// A bearer token only over https or to loopback.
	for url, ok := range map[string]bool{"http://x": false, "http://192.0.2.1:3000": false, "https://x": true, "http://127.0.0.1:3000": true, "http://[::1]": true} {
		if _, err := client.New(url, client.WithAuth(client.BearerToken("s"))); (err == nil) != ok {
			t.Errorf("New(%q) with a bearer token: %v, want accepted %v", url, err, ok)
		}
	}
}

func TestBasePath(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.URL.EscapedPath()
		_, _ = io.WriteString(w, `{"programId":"x"}`)
	}))
	defer srv.Close()
	c := newClient(t, srv.URL+"/stage/", client.WithAuth(client.BearerToken("s")))
	if _, err := c.GetProgram(context.Background(), "a b"); err != nil {
		t.Fatal(err)
	}
	if got != "/stage/api/v1/admin/programs/a%20b" {
		t.Errorf("path %q", got)
	}
}

// TestProgramAnswer decodes an admin answer: RFC 3339 times in any zone,
// "" for none, fields the client does not know kept in Raw, and a
// malformed time named in the error.
func TestProgramAnswer(t *testing.T) {
	body := `{"programId":"gala","issued":3,"createdAt":"2026-12-01T09:00:00.000Z","opensAt":"2026-12-01T10:00:00+09:00","effectiveAt":"","shuffleAtOpen":true,"unknown":[1]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/bad") {
			_, _ = io.WriteString(w, `{"opensAt":"tomorrow"}`)
			return
		}
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	c := newClient(t, srv.URL)
	p, err := c.GetProgram(context.Background(), "gala")
	if err != nil {
		t.Fatal(err)
	}
	want := api.Program{ProgramID: "gala", Issued: 3, ShuffleAtOpen: true,
		CreatedAt: api.TimeOf(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)), OpensAt: api.TimeOf(time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC))}
	if diff := cmp.Diff(want, p.Program, cmp.Comparer(func(a, b api.Time) bool { return a.Equal(b.Time) })); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if string(p.Raw) != body {
		t.Errorf("Raw = %s, want the answer as sent", p.Raw)
	}
	if _, err := c.GetProgram(context.Background(), "bad"); err == nil || !strings.Contains(err.Error(), "opensAt") {
		t.Errorf("a malformed time: %v", err)
	}
}

func TestNewIdempotencyKey(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		k := client.NewIdempotencyKey()
		if len(k) != 26 || seen[k] {
			t.Fatalf("key %q: want 26 characters, never repeated", k)
		}
		seen[k] = true
	}
}

// TestCanceled: a request ended by the caller's context is observed as
// Canceled, and not worth retrying. The server signals the request's
// arrival and the test cancels then: the request is in flight for sure.
func TestCanceled(t *testing.T) {
	arrived := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
	}))
	defer srv.Close()
	var ex client.Exchange
	c := newClient(t, srv.URL, client.WithObserver(func(e client.Exchange) { ex = e }))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-arrived
		cancel()
	}()
	_, err := c.Poll(ctx, "p", "t")
	if err == nil || !errors.Is(err, context.Canceled) || !ex.Canceled || ex.Status != 0 || ex.Op != client.OpPoll {
		t.Errorf("err %v, exchange %+v; want a canceled poll", err, ex)
	}
	if _, ok := client.RetryDelay(ctx, err, time.Second); ok {
		t.Error("RetryDelay says retry after the caller's context ended")
	}
}

// TestEndSession sends the pass in X-Admission-Pass on the session route,
// and reads a refusal as an *Error with its code.
func TestEndSession(t *testing.T) {
	var method, path, pass string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method, path, pass = r.Method, r.URL.EscapedPath(), r.Header.Get(api.HeaderAdmissionPass)
		if pass == "expired" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"code":"PASS_EXPIRED","message":"The admission pass has expired."}`))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	c := newClient(t, srv.URL)
	if err := c.EndSession(context.Background(), "a b", "p.q.r"); err != nil {
		t.Fatal(err)
	}
	if method != http.MethodDelete || path != "/api/v1/queues/programs/a%20b/session" || pass != "p.q.r" {
		t.Errorf("sent %s %s with pass %q", method, path, pass)
	}
	err := c.EndSession(context.Background(), "a b", "expired")
	if ae := (*client.Error)(nil); !errors.As(err, &ae) || ae.Status != http.StatusForbidden || ae.Code != api.CodePassExpired {
		t.Errorf("EndSession of an expired pass = %v; want 403 %s", err, api.CodePassExpired)
	}
}

// TestTokenCalls looks a token up and revokes it against the real
// handler, as an admin; the requests go to the token's escaped path.
func TestTokenCalls(t *testing.T) {
	srv := newServer(t)
	var ops []client.Op
	c := newClient(t, srv.URL, client.WithAuth(client.BearerToken(secret)), client.WithHTTPClient(srv.Client()),
		client.WithObserver(func(e client.Exchange) {
			if e.Op == client.OpGetToken || e.Op == client.OpRevokeToken {
				ops = append(ops, e.Op)
			}
		}))
	ctx := context.Background()
	if _, _, err := c.PutProgram(ctx, "p1", api.ProgramSettings{Paused: new(true)}); err != nil {
		t.Fatal(err)
	}
	w, _, err := c.Enter(ctx, "p1", client.Entry{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Token(ctx, "p1", w.TokenID)
	if err != nil || got.Status != api.StatusWaiting || got.Position != 1 || got.RetainedUntil.IsZero() || len(got.Raw) == 0 {
		t.Fatalf("Token = %+v, %v; want WAITING at 1, with its retention and raw body", got, err)
	}
	for range 2 { // the second changes nothing
		if err := c.RevokeToken(ctx, "p1", w.TokenID); err != nil {
			t.Fatalf("RevokeToken = %v", err)
		}
	}
	if p, err := c.Poll(ctx, "p1", w.TokenID); err != nil || p.Status != api.StatusRevoked || p.RevokedAt.IsZero() || p.Position != 0 {
		t.Errorf("Poll after the revoke = %+v, %v; want REVOKED", p, err)
	}
	if got, err = c.Token(ctx, "p1", w.TokenID); err != nil || got.Status != api.StatusRevoked || got.RevokedAt.IsZero() {
		t.Errorf("Token after the revoke = %+v, %v; want REVOKED", got, err)
	}
	err = c.RevokeToken(ctx, "p1", "unknownTokenFixture001")
	if ae := (*client.Error)(nil); !errors.As(err, &ae) || ae.Status != http.StatusNotFound || ae.Code != api.CodeTokenNotFound {
		t.Errorf("RevokeToken of an unknown token = %v; want 404 %s", err, api.CodeTokenNotFound)
	}
	if len(ops) != 5 {
		t.Errorf("%d token calls observed, want 5", len(ops))
	}
	for _, op := range ops {
		if !op.Admin() {
			t.Errorf("%s is not an admin call", op)
		}
	}
}

// TestAccountCalls enters twice with enqueue tokens of one account, as two
// devices do, and looks the account's place up as an admin: one token,
// one ticket, the account named; the account goes escaped into the path.
func TestAccountCalls(t *testing.T) {
	site := enqueuetest.New(t)
	h := httpapi.New(queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithEnqueue(enqueue.NewVerifier(site.Client, nil))), httpapi.BearerAuth(secret))
	var paths []string // of the account look-ups
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/accounts/") {
			paths = append(paths, r.URL.EscapedPath())
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, srv.URL, client.WithAuth(client.BearerToken(secret)), client.WithHTTPClient(srv.Client()))
	ctx := context.Background()
	set := api.ProgramSettings{Paused: new(true), EnqueueJWKSURL: new(site.JWKSURL), EnqueueIssuer: new(enqueuetest.Issuer)}
	if _, _, err := c.PutProgram(ctx, "p1", set); err != nil {
		t.Fatal(err)
	}
	const account = "alice/1 ü"
	first, created, err := c.Enter(ctx, "p1", client.Entry{EnqueueToken: site.Token(t, "p1", account)})
	if err != nil || !created {
		t.Fatalf("Enter with an enqueue token = %+v, %v, %v; want a new place", first, created, err)
	}
	again, created, err := c.Enter(ctx, "p1", client.Entry{EnqueueToken: site.Token(t, "p1", account)})
	if err != nil || created || again.TokenID != first.TokenID || again.Ticket != first.Ticket {
		t.Fatalf("second Enter of the account = %+v, %v, %v; want %s ticket %d answered again", again, created, err, first.TokenID, first.Ticket)
	}
	got, err := c.AccountToken(ctx, "p1", account)
	if err != nil || got.TokenID != first.TokenID || got.Account != account || got.Status != api.StatusWaiting || !strings.Contains(string(got.Raw), `"account"`) {
		t.Fatalf("AccountToken = %+v, %v; want %s of %q, WAITING, with its raw body", got, err, first.TokenID, account)
	}
	_, err = c.AccountToken(ctx, "p1", "bob")
	if ae := (*client.Error)(nil); !errors.As(err, &ae) || ae.Status != http.StatusNotFound || ae.Code != api.CodeTokenNotFound {
		t.Errorf("AccountToken of an account with no place = %v; want 404 %s", err, api.CodeTokenNotFound)
	}
	if want := []string{"/api/v1/admin/programs/p1/accounts/alice%2F1%20%C3%BC", "/api/v1/admin/programs/p1/accounts/bob"}; !cmp.Equal(paths, want) {
		t.Errorf("paths %q, want %q", paths, want)
	}
	if !client.OpGetAccount.Admin() {
		t.Error("OpGetAccount is not an admin call")
	}
}

// TestTokenPath: the program and token go escaped into the path, with
// the admin credentials.
func TestTokenPath(t *testing.T) {
	var path, auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, auth = r.URL.EscapedPath(), r.Header.Get("Authorization")
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, client.WithAuth(client.BearerToken("tok")))
	if err := c.RevokeToken(context.Background(), "a b", "t/1"); err != nil {
		t.Fatal(err)
	}
	if want := "/api/v1/admin/programs/a%20b/tokens/t%2F1"; path != want || auth != "Bearer tok" {
		t.Errorf("sent %s with %q, want %s with the bearer token", path, auth, want)
	}
}

// TestKeyCalls lists, rotates and revokes signing keys against the real
// handler with a keyring, as an admin; a handler without one answers
// NO_KEYRING. The keyring's clock stands at noon UTC, mid-slot: away from
// the lead before the next day's key, so its keys are the ones the test
// makes.
func TestKeyCalls(t *testing.T) {
	wrap, err := localkeys.NewWrapper()
	if err != nil {
		t.Fatal(err)
	}
	noon := time.Date(2026, 6, 15, 12, 0, 0, 0, time.UTC)
	ring := admissionpass.NewKeyring(memstore.New(), wrap, admissionpass.WithKeyringClock(simclock.NewFake(noon)))
	srv := httptest.NewServer(httpapi.New(queue.NewService(memstore.New(), polling.DefaultTiers()), httpapi.BearerAuth(secret), httpapi.WithKeyring(ring)))
	t.Cleanup(srv.Close)
	var ops []client.Op
	c := newClient(t, srv.URL, client.WithAuth(client.BearerToken(secret)), client.WithHTTPClient(srv.Client()),
		client.WithObserver(func(e client.Exchange) { ops = append(ops, e.Op) }))
	ctx := context.Background()

	if l, err := c.Keys(ctx); err != nil || l.RotationSeconds != 86400 || len(l.Keys) != 0 {
		t.Fatalf("Keys = %+v, %v; want none, a rotation of a day", l, err)
	}
	k, err := c.RotateKey(ctx)
	if err != nil || k.State != api.KeyNext || len(k.KeyID) != 43 || !k.CreatedAt.Equal(noon) || !k.SignFrom.Equal(noon.Add(15*time.Minute)) {
		t.Fatalf("RotateKey = %+v, %v; want a next key made at %s, signing 15 minutes on", k, err, noon)
	}
	if l, err := c.Keys(ctx); err != nil || len(l.Keys) != 1 || l.Keys[0].KeyID != k.KeyID {
		t.Errorf("Keys after the rotation = %+v, %v; want the new key", l, err)
	}
	if r, err := c.RevokeKey(ctx, k.KeyID); err != nil || r.Revoked != k.KeyID || r.Replacement != nil {
		t.Errorf("RevokeKey of a key that does not sign yet = %+v, %v; want it revoked, no replacement", r, err)
	}
	_, err = c.RevokeKey(ctx, "unknownKeyFixture00000000000000000000000000")
	if ae := (*client.Error)(nil); !errors.As(err, &ae) || ae.Status != http.StatusNotFound || ae.Code != api.CodeKeyNotFound {
		t.Errorf("RevokeKey of an unknown key = %v; want 404 %s", err, api.CodeKeyNotFound)
	}
	for _, op := range ops {
		if !op.Admin() {
			t.Errorf("%s is not an admin call", op)
		}
	}

	fixed := newClient(t, newServer(t).URL, client.WithAuth(client.BearerToken(secret)))
	_, err = fixed.RotateKey(ctx)
	if ae := (*client.Error)(nil); !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != api.CodeNoKeyring {
		t.Errorf("RotateKey without a keyring = %v; want 409 %s", err, api.CodeNoKeyring)
	}
}

// TestProve: against the real handler, an enter without a proof needs one;
// Prove fetches and solves a challenge with which the enter takes its
// place; the same proof again needs a new one.
func TestProve(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv.URL+"/", client.WithAuth(client.BearerToken(secret)), client.WithHTTPClient(srv.Client()))
	ctx := t.Context()
	if _, _, err := c.PutProgram(ctx, "guarded", api.ProgramSettings{Paused: new(true), ChallengeBits: new(int64(8))}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Enter(ctx, "guarded", client.Entry{}); !client.NeedsProof(err) {
		t.Fatalf("enter without a proof: %v, want CHALLENGE_REQUIRED", err)
	}
	e, err := c.Prove(ctx, "guarded", client.Entry{IdempotencyKey: client.NewIdempotencyKey()})
	if err != nil || e.Challenge == "" || e.Solution == "" {
		t.Fatalf("Prove = %+v, %v", e, err)
	}
	if _, created, err := c.Enter(ctx, "guarded", e); err != nil || !created {
		t.Fatalf("enter with the proof: created %v, %v", created, err)
	}
	e.IdempotencyKey = client.NewIdempotencyKey()
	if _, _, err := c.Enter(ctx, "guarded", e); !client.NeedsProof(err) {
		t.Errorf("the proof again under another key: %v, want CHALLENGE_FAILED", err)
	}
	if _, _, err := c.PutProgram(ctx, "open", api.ProgramSettings{Paused: new(true)}); err != nil {
		t.Fatal(err)
	}
	if e, err := c.Prove(ctx, "open", client.Entry{}); err != nil || e.Challenge != "" {
		t.Errorf("Prove of a program without proof: %+v, %v; want no proof", e, err)
	}
}
