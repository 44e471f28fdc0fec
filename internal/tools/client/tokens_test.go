package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/tools/client"
)

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
