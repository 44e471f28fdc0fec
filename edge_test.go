package waitingroom_test

// Holds the edge (EdgeProtection=waf: template.yaml's CloudFront
// distribution, template-waf.yaml's web ACL) to the routes the handler serves
// and the headers it reads. cfn-lint (make lint) checks both templates
// against CloudFormation.

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/tools/samtemplate"
	"github.com/example/waitingroom/internal/waitpage"
)

// CloudFront's managed policies, by the ids its developer guide gives
// ("Use managed cache policies", "Use managed origin request policies").
const (
	cachingDisabled           = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad"
	cachingOptimized          = "658327ea-f89d-4fab-a63d-7e88639e58f6"
	allViewerExceptHostHeader = "b689b0a8-53d0-40ab-baf2-68738e2966ac"
)

// passIssuerEnv is PASS_ISSUER as both functions set it: the PassIssuer
// parameter, else the edge's custom domain, else "" (the domain API
// Gateway reports, the execute-api one also behind CloudFront).
const passIssuerEnv = "map[Fn::If:[HasPassIssuer map[Ref:PassIssuer] map[Fn::If:[EdgeHasDomain map[Fn::Sub:https://${EdgeDomainName}] ]]]]"

// edgeParams are the parameters of a stack with the edge and a custom domain.
var edgeParams = map[string]string{
	"EdgeProtection":     "waf",
	"EdgeWebAclArn":      "arn:aws:wafv2:us-east-1:123456789012:global/webacl/wr-waiting-room/0a1b2c3d-4e5f-6789-abcd-ef0123456789",
	"EdgeDomainName":     "queue.example.com",
	"EdgeCertificateArn": "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-4e5f-6789-abcd-ef0123456789",
}

// TestEdgeModes: with EdgeProtection=none (the default) nothing of the
// edge exists; with waf the distribution and its EdgeUrl output do, and
// the custom domain and the passes' issuer follow EdgeDomainName.
func TestEdgeModes(t *testing.T) {
	tpl := loadTemplate(t)
	p := tpl.Parameters["EdgeProtection"]
	if got := fmt.Sprint(p.Default, " ", p.AllowedValues); got != "none [none waf]" {
		t.Errorf("EdgeProtection default and allowed values %s, want none [none waf]", got)
	}
	edgeTypes := []string{"AWS::CloudFront::Distribution", "AWS::WAFv2::WebACL", "AWS::WAFv2::WebACLAssociation"}
	for _, tc := range []struct {
		name              string
		params            map[string]string
		wantEdge          []string
		wantURL, wantIssu bool
	}{
		{"none", nil, nil, false, false},
		{"waf", map[string]string{"EdgeProtection": "waf", "EdgeWebAclArn": edgeParams["EdgeWebAclArn"]}, []string{"EdgeDistribution"}, true, false},
		{"waf with a domain", edgeParams, []string{"EdgeDistribution"}, true, true},
		{"a domain without waf", map[string]string{"EdgeDomainName": "queue.example.com", "EdgeCertificateArn": edgeParams["EdgeCertificateArn"]}, nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := tpl.ResourcesWith(tc.params)
			if err != nil {
				t.Fatal(err)
			}
			var edge []string
			for id, r := range rs {
				if slices.Contains(edgeTypes, r.Type) {
					edge = append(edge, id)
				}
			}
			if diff := cmp.Diff(tc.wantEdge, edge); diff != "" {
				t.Errorf("edge resources (-want +got):\n%s", diff)
			}
			outs, err := tpl.OutputsWith(tc.params)
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Contains(outs, "EdgeUrl"); got != tc.wantURL {
				t.Errorf("EdgeUrl output: %v, want %v (outputs %v)", got, tc.wantURL, outs)
			}
			if !slices.Contains(outs, "ApiUrl") {
				t.Error("no ApiUrl output: wrctl signs admin requests for it")
			}
			domain, err := tpl.Condition("EdgeHasDomain", tc.params)
			if err != nil || domain != tc.wantIssu {
				t.Errorf("EdgeHasDomain = %v, %v; want %v (the custom domain, and the passes' issuer)", domain, err, tc.wantIssu)
			}
		})
	}
	for _, id := range tpl.IDsOfType("AWS::CloudFront::Distribution") {
		if id == "GateDistribution" {
			continue // the edge gate's: gate_template_test.go
		}
		if c := tpl.Resources[id].Condition; c != "EdgeEnabled" {
			t.Errorf("%s has Condition %q, want EdgeEnabled", id, c)
		}
	}
	if got := fmt.Sprint(tpl.Outputs["EdgeUrl"]); !strings.Contains(got, "Fn::If:[EdgeHasDomain map[Fn::Sub:https://${EdgeDomainName}] map[Fn::Sub:https://${EdgeDistribution.DomainName}]]") {
		t.Errorf("EdgeUrl = %s, want the custom domain or the distribution's", got)
	}
}

// TestEdgeParameterPatterns: the ARNs the edge and the gate take are
// us-east-1's, as CloudFront requires for a web ACL and a certificate;
// the gate's origin and domain are host names (no scheme, no path); every
// one is optional (empty by default).
func TestEdgeParameterPatterns(t *testing.T) {
	tpl := loadTemplate(t)
	for _, tc := range []struct {
		param, value string
		ok           bool
	}{
		{"EdgeWebAclArn", "", true},
		{"EdgeWebAclArn", edgeParams["EdgeWebAclArn"], true},
		{"EdgeWebAclArn", "arn:aws:wafv2:eu-west-1:123456789012:regional/webacl/wr/0a1b2c3d", false},
		{"EdgeCertificateArn", edgeParams["EdgeCertificateArn"], true},
		{"EdgeCertificateArn", "arn:aws:acm:eu-west-1:123456789012:certificate/0a1b2c3d", false},
		{"EdgeDomainName", "queue.example.com", true},
		{"EdgeDomainName", "https://queue.example.com", false},
		{"EdgeDomainName", "", true},
		{"GateOrigin", "", true},
		{"GateOrigin", "origin.example.com", true},
		{"GateOrigin", "https://origin.example.com", false},
		{"GateOrigin", "origin.example.com/shop", false},
		{"GateOrigin", "localhost", false},
		{"GateDomainName", "", true},
		{"GateDomainName", "www.example.com", true},
		{"GateDomainName", "www.example.com.", false},
		{"GateCertificateArn", "", true},
		{"GateCertificateArn", gateParams["GateCertificateArn"], true},
		{"GateCertificateArn", "arn:aws:acm:eu-west-1:123456789012:certificate/0a1b2c3d", false},
	} {
		p, ok := tpl.Parameters[tc.param]
		if !ok || p.Default != "" {
			t.Fatalf("parameter %s: %v, default %v; want one, empty by default", tc.param, ok, p.Default)
		}
		re, err := regexp.Compile(p.AllowedPattern)
		if err != nil {
			t.Fatalf("%s: %v", tc.param, err)
		}
		if got := re.MatchString(tc.value); got != tc.ok {
			t.Errorf("%s accepts %q: %v, want %v", tc.param, tc.value, got, tc.ok)
		}
	}
}

// TestEdgeDistribution: the distribution reaches the API's own domain over
// HTTPS only, with the web ACL; it caches the page's assets and the JWKS
// and nothing else; every public route is served with its methods and
// every header, cookie and query string but Host; no error is cached.
func TestEdgeDistribution(t *testing.T) {
	tpl := loadTemplate(t)
	cfg, _ := tpl.Properties("EdgeDistribution")["DistributionConfig"].(map[string]any)
	if cfg == nil {
		t.Fatal("no EdgeDistribution with a DistributionConfig")
	}
	if got := fmt.Sprint(cfg["WebACLId"]); got != "map[Ref:EdgeWebAclArn]" {
		t.Errorf("WebACLId = %s, want !Ref EdgeWebAclArn", got)
	}
	// The rate rule counts per address; an IPv6 client rotates through its /64.
	if cfg["IPV6Enabled"] != false {
		t.Errorf("IPV6Enabled = %v, want false", cfg["IPV6Enabled"])
	}
	origins := list(cfg["Origins"])
	if len(origins) != 1 {
		t.Fatalf("origins %v, want the HTTP API alone", origins)
	}
	origin, _ := origins[0].(map[string]any)
	apiURL := fmt.Sprint(tpl.Outputs["ApiUrl"].(map[string]any)["Value"])
	if got := fmt.Sprint(origin["DomainName"]); "map[Fn::Sub:https://"+strings.TrimPrefix(got, "map[Fn::Sub:") != apiURL {
		t.Errorf("origin domain %s, want ApiUrl's host (%s)", got, apiURL)
	}
	if got := fmt.Sprint(origin["CustomOriginConfig"]); !strings.Contains(got, "OriginProtocolPolicy:https-only") {
		t.Errorf("origin %s, want https-only", got)
	}

	behaviours := edgeBehaviours(cfg)
	for _, b := range behaviours {
		if b.viewer != "https-only" || b.origin != "HttpApi" {
			t.Errorf("behaviour %q: viewer protocol %v, origin %v; want https-only to HttpApi", b.pattern, b.viewer, b.origin)
		}
	}
	public := publicRoutes()
	cached := map[string]bool{}
	for _, r := range public {
		p := samplePath(r.path)
		b := behaviourFor(behaviours, p)
		if !slices.Contains(b.methods, r.method) {
			t.Errorf("%s %s: behaviour %q allows %v", r.method, r.path, b.pattern, b.methods)
		}
		wantCached := strings.HasPrefix(r.path, "/waiting-room/assets/") || r.path == api.JWKSPath
		switch {
		case wantCached && b.cachePolicy != cachingOptimized:
			t.Errorf("%s %s: cache policy %s, want CachingOptimized (the origin's Cache-Control within 1 s..1 year)", r.method, r.path, b.cachePolicy)
		case !wantCached && (b.cachePolicy != cachingDisabled || b.originRequestPolicy != allViewerExceptHostHeader):
			t.Errorf("%s %s: cache policy %s, origin request policy %s; want CachingDisabled and AllViewerExceptHostHeader (forwards %s, %s, %s, X-Queue-Challenge, X-Queue-Solution, cookies and query strings; not Host)",
				r.method, r.path, b.cachePolicy, b.originRequestPolicy, api.HeaderToken, api.HeaderIdempotencyKey, api.HeaderAdmissionPass)
		}
		cached[b.pattern] = cached[b.pattern] || wantCached
	}
	for _, b := range behaviours {
		if b.cachePolicy != cachingDisabled && !cached[b.pattern] {
			t.Errorf("behaviour %q caches (policy %s) but serves no cacheable route", b.pattern, b.cachePolicy)
		}
	}
	// CloudFront caches these statuses 10 s by default, keyed without the
	// token: a 404 or 503 of one poll would answer every poll.
	errs := map[string]string{}
	for _, e := range list(cfg["CustomErrorResponses"]) {
		m, _ := e.(map[string]any)
		errs[fmt.Sprint(m["ErrorCode"])] = fmt.Sprint(m["ErrorCachingMinTTL"])
	}
	for _, code := range []string{"400", "403", "404", "405", "414", "500", "501", "502", "503", "504"} {
		if errs[code] != "0" {
			t.Errorf("error %s: ErrorCachingMinTTL %q, want 0", code, errs[code])
		}
	}
}

// route is one method and path the public side serves.
type route struct{ method, path string }

// publicRoutes are the API's public routes and the page's.
func publicRoutes() []route {
	var public []route
	for _, r := range httpapi.Routes {
		if !r.Admin {
			public = append(public, route{r.Method, r.Path})
		}
	}
	for _, r := range waitpage.Routes {
		public = append(public, route{r.Method, r.Path})
	}
	return public
}

// edgeBehaviour is one cache behaviour of a CloudFront distribution.
type edgeBehaviour struct {
	pattern, origin, viewer, cachePolicy, originRequestPolicy string
	methods, functions                                        []string
	lambdas                                                   bool
}

// edgeBehaviours returns a distribution's cache behaviours in CloudFront's
// order, its default last (pattern "*").
func edgeBehaviours(cfg map[string]any) []edgeBehaviour {
	var out []edgeBehaviour
	for _, r := range append(list(cfg["CacheBehaviors"]), cfg["DefaultCacheBehavior"]) {
		m, _ := r.(map[string]any)
		b := edgeBehaviour{pattern: "*", origin: fmt.Sprint(m["TargetOriginId"]), viewer: fmt.Sprint(m["ViewerProtocolPolicy"]), cachePolicy: fmt.Sprint(m["CachePolicyId"])}
		if p, ok := m["PathPattern"].(string); ok {
			b.pattern = p
		}
		if v, ok := m["OriginRequestPolicyId"]; ok {
			b.originRequestPolicy = fmt.Sprint(v)
		}
		for _, v := range list(m["AllowedMethods"]) {
			b.methods = append(b.methods, fmt.Sprint(v))
		}
		for _, f := range list(m["FunctionAssociations"]) {
			fm, _ := f.(map[string]any)
			b.functions = append(b.functions, fmt.Sprint(fm["EventType"], " ", fm["FunctionARN"]))
		}
		_, b.lambdas = m["LambdaFunctionAssociations"]
		out = append(out, b)
	}
	return out
}

// behaviourFor picks the behaviour CloudFront applies to path: the first
// whose pattern matches (* is any run of characters, ? one), else the
// default.
func behaviourFor(bs []edgeBehaviour, path string) edgeBehaviour {
	for _, b := range bs {
		re := "^" + strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(b.pattern)) + "$"
		if regexp.MustCompile(re).MatchString(path) {
			return b
		}
	}
	return bs[len(bs)-1]
}

// TestEdgeWebACL: template-waf.yaml's web ACL is CLOUDFRONT-scoped, limits
// enters (and only enters) per source IP with its parameters, runs AWS's
// common and known-bad-inputs groups, and refuses admin routes.
func TestEdgeWebACL(t *testing.T) {
	tpl, err := samtemplate.Load("template-waf.yaml")
	if err != nil {
		t.Fatal(err)
	}
	acls := tpl.IDsOfType("AWS::WAFv2::WebACL")
	if len(acls) != 1 {
		t.Fatalf("web ACLs %v, want one", acls)
	}
	acl := tpl.Properties(acls[0])
	if acl["Scope"] != "CLOUDFRONT" {
		t.Errorf("Scope %v, want CLOUDFRONT", acl["Scope"])
	}
	if got := fmt.Sprint(tpl.Outputs["WebAclArn"]); !strings.Contains(got, "Fn::GetAtt:["+acls[0]+" Arn]") {
		t.Errorf("output WebAclArn = %s, want the web ACL's ARN", got)
	}
	rules := map[string]map[string]any{}
	for _, r := range list(acl["Rules"]) {
		m, _ := r.(map[string]any)
		rules[fmt.Sprint(m["Name"])] = m
	}
	for _, group := range []string{"AWSManagedRulesCommonRuleSet", "AWSManagedRulesKnownBadInputsRuleSet"} {
		got := fmt.Sprint(rules[group]["Statement"])
		if want := "map[ManagedRuleGroupStatement:map[Name:" + group + " VendorName:AWS]]"; got != want {
			t.Errorf("rule %s: statement %s, want %s", group, got, want)
		}
	}

	rate, _ := rules["EnterRatePerIP"]["Statement"].(map[string]any)["RateBasedStatement"].(map[string]any)
	if rate == nil {
		t.Fatal("no rate-based rule EnterRatePerIP")
	}
	for k, want := range map[string]string{"AggregateKeyType": "IP", "Limit": "map[Ref:EdgeEnterRateLimit]", "EvaluationWindowSec": "map[Ref:EdgeRateWindowSec]"} {
		if got := fmt.Sprint(rate[k]); got != want {
			t.Errorf("EnterRatePerIP %s = %s, want %s", k, got, want)
		}
	}
	for _, p := range []string{"EdgeEnterRateLimit", "EdgeRateWindowSec", "EdgeManagedRulesAction"} {
		if tpl.Parameters[p].Default == nil {
			t.Errorf("no parameter %s with a default", p)
		}
	}
	if got := fmt.Sprint(rules["EnterRatePerIP"]["Action"]); !strings.Contains(got, "ResponseCode:429") {
		t.Errorf("EnterRatePerIP action %s, want a 429", got)
	}
	method, pathRE := enterScope(t, rate["ScopeDownStatement"])
	if method != "post" {
		t.Errorf("scope-down method %q, want post (lowercased)", method)
	}
	// Every enter and handoff (a guess at a code), and nothing else the handler serves.
	enters := []string{"POST " + api.QueuePath, "POST " + api.HandoffPath, "POST " + api.RedeemPath}
	for _, r := range waitpage.Routes {
		if r.Method == "POST" {
			enters = append(enters, r.Method+" "+r.Path)
		}
	}
	var served []string
	for _, r := range httpapi.Routes {
		served = append(served, r.Method+" "+r.Path)
	}
	for _, r := range waitpage.Routes {
		served = append(served, r.Method+" "+r.Path)
	}
	for _, s := range served {
		m, p, _ := strings.Cut(s, " ")
		counted := strings.EqualFold(m, method) && pathRE.MatchString(samplePath(p))
		if want := slices.Contains(enters, s); counted != want {
			t.Errorf("%s: counted by the enter rate rule %v, want %v", s, counted, want)
		}
	}

	admin := fmt.Sprint(rules["AdminNotAtEdge"])
	if !strings.Contains(admin, "SearchString:/api/v1/admin/") || !strings.Contains(admin, "PositionalConstraint:STARTS_WITH") || !strings.Contains(admin, "Block:") {
		t.Errorf("AdminNotAtEdge = %s, want a block of paths starting /api/v1/admin/", admin)
	}
}

// enterScope reads the rate rule's scope-down: a method match and a path
// regex, both required.
func enterScope(t *testing.T, v any) (method string, path *regexp.Regexp) {
	t.Helper()
	and, _ := v.(map[string]any)["AndStatement"].(map[string]any)
	for _, s := range list(and["Statements"]) {
		m, _ := s.(map[string]any)
		if b, ok := m["ByteMatchStatement"].(map[string]any); ok && fmt.Sprint(b["FieldToMatch"]) == "map[Method:map[]]" && b["PositionalConstraint"] == "EXACTLY" {
			method = fmt.Sprint(b["SearchString"])
		}
		if r, ok := m["RegexMatchStatement"].(map[string]any); ok && fmt.Sprint(r["FieldToMatch"]) == "map[UriPath:map[]]" {
			path = regexp.MustCompile(fmt.Sprint(r["RegexString"]))
		}
	}
	if method == "" || path == nil {
		t.Fatalf("scope-down %v: want an AndStatement of a method match and a path regex", v)
	}
	return method, path
}
