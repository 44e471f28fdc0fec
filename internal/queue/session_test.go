package queue_test

import (
	"errors"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/queue"
)

// newSigner signs passes with a fresh key, as the service does on AWS.
func newSigner(t testing.TB) queue.PassSigner {
	t.Helper()
	key, err := admissionpass.GenerateLocalKey()
	if err != nil {
		t.Fatal(err)
	}
	iss, err := admissionpass.NewIssuer("https://queue.example.com", key)
	if err != nil {
		t.Fatal(err)
	}
	return app.Signer(iss)
}

// TestEndSession: the site ends an admission with the pass it holds; the
// token then reads LEFT. A pass that is not the one stored for its token
// (forged, altered, another program's), none, or one whose admission is
// over is refused with its own code; ending twice is no error.
func TestEndSession(t *testing.T) {
	ctx := t.Context()
	signer := newSigner(t)
	svc, c := newService(t, queue.WithPassSigner(signer))
	mustPut(t, svc, "gala", 10, false)
	mustPut(t, svc, "other", 10, false)
	admitted := func(program string) queue.View {
		t.Helper()
		v, _, err := svc.Enter(ctx, program, queue.Entry{})
		if err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Second)
		if v, err = svc.Poll(ctx, program, v.TokenID); err != nil || v.Status != queue.StatusAdmitted || v.AdmissionPass == "" {
			t.Fatalf("not admitted with a pass: %+v, %v", v, err)
		}
		return v
	}
	a, b, elsewhere := admitted("gala"), admitted("gala"), admitted("other")
	refused := func(what, program, pass, code string) {
		t.Helper()
		err := svc.EndSession(ctx, program, pass)
		var qe *queue.Error
		if !errors.As(err, &qe) || qe.Code != code {
			t.Errorf("%s: %v, want %s", what, err, code)
		}
	}
	refused("no pass", "gala", "", api.CodeMissingPass)
	refused("not a JWT", "gala", "pass", api.CodeInvalidPass)
	refused("another program's pass", "gala", elsewhere.AdmissionPass, api.CodeInvalidPass)
	altered := []byte(a.AdmissionPass)
	altered[len(altered)-2] ^= 1 // a signature bit
	refused("an altered pass", "gala", string(altered), api.CodeInvalidPass)
	// A genuine pass signed by another key for the same token: not the one
	// stored, so refused too.
	forged, err := newSigner(t).SignPass(ctx, queue.Token{ID: a.TokenID, ProgramID: "gala", Ticket: a.Ticket, AdmittedAt: a.AdmittedAt, AdmissionExpiresAt: a.ExpiresAt})
	if err != nil {
		t.Fatal(err)
	}
	refused("a pass signed by another key", "gala", forged, api.CodeInvalidPass)
	if v, _ := svc.Poll(ctx, "gala", a.TokenID); v.Status != queue.StatusAdmitted {
		t.Fatalf("refused passes ended the admission: %+v", v)
	}

	for range 2 { // the second time changes nothing
		if err := svc.EndSession(ctx, "gala", a.AdmissionPass); err != nil {
			t.Fatalf("EndSession: %v", err)
		}
		if v, _ := svc.Poll(ctx, "gala", a.TokenID); v.Status != queue.StatusLeft || v.AdmissionPass != "" {
			t.Fatalf("after ending the session: %+v", v)
		}
	}
	c.Advance(queue.DefaultAdmissionWindow)
	refused("a pass whose admission is over", "gala", b.AdmissionPass, api.CodePassExpired)
	if v, _ := svc.Poll(ctx, "gala", b.TokenID); v.Status != queue.StatusExpired {
		t.Errorf("an expired admission ended: %+v", v)
	}
}
