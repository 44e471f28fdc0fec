package waitpage_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/waitpage"
)

// fakeQueue is a scripted queue: it implements waitpage.Programs and the
// JSON API's enter and poll routes, and records every API request it
// answers, so that tests can check the page's requests; the page records
// their times on its own clock (pageRecorder).
type fakeQueue struct {
	mu        sync.Mutex
	programs  map[string]*script
	tokens    map[string]*fakeToken
	keys      map[string]string // Idempotency-Key → token id
	calls     []apiCall
	answered  chan struct{} // closed, and replaced, when a call is recorded
	inFlight  int
	maxAtOnce int
	pageErr   error // Page fails with it when set
	// challenges are the proofs of work handed out, true once used.
	challenges map[string]bool
	polls      int // calls of Programs.Poll (the no-JavaScript page)
	// arrive, when set, is called with each API request as it arrives,
	// before it is answered: a test holds a request by blocking in it.
	arrive func(apiCall)
	// pushes are the push subscription requests (PUT and DELETE), apart
	// from calls: they are no polls.
	pushes []apiCall
	// handoff: the codes handed out, the redeems' keys, and the handoff
	// requests (apart from calls: they are no polls).
	codes      map[string]*fakeCode
	redeemKeys map[string]fakeRedeem
	handoffs   []apiCall
	// loseRedeems is how many redeems to do, then answer 503 with
	// Retry-After: 1 as if their answers were lost.
	loseRedeems int
	// accounts are the places of enqueue tokens: the fake takes the token
	// itself for its account; one starting "bad" is refused.
	accounts map[string]string
	// leaves are the DELETEs of a place (apart from calls: they are no polls).
	leaves []apiCall
}

// fakeCode is a handoff code of a token.
type fakeCode struct {
	token   string
	expires time.Time
	used    bool
}

// fakeRedeem is what a redeem's Idempotency-Key did: code gave token.
type fakeRedeem struct{ code, token string }

// script says how a program's tokens move: each poll of a WAITING token
// takes step off its position, until admitAfter polls (0: never).
type script struct {
	info       waitpage.PageInfo
	start      int64
	step       int64
	floor      int64           // positions stop falling here; 1 when 0
	retry      []time.Duration // retryAfterMs of successive answers, cycled
	perPerson  time.Duration   // estimatedWait = position × perPerson; 0: not known
	admitAfter int
	fail       map[int]int // answer number → Retry-After seconds of a 503 instead
	notice     string
	texts      map[string]api.Texts // by the page's language: the translated texts, each falling back
	opensAt    time.Time
	window     time.Duration
	full       bool // the line is at its limit: enters get QUEUE_FULL
	// challengeBits asks each enter for a proof of work of that many bits
	// (0: none), as the API's challengeBits does.
	challengeBits int
	// pushRetry is the retryAfterMs of the answers to a token with a push
	// subscription (the push wakes the page earlier); retry's when 0.
	pushRetry time.Duration
	// refusePush drops an enter's push subscription, as the API does with
	// one it cannot use: the token is made unsubscribed.
	refusePush bool
	// account makes every place an account's: a handoff, or a redeem, is refused.
	account bool
	// requireEnqueue refuses an enter without an enqueue token.
	requireEnqueue bool
}

type fakeToken struct {
	id, program string
	answers     int
	status      api.Status
	position    int64
	expiresAt   time.Time
	leftAt      time.Time
	pass        string
	push        string // the push subscription's JSON; "": none
}

// apiCall is one request to the JSON API as the fake server saw it.
type apiCall struct {
	Method, Token, Key string
	Lang               string        // the query's lang
	Status             int           // HTTP status answered
	RetryAfter         time.Duration // the delay the answer asked for; 0: none
	Body               string        // the request's body
	ContentType        string
	Redeem             bool   // a POST …/handoff/redeem
	Enqueue            string // the X-Enqueue-Token header
}

var programIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

func newFakeQueue() *fakeQueue {
	return &fakeQueue{
		programs: map[string]*script{}, tokens: map[string]*fakeToken{}, keys: map[string]string{}, challenges: map[string]bool{},
		codes: map[string]*fakeCode{}, redeemKeys: map[string]fakeRedeem{}, accounts: map[string]string{},
		answered: make(chan struct{}),
	}
}

// begin counts request c in flight and lets the test's arrive hook see it;
// the func it returns ends the request.
func (q *fakeQueue) begin(c apiCall) (end func()) {
	q.mu.Lock()
	q.inFlight++
	q.maxAtOnce = max(q.maxAtOnce, q.inFlight)
	arrive := q.arrive
	q.mu.Unlock()
	if arrive != nil {
		arrive(c)
	}
	return func() {
		q.mu.Lock()
		q.inFlight--
		q.mu.Unlock()
	}
}

func (q *fakeQueue) add(id string, s *script) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(s.retry) == 0 {
		s.retry = []time.Duration{200 * time.Millisecond}
	}
	if s.window == 0 {
		s.window = 10 * time.Minute
	}
	q.programs[id] = s
}

// Page implements waitpage.Programs.
func (q *fakeQueue) Page(_ context.Context, id, lang string) (waitpage.PageInfo, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.pageErr != nil {
		return waitpage.PageInfo{}, q.pageErr
	}
	p, err := q.program(id)
	if err != nil {
		return waitpage.PageInfo{}, err
	}
	info := p.info
	info.Closed = info.Closed || p.closedAt()
	info.DisplayName = cmp.Or(p.texts[lang].DisplayName, info.DisplayName)
	info.Message = cmp.Or(p.texts[lang].Message, info.Message)
	return info, nil
}

// Enter implements waitpage.Programs.
func (q *fakeQueue) Enter(_ context.Context, id, tokenID, key, lang string) (waitpage.View, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if p, err := q.program(id); err == nil && p.challengeBits > 0 && q.keys[key] == "" {
		return waitpage.View{}, waitpage.ErrNeedsScript // no script, no proof
	}
	v, _, err := q.enter(id, tokenID, key, lang)
	return v, err
}

// Poll implements waitpage.Programs.
func (q *fakeQueue) Poll(_ context.Context, id, tokenID, lang string) (waitpage.View, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.polls++
	v, fail, err := q.poll(id, tokenID, lang)
	if err == nil && fail > 0 {
		err = fmt.Errorf("scripted store fault")
	}
	return v, err
}

func (q *fakeQueue) program(id string) (*script, error) {
	if !programIDPattern.MatchString(id) {
		return nil, waitpage.ErrInvalidProgram
	}
	p, ok := q.programs[id]
	if !ok {
		return nil, waitpage.ErrProgramNotFound
	}
	return p, nil
}

func (q *fakeQueue) enter(id, tokenID, key, lang string) (v waitpage.View, created bool, err error) {
	return q.enterPush(id, tokenID, key, lang, "")
}

// enterPush is enter with the push subscription of the enter's body ("": none),
// which a new token takes.
func (q *fakeQueue) enterPush(id, tokenID, key, lang, push string) (v waitpage.View, created bool, err error) {
	p, err := q.program(id)
	if err != nil {
		return v, false, err
	}
	if t, ok := q.tokens[tokenID]; ok && t.program == id && (t.status == api.StatusWaiting || t.status == api.StatusAdmitted) {
		return q.view(p, t, lang), false, nil
	}
	if tid, ok := q.keys[key]; ok && key != "" {
		return q.view(p, q.tokens[tid], lang), false, nil
	}
	if p.info.Closed || p.closedAt() {
		return v, false, waitpage.ErrClosed
	}
	if p.full {
		return v, false, waitpage.ErrFull
	}
	t := &fakeToken{id: rand.Text()[:22], program: id, status: api.StatusWaiting, position: p.start, push: push}
	q.tokens[t.id] = t
	if key != "" {
		q.keys[key] = t.id
	}
	return q.view(p, t, lang), true, nil
}

// closedAt reports whether the program's scheduled close has come.
func (p *script) closedAt() bool {
	return !p.info.ClosesAt.IsZero() && !time.Now().Before(p.info.ClosesAt)
}

// poll advances the token by one answer; fail > 0 asks for a 503 with
// that Retry-After instead.
func (q *fakeQueue) poll(id, tokenID, lang string) (v waitpage.View, fail int, err error) {
	p, err := q.program(id)
	if err != nil {
		return v, 0, err
	}
	t, ok := q.tokens[tokenID]
	if !ok || t.program != id {
		return v, 0, waitpage.ErrTokenNotFound
	}
	t.answers++
	if ra, ok := p.fail[t.answers]; ok {
		return v, ra, nil
	}
	if t.status == api.StatusWaiting {
		if p.admitAfter > 0 && t.answers >= p.admitAfter {
			t.status, t.expiresAt = api.StatusAdmitted, time.Now().Add(p.window)
			t.pass = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ" + t.id + "In0.sig+/="
		} else {
			t.position = max(1, p.floor, t.position-p.step)
		}
	}
	return q.view(p, t, lang), 0, nil
}

func (q *fakeQueue) view(p *script, t *fakeToken, lang string) waitpage.View {
	v := waitpage.View{TokenID: t.id, Status: t.status, OpensAt: api.TimeOf(p.opensAt)}
	switch t.status {
	case api.StatusWaiting:
		v.ClosesAt = api.TimeOf(p.info.ClosesAt)
		v.Position = t.position
		v.RetryAfterMs = p.retry[t.answers%len(p.retry)].Milliseconds()
		if t.push != "" && p.pushRetry > 0 {
			v.RetryAfterMs = p.pushRetry.Milliseconds()
		}
		v.Push = t.push != ""
		v.EstimatedWaitMs = (time.Duration(t.position) * p.perPerson).Milliseconds()
		v.Notice = cmp.Or(p.texts[lang].Notice, p.notice)
		v.Paused = p.info.Paused
	case api.StatusAdmitted:
		v.ExpiresAt, v.AdmissionPass = api.TimeOf(t.expiresAt), t.pass
	case api.StatusExpired:
		v.ExpiresAt = api.TimeOf(t.expiresAt)
	case api.StatusLeft:
		v.LeftAt = api.TimeOf(t.leftAt)
	case api.StatusRevoked:
		v.RevokedAt = api.TimeOf(t.leftAt)
	}
	return v
}

// statusNoShow, for set, is an EXPIRED answer without an admission: a
// no-show's.
const statusNoShow api.Status = "NO_SHOW"

// set moves a token to status (EXPIRED, statusNoShow, LEFT or REVOKED,
// at leftAt) as the real queue would.
// setFull makes program id's line full, or not.
func (q *fakeQueue) setFull(id string, full bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.programs[id].full = full
}

func (q *fakeQueue) set(tokenID string, status api.Status) {
	q.mu.Lock()
	defer q.mu.Unlock()
	t := q.tokens[tokenID]
	t.status = status
	switch status {
	case api.StatusExpired:
		t.expiresAt = time.Now().Add(-time.Second)
	case statusNoShow: // EXPIRED with no admission: a no-show
		t.status, t.expiresAt = api.StatusExpired, time.Time{}
	case api.StatusLeft, api.StatusRevoked:
		t.leftAt = time.Now()
	}
}

// apiHandler serves the JSON API's enter (POST) and poll (GET) routes.
func (q *fakeQueue) apiHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/queues/programs/{programId}", q.serveAPI)
	mux.HandleFunc("GET /api/v1/queues/programs/{programId}", q.serveAPI)
	mux.HandleFunc("DELETE /api/v1/queues/programs/{programId}", q.serveLeave)
	mux.HandleFunc("GET /api/v1/queues/programs/{programId}/challenge", q.serveChallenge)
	mux.HandleFunc("PUT /api/v1/queues/programs/{programId}/push", q.servePush)
	mux.HandleFunc("DELETE /api/v1/queues/programs/{programId}/push", q.servePush)
	mux.HandleFunc("POST /api/v1/queues/programs/{programId}/handoff", q.serveHandoff)
	mux.HandleFunc("POST /api/v1/queues/programs/{programId}/handoff/redeem", q.serveRedeem)
	return mux
}

func (q *fakeQueue) serveAPI(w http.ResponseWriter, r *http.Request) {
	c := apiCall{Method: r.Method, Token: r.Header.Get("X-Queue-Token"), Key: r.Header.Get("Idempotency-Key"), Lang: r.URL.Query().Get("lang"), ContentType: r.Header.Get("Content-Type"),
		Enqueue: r.Header.Get(api.HeaderEnqueueToken)}
	reqBody, _ := io.ReadAll(io.LimitReader(r.Body, 4<<10))
	c.Body = string(reqBody)
	var enterBody struct {
		Push json.RawMessage `json:"push"`
	}
	if len(reqBody) > 0 && json.Unmarshal(reqBody, &enterBody) != nil {
		http.Error(w, `{"code":"INVALID_REQUEST","message":"Bad body."}`, http.StatusBadRequest)
		return
	}
	defer q.begin(c)()

	q.mu.Lock()
	var (
		v       waitpage.View
		fail    int
		err     error
		created bool
	)
	id := r.PathValue("programId")
	refused := ""
	if r.Method == http.MethodPost {
		if p, ok := q.programs[id]; ok && p.refusePush {
			enterBody.Push = nil
		}
		p, _ := q.program(id)
		switch tid, ok := q.accounts[c.Enqueue]; {
		case strings.HasPrefix(c.Enqueue, "bad"):
			refused = "INVALID_ENQUEUE_TOKEN"
		case c.Enqueue == "" && p != nil && p.requireEnqueue:
			refused = "ENQUEUE_TOKEN_REQUIRED"
		case ok: // the account's one place, whatever token the device holds
			v = q.view(p, q.tokens[tid], c.Lang)
		case c.Enqueue != "":
			if v, created, err = q.enterPush(id, "", c.Key, c.Lang, string(enterBody.Push)); err == nil {
				q.accounts[c.Enqueue] = v.TokenID
			}
		default:
			if refused = q.checkProof(id, c.Key, r.Header); refused == "" {
				v, created, err = q.enterPush(id, c.Token, c.Key, c.Lang, string(enterBody.Push))
			}
		}
	} else {
		v, fail, err = q.poll(id, c.Token, c.Lang)
	}
	status, body := http.StatusOK, any(nil)
	switch {
	case refused != "":
		status, body = http.StatusForbidden, map[string]string{"code": refused, "message": "Solve the challenge."}
	case fail > 0:
		status, body = http.StatusServiceUnavailable, map[string]string{"code": "STORE_UNAVAILABLE", "message": "Try again."}
		w.Header().Set("Retry-After", strconv.Itoa(fail))
		c.RetryAfter = time.Duration(fail) * time.Second
	case err == waitpage.ErrProgramNotFound:
		status, body = http.StatusNotFound, map[string]string{"code": "PROGRAM_NOT_FOUND", "message": "No such program."}
	case err == waitpage.ErrTokenNotFound:
		status, body = http.StatusNotFound, map[string]string{"code": "TOKEN_NOT_FOUND", "message": "No such token."}
	case err == waitpage.ErrClosed:
		status, body = http.StatusConflict, map[string]string{"code": "PROGRAM_CLOSED", "message": "Closed."}
	case err == waitpage.ErrFull:
		status, body = http.StatusConflict, map[string]string{"code": "QUEUE_FULL", "message": "The line is full."}
	case err != nil:
		status, body = http.StatusBadRequest, map[string]string{"code": "INVALID_PROGRAM_ID", "message": "Bad id."}
	default:
		if created {
			status = http.StatusCreated
		}
		body = answerJSON(v)
		if v.Status == api.StatusWaiting {
			c.RetryAfter = v.RetryAfter()
			w.Header().Set("Retry-After", strconv.Itoa(int((v.RetryAfter()+time.Second-1)/time.Second)))
		}
	}
	c.Status = status
	q.calls = append(q.calls, c)
	close(q.answered)
	q.answered = make(chan struct{})
	q.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// answerJSON is v as the API writes it: keys that do not apply are absent.
func answerJSON(v waitpage.View) map[string]any {
	m := map[string]any{"tokenId": v.TokenID, "ticket": 1, "status": v.Status, "issuedAt": time.Now().UTC().Format(time.RFC3339Nano)}
	ts := func(k string, t time.Time) {
		if !t.IsZero() {
			m[k] = t.UTC().Format(time.RFC3339Nano)
		}
	}
	if v.Status == api.StatusWaiting {
		m["position"] = v.Position
		m["retryAfterMs"] = v.RetryAfterMs
		if v.EstimatedWaitMs > 0 {
			m["estimatedWaitMs"] = v.EstimatedWaitMs
		}
		if v.Notice != "" {
			m["notice"] = v.Notice
		}
		if v.Paused {
			m["paused"] = true
		}
		if v.Push {
			m["push"] = true
		}
	}
	if v.AdmissionPass != "" {
		m["admissionPass"] = v.AdmissionPass
	}
	ts("expiresAt", v.ExpiresAt.Time)
	ts("leftAt", v.LeftAt.Time)
	ts("revokedAt", v.RevokedAt.Time)
	ts("opensAt", v.OpensAt.Time)
	ts("closesAt", v.ClosesAt.Time)
	return m
}

// servePush is PUT (subscribe, with the subscription's JSON) and DELETE
// (stop) of a token's push subscription: 204, or the API's errors.
func (q *fakeQueue) servePush(w http.ResponseWriter, r *http.Request) {
	c := apiCall{Method: r.Method, Token: r.Header.Get("X-Queue-Token"), ContentType: r.Header.Get("Content-Type")}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 4<<10))
	c.Body = string(body)
	q.mu.Lock()
	defer q.mu.Unlock()
	tok, ok := q.tokens[c.Token]
	var sub api.PushSubscription
	switch {
	case !ok || tok.program != r.PathValue("programId"):
		c.Status = http.StatusNotFound
	case tok.status != api.StatusWaiting:
		c.Status = http.StatusConflict
	case r.Method == http.MethodPut && (json.Unmarshal(body, &sub) != nil || sub.Endpoint == ""):
		c.Status = http.StatusBadRequest
	case r.Method == http.MethodPut:
		tok.push, c.Status = string(body), http.StatusNoContent
	default:
		tok.push, c.Status = "", http.StatusNoContent
	}
	q.pushes = append(q.pushes, c)
	close(q.answered)
	q.answered = make(chan struct{})
	if c.Status != http.StatusNoContent {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(c.Status)
		_, _ = w.Write([]byte(`{"code":"REFUSED","message":"Refused."}`))
		return
	}
	w.WriteHeader(c.Status)
}

// await waits until done holds of the calls list gives (both read with q.mu
// held), or ctx ends, and returns those calls; what names them for a failure.
func (q *fakeQueue) await(t *testing.T, ctx context.Context, what string, list func() []apiCall, done func([]apiCall) bool) []apiCall {
	t.Helper()
	for {
		q.mu.Lock()
		calls, answered := append([]apiCall(nil), list()...), q.answered
		q.mu.Unlock()
		if done(calls) {
			return calls
		}
		select {
		case <-answered:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v; answered %+v", what, ctx.Err(), calls)
		}
	}
}

// atLeast is await's done of n calls or more.
func atLeast(n int) func([]apiCall) bool { return func(c []apiCall) bool { return len(c) >= n } }

// awaitPushes waits until the fake has answered n push requests, or ctx
// ends, and returns them.
func (q *fakeQueue) awaitPushes(t *testing.T, ctx context.Context, n int) []apiCall {
	t.Helper()
	return q.await(t, ctx, fmt.Sprint(n, " push requests"), func() []apiCall { return q.pushes }, atLeast(n))
}

func (q *fakeQueue) recorded() []apiCall {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]apiCall(nil), q.calls...)
}

// awaitCalls waits until the fake has answered n API requests, or ctx
// ends, and returns the calls answered.
func (q *fakeQueue) awaitCalls(t *testing.T, ctx context.Context, n int) []apiCall {
	t.Helper()
	return q.await(t, ctx, fmt.Sprint(n, " API answers"), func() []apiCall { return q.calls }, atLeast(n))
}

// checkSchedule fails t unless each API request the page made came, on the
// page's clock, no earlier than the answer before it asked for (within one
// document: a reload starts over), the page never had two in flight, and
// the server answered the same requests the page recorded.
func (q *fakeQueue) checkSchedule(t *testing.T, ctx context.Context) {
	t.Helper()
	page := pageCalls(t, ctx)
	calls := q.awaitCalls(t, ctx, len(page.Calls))
	if len(calls) != len(page.Calls) {
		t.Fatalf("the server answered %d API requests, the page made %d", len(calls), len(page.Calls))
	}
	for i := range page.Calls {
		if page.Calls[i].Method != calls[i].Method {
			t.Fatalf("request %d: the page sent a %s, the server answered a %s", i, page.Calls[i].Method, calls[i].Method)
		}
		if i == 0 || page.Calls[i].Doc != page.Calls[i-1].Doc {
			continue
		}
		prev, cur := page.Calls[i-1], page.Calls[i]
		if gap := cur.gapAfter(prev); gap < calls[i-1].RetryAfter {
			t.Errorf("request %d (%s) came %v after an answer that asked for %v", i, cur.Method, gap, calls[i-1].RetryAfter)
		}
	}
	if page.MaxAtOnce > 1 {
		t.Errorf("the page had %d API requests in flight at once", page.MaxAtOnce)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.maxAtOnce > 1 {
		t.Errorf("%d API requests were in flight at once at the server", q.maxAtOnce)
	}
}

// serve starts a test server with the page handler, the fake API and a
// stand-in for the protected site at /demo-site/{programId}, which records
// the admission passes it receives.
func (q *fakeQueue) serve(t testing.TB, opts waitpage.Options) (*httptest.Server, *site) {
	t.Helper()
	h, err := waitpage.New(q, opts)
	if err != nil {
		t.Fatal(err)
	}
	s := &site{}
	mux := http.NewServeMux()
	mux.Handle(waitpage.PathPrefix, h)
	mux.Handle("/api/", q.apiHandler())
	mux.HandleFunc("GET /demo-site/{programId}", s.serve)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, s
}

// site is the protected site's stand-in.
type site struct {
	mu     sync.Mutex
	passes []string
	query  []string
}

func (s *site) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.passes = append(s.passes, r.URL.Query().Get("admissionPass"))
	s.query = append(s.query, r.URL.RawQuery)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprint(w, `<!doctype html><meta name="viewport" content="width=device-width"><title>In</title><h1 id="in">You're in</h1>`)
}

// serveChallenge hands out a proof of work for an enter of the program.
func (q *fakeQueue) serveChallenge(w http.ResponseWriter, r *http.Request) {
	q.mu.Lock()
	p, err := q.program(r.PathValue("programId"))
	bits := 0
	if err == nil {
		bits = p.challengeBits
	}
	q.mu.Unlock()
	c := slowChallenge(bits)
	q.mu.Lock()
	q.challenges[c] = false
	q.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"code":"PROGRAM_NOT_FOUND","message":"No such program."}`))
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"challenge": c, "bits": bits, "expiresAt": time.Now().Add(5 * time.Minute).UTC().Format(time.RFC3339)})
}

// checkProof is the refusal's code of an enter of program id without a
// valid, unused proof when the program asks for one; "" when it may go
// on (a retry of a known Idempotency-Key needs none). Called locked.
func (q *fakeQueue) checkProof(id, key string, h http.Header) string {
	p, err := q.program(id)
	if err != nil || p.challengeBits == 0 || q.keys[key] != "" {
		return ""
	}
	c, sol := h.Get("X-Queue-Challenge"), h.Get("X-Queue-Solution")
	if c == "" || sol == "" {
		return "CHALLENGE_REQUIRED"
	}
	used, issued := q.challenges[c]
	sum := sha256.Sum256([]byte(c + "." + sol))
	if !issued || used || binary.BigEndian.Uint32(sum[:4])>>(32-p.challengeBits) != 0 {
		return "CHALLENGE_FAILED"
	}
	q.challenges[c] = true
	return ""
}

// slowChallenge is a challenge of bits whose first solution, counting as
// the page's worker does (0, 1, … in base 36), is past the first
// minTries: the worker posts its progress before it solves it.
func slowChallenge(bits int) string {
	const minTries = 100_000
	for {
		c := rand.Text()
		if bits == 0 || !solvedWithin(c, bits, minTries) {
			return c
		}
	}
}

// solvedWithin reports whether one of the first n solutions of c solves it.
func solvedWithin(c string, bits, n int) bool {
	for i := range n {
		sum := sha256.Sum256([]byte(c + "." + strconv.FormatInt(int64(i), 36)))
		if binary.BigEndian.Uint32(sum[:4])>>(32-bits) == 0 {
			return true
		}
	}
	return false
}

// statusMoved is the status of a token whose place moved to another device
// (api.StatusMoved).
const statusMoved api.Status = "MOVED"

// fakeQR is the QR code's SVG the fake's handoff answers carry.
const fakeQR = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 29 29" role="img" shape-rendering="crispEdges">` +
	`<path d="M4 4h7v7H4zM18 4h7v7h-7zM4 18h7v7H4zM13 13h3v3h-3z"/></svg>`

// crockford is the handoff codes' alphabet.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// newHandoff hands out a code for tokenID, replacing its previous one, as
// the API's handoff does; called locked.
func (q *fakeQueue) newHandoff(tokenID string) string {
	for c, h := range q.codes {
		if h.token == tokenID {
			delete(q.codes, c)
		}
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = crockford[b[i]%32]
	}
	q.codes[string(b)] = &fakeCode{token: tokenID, expires: time.Now().Add(5 * time.Minute)}
	return string(b)
}

// handoffCode is the code the API reads in s: case-insensitive, spaces
// and dashes ignored, I and L for 1, O for 0; "" when malformed.
func handoffCode(s string) string {
	s = strings.NewReplacer(" ", "", "-", "", "I", "1", "L", "1", "O", "0").Replace(strings.ToUpper(s))
	if len(s) != 16 || strings.Trim(s, crockford) != "" {
		return ""
	}
	return s
}

// serveHandoff is POST …/handoff: a code that moves the token's place to
// the browser that redeems it, with the page's URL and a QR code of it.
func (q *fakeQueue) serveHandoff(w http.ResponseWriter, r *http.Request) {
	c := apiCall{Method: r.Method, Token: r.Header.Get("X-Queue-Token"), ContentType: r.Header.Get("Content-Type")}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 4<<10))
	c.Body = string(body)
	id := r.PathValue("programId")
	var req struct {
		Page string `json:"page"`
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	tok, ok := q.tokens[c.Token]
	err := json.Unmarshal(body, &req)
	u, uerr := url.Parse(req.Page)
	var answer any
	switch {
	case !ok || tok.program != id:
		c.Status, answer = http.StatusNotFound, apiError("TOKEN_NOT_FOUND")
	case tok.status != api.StatusWaiting:
		c.Status, answer = http.StatusConflict, apiError("NOT_WAITING")
	case q.programs[id].account:
		c.Status, answer = http.StatusConflict, apiError("HANDOFF_REFUSED")
	case err != nil || uerr != nil || u.Scheme != "http" || u.Path != "/waiting-room/"+id || u.RawQuery != "" || u.Fragment != "":
		c.Status, answer = http.StatusBadRequest, apiError("INVALID_REQUEST")
	default:
		code := q.newHandoff(tok.id)
		c.Status, answer = http.StatusCreated, map[string]string{
			"code": code, "url": req.Page + "#handoff=" + code, "qrSvg": fakeQR,
			"expiresAt": q.codes[code].expires.UTC().Format(time.RFC3339),
		}
	}
	q.handoffs = append(q.handoffs, c)
	close(q.answered)
	q.answered = make(chan struct{})
	writeJSON(w, c.Status, answer)
}

// serveRedeem is POST …/handoff/redeem: the code's place, under a new
// token, whose answer a retry with the same Idempotency-Key and code
// gets again; the old token reads MOVED.
func (q *fakeQueue) serveRedeem(w http.ResponseWriter, r *http.Request) {
	c := apiCall{Method: r.Method, Key: r.Header.Get("Idempotency-Key"), Lang: r.URL.Query().Get("lang"), ContentType: r.Header.Get("Content-Type"), Redeem: true}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 4<<10))
	c.Body = string(body)
	id := r.PathValue("programId")
	var req struct {
		Code string `json:"code"`
	}
	defer q.begin(c)()
	q.mu.Lock()
	defer q.mu.Unlock()
	p, perr := q.program(id)
	code := ""
	if json.Unmarshal(body, &req) == nil {
		code = handoffCode(req.Code)
	}
	h := q.codes[code]
	var answer any
	switch done, again := q.redeemKeys[c.Key]; {
	case perr != nil:
		c.Status, answer = http.StatusNotFound, apiError("PROGRAM_NOT_FOUND")
	case c.Key == "":
		c.Status, answer = http.StatusBadRequest, apiError("INVALID_REQUEST")
	case code == "":
		c.Status, answer = http.StatusBadRequest, apiError("INVALID_HANDOFF_CODE")
	case again && done.code == code:
		c.Status, answer = http.StatusOK, answerJSON(q.view(p, q.tokens[done.token], c.Lang))
	case h == nil || time.Now().After(h.expires):
		c.Status, answer = http.StatusNotFound, apiError("HANDOFF_NOT_FOUND")
	case h.used:
		c.Status, answer = http.StatusConflict, apiError("HANDOFF_USED")
	case p.account:
		c.Status, answer = http.StatusConflict, apiError("HANDOFF_REFUSED")
	case q.tokens[h.token].status != api.StatusWaiting:
		c.Status, answer = http.StatusConflict, apiError("NOT_WAITING")
	default:
		old := q.tokens[h.token]
		t := &fakeToken{id: rand.Text()[:22], program: id, status: api.StatusWaiting, position: old.position}
		q.tokens[t.id], old.status, h.used = t, statusMoved, true
		q.redeemKeys[c.Key] = fakeRedeem{code, t.id}
		c.Status, answer = http.StatusCreated, answerJSON(q.view(p, t, c.Lang))
		if q.loseRedeems > 0 {
			q.loseRedeems--
			c.Status, answer, c.RetryAfter = http.StatusServiceUnavailable, apiError("STORE_UNAVAILABLE"), time.Second
			w.Header().Set("Retry-After", "1")
		}
	}
	q.calls = append(q.calls, c)
	close(q.answered)
	q.answered = make(chan struct{})
	writeJSON(w, c.Status, answer)
}

// serveLeave is DELETE of the queue path: the place of X-Queue-Token
// leaves the line (204), as the API's leave does.
func (q *fakeQueue) serveLeave(w http.ResponseWriter, r *http.Request) {
	c := apiCall{Method: r.Method, Token: r.Header.Get("X-Queue-Token"), Status: http.StatusNoContent}
	q.mu.Lock()
	defer q.mu.Unlock()
	tok, ok := q.tokens[c.Token]
	switch {
	case !ok || tok.program != r.PathValue("programId"):
		c.Status = http.StatusNotFound
	case tok.status == api.StatusWaiting:
		tok.status, tok.leftAt = api.StatusLeft, time.Now()
	}
	q.leaves = append(q.leaves, c)
	close(q.answered)
	q.answered = make(chan struct{})
	if c.Status != http.StatusNoContent {
		writeJSON(w, c.Status, apiError("TOKEN_NOT_FOUND"))
		return
	}
	w.WriteHeader(c.Status)
}

// apiError is the API's error body for code.
func apiError(code string) map[string]string {
	return map[string]string{"code": code, "message": "Refused: " + code + "."}
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
