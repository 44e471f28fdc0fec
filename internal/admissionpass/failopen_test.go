package admissionpass_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/testing/passtest"
)

// lister is a FailOpen.List that answers ends, or err, and counts its calls.
type lister struct {
	ends  map[string]time.Time
	err   error
	calls int
}

func (l *lister) list(context.Context) (map[string]time.Time, error) {
	l.calls++
	return l.ends, l.err
}

// jwksAnswer is what a test checks of a JWKS answer: the status, the kids of
// its keys as a JWKS consumer reads them, and its failOpen member.
type jwksAnswer struct {
	Status   int
	KIDs     []string
	FailOpen map[string]string
}

func getJWKS(t *testing.T, h http.Handler) jwksAnswer {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/.well-known/jwks.json", nil))
	a := jwksAnswer{Status: rec.Code}
	// A standard consumer ignores the member (RFC 7517 §5).
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(rec.Body.Bytes(), &set); err != nil {
		t.Fatalf("JWKS %s: %v", rec.Body, err)
	}
	for _, k := range set.Keys {
		a.KIDs = append(a.KIDs, k.KeyID)
	}
	var doc struct {
		FailOpen map[string]string `json:"failOpen"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	a.FailOpen = doc.FailOpen
	return a
}

// TestJWKSFailOpen: the JWKS lists, in failOpen, the break-glasses that
// have not ended, and is the keys alone without any.
func TestJWKSFailOpen(t *testing.T) {
	key, _ := newLocalKey(t)
	issuer, _, kid := issuerOf(t, key)
	now := time.Date(2026, 12, 6, 22, 0, 0, 0, time.UTC)
	kst := time.FixedZone("KST", 9*3600)
	tests := []struct {
		name     string
		failOpen *admissionpass.FailOpen
		want     map[string]string
	}{
		{"NoFailOpen", nil, nil},
		{"NoList", &admissionpass.FailOpen{}, nil},
		{"NoneListed", &admissionpass.FailOpen{List: (&lister{}).list}, nil},
		{"Listed", &admissionpass.FailOpen{List: (&lister{ends: map[string]time.Time{
			"gala":  now.Add(10 * time.Minute).In(kst),
			"expo":  now.Add(time.Second),
			"ended": now.Add(-time.Second),
			"now":   now, // ends at this instant: off
		}}).list}, map[string]string{"gala": "2026-12-06T22:10:00Z", "expo": "2026-12-06T22:00:01Z"}},
		{"AllEnded", &admissionpass.FailOpen{List: (&lister{ends: map[string]time.Time{"ended": now.Add(-time.Hour)}}).list}, nil},
		{"ListFails", &admissionpass.FailOpen{List: (&lister{err: errors.New("table unavailable")}).list}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.failOpen != nil {
				tt.failOpen.Now = func() time.Time { return now }
			}
			want := jwksAnswer{Status: http.StatusOK, KIDs: []string{kid}, FailOpen: tt.want}
			if diff := cmp.Diff(want, getJWKS(t, issuer.JWKSHandler(nil, tt.failOpen))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestJWKSFailOpenCache: the handler lists at most once per FailOpenTTL,
// drops a break-glass at its end between two lists, and after a failed
// list keeps the last one's (logged), trying again a TTL later.
func TestJWKSFailOpenCache(t *testing.T) {
	key, _ := newLocalKey(t)
	issuer, _, kid := issuerOf(t, key)
	t0 := time.Date(2026, 12, 6, 22, 0, 0, 0, time.UTC)
	clock := passtest.NewClock(t0)
	l := &lister{ends: map[string]time.Time{"gala": t0.Add(time.Hour), "expo": t0.Add(10 * time.Second)}}
	var failures []error
	h := issuer.JWKSHandler(nil, &admissionpass.FailOpen{List: l.list, Now: clock.Now,
		OnError: func(_ context.Context, err error) { failures = append(failures, err) }})
	errDown := errors.New("table unavailable")
	steps := []struct {
		name      string
		advance   time.Duration
		ends      map[string]time.Time // the programs' ends from this step on
		err       error                // List's error from this step on
		want      map[string]string
		wantCalls int
	}{
		{"First", 0, nil, nil, map[string]string{"gala": "2026-12-06T23:00:00Z", "expo": "2026-12-06T22:00:10Z"}, 1},
		{"WithinTTL", 10 * time.Second, map[string]time.Time{}, nil, map[string]string{"gala": "2026-12-06T23:00:00Z"}, 1},
		{"LastInstantOfTTL", admissionpass.FailOpenTTL - 10*time.Second - time.Nanosecond, nil, nil, map[string]string{"gala": "2026-12-06T23:00:00Z"}, 1},
		{"TTLOver", time.Nanosecond, nil, nil, nil, 2},
		{"Again", admissionpass.FailOpenTTL, map[string]time.Time{"gala": t0.Add(time.Hour)}, nil, map[string]string{"gala": "2026-12-06T23:00:00Z"}, 3},
		{"ListFailsKeepsLast", admissionpass.FailOpenTTL, nil, errDown, map[string]string{"gala": "2026-12-06T23:00:00Z"}, 4},
		{"FailureCached", time.Second, nil, errDown, map[string]string{"gala": "2026-12-06T23:00:00Z"}, 4},
		{"ListAgain", admissionpass.FailOpenTTL, map[string]time.Time{}, nil, nil, 5},
	}
	for _, s := range steps {
		clock.Advance(s.advance)
		if s.ends != nil {
			l.ends = s.ends
		}
		l.err = s.err
		want := jwksAnswer{Status: http.StatusOK, KIDs: []string{kid}, FailOpen: s.want}
		if diff := cmp.Diff(want, getJWKS(t, h)); diff != "" {
			t.Errorf("%s: (-want +got):\n%s", s.name, diff)
		}
		if l.calls != s.wantCalls {
			t.Errorf("%s: %d lists, want %d", s.name, l.calls, s.wantCalls)
		}
	}
	if len(failures) != 1 || !errors.Is(failures[0], errDown) {
		t.Errorf("OnError got %v, want the one failed list", failures)
	}
}
