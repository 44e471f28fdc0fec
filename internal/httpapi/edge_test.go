package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/edge"
	"github.com/example/waitingroom/internal/edgekv"

	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tools/localkvs"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/simclock"
)

// edgeRig is both APIs over memstore with the edge gate's store emulated
// on loopback, reached through the SDK as on AWS.
type edgeRig struct {
	h        http.Handler
	kvs      *localkvs.Server
	clk      *simclock.Fake
	failGets *atomic.Bool
}

// flakyKV fails every Get while fail is set.
type flakyKV struct {
	edgekv.Store
	fail *atomic.Bool
}

func (f flakyKV) Get(ctx context.Context, key string) (string, error) {
	if f.fail.Load() {
		return "", errors.New("edge store down at arn:aws:cloudfront::123456789012:key-value-store/x")
	}
	return f.Store.Get(ctx, key)
}

func newEdgeRig(t *testing.T) *edgeRig {
	t.Helper()
	emu := localkvs.New("")
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")}
	failGets := &atomic.Bool{}
	kv := flakyKV{edgekv.New(edgekv.NewAPI(cfg, srv.URL), emu.ARN()), failGets}
	clk := simclock.NewFake(t0)
	svc := queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(clk),
		queue.WithPassSigner(app.Signer(passIssuer(t, "https://queue.example.com"))),
		queue.WithEdgeTokens(edge.NewMinter(kv, clk)))
	pub := edge.NewPublisher(kv, edge.DefaultSite(), svc, clk)
	h := checked(t, httpapi.New(svc, httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard), httpapi.WithEdge(pub)))
	return &edgeRig{h: h, kvs: emu, clk: clk, failGets: failGets}
}

// call sends a request (admin ones with the bearer token) and returns the status and body.
func (r *edgeRig) call(method, path, body string, hdr ...string) (int, string) {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer s3cret")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	r.h.ServeHTTP(w, req)
	return w.Code, w.Body.String()
}

func (r *edgeRig) entry(t *testing.T, key string) map[string]any {
	t.Helper()
	v, ok := r.kvs.Get(key)
	if !ok {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return m
}

func TestEdgeAdmin(t *testing.T) {
	r := newEdgeRig(t)
	gala := "/api/v1/admin/programs/gala"
	for _, s := range []struct {
		name, method, path, body string
		status                   int
		code                     string // of an error answer
		failPuts, failGets       bool
	}{
		{name: "create at the gate", method: "PUT", path: gala, body: `{"paused":true,"edgeMode":"on","edgePaths":["/shop/"],"edgeSessionSeconds":600}`, status: 201},
		{name: "a bad mode", method: "PUT", path: gala, body: `{"edgeMode":"yes"}`, status: 400, code: api.CodeInvalidSettings},
		{name: "a bad path", method: "PUT", path: gala, body: `{"edgePaths":["shop"]}`, status: 400, code: api.CodeInvalidSettings},
		{name: "the store refuses every write", method: "PUT", path: gala, body: `{"edgeMode":"standby"}`, status: 503, code: api.CodeEdgeUnavailable, failPuts: true},
		{name: "keys: the store refuses", method: "POST", path: api.EdgeKeysPath, body: `{}`, status: 503, code: api.CodeEdgeUnavailable, failPuts: true},
		{name: "rotate: no body", method: "POST", path: api.EdgeKeysPath, status: 400, code: api.CodeInvalidJSON},
		{name: "list: the store fails", method: "GET", path: api.EdgeKeysPath, status: 503, code: api.CodeEdgeUnavailable, failGets: true},
	} {
		r.kvs.FailPuts(func(int) bool { return s.failPuts })
		r.failGets.Store(s.failGets)
		status, body := r.call(s.method, s.path, s.body)
		if status != s.status {
			t.Errorf("%s: %d %s, want %d", s.name, status, body, s.status)
			continue
		}
		var e api.Error
		if s.code != "" && (json.Unmarshal([]byte(body), &e) != nil || e.Code != s.code) {
			t.Errorf("%s: %s, want code %s", s.name, body, s.code)
		}
		if strings.Contains(body, "arn:") {
			t.Errorf("%s: the answer leaks the store's error: %s", s.name, body)
		}
	}
	r.kvs.FailPuts(nil)
	r.failGets.Store(false)

	// The refused change was saved, not published: the same change again publishes it.
	if got := r.entry(t, "p.gala")["mode"]; got != "on" {
		t.Errorf("p.gala mode %v after the refused write, want on", got)
	}
	if status, body := r.call("PUT", gala, `{"edgeMode":"standby"}`); status != 200 {
		t.Fatalf("the change again: %d %s", status, body)
	}
	if diff := cmp.Diff(map[string]any{"mode": "standby", "session": 600.0}, r.entry(t, "p.gala")); diff != "" {
		t.Errorf("p.gala (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]any{[]any{"/shop/", "gala"}}, r.entry(t, "site")["routes"]); diff != "" {
		t.Errorf("site routes (-want +got):\n%s", diff)
	}

	// Routes over one store value are refused before anything is saved.
	var long []string
	for i := range 10 {
		long = append(long, fmt.Sprintf("/%s/%d/", strings.Repeat("x", 100), i))
	}
	paths, _ := json.Marshal(long)
	if status, body := r.call("PUT", "/api/v1/admin/programs/big", `{"edgeMode":"on","edgePaths":`+string(paths)+`}`); status != 400 || !strings.Contains(body, api.CodeInvalidSettings) {
		t.Errorf("routes over 1 KB: %d %s, want 400 %s", status, body, api.CodeInvalidSettings)
	}
	if status, _ := r.call("GET", "/api/v1/admin/programs/big", ""); status != 404 {
		t.Errorf("the refused program: %d, want 404 (not created)", status)
	}

	// A change of no edge setting writes nothing to the edge.
	puts := r.kvs.Calls("PutKey")
	if status, _ := r.call("PUT", gala, `{"paused":false}`); status != 200 || r.kvs.Calls("PutKey") != puts {
		t.Errorf("a change of paused: %d, %d writes to the edge, want none", status, r.kvs.Calls("PutKey")-puts)
	}

	// The first program at the gate made a key; a rotation adds one that signs later.
	status, body := r.call("GET", api.EdgeKeysPath, "")
	var keys api.EdgeKeys
	if status != 200 || json.Unmarshal([]byte(body), &keys) != nil || len(keys.Keys) != 1 || keys.Keys[0].State != "signing" {
		t.Fatalf("the keys: %d %s, want one signing", status, body)
	}
	first := keys.Keys[0].KeyID
	r.clk.Advance(time.Hour)
	status, body = r.call("POST", api.EdgeKeysPath, `{}`)
	if status != 201 || json.Unmarshal([]byte(body), &keys) != nil {
		t.Fatalf("rotate: %d %s", status, body)
	}
	want := api.EdgeKeys{Keys: []api.EdgeKey{
		{KeyID: keys.Keys[0].KeyID, State: "next", SignsFrom: api.TimeOf(r.clk.Now().Add(edge.Propagation).Truncate(time.Second))},
		{KeyID: first, State: "signing", SignsFrom: keys.Keys[1].SignsFrom},
	}}
	if diff := cmp.Diff(want, keys); diff != "" || keys.Keys[0].KeyID == first {
		t.Errorf("after a rotation (-want +got):\n%s", diff)
	}
	if strings.Contains(body, `"k"`) || strings.Contains(body, "secret") {
		t.Errorf("a secret in the answer: %s", body)
	}
	status, body = r.call("POST", api.EdgeKeysPath, `{"drop":true}`)
	if status != 201 || json.Unmarshal([]byte(body), &keys) != nil || len(keys.Keys) != 1 || keys.Keys[0].State != "signing" {
		t.Errorf("rotate with drop: %d %s, want one key, signing", status, body)
	}

	// A deleted program leaves the gate.
	if status, body := r.call("PUT", gala, `{"closed":true}`); status != 200 {
		t.Fatalf("close: %d %s", status, body)
	}
	r.kvs.FailPuts(func(int) bool { return true })
	if status, body := r.call("DELETE", gala, ""); status != 503 || !strings.Contains(body, api.CodeEdgeUnavailable) {
		t.Fatalf("delete with the edge's store down: %d %s, want 503 %s", status, body, api.CodeEdgeUnavailable)
	}
	r.kvs.FailPuts(nil)
	if got := r.entry(t, "p.gala")["mode"]; got == "off" {
		t.Fatalf("p.gala off before the DELETE is sent again")
	}
	if status, body := r.call("DELETE", gala, ""); status != 404 { // deleted: sent again, it publishes
		t.Fatalf("delete again: %d %s, want 404", status, body)
	}
	if got, routes := r.entry(t, "p.gala")["mode"], r.entry(t, "site")["routes"]; got != "off" || routes != nil {
		t.Errorf("after the delete: mode %v, routes %v; want off and none", got, routes)
	}
}

func TestEdgeTokens(t *testing.T) {
	r := newEdgeRig(t)
	for id, body := range map[string]string{
		"gala":  `{"admissionRatePerSecond":1,"paused":false,"edgeMode":"on","edgePaths":["/shop/"]}`,
		"plain": `{"admissionRatePerSecond":1,"paused":false}`,
	} {
		if status, b := r.call("PUT", "/api/v1/admin/programs/"+id, body); status != 201 {
			t.Fatalf("create %s: %d %s", id, status, b)
		}
	}
	ks, err := edge.ReadKeys(t.Context(), kvsStore{r.kvs})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		program string
		token   bool
	}{{"gala", true}, {"plain", false}} {
		status, body := r.call("POST", "/api/v1/queues/programs/"+tc.program, "")
		var tok api.Token
		if status != 201 || json.Unmarshal([]byte(body), &tok) != nil {
			t.Fatalf("enter %s: %d %s", tc.program, status, body)
		}
		r.clk.Advance(2 * time.Second)
		status, body = r.call("GET", "/api/v1/queues/programs/"+tc.program, "", api.HeaderToken, tok.TokenID)
		if status != 200 || json.Unmarshal([]byte(body), &tok) != nil || tok.Status != api.StatusAdmitted || tok.AdmissionPass == "" {
			t.Fatalf("poll %s: %d %s, want ADMITTED with a pass", tc.program, status, body)
		}
		if !tc.token {
			if tok.EdgeToken != "" {
				t.Errorf("%s, not at the gate: an edge token %q", tc.program, tok.EdgeToken)
			}
			continue
		}
		exp, jti, err := ks.VerifyToken(tok.EdgeToken, tc.program, r.clk.Now())
		if err != nil || !exp.Equal(tok.ExpiresAt.Time.Truncate(time.Second)) || jti == "" || !strings.Contains(tok.AdmissionPass, ".") {
			t.Errorf("%s: edge token %q: %v, %v, %v; want one valid until %v", tc.program, tok.EdgeToken, exp, jti, err, tok.ExpiresAt)
		}
		if _, _, err := ks.VerifyToken(tok.EdgeToken, "plain", r.clk.Now()); err == nil {
			t.Errorf("%s's token passes for another program", tc.program)
		}
	}

	// Without its keys readable, an admitted answer is a 503 to retry, never one without the token.
	r.kvs.Set(edge.KeysKey, "not JSON")
	status, body := r.call("POST", "/api/v1/queues/programs/gala", "")
	var tok api.Token
	if status != 201 || json.Unmarshal([]byte(body), &tok) != nil {
		t.Fatalf("enter: %d %s", status, body)
	}
	r.clk.Advance(edge.KeysTTL + 2*time.Second)
	status, body = r.call("GET", "/api/v1/queues/programs/gala", "", api.HeaderToken, tok.TokenID)
	if status != 200 || !strings.Contains(body, `"edgeToken"`) {
		t.Errorf("with the keys unreadable after they were read once: %d %s; want the token of the keys read before", status, body)
	}
}

func TestEdgeTokenUnavailable(t *testing.T) {
	r := newEdgeRig(t)
	if status, b := r.call("PUT", "/api/v1/admin/programs/gala", `{"admissionRatePerSecond":1,"paused":false,"edgeMode":"on","edgePaths":["/"]}`); status != 201 {
		t.Fatalf("create: %d %s", status, b)
	}
	r.kvs.Set(edge.KeysKey, "not JSON") // before this instance ever read them
	_, body := r.call("POST", "/api/v1/queues/programs/gala", "")
	var tok api.Token
	if err := json.Unmarshal([]byte(body), &tok); err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(2 * time.Second)
	status, body := r.call("GET", "/api/v1/queues/programs/gala", "", api.HeaderToken, tok.TokenID)
	var e api.Error
	if status != 503 || json.Unmarshal([]byte(body), &e) != nil || e.Code != api.CodeEdgeUnavailable {
		t.Errorf("admitted without readable keys: %d %s; want 503 %s", status, body, api.CodeEdgeUnavailable)
	}
}

// kvsStore reads an emulated store in process, as edgekv.Store.
type kvsStore struct{ *localkvs.Server }

func (s kvsStore) Get(_ context.Context, key string) (string, error) {
	if v, ok := s.Server.Get(key); ok {
		return v, nil
	}
	return "", edgekv.ErrNotFound
}

func (s kvsStore) Put(_ context.Context, key, value string) error {
	s.Server.Set(key, value)
	return nil
}
