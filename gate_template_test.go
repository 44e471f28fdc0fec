package waitingroom_test

// Holds the edge gate (GateOrigin: template.yaml's GateKeyValueStore,
// GateFunction and GateDistribution) to the routes the waiting room serves,
// to functions/edgegate/gate.js, of which the template carries a copy, and
// the functions' rights on the store to what each calls. cfn-lint (make
// lint) checks the resources against CloudFormation.

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/tools/samtemplate"
)

var update = flag.Bool("update", false, "TestGateFunctionCode: copy "+gateJS+" into template.yaml's GateFunction")

const (
	// gateJS is the gate's code; template.yaml holds a copy between the
	// marker comments.
	gateJS    = "functions/edgegate/gate.js"
	gateBegin = "# BEGIN " + gateJS
	gateEnd   = "# END " + gateJS
	// kvsGrant is the Sid of each function's one statement on the store.
	kvsGrant = "EdgeKeyValueStore"
)

// gateParams are the parameters of a stack with the gate and a custom domain.
var gateParams = map[string]string{
	"GateOrigin":         "origin.example.com",
	"GateDomainName":     "www.example.com",
	"GateCertificateArn": "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-4e5f-6789-abcd-ef0123456789",
}

// gateOnly are the parameters of a stack with the gate on its cloudfront.net name.
var gateOnly = map[string]string{"GateOrigin": gateParams["GateOrigin"]}

// gateResources are the resources the gate adds.
var gateResources = []string{"GateDistribution", "GateFunction", "GateKeyValueStore"}

// kvsActions are the CloudFront KeyValueStore API's actions (Service
// Authorization Reference, "Actions, resources, and condition keys for
// Amazon CloudFront KeyValueStore").
var kvsActions = []string{
	"cloudfront-keyvaluestore:DeleteKey", "cloudfront-keyvaluestore:DescribeKeyValueStore",
	"cloudfront-keyvaluestore:GetKey", "cloudfront-keyvaluestore:ListKeys",
	"cloudfront-keyvaluestore:PutKey", "cloudfront-keyvaluestore:UpdateKeys",
}

// TestGateModes: without GateOrigin (the default) nothing of the gate
// exists; with it the store, the function, the distribution and GateUrl do,
// each under the condition GateEnabled, and the custom domain follows
// GateDomainName.
func TestGateModes(t *testing.T) {
	tpl := loadTemplate(t)
	for _, tc := range []struct {
		name           string
		params         map[string]string
		gate, onDomain bool
	}{
		{"none", nil, false, false},
		{"gate", gateOnly, true, false},
		{"gate with a domain", gateParams, true, true},
		{"a domain without the gate", map[string]string{"GateDomainName": gateParams["GateDomainName"], "GateCertificateArn": gateParams["GateCertificateArn"]}, false, false},
		{"the gate beside the WAF edge", mergeParams(edgeParams, gateParams), true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := tpl.ResourcesWith(tc.params)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for id := range rs {
				if strings.HasPrefix(id, "Gate") {
					got = append(got, id)
				}
			}
			slices.Sort(got)
			var want []string
			if tc.gate {
				want = gateResources
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("gate resources (-want +got):\n%s", diff)
			}
			outs, err := tpl.OutputsWith(tc.params)
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Contains(outs, "GateUrl"); got != tc.gate {
				t.Errorf("GateUrl output: %v, want %v (outputs %v)", got, tc.gate, outs)
			}
			if domain, err := tpl.Condition("GateHasDomain", tc.params); err != nil || domain != tc.onDomain {
				t.Errorf("GateHasDomain = %v, %v; want %v", domain, err, tc.onDomain)
			}
		})
	}
	for id, r := range tpl.Resources {
		if strings.HasPrefix(id, "Gate") && r.Condition != "GateEnabled" {
			t.Errorf("%s has Condition %q, want GateEnabled", id, r.Condition)
		}
	}
	for typ, want := range map[string][]string{
		"AWS::CloudFront::KeyValueStore": {"GateKeyValueStore"},
		"AWS::CloudFront::Function":      {"GateFunction"},
	} {
		if got := tpl.IDsOfType(typ); !slices.Equal(got, want) {
			t.Errorf("%s resources %v, want %v", typ, got, want)
		}
	}
	out, _ := tpl.Outputs["GateUrl"].(map[string]any)
	if got := fmt.Sprint(out["Condition"], " ", out["Value"]); got != "GateEnabled map[Fn::Sub:https://${GateDistribution.DomainName}]" {
		t.Errorf("GateUrl: %s, want the distribution's https URL under GateEnabled", got)
	}
}

func mergeParams(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// TestGateDistribution: the default behaviour serves the site (GateOrigin,
// HTTPS only), uncached, every header, cookie and query string but Host
// forwarded, through GateFunction at viewer-request; the waiting room's
// paths (page, assets, queue API, JWKS) reach the HTTP API as at
// EdgeDistribution, without the function; no other behaviour runs code.
func TestGateDistribution(t *testing.T) {
	tpl := loadTemplate(t)
	cfg, _ := resolveIfs(t, tpl, tpl.Properties("GateDistribution")["DistributionConfig"], gateParams).(map[string]any)
	if cfg == nil {
		t.Fatal("no GateDistribution with a DistributionConfig")
	}
	edge, _ := tpl.Properties("EdgeDistribution")["DistributionConfig"].(map[string]any)

	origins := map[string]any{}
	for _, o := range list(cfg["Origins"]) {
		m, _ := o.(map[string]any)
		origins[fmt.Sprint(m["Id"])] = o
	}
	wantSite := map[string]any{
		"Id":         "Site",
		"DomainName": map[string]any{"Ref": "GateOrigin"},
		"CustomOriginConfig": map[string]any{
			"OriginProtocolPolicy": "https-only",
			"OriginSSLProtocols":   []any{"TLSv1.2"},
		},
	}
	var edgeAPI any
	for _, o := range list(edge["Origins"]) {
		if m, _ := o.(map[string]any); m["Id"] == "HttpApi" {
			edgeAPI = o
		}
	}
	if diff := cmp.Diff(map[string]any{"Site": wantSite, "HttpApi": edgeAPI}, origins); diff != "" {
		t.Errorf("origins (-want +got): the site over HTTPS, and the HTTP API as EdgeDistribution reaches it\n%s", diff)
	}
	if cfg["HttpVersion"] != "http2and3" || cfg["Enabled"] != true {
		t.Errorf("HttpVersion %v Enabled %v, want http2and3 and true", cfg["HttpVersion"], cfg["Enabled"])
	}
	if diff := cmp.Diff(edge["CustomErrorResponses"], cfg["CustomErrorResponses"]); diff != "" {
		t.Errorf("CustomErrorResponses (-EdgeDistribution +GateDistribution): no error of the room's may be cached\n%s", diff)
	}
	if _, ok := cfg["WebACLId"]; ok {
		t.Errorf("WebACLId %v: template-waf.yaml's rules are the API's, not the site's", cfg["WebACLId"])
	}

	allMethods := []string{"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "POST", "DELETE"}
	gateFn := fmt.Sprint("viewer-request ", map[string]any{"Fn::GetAtt": []any{"GateFunction", "FunctionARN"}})
	behaviours := edgeBehaviours(cfg)
	for _, b := range behaviours {
		if b.lambdas {
			t.Errorf("behaviour %q has LambdaFunctionAssociations: the gate is GateFunction alone", b.pattern)
		}
		if b.pattern == "*" {
			want := edgeBehaviour{pattern: "*", origin: "Site", viewer: "redirect-to-https", cachePolicy: cachingDisabled,
				originRequestPolicy: allViewerExceptHostHeader, methods: allMethods, functions: []string{gateFn}}
			if diff := cmp.Diff(want, b, cmp.AllowUnexported(edgeBehaviour{})); diff != "" {
				t.Errorf("default behaviour (-want +got):\n%s", diff)
			}
			continue
		}
		if b.origin != "HttpApi" || b.viewer != "https-only" || len(b.functions) > 0 {
			t.Errorf("behaviour %q: origin %s, viewer protocol %s, functions %v; want the HTTP API, https-only, no function (the room's own paths are never gated)", b.pattern, b.origin, b.viewer, b.functions)
		}
	}

	// Every route of the room, as EdgeDistribution serves it.
	public := publicRoutes()
	edgeBs := edgeBehaviours(edge)
	for _, r := range public {
		p := samplePath(r.path)
		b, e := behaviourFor(behaviours, p), behaviourFor(edgeBs, p)
		if b.origin != "HttpApi" || !slices.Contains(b.methods, r.method) {
			t.Errorf("%s %s: behaviour %q to %s with methods %v, want the HTTP API", r.method, r.path, b.pattern, b.origin, b.methods)
		}
		if b.cachePolicy != e.cachePolicy || b.originRequestPolicy != e.originRequestPolicy {
			t.Errorf("%s %s: cache policy %s, origin request policy %q; EdgeDistribution's are %s, %q", r.method, r.path, b.cachePolicy, b.originRequestPolicy, e.cachePolicy, e.originRequestPolicy)
		}
	}
	// And the rest is the site's, through the gate.
	for _, tc := range []struct{ path, origin string }{
		{"/", "Site"},
		{"/opera/tickets", "Site"},
		{"/api/v1/admin/programs/gala", "Site"}, // admin stays on ApiUrl (SigV4 names its host)
		{"/api/v1/cart", "Site"},
		{"/waiting-room", "Site"},
		{"/waiting-room/gala", "HttpApi"},
		{"/waiting-room/assets/page.css", "HttpApi"},
		{"/api/v1/queues/programs/gala", "HttpApi"},
		{"/.well-known/jwks.json", "HttpApi"},
		{"/.well-known/security.txt", "Site"},
	} {
		b := behaviourFor(behaviours, tc.path)
		if b.origin != tc.origin {
			t.Errorf("%s: behaviour %q to %s, want %s", tc.path, b.pattern, b.origin, tc.origin)
		}
		if gated := slices.Contains(b.functions, gateFn); gated != (tc.origin == "Site") {
			t.Errorf("%s: gated %v, want %v", tc.path, gated, tc.origin == "Site")
		}
	}

	// The custom domain, and the distribution's own name without it.
	if got := fmt.Sprint(cfg["Aliases"], " ", cfg["ViewerCertificate"]); got != "[map[Ref:GateDomainName]] map[AcmCertificateArn:map[Ref:GateCertificateArn] MinimumProtocolVersion:TLSv1.2_2021 SslSupportMethod:sni-only]" {
		t.Errorf("with GateDomainName: Aliases and ViewerCertificate %s", got)
	}
	plain, _ := resolveIfs(t, tpl, tpl.Properties("GateDistribution")["DistributionConfig"], gateOnly).(map[string]any)
	if got := fmt.Sprint(plain["Aliases"], " ", plain["ViewerCertificate"]); got != "<nil> map[CloudFrontDefaultCertificate:true]" {
		t.Errorf("without GateDomainName: Aliases and ViewerCertificate %s", got)
	}
}

// TestGateFunction: GateFunction runs cloudfront-js-2.0 (the KeyValueStore
// helpers need it), reads GateKeyValueStore and no other store, and is
// published on every deploy (a distribution runs only the LIVE stage).
func TestGateFunction(t *testing.T) {
	tpl := loadTemplate(t)
	props := tpl.Properties("GateFunction")
	if props["AutoPublish"] != true {
		t.Errorf("AutoPublish %v, want true", props["AutoPublish"])
	}
	cfg, _ := props["FunctionConfig"].(map[string]any)
	if cfg["Runtime"] != "cloudfront-js-2.0" {
		t.Errorf("Runtime %v, want cloudfront-js-2.0", cfg["Runtime"])
	}
	want := []any{map[string]any{"KeyValueStoreARN": map[string]any{"Fn::GetAtt": []any{"GateKeyValueStore", "Arn"}}}}
	if diff := cmp.Diff(want, cfg["KeyValueStoreAssociations"]); diff != "" {
		t.Errorf("KeyValueStoreAssociations (-want +got):\n%s", diff)
	}
	if c, _ := cfg["Comment"].(string); c == "" || len(c) > 128 {
		t.Errorf("Comment %q: CloudFront requires one of at most 128 characters", c)
	}
}

// TestGateFunctionCode: template.yaml's GateFunction carries
// functions/edgegate/gate.js byte for byte; -update copies the file in.
func TestGateFunctionCode(t *testing.T) {
	src, err := os.ReadFile(gateJS)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		t.Fatalf("%s does not exist: template.yaml's GateFunction has no gate to carry. Write it, then run\n\tgo test -run TestGateFunctionCode -update .", gateJS)
	case err != nil:
		t.Fatal(err)
	}
	if *update {
		if err := updateGateCode("template.yaml", src); err != nil {
			t.Fatal(err)
		}
	}
	code, _ := loadTemplate(t).Properties("GateFunction")["FunctionCode"].(string)
	if code != string(src) {
		t.Errorf("template.yaml's GateFunction.FunctionCode is not %s (first difference on line %d). Edit the file, never the copy, then run\n\tgo test -run TestGateFunctionCode -update .\nwhich rewrites the copy between the template's %q and %q lines", gateJS, firstDiffLine(code, string(src)), gateBegin, gateEnd)
	}
}

// firstDiffLine returns the 1-based number of the first line where a and b differ.
func firstDiffLine(a, b string) int {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return i + 1
		}
	}
	return min(len(al), len(bl)) + 1
}

// updateGateCode rewrites the template at file with src as GateFunction's
// code, keeping its mode, once the rewrite is known to read back as src.
func updateGateCode(file string, src []byte) error {
	old, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	out, err := rewriteGateCode(old, src)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	info, err := os.Stat(file)
	if err != nil {
		return err
	}
	return os.WriteFile(file, out, info.Mode().Perm())
}

// rewriteGateCode returns template with the lines between its gateBegin
// and gateEnd lines replaced by a FunctionCode literal block scalar of src,
// indented as the markers are; an error unless GateFunction's code then
// reads back as src.
func rewriteGateCode(template, src []byte) ([]byte, error) {
	lines := strings.SplitAfter(string(template), "\n")
	begin, end := -1, -1
	for i, l := range lines {
		switch strings.TrimSpace(l) {
		case gateBegin:
			if begin >= 0 {
				return nil, fmt.Errorf("line %d: a second %q", i+1, gateBegin)
			}
			begin = i
		case gateEnd:
			if end >= 0 {
				return nil, fmt.Errorf("line %d: a second %q", i+1, gateEnd)
			}
			end = i
		}
	}
	if begin < 0 || end < begin {
		return nil, fmt.Errorf("want a %q line, then a %q line, around GateFunction's FunctionCode", gateBegin, gateEnd)
	}
	indent := lines[begin][:len(lines[begin])-len(strings.TrimLeft(lines[begin], " "))]
	block, err := literalBlock(string(src), indent+"  ")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", gateJS, err)
	}
	out := strings.Join(lines[:begin+1], "") + indent + "FunctionCode: " + block + strings.Join(lines[end:], "")
	tpl, err := samtemplate.Parse([]byte(out))
	if err != nil {
		return nil, fmt.Errorf("the rewritten template does not parse: %w", err)
	}
	if code, _ := tpl.Properties("GateFunction")["FunctionCode"].(string); code != string(src) {
		return nil, fmt.Errorf("the markers are not around GateFunction's FunctionCode, or %s does not survive as a YAML block (first difference on line %d)", gateJS, firstDiffLine(code, string(src)))
	}
	return []byte(out), nil
}

// literalBlock returns s as a YAML literal block scalar: the header ("|"
// with the chomping that keeps s's final line breaks as they are, and an
// explicit indentation when s's first line starts with a space), a line
// break, then s's lines, each but the empty ones after indent.
func literalBlock(s, indent string) (string, error) {
	switch {
	case strings.TrimSpace(s) == "":
		return "", errors.New("empty")
	case !utf8.ValidString(s):
		return "", errors.New("not UTF-8")
	case strings.ContainsAny(s, "\r\ufeff"):
		return "", errors.New("carriage returns or a byte order mark: save it with LF line ends, without a BOM")
	}
	body := strings.TrimRight(s, "\n")
	header := "|"
	if strings.HasPrefix(strings.TrimLeft(body, "\n"), " ") {
		header += "2" // the block's lines sit 2 columns in from FunctionCode
	}
	switch len(s) - len(body) {
	case 0:
		header += "-"
	case 1:
	default:
		header += "+"
	}
	var b strings.Builder
	b.WriteString(header + "\n")
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if strings.TrimSpace(l) == gateBegin || strings.TrimSpace(l) == gateEnd {
			return "", fmt.Errorf("a line reads %q, the template's marker", strings.TrimSpace(l))
		}
		if l != "" {
			b.WriteString(indent + l)
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}

// TestGateFunctionCodeRewrite: the -update rewrite carries any gate.js
// byte for byte (final newlines or none, blank lines, leading spaces, tabs,
// text that looks like YAML) and changes nothing outside its markers.
func TestGateFunctionCodeRewrite(t *testing.T) {
	orig, err := os.ReadFile("template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{
		"function handler(event) {\n  return event.request;\n}\n",
		"function handler(event) { return event.request; }",
		"import cf from 'cloudfront';\n\n\nasync function handler(event) {\n\treturn event.request; // tab\n}\n\n\n",
		"  // starts indented\nfunction handler(e) { return e.request; }\n",
		"\n// after a blank line\n# not: a comment\n- nor a list\nkey: 'value' # x\n   \n",
		"const s = `${a}` + \"|\" + '>-';\n",
	} {
		out, err := rewriteGateCode(orig, []byte(src))
		if err != nil {
			t.Errorf("%q: %v", src, err)
			continue
		}
		// Undone, the rewrite leaves the template as it was.
		cur, _ := loadTemplate(t).Properties("GateFunction")["FunctionCode"].(string)
		back, err := rewriteGateCode(out, []byte(cur))
		if err != nil {
			t.Errorf("%q: rewriting back: %v", src, err)
		} else if string(back) != string(orig) {
			t.Errorf("%q: the rewrite changed lines outside the markers (or the copy is not in the canonical form -update writes)", src)
		}
	}
	for _, bad := range []string{"", "\n\n", "a\r\nb\n", "x\n  " + gateEnd + "\n"} {
		if _, err := rewriteGateCode(orig, []byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, err := rewriteGateCode([]byte("Resources: {}\n"), []byte("x\n")); err == nil {
		t.Error("a template without markers: no error")
	}
}

// TestGateKeyValueStoreGrants: with the gate, the admin function may
// describe the store, read and write its keys (DescribeKeyValueStore gives
// the ETag PutKey requires), and nothing else; the queue
// function may read a key (GetKey takes no ETag), nothing else; both on
// GateKeyValueStore alone, and both find its ARN in EDGE_KVS_ARN. No other
// statement of the template, nor a wildcard, reaches the store's API;
// without the gate nothing does.
func TestGateKeyValueStoreGrants(t *testing.T) {
	tpl := loadTemplate(t)
	queueFn, adminFn := keyFunctions(t, tpl)
	store := fmt.Sprint(map[string]any{"Fn::GetAtt": []any{"GateKeyValueStore", "Arn"}})
	want := map[string][]string{
		adminFn: {"Allow [cloudfront-keyvaluestore:DescribeKeyValueStore cloudfront-keyvaluestore:GetKey cloudfront-keyvaluestore:PutKey] on [" + store + "]"},
		queueFn: {"Allow [cloudfront-keyvaluestore:GetKey] on [" + store + "]"},
	}
	if diff := cmp.Diff(want, kvsGrants(t, tpl, gateParams)); diff != "" {
		t.Errorf("grants on the CloudFront KeyValueStore API with the gate (-want +got):\n%s", diff)
	}
	if got := kvsGrants(t, tpl, nil); len(got) > 0 {
		t.Errorf("grants on the CloudFront KeyValueStore API without the gate: %v", got)
	}
	for _, fn := range []string{queueFn, adminFn} {
		f, err := tpl.Function(fn)
		if err != nil {
			t.Fatal(err)
		}
		env := f.Environment.Variables[config.EnvEdgeKVSARN]
		if got := fmt.Sprint(resolveIfs(t, tpl, env, gateParams)); got != store {
			t.Errorf("%s: %s = %s with the gate, want %s", fn, config.EnvEdgeKVSARN, got, store)
		}
		if got := resolveIfs(t, tpl, env, nil); got != "" {
			t.Errorf("%s: %s = %v without the gate, want \"\"", fn, config.EnvEdgeKVSARN, got)
		}
		if v, ok := f.Environment.Variables[config.EnvEdgeKVSEndpoint]; ok {
			t.Errorf("%s: %s = %v: on AWS the SDK finds the KeyValueStore API itself", fn, config.EnvEdgeKVSEndpoint, v)
		}
	}
}

// kvsGrants walks every resource of a stack deployed with params (and
// Globals) for IAM statements, and returns, by resource, those that allow
// an action of the CloudFront KeyValueStore API however spelled (wildcards
// included, as IAM matches them): "Effect [actions] on [resources]", each
// statement checked to be kvsGrant's. NotAction, which allows everything
// it does not name, counts as such a grant.
func kvsGrants(t *testing.T, tpl *samtemplate.Template, params map[string]string) map[string][]string {
	t.Helper()
	rs, err := tpl.ResourcesWith(params)
	if err != nil {
		t.Fatal(err)
	}
	trees := map[string]any{"Globals": resolveIfs(t, tpl, tpl.Globals.Function.Policies, params)}
	for id := range rs {
		trees[id] = resolveIfs(t, tpl, tpl.Properties(id), params)
	}
	grants := map[string][]string{}
	for id, tree := range trees {
		walkStatements(tree, func(st map[string]any) {
			if st["Effect"] != "Allow" {
				return
			}
			var actions []string
			reaches := st["NotAction"] != nil
			for _, a := range list(st["Action"]) {
				actions = append(actions, fmt.Sprint(a))
				for _, op := range kvsActions {
					reaches = reaches || matches(fmt.Sprint(a), op)
				}
			}
			if !reaches {
				return
			}
			if st["Sid"] != kvsGrant || st["NotAction"] != nil || st["NotResource"] != nil || st["Condition"] != nil {
				t.Errorf("%s: statement %v reaches the KeyValueStore API; only a plain statement with Sid %s may", id, st, kvsGrant)
			}
			slices.Sort(actions)
			grants[id] = append(grants[id], fmt.Sprintf("Allow %v on %v", actions, list(st["Resource"])))
		})
	}
	return grants
}

// walkStatements calls f with every map in v that has an Effect: an IAM
// or key policy statement.
func walkStatements(v any, f func(map[string]any)) {
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v["Effect"]; ok {
			f(v)
			return
		}
		for _, e := range v {
			walkStatements(e, f)
		}
	case []any:
		for _, e := range v {
			walkStatements(e, f)
		}
	}
}

// resolveIfs returns v as a stack deployed with params holds it: each
// Fn::If decided (tpl.Condition), AWS::NoValue dropped from maps and lists.
func resolveIfs(t *testing.T, tpl *samtemplate.Template, v any, params map[string]string) any {
	t.Helper()
	noValue := func(v any) bool {
		m, ok := v.(map[string]any)
		return ok && len(m) == 1 && m["Ref"] == "AWS::NoValue"
	}
	switch v := v.(type) {
	case map[string]any:
		if args, ok := v["Fn::If"].([]any); ok && len(v) == 1 && len(args) == 3 {
			name, _ := args[0].(string)
			holds, err := tpl.Condition(name, params)
			if err != nil {
				t.Fatal(err)
			}
			if holds {
				return resolveIfs(t, tpl, args[1], params)
			}
			return resolveIfs(t, tpl, args[2], params)
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			if r := resolveIfs(t, tpl, e, params); !noValue(r) {
				out[k] = r
			}
		}
		return out
	case []any:
		out := make([]any, 0, len(v))
		for _, e := range v {
			if r := resolveIfs(t, tpl, e, params); !noValue(r) {
				out = append(out, r)
			}
		}
		return out
	}
	return v
}

// TestGateActionMatching: the walk of kvsGrants sees the store's API
// however an action names it (IAM matches wildcards, and case-blind).
func TestGateActionMatching(t *testing.T) {
	for _, tc := range []struct {
		action string
		hit    bool
	}{
		{"*", true},
		{"cloudfront-keyvaluestore:*", true},
		{"CloudFront-KeyValueStore:getkey", true},
		{"cloudfront-*", true},
		{"cloudfront-keyvaluestore:Get*", true},
		{"cloudfront:*", false},
		{"dynamodb:GetItem", false},
	} {
		hit := false
		for _, op := range kvsActions {
			hit = hit || matches(tc.action, op)
		}
		if hit != tc.hit {
			t.Errorf("%q reaches the KeyValueStore API: %v, want %v", tc.action, hit, tc.hit)
		}
	}
}
