package waitingroom_test

// Holds template.yaml to the code: the routes the handler serves, the
// environment the config reads, the Makefile targets sam build runs, and
// least-privilege policies. cfn-lint (make lint) checks the template
// against CloudFormation and SAM themselves.

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/testing/samtemplate"
)

func loadTemplate(t *testing.T) *samtemplate.Template {
	t.Helper()
	tpl, err := samtemplate.Load("template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

func TestTemplateRoutes(t *testing.T) {
	tpl := loadTemplate(t)
	routes, err := tpl.Routes()
	if err != nil {
		t.Fatal(err)
	}
	// auth[routeKey] is the authorizer of that route ("" for none).
	auth := map[string]string{}
	for _, id := range tpl.FunctionIDs() {
		f, err := tpl.Function(id)
		if err != nil {
			t.Fatal(err)
		}
		for name, e := range f.Events {
			if e.Type != "HttpApi" {
				t.Errorf("%s event %s: type %s, want HttpApi (the handler reads payload format 2.0)", id, name, e.Type)
				continue
			}
			if ref, _ := e.Properties.APIID.(map[string]any); ref["Ref"] != "HttpApi" {
				t.Errorf("%s event %s: ApiId %v, want !Ref HttpApi (the throttled API)", id, name, e.Properties.APIID)
			}
			auth[e.RouteKey()] = e.Properties.Auth.Authorizer
		}
	}

	servedBy := map[bool]string{} // admin? -> function
	paths := map[string]bool{}
	for _, r := range httpapi.Routes {
		paths[r.Path] = true
		name := r.Method + " " + r.Path
		// Each path is routed as ANY so a wrong method reaches the
		// handler's 405; a route for the method alone would also do.
		key := "ANY " + r.Path
		fn, ok := routes[key]
		if !ok {
			key = r.Method + " " + r.Path
			if fn, ok = routes[key]; !ok {
				t.Errorf("%s: no route in template.yaml (want ANY %s)", name, r.Path)
				continue
			}
		}
		if other, seen := servedBy[r.Admin]; seen && other != fn {
			t.Errorf("%s goes to %s, other routes of its kind to %s", name, fn, other)
		}
		servedBy[r.Admin] = fn
		switch got := auth[key]; {
		case r.Admin && got != "AWS_IAM":
			t.Errorf("%s: admin route has authorizer %q, want AWS_IAM", name, got)
		case !r.Admin && got != "":
			t.Errorf("%s: public route has authorizer %q, want none", name, got)
		}
	}
	if servedBy[true] == servedBy[false] {
		t.Errorf("admin and public routes both go to %s; they must be separate functions (the admin one alone has write access to settings through IAM)", servedBy[true])
	}
	// No route the handler does not serve, except $default, which must
	// reach the public function so unknown paths get its JSON 404.
	for key, fn := range routes {
		if key == samtemplate.DefaultRoute {
			if fn != servedBy[false] {
				t.Errorf("$default goes to %s, want the public function %s", fn, servedBy[false])
			}
			if auth[key] != "" {
				t.Errorf("$default has authorizer %q, want none", auth[key])
			}
			continue
		}
		_, path, _ := strings.Cut(key, " ")
		if !paths[path] {
			t.Errorf("route %q (%s): the handler serves no such path (internal/httpapi/routes.go)", key, fn)
		}
	}
	if _, ok := routes[samtemplate.DefaultRoute]; !ok {
		t.Error("no $default route: unknown paths would get API Gateway's own 404, not the API's JSON error")
	}
}

func TestTemplateFunctions(t *testing.T) {
	tpl := loadTemplate(t)
	ids := tpl.FunctionIDs()
	if len(ids) == 0 {
		t.Fatal("no functions in template.yaml")
	}
	for _, id := range ids {
		t.Run(id, func(t *testing.T) {
			f, err := tpl.Function(id)
			if err != nil {
				t.Fatal(err)
			}
			if f.Runtime != "provided.al2023" || f.Handler != "bootstrap" {
				t.Errorf("Runtime %q Handler %q, want provided.al2023 and bootstrap", f.Runtime, f.Handler)
			}
			if !slices.Equal(f.Architectures, []string{"arm64"}) {
				t.Errorf("Architectures %v, want [arm64] (what the Makefile builds)", f.Architectures)
			}
			if f.Timeout <= 0 || f.Timeout > 29 {
				t.Errorf("Timeout %d s, want 1..29 (inside HTTP API's 30 s)", f.Timeout)
			}
			if m := tpl.Resources[id].Metadata; m["BuildMethod"] != "makefile" {
				t.Errorf("Metadata.BuildMethod = %v, want makefile", m["BuildMethod"])
			}
			if f.CodeURI != "." {
				t.Errorf("CodeUri = %v, want . (where the Makefile is)", f.CodeURI)
			}
			// What sam build will run, expanded by make itself.
			out, err := exec.Command("make", "--no-print-directory", "-n", "build-"+id, "ARTIFACTS_DIR=/artifacts").CombinedOutput()
			if err != nil {
				t.Fatalf("make -n build-%s: %v\n%s (sam build needs this target)", id, err, out)
			}
			cmd := string(out)
			for _, want := range []string{"GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0", "-tags lambda.norpc", "-o /artifacts/bootstrap", "./" + samtemplate.MainPackage(id)} {
				if !strings.Contains(cmd, want) {
					t.Errorf("make build-%s runs\n  %s\nwithout %q", id, strings.TrimSpace(cmd), want)
				}
			}
		})
	}
}

func TestTemplateEnvironment(t *testing.T) {
	tpl := loadTemplate(t)
	known := config.Variables
	for _, id := range tpl.FunctionIDs() {
		t.Run(id, func(t *testing.T) {
			f, err := tpl.Function(id)
			if err != nil {
				t.Fatal(err)
			}
			for name := range f.Environment.Variables {
				if !slices.Contains(known, name) {
					t.Errorf("environment variable %s: the config reads no such variable (internal/config: %v)", name, known)
				}
			}
			if _, ok := f.Environment.Variables[config.EnvDynamoEndpoint]; ok {
				t.Errorf("%s is set: on AWS the SDK must find DynamoDB itself", config.EnvDynamoEndpoint)
			}
			if got := fmt.Sprint(f.Environment.Variables[config.EnvTableName]); got != "map[Ref:QueueTable]" {
				t.Errorf("%s = %s, want !Ref QueueTable", config.EnvTableName, got)
			}
			// The defaults the stack deploys with must pass the checks
			// the function makes at cold start.
			env, err := tpl.Env(id, tpl.TableRefs("table"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := config.FromEnv(func(k string) string { return env[k] }, true); err != nil {
				t.Errorf("the template's default environment fails at cold start: %v", err)
			}
		})
	}
}

// TestTemplatePollPolicy: the PollPolicy parameter offers exactly the
// policies the functions know by name, and defaults to the same one.
func TestTemplatePollPolicy(t *testing.T) {
	tpl := loadTemplate(t)
	p, ok := tpl.Parameters["PollPolicy"]
	if !ok {
		t.Fatal("no PollPolicy parameter")
	}
	var allowed []string
	for _, v := range p.AllowedValues {
		allowed = append(allowed, fmt.Sprint(v))
	}
	slices.Sort(allowed)
	names := polling.Named(polling.DefaultTiers(), polling.DefaultETA()).Names()
	if diff := cmp.Diff(names, allowed); diff != "" {
		t.Errorf("PollPolicy AllowedValues (-polling.Registry +template):\n%s", diff)
	}
	if p.Default != polling.DefaultName {
		t.Errorf("PollPolicy default %v, want %s", p.Default, polling.DefaultName)
	}
}

// allowedActions is what the store calls (internal/dynamostore); no Scan,
// Query or DeleteItem: expiry is DynamoDB's TTL.
var allowedActions = []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"}

func TestTemplatePolicies(t *testing.T) {
	tpl := loadTemplate(t)
	for _, id := range tpl.FunctionIDs() {
		t.Run(id, func(t *testing.T) {
			f, err := tpl.Function(id)
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Policies) == 0 {
				t.Fatal("no policies: the function could not reach its table")
			}
			for i, p := range f.Policies {
				doc, ok := p.(map[string]any)
				stmts, _ := doc["Statement"].([]any)
				if !ok || len(stmts) == 0 {
					t.Errorf("policy %d is %v: want an inline policy document (managed policies and SAM policy templates grant more than the store uses)", i, p)
					continue
				}
				for j, s := range stmts {
					st, _ := s.(map[string]any)
					where := fmt.Sprintf("policy %d statement %d", i, j)
					if st["Effect"] != "Allow" {
						continue
					}
					for _, v := range list(st["Action"]) {
						a := fmt.Sprint(v)
						if strings.Contains(a, "*") {
							t.Errorf("%s: wildcard action %q", where, a)
						} else if !slices.Contains(allowedActions, a) {
							t.Errorf("%s: action %q beyond what the store calls %v", where, a, allowedActions)
						}
					}
					if _, ok := st["NotAction"]; ok {
						t.Errorf("%s: NotAction grants everything else", where)
					}
					for _, r := range list(st["Resource"]) {
						if got := fmt.Sprint(r); got != "map[Fn::GetAtt:[QueueTable Arn]]" {
							t.Errorf("%s: resource %s, want only !GetAtt QueueTable.Arn", where, got)
						}
					}
				}
			}
		})
	}
}

// list returns v as a list: a YAML scalar stands for a list of one.
func list(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	if v == nil {
		return nil
	}
	return []any{v}
}

func TestTemplateTable(t *testing.T) {
	tpl := loadTemplate(t)
	got := fmt.Sprint(tpl.TableRefs("x"))
	if got != "map[QueueTable:x]" {
		t.Fatalf("tables %s, want the one QueueTable", got)
	}
	want := []string{
		"BillingMode:PAY_PER_REQUEST",
		"AttributeDefinitions:[map[AttributeName:pk AttributeType:S] map[AttributeName:sk AttributeType:S]]",
		"KeySchema:[map[AttributeName:pk KeyType:HASH] map[AttributeName:sk KeyType:RANGE]]",
		"TimeToLiveSpecification:map[AttributeName:ttl Enabled:true]",
		"PointInTimeRecoverySpecification:map[PointInTimeRecoveryEnabled:true]",
	}
	props := fmt.Sprint(tpl.Properties("QueueTable"))
	for _, w := range want {
		if !strings.Contains(props, w) {
			t.Errorf("QueueTable properties lack %s (what internal/dynamostore.CreateTable makes)\n  %s", w, props)
		}
	}
}
