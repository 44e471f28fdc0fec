package samtemplate_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const condSrc = `
Parameters:
  Mode:
    Type: String
    Default: none
  Domain:
    Type: String
    Default: ""
  Issuer:
    Type: String
    Default: ""
Conditions:
  On: !Equals [!Ref Mode, waf]
  HasDomain: !And [!Condition On, !Not [!Equals [!Ref Domain, ""]]]
  Either: !Or [!Condition On, !Equals [!Ref Domain, x.example]]
  HasIssuer: !Not [!Equals [!Ref Issuer, ""]]
  Loop: !Condition Loop
Resources:
  Always: {Type: AWS::SNS::Topic}
  Edge: {Type: AWS::CloudFront::Distribution, Condition: On}
  Fn:
    Type: AWS::Serverless::Function
    Properties: {Environment: {Variables: {ISSUER: !If [HasIssuer, !Ref Issuer, !If [HasDomain, "domain", "none"]]}}}
Outputs:
  Plain:
    Value: x
  EdgeUrl:
    Condition: On
    Value: y
`

func TestCondition(t *testing.T) {
	tpl := parse(t, condSrc)
	for _, tc := range []struct {
		cond   string
		params map[string]string
		want   bool
	}{
		{"On", nil, false},
		{"On", map[string]string{"Mode": "waf"}, true},
		{"HasDomain", map[string]string{"Mode": "waf"}, false},
		{"HasDomain", map[string]string{"Domain": "x.example"}, false},
		{"HasDomain", map[string]string{"Mode": "waf", "Domain": "x.example"}, true},
		{"Either", nil, false},
		{"Either", map[string]string{"Domain": "x.example"}, true},
		{"Either", map[string]string{"Mode": "waf"}, true},
	} {
		got, err := tpl.Condition(tc.cond, tc.params)
		if err != nil || got != tc.want {
			t.Errorf("Condition(%s, %v) = %v, %v; want %v", tc.cond, tc.params, got, err, tc.want)
		}
	}
	for _, bad := range []string{"Loop", "Missing"} {
		if _, err := tpl.Condition(bad, nil); err == nil {
			t.Errorf("Condition(%s) evaluated without an error", bad)
		}
	}
}

func TestResourcesAndOutputsWith(t *testing.T) {
	tpl := parse(t, condSrc)
	for _, tc := range []struct {
		mode            string
		resources, outs []string
	}{
		{"none", []string{"Always", "Fn"}, []string{"Plain"}},
		{"waf", []string{"Always", "Edge", "Fn"}, []string{"EdgeUrl", "Plain"}},
	} {
		params := map[string]string{"Mode": tc.mode}
		rs, err := tpl.ResourcesWith(params)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for id := range rs {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		if diff := cmp.Diff(tc.resources, ids); diff != "" {
			t.Errorf("Mode=%s: resources (-want +got):\n%s", tc.mode, diff)
		}
		outs, err := tpl.OutputsWith(params)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.outs, outs); diff != "" {
			t.Errorf("Mode=%s: outputs (-want +got):\n%s", tc.mode, diff)
		}
	}
}

// TestEnvIf: Env resolves an !If by its condition at the defaults.
func TestEnvIf(t *testing.T) {
	tpl := parse(t, condSrc)
	env, err := tpl.Env("Fn", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := env["ISSUER"]; got != "none" {
		t.Errorf("ISSUER = %q, want none (neither condition holds at the defaults)", got)
	}
}
