package waitingroom_test

// Holds template.yaml to the code: the routes the handler serves, the
// environment the config reads, the Makefile targets sam build runs,
// least-privilege policies, the metrics the dashboard and alarms read, and
// the access logs. cfn-lint (make lint) checks the template against
// CloudFormation and SAM themselves.

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/notify"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/metricstest"
	"github.com/example/waitingroom/internal/tools/samtemplate"
	"github.com/example/waitingroom/internal/waitpage"
)

func loadTemplate(t *testing.T) *samtemplate.Template {
	t.Helper()
	tpl, err := samtemplate.Load("template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

// TestTemplateRoutes: every route of the handler and the page reaches, as
// API Gateway picks routes (samtemplate.RouteFor), the function that serves
// it, admin routes only through AWS_IAM and public ones without; so does any
// other method on their paths (for the handler's 405). Every route to the
// admin function is IAM-authorized, every template route serves something,
// and $default sends the rest to the public function.
func TestTemplateRoutes(t *testing.T) {
	tpl := loadTemplate(t)
	routes, err := tpl.Routes()
	if err != nil {
		t.Fatal(err)
	}
	auth := routeAuthorizers(t, tpl)

	type served struct {
		method, path string
		admin        bool
	}
	var all []served
	for _, r := range httpapi.Routes {
		// Any other method must reach the same function, for its JSON 405.
		all = append(all, served{r.Method, r.Path, r.Admin}, served{"PATCH", r.Path, r.Admin})
	}
	for _, r := range waitpage.Routes {
		all = append(all, served{r.Method, r.Path, false}, served{"PATCH", r.Path, false})
	}
	var publicPaths []string
	for _, r := range all {
		if !r.admin && !slices.Contains(publicPaths, r.path) {
			publicPaths = append(publicPaths, r.path)
		}
	}
	servedBy := map[bool]string{} // admin? -> function
	used := map[string]bool{}     // route keys that some served path takes
	for _, r := range all {
		name := r.method + " " + r.path
		key, fn, err := tpl.RouteFor(r.method, samplePath(r.path))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		used[key] = true
		if key == samtemplate.DefaultRoute && r.method != "PATCH" {
			t.Errorf("%s: no route in template.yaml, it falls to $default", name)
		}
		if other, seen := servedBy[r.admin]; seen && other != fn {
			t.Errorf("%s goes to %s (route %q), other routes of its kind to %s", name, fn, key, other)
		}
		servedBy[r.admin] = fn
		switch got := auth[key]; {
		case r.admin && got != "AWS_IAM":
			t.Errorf("%s: admin route %q has authorizer %q, want AWS_IAM", name, key, got)
		case !r.admin && got != "":
			t.Errorf("%s: public route %q has authorizer %q, want none", name, key, got)
		}
	}
	if servedBy[true] == servedBy[false] {
		t.Errorf("admin and public routes both go to %s; they must be separate functions (the admin one alone has write access to settings through IAM)", servedBy[true])
	}
	for key, fn := range routes {
		switch {
		case fn == servedBy[true] && auth[key] != "AWS_IAM":
			t.Errorf("route %q reaches the admin function %s with authorizer %q, want AWS_IAM", key, fn, auth[key])
		case key == samtemplate.DefaultRoute:
			// Unknown paths get the public function's JSON 404.
			if fn != servedBy[false] || auth[key] != "" {
				t.Errorf("$default goes to %s with authorizer %q, want the public function %s without", fn, auth[key], servedBy[false])
			}
		case !used[key]:
			t.Errorf("route %q (%s): the handler serves no path through it (internal/httpapi/routes.go, internal/waitpage)", key, fn)
		}
		// A greedy route covers admin paths alone: every stray path under
		// it reaches the function behind it.
		if prefix, _, greedy := strings.Cut(key, "+}"); greedy {
			_, prefix, _ = strings.Cut(prefix, " ")
			prefix = prefix[:strings.LastIndex(prefix, "{")]
			for _, p := range publicPaths {
				if strings.HasPrefix(samplePath(p), prefix) {
					t.Errorf("greedy route %q covers the public path %s", key, p)
				}
			}
		}
	}
	if _, ok := routes[samtemplate.DefaultRoute]; !ok {
		t.Error("no $default route: unknown paths would get API Gateway's own 404, not the API's JSON error")
	}
}

// routeAuthorizers maps each route key of the template to its authorizer
// ("" for none), checking that every event is an HttpApi one on HttpApi.
func routeAuthorizers(t *testing.T, tpl *samtemplate.Template) map[string]string {
	t.Helper()
	auth := map[string]string{}
	for _, id := range tpl.FunctionIDs() {
		f, err := tpl.Function(id)
		if err != nil {
			t.Fatal(err)
		}
		for name, e := range f.Events {
			if (id == pushSender || id == reporter) && e.Type == "ScheduleV2" {
				continue // their schedules: TestTemplatePushSender, TestTemplateReporter
			}
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
	return auth
}

// samplePath fills a route path's variables ({programId}) with a value.
func samplePath(route string) string {
	return regexp.MustCompile(`\{[^}]+\}`).ReplaceAllString(route, "demo")
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
			if id == pushSender {
				if run := notify.RunFor + notify.Lease + 3*time.Second; time.Duration(f.Timeout)*time.Second < run {
					t.Errorf("Timeout %d s, want at least a run, a turn's lease and the reserve, %s", f.Timeout, run)
				}
			} else if id == reporter {
				if f.Timeout < 60 || f.Timeout > 900 {
					t.Errorf("Timeout %d s, want minutes for a pass over the table, at most Lambda's 900", f.Timeout)
				}
			} else if f.Timeout <= 0 || f.Timeout > 29 {
				t.Errorf("Timeout %d s, want 1..29 (inside HTTP API's 30 s)", f.Timeout)
			}
			if id == "QueueFunction" && time.Duration(f.Timeout)*time.Second != app.QueueTimeout {
				t.Errorf("Timeout %d s, want app.QueueTimeout (%s): the local server gives each request that deadline", f.Timeout, app.QueueTimeout)
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
			refs := tpl.TableRefs("table")
			maps.Copy(refs, tpl.RefsOfType("AWS::KMS::Key", "key"))
			maps.Copy(refs, tpl.RefsOfType("AWS::SecretsManager::Secret", "arn:aws:secretsmanager:us-east-1:1:secret:s"))
			env, err := tpl.Env(id, refs)
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
	names := polling.Named(polling.DefaultTiers(), polling.DefaultETA(), polling.DefaultSteady()).Names()
	if diff := cmp.Diff(names, allowed); diff != "" {
		t.Errorf("PollPolicy AllowedValues (-polling.Registry +template):\n%s", diff)
	}
	if p.Default != polling.DefaultName {
		t.Errorf("PollPolicy default %v, want %s", p.Default, polling.DefaultName)
	}
}

// allowedActions is what the store calls (internal/dynamostore); no
// DeleteItem: expiry is DynamoDB's TTL. Query reads the capacity's marks
// (MarkBefore), one partition, one item. Only the admin function scans:
// a report's pass over the tokens (scanGrant).
var allowedActions = []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"}

// scanGrant is the admin function's statement that lets it scan.
const scanGrant = "ReportPass"

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
			// Every optional statement in: the stack with the gate.
			policies, _ := resolveIfs(t, tpl, f.Policies, gateParams).([]any)
			for i, p := range policies {
				doc, ok := p.(map[string]any)
				stmts, _ := doc["Statement"].([]any)
				if !ok || len(stmts) == 0 {
					t.Errorf("policy %d is %v: want an inline policy document (managed policies and SAM policy templates grant more than the store uses)", i, p)
					continue
				}
				for j, s := range stmts {
					st, _ := s.(map[string]any)
					where := fmt.Sprintf("policy %d statement %d", i, j)
					if st["Effect"] != "Allow" || st["Sid"] == challengeGrant {
						continue // the secret's grant: TestTemplateChallengeSecret
					}
					if st["Sid"] == kvsGrant {
						// The gate's store: TestGateKeyValueStoreGrants.
						for _, a := range list(st["Action"]) {
							if !strings.HasPrefix(fmt.Sprint(a), "cloudfront-keyvaluestore:") {
								t.Errorf("%s (%s): action %v, beyond the gate's store", where, kvsGrant, a)
							}
						}
						continue
					}
					allowed := allowedActions
					if st["Sid"] == scanGrant && (id == "AdminFunction" || id == reporter) {
						allowed = []string{"dynamodb:Scan"}
					}
					for _, v := range list(st["Action"]) {
						a := fmt.Sprint(v)
						if strings.Contains(a, "*") {
							t.Errorf("%s: wildcard action %q", where, a)
						} else if !slices.Contains(allowed, a) {
							t.Errorf("%s: action %q beyond what the store calls %v", where, a, allowed)
						}
					}
					if _, ok := st["NotAction"]; ok {
						t.Errorf("%s: NotAction grants everything else", where)
					}
					for _, r := range list(st["Resource"]) {
						got := fmt.Sprint(r)
						if got != "map[Fn::GetAtt:[QueueTable Arn]]" && (id != pushSender || got != "map[Fn::Sub:${QueueTable.Arn}/index/"+dynamostore.PushIndex+"]") {
							t.Errorf("%s: resource %s, want only !GetAtt QueueTable.Arn (and the push index for %s)", where, got, pushSender)
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
		"AttributeDefinitions:[map[AttributeName:pk AttributeType:S] map[AttributeName:sk AttributeType:S] map[AttributeName:pushList AttributeType:S] map[AttributeName:pushTicket AttributeType:N]]",
		"GlobalSecondaryIndexes:[map[IndexName:" + dynamostore.PushIndex + " KeySchema:[map[AttributeName:pushList KeyType:HASH] map[AttributeName:pushTicket KeyType:RANGE]] Projection:map[ProjectionType:KEYS_ONLY]]]",
		"KeySchema:[map[AttributeName:pk KeyType:HASH] map[AttributeName:sk KeyType:RANGE]]",
		"TimeToLiveSpecification:map[AttributeName:ttl Enabled:true]",
		"PointInTimeRecoverySpecification:map[PointInTimeRecoveryEnabled:true]",
	}
	props := fmt.Sprint(tpl.Properties("QueueTable"))
	for _, w := range want {
		if !strings.Contains(props, w) {
			t.Errorf("QueueTable properties lack %s (what internal/localdynamo.CreateTable makes)\n  %s", w, props)
		}
	}
}

// metricRef is a metric that the dashboard or an alarm reads from the
// functions' namespace: its name and dimension names.
type metricRef struct {
	where string
	name  string
	dims  []string
	// values are the dimension values, where the reference names them.
	values map[string]string
}

// searchExpr reads the schema and metric name of a SEARCH expression over
// the functions' namespace: SEARCH('{"NS",Dim,…} MetricName="Name"', …).
var searchExpr = regexp.MustCompile(`^SEARCH\('\{"` + regexp.QuoteMeta(nsMarker) + `"((?:,\w+)*)\} MetricName="(\w+)"', '(\w+)', 60\)$`)

// nsMarker stands for ${MetricsNamespace} in the dashboard body.
const nsMarker = "NAMESPACE"

// dashboardRefs returns the dashboard's widgets and the metrics of the
// functions' namespace they read.
func dashboardRefs(t *testing.T, tpl *samtemplate.Template) ([]any, []metricRef) {
	t.Helper()
	sub, _ := tpl.Properties("Dashboard")["DashboardBody"].(map[string]any)
	body, ok := sub["Fn::Sub"].(string)
	if !ok {
		t.Fatal("Dashboard: DashboardBody is not a !Sub string")
	}
	// Every ${…} of the !Sub must be a parameter, a resource, an
	// attribute of one, or a pseudo parameter; stand-ins make it JSON.
	for _, m := range regexp.MustCompile(`\$\{([^}]+)\}`).FindAllStringSubmatch(body, -1) {
		name, _, _ := strings.Cut(m[1], ".")
		_, param := tpl.Parameters[name]
		_, res := tpl.Resources[name]
		if !param && !res && !strings.HasPrefix(name, "AWS::") {
			t.Errorf("dashboard: ${%s} names nothing in the template", m[1])
		}
	}
	body = strings.ReplaceAll(body, "${MetricsNamespace}", nsMarker)
	body = strings.ReplaceAll(body, "${PollLatencyAlarmMs}", "250")
	body = regexp.MustCompile(`\$\{[^}]+\}`).ReplaceAllString(body, "X")
	var dash struct {
		Widgets []struct {
			Type       string `json:"type"`
			Properties struct {
				Title   string  `json:"title"`
				Metrics [][]any `json:"metrics"`
			} `json:"properties"`
		} `json:"widgets"`
	}
	if err := json.Unmarshal([]byte(body), &dash); err != nil {
		t.Fatalf("dashboard body is not JSON: %v", err)
	}
	var widgets []any
	var refs []metricRef
	for _, w := range dash.Widgets {
		widgets = append(widgets, w)
		for _, m := range w.Properties.Metrics {
			where := fmt.Sprintf("dashboard %q", w.Properties.Title)
			if len(m) == 0 {
				t.Errorf("%s: empty metric", where)
				continue
			}
			if opts, ok := m[0].(map[string]any); ok {
				expr, _ := opts["expression"].(string)
				if !strings.Contains(expr, nsMarker) {
					continue
				}
				sm := searchExpr.FindStringSubmatch(expr)
				if sm == nil {
					t.Errorf("%s: expression %q is not SEARCH('{\"NS\",Dim} MetricName=\"Name\"', 'Stat', 60)", where, expr)
					continue
				}
				refs = append(refs, metricRef{where: where, name: sm[2], dims: strings.Split(strings.TrimPrefix(sm[1], ","), ",")})
				continue
			}
			var strs []string
			for _, v := range m {
				if s, ok := v.(string); ok {
					strs = append(strs, s)
				}
			}
			if slices.Contains(strs, ".") {
				t.Errorf("%s: %v uses the \".\" shorthand; spell metrics out so the test can read them", where, m)
			}
			if len(strs) < 2 || strs[0] != nsMarker {
				continue
			}
			ref := metricRef{where: where, name: strs[1], values: map[string]string{}}
			for i := 2; i+1 < len(strs); i += 2 {
				ref.dims = append(ref.dims, strs[i])
				ref.values[strs[i]] = strs[i+1]
			}
			refs = append(refs, ref)
		}
	}
	return widgets, refs
}

// alarmRefs returns the template's alarms and the metrics of the
// functions' namespace they read, by alarm.
func alarmRefs(tpl *samtemplate.Template) (map[string]map[string]any, []metricRef) {
	isNS := func(v any) bool { return fmt.Sprint(v) == "map[Ref:MetricsNamespace]" }
	dims := func(id, name string, v any) metricRef {
		ref := metricRef{where: id, name: name, values: map[string]string{}}
		for _, d := range list(v) {
			dm, _ := d.(map[string]any)
			ref.dims = append(ref.dims, fmt.Sprint(dm["Name"]))
			ref.values[fmt.Sprint(dm["Name"])] = fmt.Sprint(dm["Value"])
		}
		return ref
	}
	alarms := map[string]map[string]any{}
	var refs []metricRef
	for id, r := range tpl.Resources {
		if r.Type != "AWS::CloudWatch::Alarm" {
			continue
		}
		p := tpl.Properties(id)
		alarms[id] = p
		if isNS(p["Namespace"]) {
			refs = append(refs, dims(id, fmt.Sprint(p["MetricName"]), p["Dimensions"]))
		}
		for _, q := range list(p["Metrics"]) {
			qm, _ := q.(map[string]any)
			stat, _ := qm["MetricStat"].(map[string]any)
			m, _ := stat["Metric"].(map[string]any)
			if isNS(m["Namespace"]) {
				refs = append(refs, dims(id, fmt.Sprint(m["MetricName"]), m["Dimensions"]))
			}
		}
	}
	return alarms, refs
}

// dimensionValues are the values the functions publish for the dimensions
// with a closed set of them.
var dimensionValues = map[string][]string{
	metrics.DimStatus:    {string(queue.StatusWaiting), string(queue.StatusAdmitted), string(queue.StatusExpired), string(queue.StatusLeft), string(queue.StatusRevoked), string(queue.StatusMoved)},
	metrics.DimOperation: {string(metrics.OpEnter), string(metrics.OpPoll), string(metrics.OpLeave), string(metrics.OpAdmin), string(metrics.OpPage), string(metrics.OpHandoff), string(metrics.OpOther)},
}

// TestTemplateMetrics holds the dashboard and the alarms to the metrics
// the functions publish (internal/metrics.Defs): names, dimensions, and
// every metric shown; and the alarms to what operating an on-sale needs.
func TestTemplateMetrics(t *testing.T) {
	tpl := loadTemplate(t)
	widgets, dashRefs := dashboardRefs(t, tpl)
	if len(widgets) == 0 {
		t.Fatal("no dashboard widgets")
	}
	alarms, alarmMetricRefs := alarmRefs(tpl)
	shown := map[string]bool{}
	for _, ref := range append(dashRefs, alarmMetricRefs...) {
		d, ok := metricstest.ByName(ref.name)
		if !ok {
			t.Errorf("%s: metric %q is not one the functions publish (internal/metrics.Defs)", ref.where, ref.name)
			continue
		}
		if !slices.Equal(slices.Sorted(slices.Values(ref.dims)), slices.Sorted(slices.Values(d.Dimensions))) {
			t.Errorf("%s: metric %s with dimensions %v; it is published with %v", ref.where, ref.name, ref.dims, d.Dimensions)
		}
		for dim, v := range ref.values {
			if known, ok := dimensionValues[dim]; ok && !slices.Contains(known, v) {
				t.Errorf("%s: metric %s with %s=%q; the functions publish %s as one of %q", ref.where, ref.name, dim, v, dim, known)
			}
		}
		shown[ref.name] = true
	}
	for _, d := range metrics.Defs {
		if d.CloudWatch() && !shown[d.Name] {
			t.Errorf("metric %s is published but neither on the dashboard nor in an alarm", d.Name)
		}
	}

	// The alarms the on-sale needs, by the metric each watches.
	watches := func(p map[string]any) string { return fmt.Sprint(p) }
	for _, want := range []struct{ what, substr string }{
		{"the 503 rate", "MetricName:StoreUnavailable"},
		{"the poll p99 latency", "ExtendedStatistic:p99"},
		{"Lambda errors", "MetricName:Errors"},
		{"Lambda throttles", "MetricName:Throttles"},
		{"DynamoDB throttled requests", "MetricName:ThrottledRequests"},
		{"API Gateway 5xx", "MetricName:5xx"},
	} {
		found := false
		for _, p := range alarms {
			found = found || strings.Contains(watches(p), want.substr)
		}
		if !found {
			t.Errorf("no alarm on %s (%s)", want.what, want.substr)
		}
	}
	for id, p := range alarms {
		for _, key := range []string{"AlarmActions", "OKActions"} {
			if got := fmt.Sprint(p[key]); got != "map[Fn::If:[HasAlarmTopic [map[Ref:AlarmTopicArn]] map[Ref:AWS::NoValue]]]" {
				t.Errorf("%s: %s = %s, want the AlarmTopicArn when one is given, else none", id, key, got)
			}
		}
		if p["TreatMissingData"] != "notBreaching" {
			t.Errorf("%s: TreatMissingData %v, want notBreaching (no requests is no failure)", id, p["TreatMissingData"])
		}
	}
	if _, ok := tpl.Outputs["DashboardUrl"]; !ok {
		t.Error("no DashboardUrl output")
	}
	for _, id := range tpl.FunctionIDs() {
		f, err := tpl.Function(id)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(f.Environment.Variables[config.EnvMetricsNamespace]); got != "map[Ref:MetricsNamespace]" {
			t.Errorf("%s: %s = %s, want !Ref MetricsNamespace (the namespace the dashboard and alarms read)", id, config.EnvMetricsNamespace, got)
		}
	}
}

// TestTemplatePassWrapKey: the admission passes' signing keys are made and
// wrapped by a symmetric KMS key (its material rotated by KMS, retained)
// whose key policy is the only grant of its use: the account manages it but
// may not use it; the queue function's role and the admin function's may
// kms:GenerateDataKeyPair (ECC_NIST_P256 pairs only) and kms:Decrypt, both
// only under the encryption context purpose admissionpass.EncryptionPurpose,
// and nothing else (no Sign, GetPublicKey or Encrypt); no other principal
// gets anything. Both functions sign with the keyring it wraps, every
// PassKeyRotationHours, and read the keyring's partition with a Query.
func TestTemplatePassWrapKey(t *testing.T) {
	tpl := loadTemplate(t)
	if keys := tpl.IDsOfType("AWS::KMS::Key"); !slices.Equal(keys, []string{"PassWrapKey", "ShuffleKey"}) {
		t.Fatalf("KMS keys %v, want the pass wrapping key and the shuffle key", keys)
	}
	const key = "PassWrapKey"
	props := tpl.Properties(key)
	if props["KeySpec"] != "SYMMETRIC_DEFAULT" || props["KeyUsage"] != "ENCRYPT_DECRYPT" {
		t.Errorf("%s: KeySpec %v KeyUsage %v, want SYMMETRIC_DEFAULT and ENCRYPT_DECRYPT (kms:GenerateDataKeyPair needs a symmetric encryption key)", key, props["KeySpec"], props["KeyUsage"])
	}
	if props["EnableKeyRotation"] != true {
		t.Errorf("%s: EnableKeyRotation %v, want true", key, props["EnableKeyRotation"])
	}
	if r := tpl.Resources[key]; r.DeletionPolicy != "Retain" || r.UpdateReplacePolicy != "Retain" {
		t.Errorf("%s: DeletionPolicy %q UpdateReplacePolicy %q, want Retain: without the key the stored signing keys cannot be opened", key, r.DeletionPolicy, r.UpdateReplacePolicy)
	}

	queueFn, adminFn := keyFunctions(t, tpl)
	users := []string{roleArn(queueFn), roleArn(adminFn)}
	grants := keyGrants(t, tpl, key)
	purpose := "kms:EncryptionContext:purpose:" + admissionpass.EncryptionPurpose
	want := []string{
		"kms:Decrypt map[StringEquals:map[" + purpose + "]]",
		"kms:GenerateDataKeyPair map[StringEquals:map[kms:DataKeyPairSpec:" + string(kmstypes.DataKeyPairSpecEccNistP256) + " " + purpose + "]]",
	}
	for _, role := range users {
		if diff := cmp.Diff(want, slices.Sorted(slices.Values(grants[role]))); diff != "" {
			t.Errorf("%s's grants on the key (-want +got):\n%s", role, diff)
		}
	}
	// The push sender makes and opens its VAPID key alone, under its own purpose.
	vapid := "kms:EncryptionContext:purpose:" + notify.EncryptionPurpose
	wantSender := []string{
		"kms:Decrypt map[StringEquals:map[" + vapid + "]]",
		"kms:GenerateDataKeyPair map[StringEquals:map[kms:DataKeyPairSpec:" + string(kmstypes.DataKeyPairSpecEccNistP256) + " " + vapid + "]]",
	}
	if diff := cmp.Diff(wantSender, slices.Sorted(slices.Values(grants[roleArn(pushSender)]))); diff != "" {
		t.Errorf("%s's grants on the key (-want +got):\n%s", pushSender, diff)
	}
	users = append(users, roleArn(pushSender))
	// Spelled out, whatever the grants above become: what no principal
	// may do with the key, and the purpose every Decrypt and
	// GenerateDataKeyPair statement requires.
	for p, gs := range grants {
		for _, g := range gs {
			action, _, _ := strings.Cut(g, " ")
			for _, forbidden := range []string{"kms:Sign", "kms:GetPublicKey", "kms:Encrypt", "kms:ReEncryptFrom", "kms:ReEncryptTo", "kms:GenerateDataKey", "kms:GenerateDataKeyWithoutPlaintext", "kms:GenerateDataKeyPairWithoutPlaintext", "kms:CreateGrant"} {
				if matches(action, forbidden) {
					t.Errorf("%s is allowed %s (as %q): the keyring needs neither it nor any grant through which it could spread", p, forbidden, action)
				}
			}
		}
	}
	policy, _ := props["KeyPolicy"].(map[string]any)
	for i, s := range list(policy["Statement"]) {
		st, _ := s.(map[string]any)
		for _, a := range list(st["Action"]) {
			action := fmt.Sprint(a)
			if st["Effect"] != "Allow" || !matches(action, "kms:Decrypt") && !matches(action, "kms:GenerateDataKeyPair") {
				continue
			}
			cond, _ := st["Condition"].(map[string]any)
			eq, _ := cond["StringEquals"].(map[string]any)
			if eq["kms:EncryptionContext:purpose"] != admissionpass.EncryptionPurpose {
				t.Errorf("key policy statement %d (%v) allows %s without StringEquals kms:EncryptionContext:purpose %s: any blob of the key could be opened, any pair made", i, st["Sid"], action, admissionpass.EncryptionPurpose)
			}
			if matches(action, "kms:GenerateDataKeyPair") && eq["kms:DataKeyPairSpec"] != string(kmstypes.DataKeyPairSpecEccNistP256) {
				t.Errorf("key policy statement %d (%v) allows %s of any kms:DataKeyPairSpec, want %s only", i, st["Sid"], action, kmstypes.DataKeyPairSpecEccNistP256)
			}
		}
	}
	account := accountPrincipal()
	if len(grants[account]) == 0 {
		t.Error("the account has no statement: nobody could manage the key")
	}
	var managed []string
	for _, g := range grants[account] {
		action, _, _ := strings.Cut(g, " ")
		managed = append(managed, action)
		for _, crypto := range []string{"kms:Decrypt", "kms:GenerateDataKeyPair"} {
			if matches(action, crypto) {
				t.Errorf("the account is allowed %s (as %q): anyone the account's IAM policies allow could open or make signing keys", crypto, action)
			}
		}
	}
	// CloudFormation enables and reads the key's rotation, and a stack
	// update puts the key policy, with the deploying identity's rights.
	for _, need := range []string{"kms:PutKeyPolicy", "kms:EnableKeyRotation", "kms:GetKeyRotationStatus", "kms:ScheduleKeyDeletion"} {
		if !slices.Contains(managed, need) {
			t.Errorf("the account may not %s: CloudFormation could not manage the key", need)
		}
	}
	for p := range grants {
		if !slices.Contains(users, p) && p != account {
			t.Errorf("key policy grants %v to %s: only the account (to manage) and %v (to make and open signing keys) may appear", grants[p], p, users)
		}
	}
	checkNoKMSPolicies(t, tpl, queueFn, adminFn)

	// Both functions: the key and the rotation, and no fixed pass key.
	wantEnv := map[string]string{
		config.EnvPassWrapKMSKeyID: "map[Ref:" + key + "]",
		config.EnvPassKeyRotation:  "map[Fn::Sub:${PassKeyRotationHours}h]",
		config.EnvPassIssuer:       passIssuerEnv,
	}
	for _, fn := range []string{queueFn, adminFn} {
		f, err := tpl.Function(fn)
		if err != nil {
			t.Fatal(err)
		}
		for k, want := range wantEnv {
			if got := fmt.Sprint(f.Environment.Variables[k]); got != want {
				t.Errorf("%s: %s = %s, want %s", fn, k, got, want)
			}
		}
		for _, k := range append([]string{config.EnvKMSEndpoint, config.EnvPassKeyFile, config.EnvPassPublishedKeyFile}, config.Retired...) {
			if v, ok := f.Environment.Variables[k]; ok {
				t.Errorf("%s: %s = %v: the keyring signs and publishes its own keys (and endpoints and key files are local settings)", fn, k, v)
			}
		}
		if !slices.Contains(tableActions(t, tpl, fn), "dynamodb:Query") {
			t.Errorf("%s: no dynamodb:Query on the table: the keyring reads its keys (pk PASSKEYS) with one", fn)
		}
	}
	admin, err := tpl.Function(adminFn)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range admin.Environment.Variables {
		if _, ok := wantEnv[k]; !ok && (strings.HasPrefix(k, "PASS_") || strings.HasPrefix(k, "KMS_") || strings.HasPrefix(k, "SHUFFLE_")) {
			t.Errorf("%s: %s = %v: the admin function signs bypass passes with the keyring only", adminFn, k, v)
		}
	}

	// The rotation: hours the config accepts, its default the keyring's.
	p, ok := tpl.Parameters["PassKeyRotationHours"]
	if !ok {
		t.Fatal("no PassKeyRotationHours parameter")
	}
	if got := fmt.Sprint(p.Type, " ", p.Default, " ", p.MinValue, "..", p.MaxValue); got != "Number 24 1..720" {
		t.Errorf("PassKeyRotationHours: %s, want Number 24 1..720", got)
	}
	for _, h := range []any{p.Default, p.MinValue, p.MaxValue} {
		hours, err := strconv.Atoi(fmt.Sprint(h))
		if err != nil {
			t.Fatalf("PassKeyRotationHours bound %v: %v", h, err)
		}
		cfg, err := config.FromEnv(func(k string) string {
			return map[string]string{config.EnvTableName: "t", config.EnvPassWrapKMSKeyID: "k", config.EnvPassKeyRotation: fmt.Sprintf("%dh", hours)}[k]
		}, true)
		if err != nil {
			t.Errorf("PassKeyRotationHours %d: the config refuses it: %v", hours, err)
		} else if cfg.Pass.KeyRotation != time.Duration(hours)*time.Hour {
			t.Errorf("PassKeyRotationHours %d: rotation %s", hours, cfg.Pass.KeyRotation)
		}
	}
	if fmt.Sprint(p.MinValue) != fmt.Sprint(config.MinKeyRotation.Hours()) || fmt.Sprint(p.MaxValue) != fmt.Sprint(config.MaxKeyRotation.Hours()) {
		t.Errorf("PassKeyRotationHours %v..%v, want the config's bounds %s..%s", p.MinValue, p.MaxValue, config.MinKeyRotation, config.MaxKeyRotation)
	}
	if fmt.Sprint(p.Default) != fmt.Sprint(admissionpass.DefaultRotation.Hours()) {
		t.Errorf("PassKeyRotationHours default %v, want the keyring's %s", p.Default, admissionpass.DefaultRotation)
	}

	for _, gone := range []string{"PassPublishedKeyId"} {
		if _, ok := tpl.Parameters[gone]; ok {
			t.Errorf("parameter %s: the keyring publishes its own rotations", gone)
		}
	}
	if param, ok := tpl.Parameters["PassIssuer"]; !ok || param.Default != "" {
		t.Errorf("parameter PassIssuer: %+v, want one defaulting to empty", param)
	}
	if got := fmt.Sprint(tpl.Outputs["PassWrapKeyArn"]); !strings.Contains(got, "Value:map[Fn::GetAtt:[PassWrapKey Arn]]") {
		t.Errorf("PassWrapKeyArn output %s, want !GetAtt PassWrapKey.Arn", got)
	}
	if _, ok := tpl.Outputs["PassKeyArn"]; ok {
		t.Error("a PassKeyArn output: there is no such key any more")
	}
	if got := fmt.Sprint(tpl.Outputs["JwksUrl"]); !strings.Contains(got, api.JWKSPath) {
		t.Errorf("JwksUrl %s does not end in %s", got, api.JWKSPath)
	}
}

// matches reports whether a policy action (which may hold wildcards)
// covers op, as IAM compares them: without regard to case.
func matches(action, op string) bool {
	ok, _ := path.Match(strings.ToLower(action), strings.ToLower(op))
	return ok
}

// tableActions lists the actions function fn's policies allow.
func tableActions(t *testing.T, tpl *samtemplate.Template, fn string) []string {
	t.Helper()
	f, err := tpl.Function(fn)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, st := range statements(f) {
		if st["Effect"] != "Allow" || fmt.Sprint(st["Resource"]) != "map[Fn::GetAtt:[QueueTable Arn]]" {
			continue
		}
		for _, a := range list(st["Action"]) {
			actions = append(actions, fmt.Sprint(a))
		}
	}
	return actions
}

// statements are the statements of f's inline policy documents.
func statements(f samtemplate.Function) []map[string]any {
	var out []map[string]any
	for _, p := range f.Policies {
		doc, _ := p.(map[string]any)
		for _, s := range list(doc["Statement"]) {
			st, _ := s.(map[string]any)
			out = append(out, st)
		}
	}
	return out
}

// TestTemplateShuffleKey: the key that seeds shuffled openings is an
// RSA_2048 signing key that only the queue function may use, to sign with
// RSASSA_PKCS1_V1_5_SHA_256 over the raw message (deterministic: every
// instance derives one seed) and to read its public half.
// challengeGrant is the Sid of the queue function's one grant on the
// challenges' secret.
const challengeGrant = "ChallengeSecret"

// TestTemplateChallengeSecret: the challenges' secret is generated by
// Secrets Manager; the queue function, and no other, may read that one
// secret (GetSecretValue, nothing else) and finds its ARN in its
// environment.
func TestTemplateChallengeSecret(t *testing.T) {
	tpl := loadTemplate(t)
	const secret = "ChallengeSecret"
	if ids := tpl.IDsOfType("AWS::SecretsManager::Secret"); !slices.Equal(ids, []string{secret}) {
		t.Fatalf("secrets %v, want only %s", ids, secret)
	}
	gen, _ := tpl.Properties(secret)["GenerateSecretString"].(map[string]any)
	if n, _ := strconv.Atoi(fmt.Sprint(gen["PasswordLength"])); n < 32 {
		t.Errorf("%s: GenerateSecretString %v, want a generated string of at least 32 characters", secret, gen)
	}
	if _, ok := tpl.Properties(secret)["SecretString"]; ok {
		t.Errorf("%s has a SecretString: the value must be generated, never written in the template", secret)
	}
	_, queueFn, err := tpl.RouteFor(http.MethodPost, samplePath(api.QueuePath))
	if err != nil {
		t.Fatal(err)
	}
	// The admin function keys accounts' token ids with it too (wrctl token -account).
	_, adminFn, err := tpl.RouteFor(http.MethodGet, samplePath(api.AccountPath))
	if err != nil {
		t.Fatal(err)
	}
	readers := []string{queueFn, adminFn}
	ref := fmt.Sprint(map[string]any{"Ref": secret})
	for _, id := range tpl.FunctionIDs() {
		f, err := tpl.Function(id)
		if err != nil {
			t.Fatal(err)
		}
		var grants []string
		for _, st := range statements(f) {
			for _, a := range list(st["Action"]) {
				if strings.HasPrefix(fmt.Sprint(a), "secretsmanager:") || st["Sid"] == challengeGrant {
					grants = append(grants, fmt.Sprintf("%v %v on %v", st["Effect"], a, st["Resource"]))
				}
			}
		}
		var want []string
		if slices.Contains(readers, id) {
			want = []string{"Allow secretsmanager:GetSecretValue on " + ref}
		}
		if !slices.Equal(grants, want) {
			t.Errorf("%s: secret grants %q, want %q", id, grants, want)
		}
		got := fmt.Sprint(f.Environment.Variables[config.EnvChallengeSecretARN])
		if slices.Contains(readers, id) && got != ref || !slices.Contains(readers, id) && got != "<nil>" {
			t.Errorf("%s: %s = %s", id, config.EnvChallengeSecretARN, got)
		}
	}
}

func TestTemplateShuffleKey(t *testing.T) {
	tpl := loadTemplate(t)
	const key = "ShuffleKey"
	queueFn, _ := checkSigningKey(t, tpl, key, "RSA_2048", "RSASSA_PKCS1_V1_5_SHA_256", false)
	queue, err := tpl.Function(queueFn)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(queue.Environment.Variables[config.EnvShuffleKMSKeyID]); got != "map[Ref:"+key+"]" {
		t.Errorf("%s: %s = %s, want !Ref %s", queueFn, config.EnvShuffleKMSKeyID, got, key)
	}
	if _, ok := tpl.Outputs["ShuffleKeyArn"]; !ok {
		t.Error("no ShuffleKeyArn output")
	}
}

// checkSigningKey checks the KMS key key: its spec, retained, and a key
// policy that lets the account manage it but not sign, and the queue
// function (returned with the admin function), and the admin function if
// adminSigns, sign with algorithm over raw messages and read the public
// key, nobody else; no function's IAM policies mention KMS.
func checkSigningKey(t *testing.T, tpl *samtemplate.Template, key, spec, algorithm string, adminSigns bool) (queueFn, adminFn string) {
	t.Helper()
	props := tpl.Properties(key)
	if props["KeySpec"] != spec || props["KeyUsage"] != "SIGN_VERIFY" {
		t.Errorf("%s: KeySpec %v KeyUsage %v, want %s and SIGN_VERIFY", key, props["KeySpec"], props["KeyUsage"], spec)
	}
	if r := tpl.Resources[key]; r.DeletionPolicy != "Retain" || r.UpdateReplacePolicy != "Retain" {
		t.Errorf("%s: DeletionPolicy %q UpdateReplacePolicy %q, want Retain: a replaced shuffle key would change the key that armed shuffles committed to", key, r.DeletionPolicy, r.UpdateReplacePolicy)
	}
	queueFn, adminFn = keyFunctions(t, tpl)
	signers := []string{roleArn(queueFn)}
	if key == "ShuffleKey" {
		signers = append(signers, roleArn(pushSender))
	}
	if adminSigns {
		signers = append(signers, roleArn(adminFn))
	}
	account := accountPrincipal()
	grants := keyGrants(t, tpl, key)
	wantQueue := []string{
		"kms:GetPublicKey",
		"kms:Sign map[StringEquals:map[kms:MessageType:RAW kms:SigningAlgorithm:" + algorithm + "]]",
	}
	for _, role := range signers {
		if diff := cmp.Diff(wantQueue, slices.Sorted(slices.Values(grants[role]))); diff != "" {
			t.Errorf("%s's grants on the key (-want +got):\n%s", role, diff)
		}
	}
	if len(grants[account]) == 0 {
		t.Error("the account has no statement: nobody could manage the key")
	}
	for _, g := range grants[account] {
		action, _, _ := strings.Cut(g, " ")
		for _, forbidden := range []string{"kms:Sign", "kms:CreateGrant"} {
			if matches(action, forbidden) {
				t.Errorf("the account is allowed %s (as %q): anyone the account's IAM policies allow could sign", forbidden, action)
			}
		}
	}
	for p := range grants {
		if !slices.Contains(signers, p) && p != account {
			t.Errorf("key policy grants %v to %s: only the account (to manage) and %v (to sign) may appear", grants[p], p, signers)
		}
	}
	checkNoKMSPolicies(t, tpl, queueFn, adminFn)
	return queueFn, adminFn
}

// keyFunctions returns the queue function and the admin function, by the
// routes they serve; neither has its own Role, so that a key policy names
// the role SAM generates.
func keyFunctions(t *testing.T, tpl *samtemplate.Template) (queueFn, adminFn string) {
	t.Helper()
	_, queueFn, err := tpl.RouteFor(http.MethodPost, samplePath(api.QueuePath))
	if err != nil {
		t.Fatal(err)
	}
	_, adminFn, err = tpl.RouteFor(http.MethodPut, samplePath(api.AdminPath))
	if err != nil {
		t.Fatal(err)
	}
	if queueFn == "" || adminFn == "" || queueFn == adminFn {
		t.Fatalf("queue function %q, admin function %q", queueFn, adminFn)
	}
	for _, fn := range []string{queueFn, adminFn} {
		if _, own := tpl.Properties(fn)["Role"]; own {
			t.Errorf("%s has its own Role: the key policy names the role SAM generates, %sRole", fn, fn)
		}
	}
	return queueFn, adminFn
}

// roleArn is the key policy principal of function fn's generated role.
func roleArn(fn string) string {
	return fmt.Sprint(map[string]any{"Fn::GetAtt": []any{fn + "Role", "Arn"}})
}

// accountPrincipal is the key policy principal of the account.
func accountPrincipal() string {
	return fmt.Sprint(map[string]any{"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:root"})
}

// keyGrants reads key's key policy: for each principal, "action
// condition" for each action a statement allows it (without a condition:
// the action alone). Every statement must name AWS principals and no
// NotAction, NotPrincipal or NotResource.
func keyGrants(t *testing.T, tpl *samtemplate.Template, key string) map[string][]string {
	t.Helper()
	grants := map[string][]string{}
	policy, _ := tpl.Properties(key)["KeyPolicy"].(map[string]any)
	for i, s := range list(resolveIfs(t, tpl, policy["Statement"], pushParams)) {
		st, _ := s.(map[string]any)
		for _, k := range []string{"NotAction", "NotPrincipal", "NotResource"} {
			if _, ok := st[k]; ok {
				t.Errorf("%s: key policy statement %d has %s", key, i, k)
			}
		}
		if st["Effect"] != "Allow" {
			continue
		}
		principal, _ := st["Principal"].(map[string]any)
		if len(principal) != 1 || principal["AWS"] == nil {
			t.Errorf("%s: key policy statement %d: principal %v, want AWS principals", key, i, st["Principal"])
			continue
		}
		for _, p := range list(principal["AWS"]) {
			for _, a := range list(st["Action"]) {
				g := fmt.Sprint(a)
				if c, ok := st["Condition"]; ok {
					g += " " + fmt.Sprint(c)
				}
				grants[fmt.Sprint(p)] = append(grants[fmt.Sprint(p)], g)
			}
		}
	}
	return grants
}

// checkNoKMSPolicies: no function's IAM policies mention KMS, so that the
// key policies alone grant the keys.
func checkNoKMSPolicies(t *testing.T, tpl *samtemplate.Template, fns ...string) {
	t.Helper()
	for _, fn := range fns {
		f, _ := tpl.Function(fn)
		if p := fmt.Sprint(f.Policies); strings.Contains(strings.ToLower(p), "kms") {
			t.Errorf("%s: policies mention KMS (%s): the key policy alone grants the key", fn, p)
		}
	}
}

// accessLogFields are the fields every access log line carries, each
// with the HTTP API variable that fills it (API Gateway developer guide,
// "Customize HTTP API access logs"). callerArn is the signer's IAM ARN on
// routes with IAM authorization: the answer to "who paused at 10:02?".
var accessLogFields = map[string]string{
	"requestId":        "$context.requestId",
	"requestTimeEpoch": "$context.requestTimeEpoch",
	"sourceIp":         "$context.identity.sourceIp",
	"httpMethod":       "$context.httpMethod",
	"routeKey":         "$context.routeKey",
	"path":             "$context.path",
	"status":           "$context.status",
	"responseLatency":  "$context.responseLatency",
	"callerArn":        "$context.identity.userArn",
}

// httpAPILogVariables are the HTTP API access log variables the format may
// use: a REST API's variable (such as $context.authorize.status) is not
// one, and API Gateway would log it as text or refuse the stage.
var httpAPILogVariables = []string{
	"$context.requestId", "$context.requestTime", "$context.requestTimeEpoch",
	"$context.identity.sourceIp", "$context.identity.userAgent", "$context.identity.userArn",
	"$context.identity.accountId", "$context.httpMethod", "$context.routeKey", "$context.path",
	"$context.status", "$context.responseLength", "$context.responseLatency",
	"$context.integrationLatency", "$context.integrationStatus", "$context.error.messageString",
}

// cloudWatchRetentionDays are the retention periods CloudWatch Logs takes
// (PutRetentionPolicy's retentionInDays).
var cloudWatchRetentionDays = []string{"1", "3", "5", "7", "14", "30", "60", "90", "120", "150", "180",
	"365", "400", "545", "731", "1096", "1827", "2192", "2557", "2922", "3288", "3653"}

var logVariable = regexp.MustCompile(`\$context(\.[A-Za-z0-9]+)+`)

// TestTemplateAccessLogs: the HTTP API writes access logs to the template's
// own log group, kept as long as a parameter says (a retention CloudWatch
// takes); each line is one JSON object whatever the variables hold, and
// names the request, its time, source, route, status, latencies and, on
// admin routes, the caller's ARN.
func TestTemplateAccessLogs(t *testing.T) {
	tpl := loadTemplate(t)
	settings, _ := tpl.Properties("HttpApi")["AccessLogSettings"].(map[string]any)
	if got := fmt.Sprint(settings["DestinationArn"]); got != "map[Fn::GetAtt:[AccessLogs Arn]]" {
		t.Errorf("AccessLogSettings.DestinationArn %s, want !GetAtt AccessLogs.Arn", got)
	}
	if r := tpl.Resources["AccessLogs"]; r.Type != "AWS::Logs::LogGroup" || r.DeletionPolicy != "Retain" {
		t.Errorf("AccessLogs is %q with DeletionPolicy %q, want a retained AWS::Logs::LogGroup", r.Type, r.DeletionPolicy)
	}
	if got := fmt.Sprint(tpl.Properties("AccessLogs")["RetentionInDays"]); got != "map[Ref:AccessLogRetentionDays]" {
		t.Errorf("AccessLogs RetentionInDays %s, want !Ref AccessLogRetentionDays", got)
	}
	p, ok := tpl.Parameters["AccessLogRetentionDays"]
	var allowed []string
	for _, v := range p.AllowedValues {
		allowed = append(allowed, fmt.Sprint(v))
	}
	if !ok || !slices.Equal(allowed, cloudWatchRetentionDays) || !slices.Contains(allowed, fmt.Sprint(p.Default)) {
		t.Errorf("parameter AccessLogRetentionDays %+v, want one allowing CloudWatch's retentions %v, with one of them as default", p, cloudWatchRetentionDays)
	}
	if _, ok := tpl.Outputs["AccessLogGroup"]; !ok {
		t.Error("no AccessLogGroup output: the operator must find the logs")
	}

	format, _ := settings["Format"].(string)
	if strings.ContainsAny(format, "\n\r") {
		t.Errorf("the format spans lines: API Gateway takes a single line\n%s", format)
	}
	for _, v := range logVariable.FindAllString(format, -1) {
		if !slices.Contains(httpAPILogVariables, v) {
			t.Errorf("the format uses %s, not an HTTP API access log variable", v)
		}
	}
	// Each variable as API Gateway would fill it: "-" when it has no value,
	// a quoted string for messageString; then the line must be JSON, and
	// the same line with each variable replaced by its own name tells which
	// field each fills.
	filled := logVariable.ReplaceAllStringFunc(format, func(v string) string {
		if strings.HasSuffix(v, "String") {
			return `"a \"quoted\" message"`
		}
		return "-"
	})
	var line map[string]any
	if err := json.Unmarshal([]byte(filled), &line); err != nil {
		t.Fatalf("an access log line with empty values is not a JSON object: %v\n%s", err, filled)
	}
	named := logVariable.ReplaceAllStringFunc(format, func(v string) string {
		if strings.HasSuffix(v, "String") {
			return `"` + v + `"`
		}
		return v
	})
	var fields map[string]string
	if err := json.Unmarshal([]byte(named), &fields); err != nil {
		t.Fatalf("the format's fields are not all strings: %v\n%s", err, named)
	}
	// Those fields and the error, and nothing else: each byte of a line is
	// paid for on every request.
	want := maps.Clone(accessLogFields)
	want["errorMessage"] = "$context.error.messageString"
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("access log fields (-want +template):\n%s", diff)
	}
}

// pushSender is the push sender's function; pushParams turn it on.
const pushSender = "PushSenderFunction"

var pushParams = map[string]string{"PushSubject": "mailto:ops@example.com"}

// TestTemplatePushSender: the sender exists only with a PushSubject; the
// schedule starts it every minute without retries (a missed run is the next
// minute's); it reads and writes the table and its push index alone, with
// the VAPID key's wrapper and the shuffle key's in its environment; and
// every function knows PUSH_SUBJECT.
func TestTemplatePushSender(t *testing.T) {
	tpl := loadTemplate(t)
	if got := tpl.Resources[pushSender].Condition; got != "PushEnabled" {
		t.Errorf("%s: Condition %q, want PushEnabled", pushSender, got)
	}
	for params, want := range map[string]bool{"": false, pushParams["PushSubject"]: true} {
		if holds, err := tpl.Condition("PushEnabled", map[string]string{"PushSubject": params}); err != nil || holds != want {
			t.Errorf("PushEnabled with PushSubject %q: %v, %v; want %v", params, holds, err, want)
		}
	}
	f, err := tpl.Function(pushSender)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := f.Events["EveryMinute"]
	if !ok || e.Type != "ScheduleV2" {
		t.Fatalf("events %v, want a ScheduleV2 EveryMinute", f.Events)
	}
	props := fmt.Sprint(tpl.Properties(pushSender)["Events"])
	for _, want := range []string{"ScheduleExpression:rate(1 minute)", "RetryPolicy:map[MaximumRetryAttempts:0]"} {
		if !strings.Contains(props, want) {
			t.Errorf("the schedule lacks %s: %s", want, props)
		}
	}
	for k, want := range map[string]string{config.EnvPassWrapKMSKeyID: "map[Ref:PassWrapKey]", config.EnvShuffleKMSKeyID: "map[Ref:ShuffleKey]", config.EnvChallengeSecretARN: "<nil>"} {
		if got := fmt.Sprint(f.Environment.Variables[k]); got != want {
			t.Errorf("%s: %s = %s, want %s", pushSender, k, got, want)
		}
	}
	if got := fmt.Sprint(tpl.Globals.Function.Environment.Variables[config.EnvPushSubject]); got != "map[Ref:PushSubject]" {
		t.Errorf("Globals: %s = %s, want !Ref PushSubject (the queue function offers push with it)", config.EnvPushSubject, got)
	}
	checkNoKMSPolicies(t, tpl, pushSender)
	// It writes whole items only to make the VAPID key.
	for _, st := range statements(f) {
		if slices.Contains(list(st["Action"]), any("dynamodb:PutItem")) && fmt.Sprint(st["Condition"]) != "map[ForAllValues:StringEquals:map[dynamodb:LeadingKeys:[VAPID]]]" {
			t.Errorf("%s: PutItem %v beyond the VAPID item", pushSender, st)
		}
	}
}

const reporter = "ReporterFunction"

// TestTemplateReporter: the reporter runs every 15 minutes without retries
// (a run missed is the next one's), and writes the report items alone.
func TestTemplateReporter(t *testing.T) {
	tpl := loadTemplate(t)
	f, err := tpl.Function(reporter)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := f.Events["Every15Minutes"]; !ok || e.Type != "ScheduleV2" || len(f.Events) != 1 {
		t.Fatalf("events %v, want a ScheduleV2 Every15Minutes alone", f.Events)
	}
	props := fmt.Sprint(tpl.Properties(reporter)["Events"])
	for _, want := range []string{"ScheduleExpression:rate(15 minutes)", "RetryPolicy:map[MaximumRetryAttempts:0]"} {
		if !strings.Contains(props, want) {
			t.Errorf("events %s lack %s", props, want)
		}
	}
	var puts []string
	for _, p := range f.Policies {
		doc, _ := p.(map[string]any)
		for _, s := range list(doc["Statement"]) {
			st, _ := s.(map[string]any)
			if slices.Contains(list(st["Action"]), any("dynamodb:PutItem")) {
				puts = append(puts, fmt.Sprint(st["Condition"]))
			}
		}
	}
	if want := []string{"map[ForAllValues:StringLike:map[dynamodb:LeadingKeys:[REPORT#*]]]"}; !slices.Equal(puts, want) {
		t.Errorf("PutItem grants %q, want %q", puts, want)
	}
}
