package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/memstore"
)

// FuzzHandler throws arbitrary methods, paths, tokens, authorization
// headers and bodies at the handler, both through the Lambda adapter and
// directly (ServeHTTP, as the local server calls it): it must never panic,
// never return an error, always answer JSON (or nothing on 204), and never
// blame itself (5xx) for what a client sent. Seeds come from events/.
func FuzzHandler(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "events", "*.json"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		var req events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(b, &req); err != nil {
			f.Fatal(err)
		}
		f.Add(req.RequestContext.HTTP.Method, req.RawPath, req.Headers["x-queue-token"], req.Headers["authorization"], req.Body, req.RequestContext.Authorizer != nil)
	}
	f.Add("GET", "/api/v1/queues/programs/%zz", "", "", "", false)
	f.Add("PUT", "/api/v1/admin/programs/demo", "", "Bearer s3cret", `{"admissionRatePerSecond":1e309}`, false)
	f.Add("POST", "/api/v1/admin/programs/demo/admissions", "", "Bearer s3cret", `{"count":1.5}`, false)
	f.Add("POST", "//api/v1//queues/programs/demo/", "waitingTokenFixture001", "", "", false)
	f.Add("PUT", "/api/v1/admin/programs/demo", "", "Bearer s3cret", `{"paused":true,"paused":false}`, true)
	f.Add("PUT", "/api/v1/admin/programs/demo", "", "Bearer s3cret", `null`, true)
	f.Add("GET", "/api/v1/admin/programs/../queues/programs/demo", "", "", "", false)
	f.Add("GE T", "/", "", "", "", false)
	f.Add("DELETE", "/api/v1/admin/keys/"+kid1, "", "Bearer s3cret", "", false)
	f.Add("DELETE", "/api/v1/admin/keys/%2e%2e", "", "Bearer s3cret", "", true)

	// As deployed: the local server names its issuer; on Lambda, API
	// Gateway always gives the domain, whose URL the passes then name.
	svc := newServiceIssuing(f, passIssuer(f, "http://127.0.0.1:3000"))
	ring := admissionpass.NewKeyring(memstore.New(), &seqWrapper{})
	lambda := httpapi.Lambda(httpapi.New(svc, httpapi.IAMAuth(), httpapi.WithLogger(discard), httpapi.WithPasses(passIssuer(f, "")), httpapi.WithKeyring(ring)))
	direct := httpapi.New(svc, httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard), httpapi.WithPasses(passIssuer(f, "")), httpapi.WithKeyring(ring))
	f.Fuzz(func(t *testing.T, method, path, token, auth, body string, iam bool) {
		req := events.APIGatewayV2HTTPRequest{
			Version: "2.0", RouteKey: "$default", RawPath: path,
			Headers: map[string]string{"x-queue-token": token, "authorization": auth},
			Body:    body,
		}
		req.RequestContext.HTTP.Method = method
		req.RequestContext.RequestID = "fuzz"
		if iam {
			req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::1:user/x"}}
		}
		resp := invoke(t, lambda, req)
		checkAnswer(t, "lambda", method, path, body, resp.StatusCode, resp.Body)

		// The same request as net/http would hand it to the local server,
		// when it is one net/http would accept.
		r, err := http.NewRequest(method, "http://localhost"+path, strings.NewReader(body))
		if err != nil || !strings.HasPrefix(path, "/") {
			return
		}
		r.Header.Set(api.HeaderToken, token)
		r.Header.Set("Authorization", auth)
		w := httptest.NewRecorder()
		direct.ServeHTTP(w, r)
		b, _ := io.ReadAll(w.Result().Body)
		checkAnswer(t, "ServeHTTP", method, path, body, w.Code, string(b))
	})
}

func checkAnswer(t *testing.T, via, method, path, reqBody string, status int, body string) {
	t.Helper()
	if status >= 500 {
		t.Fatalf("%s: %s %q: status %d for client input: %s", via, method, path, status, body)
	}
	if status == 204 {
		if body != "" {
			t.Fatalf("%s: 204 with a body: %q", via, body)
		}
		return
	}
	if !json.Valid([]byte(body)) || !utf8.ValidString(body) {
		t.Fatalf("%s: %s %q: body is not valid JSON: %q", via, method, path, body)
	}
	if status >= 400 {
		var e map[string]any
		_ = json.Unmarshal([]byte(body), &e)
		code, _ := e["code"].(string)
		msg, _ := e["message"].(string)
		if code == "" || msg == "" || len(e) != 2 {
			t.Fatalf("%s: error body is not {code,message}: %s", via, body)
		}
		if len(reqBody) > 8 && strings.Contains(msg, reqBody) {
			t.Fatalf("%s: error message echoes the request body: %s", via, msg)
		}
	}
}
