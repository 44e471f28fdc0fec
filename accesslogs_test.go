package waitingroom_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// accessLogFields are the fields every access log line must carry, each
// with the HTTP API variable that fills it (API Gateway developer guide,
// "Customize HTTP API access logs"). callerArn is the signer's IAM ARN on
// routes with IAM authorization: the answer to "who paused at 10:02?".
var accessLogFields = map[string]string{
	"requestId":          "$context.requestId",
	"requestTime":        "$context.requestTime",
	"requestTimeEpoch":   "$context.requestTimeEpoch",
	"sourceIp":           "$context.identity.sourceIp",
	"routeKey":           "$context.routeKey",
	"path":               "$context.path",
	"status":             "$context.status",
	"responseLatency":    "$context.responseLatency",
	"integrationLatency": "$context.integrationLatency",
	"callerArn":          "$context.identity.userArn",
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
	got := map[string]string{}
	for k := range accessLogFields {
		got[k] = fields[k]
	}
	if diff := cmp.Diff(accessLogFields, got); diff != "" {
		t.Errorf("access log fields (-want +template):\n%s", diff)
	}
}
