package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi/datamodel/high/base"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"github.com/example/waitingroom/internal/httpapi"
)

// contract holds every answer the tests see to docs/openapi.yaml, and
// records which operations, statuses and codes were seen.
type contract struct {
	v     validator.Validator
	model *v3.Document
	mu    sync.Mutex
	seen  map[string]bool // "operationId status" and "status code"
}

var theContract = sync.OnceValues(func() (*contract, error) {
	spec, err := os.ReadFile(filepath.Join("..", "..", "docs", "openapi.yaml"))
	if err != nil {
		return nil, err
	}
	doc, err := libopenapi.NewDocument(spec)
	if err != nil {
		return nil, err
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		return nil, err
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return &contract{v: v, model: &m.Model, seen: map[string]bool{}}, nil
})

// checked returns h, each answer held to the contract (a failure of t).
func checked(t testing.TB, h http.Handler) http.Handler {
	t.Helper()
	c, err := theContract()
	if err != nil {
		t.Fatalf("docs/openapi.yaml: %v", err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		if err := c.check(r.Method, r.URL.EscapedPath(), rec.Result()); err != nil {
			t.Errorf("%s %s: the answer breaks docs/openapi.yaml: %v", r.Method, r.URL.EscapedPath(), err)
		}
	})
}

// checkedLambda returns fn, each answer held to the contract, those to
// events that never become a request included.
func checkedLambda(t testing.TB, fn httpapi.LambdaHandler) httpapi.LambdaHandler {
	t.Helper()
	c, err := theContract()
	if err != nil {
		t.Fatalf("docs/openapi.yaml: %v", err)
	}
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		resp, err := fn(ctx, ev)
		h := http.Header{}
		for k, v := range resp.Headers {
			h.Set(k, v)
		}
		for k, vs := range resp.MultiValueHeaders {
			h[http.CanonicalHeaderKey(k)] = vs
		}
		answer := &http.Response{StatusCode: resp.StatusCode, Header: h, Body: io.NopCloser(strings.NewReader(resp.Body))}
		if cerr := c.check(ev.RequestContext.HTTP.Method, ev.RawPath, answer); cerr != nil {
			t.Errorf("event %s %s: the answer breaks docs/openapi.yaml: %v", ev.RequestContext.HTTP.Method, ev.RawPath, cerr)
		}
		return resp, err
	}
}

// check validates answer, given to method on path, against the operation
// the document has for them: any other method on a listed path against
// the path's 405, a request not routed against the NoRoute response.
func (c *contract) check(method, path string, answer *http.Response) error {
	body, _ := io.ReadAll(answer.Body)
	var e struct{ Code string }
	_ = json.Unmarshal(body, &e)
	template, item := c.pathOf(path)
	if answer.StatusCode == http.StatusNotFound && e.Code == "NOT_FOUND" {
		item = nil // a request the server could not route, on any path
	}
	ops := map[string]*v3.Operation{}
	if item != nil {
		for m, op := range item.GetOperations().FromOldest() {
			ops[strings.ToUpper(m)] = op
		}
	}
	op, asked := ops[method]
	seenOps := []*v3.Operation{op}
	switch {
	case item == nil: // no route
		template, method = "/.well-known/jwks.json", http.MethodGet
		if answer.StatusCode != http.StatusNotFound {
			return fmt.Errorf("status %d on no route, want 404", answer.StatusCode)
		}
	case !asked:
		if answer.StatusCode != http.StatusMethodNotAllowed {
			return fmt.Errorf("status %d for a method the path does not serve, want 405", answer.StatusCode)
		}
		var allow []string
		for m := range ops {
			allow = append(allow, m)
		}
		slices.Sort(allow)
		if got, want := answer.Header.Get("Allow"), strings.Join(allow, ", "); got != want {
			return fmt.Errorf("Allow %q, want %q", got, want)
		}
		method = allow[0]
		seenOps = slices.Collect(maps.Values(ops)) // the 405 of each
	}
	if method == http.MethodHead { // answered without a body
		method = http.MethodGet
	}
	if item == nil {
		seenOps = []*v3.Operation{c.model.Paths.PathItems.GetOrZero(template).Get}
	}
	req := httptest.NewRequest(method, strings.NewReplacer("{programId}", "p", "{tokenId}", "t", "{keyId}", "k").Replace(template), nil)
	answer.Body = io.NopCloser(bytes.NewReader(body))
	if ok, errs := c.v.ValidateHttpResponse(req, answer); !ok {
		var msgs []string
		for _, e := range errs {
			msgs = append(msgs, e.Error())
			for _, s := range e.SchemaValidationErrors {
				msgs = append(msgs, s.Reason)
			}
		}
		return fmt.Errorf("status %d body %s: %s", answer.StatusCode, body, strings.Join(msgs, "; "))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, op := range seenOps {
		c.seen[op.OperationId+" "+strconv.Itoa(answer.StatusCode)] = true
	}
	if e.Code != "" {
		c.seen[strconv.Itoa(answer.StatusCode)+" "+e.Code] = true
	}
	return nil
}

// pathOf returns the document's path template that matches path (escaped,
// as ServeMux matches it), and its item; nil for none.
func (c *contract) pathOf(path string) (string, *v3.PathItem) {
	segs := strings.Split(path, "/")
	for template, item := range c.model.Paths.PathItems.FromOldest() {
		want := strings.Split(template, "/")
		if len(want) != len(segs) {
			continue
		}
		match := true
		for i, w := range want {
			if strings.HasPrefix(w, "{") {
				match = match && segs[i] != ""
			} else {
				match = match && segs[i] == w
			}
		}
		if match {
			return template, item
		}
	}
	return "", nil
}

// missing lists what the document says the API answers and no test saw:
// an operation's status, or a status's error code.
func (c *contract) missing() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, item := range c.model.Paths.PathItems.FromOldest() {
		for _, op := range item.GetOperations().FromOldest() {
			for status, resp := range op.Responses.Codes.FromOldest() {
				if k := op.OperationId + " " + status; !c.seen[k] {
					out = append(out, k)
				}
				for _, code := range errorCodes(resp) {
					if k := status + " " + code; !c.seen[k] {
						out = append(out, k)
					}
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// errorCodes are the codes an error response's schema allows.
func errorCodes(resp *v3.Response) []string {
	if resp.Content == nil {
		return nil
	}
	mt := resp.Content.GetOrZero("application/json")
	if mt == nil || mt.Schema == nil {
		return nil
	}
	var codes []string
	var walk func(*base.Schema)
	walk = func(s *base.Schema) {
		for _, p := range s.AllOf {
			walk(p.Schema())
		}
		if s.Properties == nil {
			return
		}
		if code := s.Properties.GetOrZero("code"); code != nil {
			cs := code.Schema()
			if cs.Const != nil {
				codes = append(codes, cs.Const.Value)
			}
			for _, n := range cs.Enum {
				codes = append(codes, n.Value)
			}
		}
	}
	walk(mt.Schema.Schema())
	return codes
}

// TestMain fails the run when a whole run (no -run, -skip or -fuzz) saw
// less than the document says the API answers.
func TestMain(m *testing.M) {
	code := m.Run()
	whole := true
	for _, f := range []string{"test.run", "test.skip", "test.fuzz"} {
		if fl := flag.Lookup(f); fl != nil && fl.Value.String() != "" {
			whole = false
		}
	}
	if c, err := theContract(); code == 0 && whole && err == nil {
		if missing := c.missing(); len(missing) > 0 {
			fmt.Printf("docs/openapi.yaml documents answers no test saw:\n  %s\n", strings.Join(missing, "\n  "))
			code = 1
		}
	}
	os.Exit(code)
}
