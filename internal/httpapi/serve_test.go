package httpapi_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/example/waitingroom/internal/httpapi"
)

// answer is what a client of the local server sees.
type answer struct {
	status int
	header http.Header
	body   string
}

// serve starts the API behind net/http, as the local server runs it, and
// returns a function that sends one request to it.
func serve(t *testing.T) func(method, path string, hdr http.Header, body string) answer {
	t.Helper()
	srv := httptest.NewServer(newHandler(t, httpapi.BearerAuth("s3cret")))
	t.Cleanup(srv.Close)
	return func(method, path string, hdr http.Header, body string) answer {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = hdr.Clone()
		if req.Header == nil {
			req.Header = http.Header{}
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Header, string(b)}
	}
}

// headersTooLarge is the answer to a request line and headers over
// MaxHeaderBytes.
const headersTooLarge = `{"code":"HEADERS_TOO_LARGE","message":"The request line and headers must be at most 16384 bytes."}`

// withHeader is hdr with name set to value.
func withHeader(hdr http.Header, name, value string) http.Header {
	out := hdr.Clone()
	out.Set(name, value)
	return out
}

var (
	admin   = http.Header{"Authorization": {"Bearer s3cret"}}
	waiting = http.Header{"X-Queue-Token": {"waitingTokenFixture001"}}
)

func TestServeHTTP(t *testing.T) {
	do := serve(t)
	tests := []struct {
		name, method, path string
		hdr                http.Header
		body               string
		wantStatus         int
		wantBody           string // exact JSON; "" for none
		wantHeader         map[string]string
	}{
		{"Poll", "GET", "/api/v1/queues/programs/demo", waiting, "", 200,
			`{"tokenId":"waitingTokenFixture001","status":"WAITING","ticket":734,"issuedAt":"2026-05-19T09:30:00.123Z","position":234,"retryAfterMs":` + firstRetryMs(234) + `,"estimatedWaitMs":23400}`,
			map[string]string{"Retry-After": "6", "Cache-Control": "no-store"}},
		// A request line and headers up to MaxHeaderBytes pass; past it,
		// 431 (17 KiB is within net/http's own slack: the handler answers).
		{"HeadersUnderTheLimit", "DELETE", "/api/v1/queues/programs/demo/session", http.Header{"X-Admission-Pass": {strings.Repeat("a", 15<<10)}}, "", 403,
			`{"code":"INVALID_PASS","message":"The admission pass is not one this waiting room handed out for this program."}`, nil},
		{"HeadersTooLarge", "GET", "/api/v1/queues/programs/demo", withHeader(waiting, "X-Big", strings.Repeat("a", 17<<10)), "", 431, headersTooLarge, nil},
		{"AuthorizationTooLarge", "PUT", "/api/v1/admin/programs/demo", http.Header{"Authorization": {"Bearer " + strings.Repeat("a", 17<<10)}}, `{"paused":true}`, 431, headersTooLarge, nil},
		{"PassTooLarge", "DELETE", "/api/v1/queues/programs/demo/session", http.Header{"X-Admission-Pass": {strings.Repeat("a", 17<<10)}}, "", 431, headersTooLarge, nil},
		{"TooLarge", "PUT", "/api/v1/admin/programs/demo", admin, `{"admissionRatePerSecond": 1` + strings.Repeat(" ", httpapi.MaxBodyBytes) + `}`, 413,
			`{"code":"PAYLOAD_TOO_LARGE","message":"The body must be at most 16384 bytes."}`, nil},
		{"TooLargeOnAnyRoute", "POST", "/api/v1/queues/programs/demo", nil, strings.Repeat(" ", httpapi.MaxBodyBytes+1), 413,
			`{"code":"PAYLOAD_TOO_LARGE","message":"The body must be at most 16384 bytes."}`, nil},
		{"EscapedProgramID", "GET", "/api/v1/queues/programs/de%2Fmo", waiting, "", 400,
			`{"code":"INVALID_PROGRAM_ID","message":"The program id must be 1 to 64 letters, digits, '-' or '_', starting with a letter or digit."}`, nil},
		{"AdminSecret", "POST", "/api/v1/admin/programs/demo/admissions", admin, `{"count":2}`, 200,
			`{"programId":"demo","issued":1000,"admitted":502,"waiting":498,"admissionRatePerSecond":10,"paused":false,"closed":false,"admissionWindowSeconds":600,"createdAt":"2026-05-19T09:00:00.123Z"}`, nil},
		// Two values must not pass for one.
		{"TwoTokens", "GET", "/api/v1/queues/programs/demo", http.Header{"X-Queue-Token": {"waitingTokenFixture001", "admittedTokenFixture01"}}, "", 400,
			`{"code":"INVALID_TOKEN","message":"The queue token is malformed."}`, nil},
		// ServeMux would answer these itself, in text: a redirect to the
		// clean path, its own 404 and 405.
		{"DoubleSlash", "GET", "//api/v1/queues/programs/demo", nil, "", 404, `{"code":"NOT_FOUND","message":"No such route."}`, nil},
		{"DotSegment", "GET", "/api/v1/admin/programs/../../queues/programs/demo", nil, "", 404, `{"code":"NOT_FOUND","message":"No such route."}`, nil},
		{"TrailingSlash", "GET", "/api/v1/queues/programs/demo/", nil, "", 404, `{"code":"NOT_FOUND","message":"No such route."}`, nil},
		{"UnknownRoute", "GET", "/favicon.ico", nil, "", 404, `{"code":"NOT_FOUND","message":"No such route."}`, nil},
		{"MethodNotAllowed", "PATCH", "/api/v1/admin/programs/demo/admissions", nil, "", 405,
			`{"code":"METHOD_NOT_ALLOWED","message":"Allowed methods: POST."}`, map[string]string{"Allow": "POST"}},
		{"Head", "HEAD", "/api/v1/queues/programs/demo", nil, "", 405, "", map[string]string{"Allow": "DELETE, GET, POST"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := do(tt.method, tt.path, tt.hdr, tt.body)
			if got.status != tt.wantStatus {
				t.Errorf("status = %d, want %d (body %s)", got.status, tt.wantStatus, got.body)
			}
			assertJSONEqual(t, got.body, tt.wantBody)
			for k, want := range tt.wantHeader {
				if g := got.header.Get(k); g != want {
					t.Errorf("header %s = %q, want %q", k, g, want)
				}
			}
			if got.header.Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control = %q, want no-store on every answer", got.header.Get("Cache-Control"))
			}
		})
	}
}

// TestDecodeBody holds the admin bodies to the documented JSON rules: one
// object, keys spelt exactly and at most once, no null, no unknown key
// (named in at most 64 characters, a nested one by its path), a wrong
// type named as the JSON type wanted, -0 read as 0.
func TestDecodeBody(t *testing.T) {
	long := strings.Repeat("x", 15000)
	tests := []struct {
		name, path, body string
		wantStatus       int
		wantBody         string // exact JSON
	}{
		{"NullBody", "/api/v1/admin/programs/demo", `null`, 400, `{"code":"INVALID_JSON","message":"The body must be a JSON object."}`},
		{"Array", "/api/v1/admin/programs/demo", `[{"paused":true}]`, 400, `{"code":"INVALID_JSON","message":"The body must be a JSON object."}`},
		{"Empty", "/api/v1/admin/programs/demo", ` `, 400, `{"code":"INVALID_JSON","message":"A JSON object body is required."}`},
		{"TwoObjects", "/api/v1/admin/programs/demo", `{} {}`, 400, `{"code":"INVALID_JSON","message":"The body must hold a single JSON object."}`},
		{"Syntax", "/api/v1/admin/programs/demo", `{"paused" true}`, 400, `{"code":"INVALID_JSON","message":"The body is not valid JSON (at byte 11)."}`},
		{"KeyCase", "/api/v1/admin/programs/demo", `{"ADMISSIONRATEPERSECOND": 5}`, 400, `{"code":"INVALID_JSON","message":"Unknown field \"ADMISSIONRATEPERSECOND\"."}`},
		{"DuplicateKey", "/api/v1/admin/programs/demo", `{"paused": true, "paused": false}`, 400, `{"code":"INVALID_JSON","message":"Field \"paused\" is repeated."}`},
		{"NullField", "/api/v1/admin/programs/demo", `{"paused": null}`, 400, `{"code":"INVALID_JSON","message":"Field \"paused\" must be a boolean."}`},
		{"NullTranslation", "/api/v1/admin/programs/demo", `{"translations": {"ja": null}}`, 400, `{"code":"INVALID_JSON","message":"Field \"translations.ja\" must be an object of texts (displayName, message, notice); to remove a language, set each of its texts to \"\"."}`},
		{"TranslationNotAnObject", "/api/v1/admin/programs/demo", `{"translations": {"ja": "x"}}`, 400, `{"code":"INVALID_JSON","message":"Field \"translations.ja\" must be an object of texts (displayName, message, notice); to remove a language, set each of its texts to \"\"."}`},
		{"NullTranslations", "/api/v1/admin/programs/demo", `{"translations": null}`, 400, `{"code":"INVALID_JSON","message":"Field \"translations\" must be an object."}`},
		{"NestedWrongType", "/api/v1/admin/programs/demo", `{"translations": {"ja": {"notice": 5}}}`, 400, `{"code":"INVALID_JSON","message":"Field \"translations.ja.notice\" must be a string."}`},
		{"NestedUnknownField", "/api/v1/admin/programs/demo", `{"translations": {"ja": {"title": "x"}}}`, 400, `{"code":"INVALID_JSON","message":"Unknown field \"translations.ja.title\"."}`},
		{"LongUnknownField", "/api/v1/admin/programs/demo", `{"` + long + `": 1}`, 400, `{"code":"INVALID_JSON","message":"Unknown field \"` + strings.Repeat("x", 64) + `…\"."}`},
		{"MinusZero", "/api/v1/admin/programs/demo", `{"admissionRatePerSecond": -0}`, 200,
			`{"programId":"demo","issued":1000,"admitted":500,"waiting":500,"admissionRatePerSecond":0,"paused":false,"closed":false,"admissionWindowSeconds":600,"createdAt":"2026-05-19T09:00:00.123Z"}`},
		{"FractionalCount", "/api/v1/admin/programs/demo/admissions", `{"count": 1.5}`, 400, `{"code":"INVALID_JSON","message":"Field \"count\" must be a number."}`},
		{"MissingCount", "/api/v1/admin/programs/demo/admissions", `{}`, 400, `{"code":"INVALID_COUNT","message":"count is required."}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := "PUT"
			if strings.HasSuffix(tt.path, "/admissions") {
				method = "POST"
			}
			got := serve(t)(method, tt.path, admin, tt.body)
			if got.status != tt.wantStatus {
				t.Errorf("status = %d, want %d (body %s)", got.status, tt.wantStatus, got.body)
			}
			assertJSONEqual(t, got.body, tt.wantBody)
			if strings.Contains(got.body, ":-0") {
				t.Errorf("body %s echoes -0", got.body)
			}
		})
	}
}

// TestUnreadableBody: a body that fails while read (the client's stream
// broke, or stopped and the server's read deadline passed) gets
// INVALID_BODY.
func TestUnreadableBody(t *testing.T) {
	h := newHandler(t, httpapi.BearerAuth("s3cret"))
	r := httptest.NewRequest("PUT", "/api/v1/admin/programs/demo", io.MultiReader(strings.NewReader(`{"paused":`), errReader{}))
	r.Header = admin.Clone()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusBadRequest {
		t.Errorf("status = %d, want 400", w.Code)
	}
	assertJSONEqual(t, w.Body.String(), `{"code":"INVALID_BODY","message":"The request body could not be read."}`)
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }
