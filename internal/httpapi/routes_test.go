package httpapi_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/example/waitingroom/internal/httpapi"
)

// decodeCode returns the code of an error body, "" for anything else.
func decodeCode(body string) string {
	var e struct{ Code string }
	_ = json.Unmarshal([]byte(body), &e)
	return e.Code
}

// TestRoutes checks httpapi.Routes against what the handler does: each
// listed route is served, and any other method on a listed path (HEAD
// included, which a GET pattern would match) gets 405 with exactly the
// listed methods in Allow.
func TestRoutes(t *testing.T) {
	h := newLambda(t, nil)
	methods := map[string][]string{} // path -> methods listed for it
	for _, r := range httpapi.Routes {
		methods[r.Path] = append(methods[r.Path], r.Method)
	}
	call := func(method, path string) events.APIGatewayV2HTTPResponse {
		t.Helper()
		req := events.APIGatewayV2HTTPRequest{
			RawPath: strings.NewReplacer("{programId}", "demo", "{keyId}", kid1).Replace(path),
			Headers: map[string]string{},
		}
		req.RequestContext.HTTP.Method = method
		req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::123456789012:user/ops"},
		}
		return invoke(t, h, req)
	}

	for _, r := range httpapi.Routes {
		t.Run(r.Method+" "+r.Path, func(t *testing.T) {
			resp := call(r.Method, r.Path)
			if code := decodeCode(resp.Body); resp.StatusCode == http.StatusMethodNotAllowed || code == "NOT_FOUND" {
				t.Errorf("status %d body %s: the handler does not serve this listed route", resp.StatusCode, resp.Body)
			}
		})
	}
	for path, listed := range methods {
		for _, method := range []string{http.MethodPatch, http.MethodHead, http.MethodOptions} {
			if slices.Contains(listed, method) {
				continue
			}
			t.Run(method+" "+path, func(t *testing.T) {
				resp := call(method, path)
				slices.Sort(listed)
				if got, want := resp.StatusCode, http.StatusMethodNotAllowed; got != want {
					t.Errorf("status = %d, want %d (body %s)", got, want, resp.Body)
				}
				if got, want := resp.Headers["Allow"], strings.Join(listed, ", "); got != want {
					t.Errorf("Allow = %q, want %q (the methods Routes lists)", got, want)
				}
				if code := decodeCode(resp.Body); code != "METHOD_NOT_ALLOWED" {
					t.Errorf("body %s, want code METHOD_NOT_ALLOWED", resp.Body)
				}
			})
		}
	}
}
