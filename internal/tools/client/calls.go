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
	// OpBypass is an admin's issuance of bypass passes.
	OpBypass      Op = "POST passes"
	OpGetToken    Op = "GET token"
	OpRevokeToken Op = "DELETE token"
	OpListKeys    Op = "GET keys"
	OpRotateKey   Op = "POST keys"
	OpRevokeKey   Op = "DELETE key"
)

// adminOps are the admin calls.
var adminOps = []Op{OpGetProgram, OpPutProgram, OpAdmit, OpListPrograms, OpDeleteProgram, OpHistory, OpGetToken, OpRevokeToken, OpBypass,
	OpListKeys, OpRotateKey, OpRevokeKey}

// Admin reports whether o is an admin call.
func (o Op) Admin() bool { return slices.Contains(adminOps, o) }

// authorized reports whether o's request carries the admin credentials:
// an admin operation, or the site's release of a session.
func (o Op) authorized() bool { return o.Admin() || o == OpReleaseSession }

// NewIdempotencyKey returns a fresh random key for an enter (128 bits of
// crypto/rand as 26 base32 characters).
func NewIdempotencyKey() string { return rand.Text() }

// Entry is what an enter sends besides the program: a token already held
// (answered again) and an idempotency key, each optional.
type Entry struct {
	Token string
	// IdempotencyKey makes a retried enter answer the token and ticket of
	// the first attempt.
	IdempotencyKey string
	// Challenge and Solution are a proof of work (Prove), for a program
	// that asks for one.
	Challenge, Solution string
}

// ProgramAnswer is an admin call's answer: the program, and the body as
// the server sent it, including any field this client does not know.
type ProgramAnswer struct {
	api.Program
	Raw json.RawMessage
}

// TokenAnswer is a token lookup's answer: the record, and the body as the
// server sent it, including any field this client does not know.
type TokenAnswer struct {
	api.TokenRecord
	Raw json.RawMessage
}

// route is the API route tmpl with its parameters ({programId},
// {tokenId}, {keyId}) replaced, in order, by args, path-escaped.
func route(tmpl string, args ...string) string {
	var b strings.Builder
	for _, arg := range args {
		open, end := strings.IndexByte(tmpl, '{'), strings.IndexByte(tmpl, '}')
		b.WriteString(tmpl[:open] + url.PathEscape(arg))
		tmpl = tmpl[end+1:]
	}
	return b.String() + tmpl
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
func answer[T any](ctx context.Context, c *Client, r request) (T, int, error) {
	var out T
	status, _, err := c.do(ctx, r, &out)
	return out, status, err
}

// Enter takes a place in programID's queue; created is true for a new
// place (201), false for a token answered again (200).
func (c *Client) Enter(ctx context.Context, programID string, e Entry) (t api.Token, created bool, err error) {
	h := http.Header{}
	if e.Token != "" {
		h.Set(api.HeaderToken, e.Token)
	}
	if e.IdempotencyKey != "" {
		h.Set(api.HeaderIdempotencyKey, e.IdempotencyKey)
	}
	if e.Challenge != "" || e.Solution != "" {
		h.Set(api.HeaderChallenge, e.Challenge)
		h.Set(api.HeaderSolution, e.Solution)
	}
	r := request{OpEnter, http.MethodPost, route(api.QueuePath, programID), h, nil, []int{http.StatusCreated, http.StatusOK}}
	t, status, err := answer[api.Token](ctx, c, r)
	return t, status == http.StatusCreated, err
}

// Poll reads the status of token in programID's queue.
func (c *Client) Poll(ctx context.Context, programID, token string) (api.Token, error) {
	h := http.Header{api.HeaderToken: {token}}
	t, _, err := answer[api.Token](ctx, c, request{OpPoll, http.MethodGet, route(api.QueuePath, programID), h, nil, []int{http.StatusOK}})
	return t, err
}

// Leave gives up token's place in programID's queue. An admitted token
// cannot leave: that is an *Error with Status 409.
func (c *Client) Leave(ctx context.Context, programID, token string) error {
	h := http.Header{api.HeaderToken: {token}}
	return c.send(ctx, request{OpLeave, http.MethodDelete, route(api.QueuePath, programID), h, nil, []int{http.StatusNoContent}})
}

// EndSession tells the waiting room that the protected site is done with
// the person whose admission pass is pass, as passverify.EndSession does;
// under a cap their slot frees when their window ends. Ending it again is
// no error.
func (c *Client) EndSession(ctx context.Context, programID, pass string) error {
	h := http.Header{api.HeaderAdmissionPass: {pass}}
	return c.send(ctx, request{OpEndSession, http.MethodDelete, route(api.SessionPath, programID), h, nil, []int{http.StatusNoContent}})
}

// ReleaseSession is EndSession with the client's admin credentials: under
// a cap the slot also frees at once.
func (c *Client) ReleaseSession(ctx context.Context, programID, pass string) error {
	h := http.Header{api.HeaderAdmissionPass: {pass}}
	return c.send(ctx, request{OpReleaseSession, http.MethodDelete, route(api.AdminSessionPath, programID), h, nil, []int{http.StatusNoContent}})
}

// Challenge fetches a proof-of-work challenge for an enter into programID.
func (c *Client) Challenge(ctx context.Context, programID string) (api.Challenge, error) {
	ch, _, err := answer[api.Challenge](ctx, c, request{OpChallenge, http.MethodGet, route(api.ChallengePath, programID), nil, nil, []int{http.StatusOK}})
	return ch, err
}

// Prove fetches a challenge of programID and solves it on this core, and
// returns e with the proof; bits 0 (no proof asked) leaves e as it is.
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

// NeedsProof reports whether err refused an enter for its proof of work:
// none sent (CHALLENGE_REQUIRED) or one refused (CHALLENGE_FAILED); a new
// proof (Prove) is then the way in.
func NeedsProof(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.Code == api.CodeChallengeRequired || e.Code == api.CodeChallengeFailed)
}

// GetProgram reads programID's counters and settings.
func (c *Client) GetProgram(ctx context.Context, programID string) (ProgramAnswer, error) {
	p, _, err := c.program(ctx, request{OpGetProgram, http.MethodGet, route(api.AdminPath, programID), nil, nil, []int{http.StatusOK}})
	return p, err
}

// PutProgram creates programID with s, or changes the settings s holds;
// created tells which.
func (c *Client) PutProgram(ctx context.Context, programID string, s api.ProgramSettings) (p ProgramAnswer, created bool, err error) {
	p, status, err := c.program(ctx, request{OpPutProgram, http.MethodPut, route(api.AdminPath, programID), nil, s, []int{http.StatusCreated, http.StatusOK}})
	return p, status == http.StatusCreated, err
}

// Admit admits the next n people of programID's queue now, on top of the
// automatic admission.
func (c *Client) Admit(ctx context.Context, programID string, n int64) (ProgramAnswer, error) {
	p, _, err := c.program(ctx, request{OpAdmit, http.MethodPost, route(api.AdmissionPath, programID), nil, api.Admission{Count: &n}, []int{http.StatusOK}})
	return p, err
}

// program sends an admin request and reads the program it answers.
func (c *Client) program(ctx context.Context, r request) (ProgramAnswer, int, error) {
	var p ProgramAnswer
	status, raw, err := c.do(ctx, r, &p.Program)
	p.Raw = raw
	return p, status, err
}

// ListPrograms reads a page of up to limit programs (0: the server's
// default) from cursor ("" for the first).
func (c *Client) ListPrograms(ctx context.Context, cursor string, limit int) (api.ProgramList, error) {
	l, _, err := answer[api.ProgramList](ctx, c, request{OpListPrograms, http.MethodGet, api.ProgramsPath + pageQuery(cursor, limit), nil, nil, []int{http.StatusOK}})
	return l, err
}

// DeleteProgram deletes programID, which must be closed.
func (c *Client) DeleteProgram(ctx context.Context, programID string) error {
	return c.send(ctx, request{OpDeleteProgram, http.MethodDelete, route(api.AdminPath, programID), nil, nil, []int{http.StatusNoContent}})
}

// History reads a page of up to limit of programID's changes (0: the
// server's default), newest first, from cursor ("" for the newest).
func (c *Client) History(ctx context.Context, programID, cursor string, limit int) (api.ChangeList, error) {
	path := route(api.ChangesPath, programID) + pageQuery(cursor, limit)
	l, _, err := answer[api.ChangeList](ctx, c, request{OpHistory, http.MethodGet, path, nil, nil, []int{http.StatusOK}})
	return l, err
}

// IssueBypass asks for n bypass passes to programID, each valid for
// validity (whole seconds) from when the server signs it.
func (c *Client) IssueBypass(ctx context.Context, programID string, n int64, validity time.Duration) ([]string, error) {
	seconds := int64(validity / time.Second)
	body := api.BypassRequest{Count: &n, ValidSeconds: &seconds}
	out, _, err := answer[api.BypassPasses](ctx, c, request{OpBypass, http.MethodPost, route(api.PassesPath, programID), nil, body, []int{http.StatusOK}})
	return out.Passes, err
}

// Token looks up token in programID as an admin: what its holder would be
// told (without the pass), and the times it stores. It records nothing.
func (c *Client) Token(ctx context.Context, programID, token string) (TokenAnswer, error) {
	var t TokenAnswer
	_, raw, err := c.do(ctx, request{OpGetToken, http.MethodGet, route(api.TokenPath, programID, token), nil, nil, []int{http.StatusOK}}, &t.TokenRecord)
	t.Raw = raw
	return t, err
}

// RevokeToken revokes token in programID: it then reads REVOKED, with no
// place, admission or pass. Revoking it again is no error.
func (c *Client) RevokeToken(ctx context.Context, programID, token string) error {
	return c.send(ctx, request{OpRevokeToken, http.MethodDelete, route(api.TokenPath, programID, token), nil, nil, []int{http.StatusNoContent}})
}

// Keys lists the keyring's signing keys, newest first, with their states.
// A deployment that signs with fixed keys answers 409 NO_KEYRING.
func (c *Client) Keys(ctx context.Context) (api.SigningKeys, error) {
	l, _, err := answer[api.SigningKeys](ctx, c, request{OpListKeys, http.MethodGet, api.KeysPath, nil, nil, []int{http.StatusOK}})
	return l, err
}

// RotateKey makes a new signing key, published at once, that signs from
// 15 minutes from now. It is not repeated after a 503: the key may have
// been made (Keys tells).
func (c *Client) RotateKey(ctx context.Context) (api.SigningKey, error) {
	r, _, err := answer[api.KeyRotation](ctx, c, request{OpRotateKey, http.MethodPost, api.KeysPath, nil, nil, []int{http.StatusCreated}})
	return r.Key, err
}

// RevokeKey revokes the signing key kid: it leaves the JWKS and signs no
// more; when it was the key that signs, the answer's Replacement signs in
// its place from now. Revoking it again is no error.
func (c *Client) RevokeKey(ctx context.Context, kid string) (api.KeyRevocation, error) {
	r, _, err := answer[api.KeyRevocation](ctx, c, request{OpRevokeKey, http.MethodDelete, route(api.KeyPath, kid), nil, nil, []int{http.StatusOK}})
	return r, err
}
