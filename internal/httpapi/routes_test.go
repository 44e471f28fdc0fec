package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/example/waitingroom/internal/httpapi"
)

// TestRoutes checks httpapi.Routes against what the handler does: each
// listed route is served, and any other method on a listed path gets 405
// with exactly the listed methods in Allow.
func TestRoutes(t *testing.T) {
	h := newHandler(t)
	methods := map[string][]string{} // path -> methods listed for it
	for _, r := range httpapi.Routes {
		methods[r.Path] = append(methods[r.Path], r.Method)
	}
	call := func(method, path string) events.APIGatewayV2HTTPResponse {
		t.Helper()
		req := events.APIGatewayV2HTTPRequest{
			RawPath: strings.ReplaceAll(path, "{programId}", "demo"),
			Headers: map[string]string{},
		}
		req.RequestContext.HTTP.Method = method
		req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::123456789012:user/ops"},
		}
		resp, err := h.Handle(context.Background(), req)
		if err != nil {
			t.Fatalf("%s %s: Handle returned error %v", method, path, err)
		}
		return resp
	}

	for _, r := range httpapi.Routes {
		t.Run(r.Method+" "+r.Path, func(t *testing.T) {
			resp := call(r.Method, r.Path)
			var body struct{ Code string }
			_ = json.Unmarshal([]byte(resp.Body), &body)
			if resp.StatusCode == http.StatusMethodNotAllowed || body.Code == "NOT_FOUND" {
				t.Errorf("status %d body %s: the handler does not serve this listed route", resp.StatusCode, resp.Body)
			}
		})
	}
	for path, listed := range methods {
		t.Run("PATCH "+path, func(t *testing.T) {
			if slices.Contains(listed, http.MethodPatch) {
				t.Skip("PATCH is listed")
			}
			resp := call(http.MethodPatch, path)
			slices.Sort(listed)
			if got, want := resp.StatusCode, http.StatusMethodNotAllowed; got != want {
				t.Errorf("status = %d, want %d (body %s)", got, want, resp.Body)
			}
			if got, want := resp.Headers["Allow"], strings.Join(listed, ", "); got != want {
				t.Errorf("Allow = %q, want %q (the methods Routes lists)", got, want)
			}
		})
	}
}
