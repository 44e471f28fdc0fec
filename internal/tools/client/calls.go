package client

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/challenge"
)

// Op names an API call as "METHOD route"; the bench counts requests by it.
type Op string

func (o Op) method() string {
	m, _, _ := strings.Cut(string(o), " ")
	return m
}

// The calls of the API.
const (
	OpEnter      Op = "POST enter"
	OpPoll       Op = "GET poll"
	OpLeave      Op = "DELETE leave"
	OpEndSession Op = "DELETE session"
	OpChallenge  Op = "GET challenge"
	// OpReleaseSession is the site's end of a session as an admin.
	OpReleaseSession Op = "DELETE release"
	OpGetProgram     Op = "GET admin"
	OpPutProgram     Op = "PUT admin"
	OpAdmit          Op = "POST admissions"
	OpListPrograms   Op = "GET programs"
	OpDeleteProgram  Op = "DELETE admin"
	OpHistory        Op = "GET changes"
	OpReport         Op = "GET report"
	// OpBypass is an admin's issuance of bypass passes.
	OpBypass   Op = "POST passes"
	OpGetToken Op = "GET token"
	// OpGetAccount is an admin's look-up of an account's place.
	OpGetAccount  Op = "GET account"
	OpRevokeToken Op = "DELETE token"
	OpListKeys    Op = "GET keys"
	OpRotateKey   Op = "POST keys"
	OpEdgeKeys    Op = "GET edge keys"
	OpRotateEdge  Op = "POST edge keys"
	OpRevokeKey   Op = "DELETE key"
)

var adminOps = []Op{OpGetProgram, OpPutProgram, OpAdmit, OpListPrograms, OpDeleteProgram, OpHistory, OpReport, OpGetToken, OpGetAccount, OpRevokeToken, OpBypass,
	OpListKeys, OpRotateKey, OpRevokeKey, OpEdgeKeys, OpRotateEdge}

// Admin reports whether o is an admin call.
func (o Op) Admin() bool { return slices.Contains(adminOps, o) }

// authorized reports whether o's request carries the admin credentials.
func (o Op) authorized() bool { return o.Admin() || o == OpReleaseSession }

// NewIdempotencyKey returns a fresh random key for an enter (128 bits as 26 base32 characters).
func NewIdempotencyKey() string { return rand.Text() }

// Entry is what an enter optionally sends: a token held, an idempotency key, a proof of work (Prove)
// and the site's enqueue token, which makes the place its account's.
type Entry struct {
	Token, IdempotencyKey string
	Challenge, Solution   string
	EnqueueToken          string
}

// ProgramAnswer is an admin call's program, and the body as sent, with any field this client does not know.
type ProgramAnswer struct {
	api.Program
	Raw json.RawMessage
}

// TokenAnswer is a token lookup's answer: the record, and the body as sent.
type TokenAnswer struct {
	api.TokenRecord
	Raw json.RawMessage
}

// route is the API route tmpl with its {parameters} replaced, in order, by args, path-escaped.
func route(tmpl string, args ...string) string {
	for _, arg := range args {
		before, after, _ := strings.Cut(tmpl, "{")
		_, after, _ = strings.Cut(after, "}")
		tmpl = before + url.PathEscape(arg) + after // escaped, arg has no braces
	}
	return tmpl
}

// pageQuery is the query string of a page: cursor and limit when set.
func pageQuery(cursor string, limit int) string {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// answer sends r and decodes the wanted answer into a T.
func answer[T any](ctx context.Context, c *Client, r request) (T, error) {
	var out T
	_, _, err := c.do(ctx, r, &out)
	return out, err
}

// send sends op's request to path, which answers 204 without a body.
func (c *Client) send(ctx context.Context, op Op, path string, h http.Header) error {
	_, _, err := c.do(ctx, request{op: op, path: path, header: h, want: []int{http.StatusNoContent}}, nil)
	return err
}

// Enter takes a place in programID's queue; created is false for a token answered again.
func (c *Client) Enter(ctx context.Context, programID string, e Entry) (t api.Token, created bool, err error) {
	h := http.Header{}
	for _, kv := range [...][2]string{{api.HeaderToken, e.Token}, {api.HeaderIdempotencyKey, e.IdempotencyKey},
		{api.HeaderChallenge, e.Challenge}, {api.HeaderSolution, e.Solution}, {api.HeaderEnqueueToken, e.EnqueueToken}} {
		if kv[1] != "" {
			h.Set(kv[0], kv[1])
		}
	}
	r := request{op: OpEnter, path: route(api.QueuePath, programID), header: h, want: []int{http.StatusCreated, http.StatusOK}}
	status, _, err := c.do(ctx, r, &t)
	return t, status == http.StatusCreated, err
}

// Poll reads the status of token in programID's queue.
func (c *Client) Poll(ctx context.Context, programID, token string) (api.Token, error) {
	return answer[api.Token](ctx, c, request{op: OpPoll, path: route(api.QueuePath, programID), header: http.Header{api.HeaderToken: {token}}})
}

// Leave gives up token's place in programID's queue.
func (c *Client) Leave(ctx context.Context, programID, token string) error {
	return c.send(ctx, OpLeave, route(api.QueuePath, programID), http.Header{api.HeaderToken: {token}})
}

// EndSession tells the waiting room that the site is done with the holder of pass, as passverify.EndSession does.
func (c *Client) EndSession(ctx context.Context, programID, pass string) error {
	return c.send(ctx, OpEndSession, route(api.SessionPath, programID), http.Header{api.HeaderAdmissionPass: {pass}})
}

// ReleaseSession is EndSession with the admin credentials: under a cap the slot frees at once.
func (c *Client) ReleaseSession(ctx context.Context, programID, pass string) error {
	return c.send(ctx, OpReleaseSession, route(api.AdminSessionPath, programID), http.Header{api.HeaderAdmissionPass: {pass}})
}

// Challenge fetches a proof-of-work challenge for an enter into programID.
func (c *Client) Challenge(ctx context.Context, programID string) (api.Challenge, error) {
	return answer[api.Challenge](ctx, c, request{op: OpChallenge, path: route(api.ChallengePath, programID)})
}

// Prove returns e with the proof of a challenge of programID solved on this core, if one is asked.
func (c *Client) Prove(ctx context.Context, programID string, e Entry) (Entry, error) {
	ch, err := c.Challenge(ctx, programID)
	if err != nil || ch.Bits == 0 {
		return e, err
	}
	sol, _, err := challenge.Solve(ctx, ch.Challenge, ch.Bits)
	if err != nil {
		return e, err
	}
	e.Challenge, e.Solution = ch.Challenge, sol
	return e, nil
}

// NeedsProof reports whether err refused an enter for its proof of work (missing or refused).
func NeedsProof(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.Code == api.CodeChallengeRequired || e.Code == api.CodeChallengeFailed)
}

// GetProgram reads programID's counters and settings.
func (c *Client) GetProgram(ctx context.Context, programID string) (ProgramAnswer, error) {
	p, _, err := c.program(ctx, request{op: OpGetProgram, path: route(api.AdminPath, programID)})
	return p, err
}

// PutProgram creates programID with s, or changes the settings s holds; created tells which.
func (c *Client) PutProgram(ctx context.Context, programID string, s api.ProgramSettings) (p ProgramAnswer, created bool, err error) {
	p, status, err := c.program(ctx, request{op: OpPutProgram, path: route(api.AdminPath, programID), body: s, want: []int{http.StatusCreated, http.StatusOK}})
	return p, status == http.StatusCreated, err
}

// Admit admits the next n people of programID's queue now.
func (c *Client) Admit(ctx context.Context, programID string, n int64) (ProgramAnswer, error) {
	p, _, err := c.program(ctx, request{op: OpAdmit, path: route(api.AdmissionPath, programID), body: api.Admission{Count: &n}})
	return p, err
}

// program sends an admin request and reads the program it answers.
func (c *Client) program(ctx context.Context, r request) (ProgramAnswer, int, error) {
	var p ProgramAnswer
	status, raw, err := c.do(ctx, r, &p.Program)
	p.Raw = raw
	return p, status, err
}

// ListPrograms reads a page of up to limit programs (0: the default) from cursor ("" for the first).
func (c *Client) ListPrograms(ctx context.Context, cursor string, limit int) (api.ProgramList, error) {
	return answer[api.ProgramList](ctx, c, request{op: OpListPrograms, path: api.ProgramsPath + pageQuery(cursor, limit)})
}

// DeleteProgram deletes programID, which must be closed.
func (c *Client) DeleteProgram(ctx context.Context, programID string) error {
	return c.send(ctx, OpDeleteProgram, route(api.AdminPath, programID), nil)
}

// History reads a page of up to limit of programID's changes, newest first, from cursor.
func (c *Client) History(ctx context.Context, programID, cursor string, limit int) (api.ChangeList, error) {
	return answer[api.ChangeList](ctx, c, request{op: OpHistory, path: route(api.ChangesPath, programID) + pageQuery(cursor, limit)})
}

// Report reads programID's report.
func (c *Client) Report(ctx context.Context, programID string) (api.Report, error) {
	return answer[api.Report](ctx, c, request{op: OpReport, path: route(api.ReportPath, programID)})
}

// IssueBypass asks for n bypass passes to programID, each valid for validity (whole seconds).
func (c *Client) IssueBypass(ctx context.Context, programID string, n int64, validity time.Duration) ([]string, error) {
	seconds := int64(validity / time.Second)
	body := api.BypassRequest{Count: &n, ValidSeconds: &seconds}
	out, err := answer[api.BypassPasses](ctx, c, request{op: OpBypass, path: route(api.PassesPath, programID), body: body})
	return out.Passes, err
}

// Token looks up token in programID as an admin, recording nothing.
func (c *Client) Token(ctx context.Context, programID, token string) (TokenAnswer, error) {
	var t TokenAnswer
	_, raw, err := c.do(ctx, request{op: OpGetToken, path: route(api.TokenPath, programID, token)}, &t.TokenRecord)
	t.Raw = raw
	return t, err
}

// AccountToken looks up the place of account (an enqueue token's sub) in programID as an admin, as Token does;
// the answer names the account.
func (c *Client) AccountToken(ctx context.Context, programID, account string) (TokenAnswer, error) {
	var t TokenAnswer
	_, raw, err := c.do(ctx, request{op: OpGetAccount, path: route(api.AccountPath, programID, account)}, &t.TokenRecord)
	t.Raw = raw
	return t, err
}

// RevokeToken revokes token in programID; revoking it again is no error.
func (c *Client) RevokeToken(ctx context.Context, programID, token string) error {
	return c.send(ctx, OpRevokeToken, route(api.TokenPath, programID, token), nil)
}

// Keys lists the keyring's signing keys, newest first, with their states.
func (c *Client) Keys(ctx context.Context) (api.SigningKeys, error) {
	return answer[api.SigningKeys](ctx, c, request{op: OpListKeys, path: api.KeysPath})
}

// RotateKey makes a new signing key, published at once, that signs 15 minutes from now.
func (c *Client) RotateKey(ctx context.Context) (api.SigningKey, error) {
	r, err := answer[api.KeyRotation](ctx, c, request{op: OpRotateKey, path: api.KeysPath, want: []int{http.StatusCreated}})
	return r.Key, err
}

// EdgeKeys lists the edge gate's keys, newest first, without their secrets.
func (c *Client) EdgeKeys(ctx context.Context) (api.EdgeKeys, error) {
	return answer[api.EdgeKeys](ctx, c, request{op: OpEdgeKeys, path: api.EdgeKeysPath})
}

// RotateEdgeKeys makes a new edge key that signs once it has reached the
// edges; with drop, one that signs at once, the others dropped.
func (c *Client) RotateEdgeKeys(ctx context.Context, drop bool) (api.EdgeKeys, error) {
	return answer[api.EdgeKeys](ctx, c, request{op: OpRotateEdge, path: api.EdgeKeysPath, body: api.EdgeRotation{Drop: drop}, want: []int{http.StatusCreated}})
}

// RevokeKey revokes the signing key kid; a Replacement signs in its place if it was signing.
func (c *Client) RevokeKey(ctx context.Context, kid string) (api.KeyRevocation, error) {
	return answer[api.KeyRevocation](ctx, c, request{op: OpRevokeKey, path: route(api.KeyPath, kid)})
}
