package httpapi_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// FuzzHandler throws arbitrary methods, paths, tokens, authorization
// headers and bodies at the handler: it must never panic, never return an
// error, always answer JSON (or nothing on 204), and never blame itself
// (5xx) for what a client sent. Seeds come from events/.
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

	h := newHandler(f, withSecret("s3cret"))
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
		resp, err := h.Handle(context.Background(), req)
		if err != nil {
			t.Fatalf("Handle returned an error: %v", err)
		}
		if resp.StatusCode >= 500 {
			t.Fatalf("%s %q: status %d for client input: %s", method, path, resp.StatusCode, resp.Body)
		}
		if resp.StatusCode == 204 {
			if resp.Body != "" {
				t.Fatalf("204 with a body: %q", resp.Body)
			}
			return
		}
		if !json.Valid([]byte(resp.Body)) || !utf8.ValidString(resp.Body) {
			t.Fatalf("%s %q: body is not valid JSON: %q", method, path, resp.Body)
		}
		if resp.StatusCode >= 400 {
			var e map[string]any
			_ = json.Unmarshal([]byte(resp.Body), &e)
			code, _ := e["code"].(string)
			msg, _ := e["message"].(string)
			if code == "" || msg == "" || len(e) != 2 {
				t.Fatalf("error body is not {code,message}: %s", resp.Body)
			}
			if len(body) > 8 && strings.Contains(msg, body) {
				t.Fatalf("error message echoes the request body: %s", msg)
			}
		}
	})
}
