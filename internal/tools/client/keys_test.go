package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tools/client"
)

// TestKeyCalls lists, rotates and revokes signing keys against the real
// handler with a keyring, as an admin; a handler without one answers
// NO_KEYRING. The keyring's clock stands at noon UTC, mid-slot: away from
// the lead before the next day's key, so its keys are the ones the test
// makes.
func TestKeyCalls(t *testing.T) {
	wrap, err := admissionpass.NewLocalWrapper()
	if err != nil {
		t.Fatal(err)
	}
	noon := time.Date(2026, 6, 15, 12, 0, 0, 0, time.UTC)
	ring := admissionpass.NewKeyring(memstore.New(), wrap, admissionpass.WithKeyringClock(clock.NewFake(noon)))
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
