package samtemplate_test

import (
	"fmt"
	"testing"

	"github.com/example/waitingroom/internal/tools/samtemplate"
)

const src = `
Transform: AWS::Serverless-2016-10-31
Parameters:
  Level:
    Type: String
    Default: info
  Port:
    Type: Number
    Default: 8080
    MinValue: 1
    MaxValue: 65535
Globals:
  Function:
    Runtime: provided.al2023
    Timeout: 5
    Environment:
      Variables:
        LEVEL: !Ref Level
        TABLE: !Ref Table
Resources:
  Table:
    Type: AWS::DynamoDB::Table
  Key:
    Type: AWS::KMS::Key
    DeletionPolicy: Retain
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Timeout: 9
      Environment:
        Variables:
          PORT: !Ref Port
          PLAIN: "1"
          ADDR: !Sub "${Table}:${Port}/${!Literal}"
      Policies:
        - Statement:
            - Action: [dynamodb:GetItem]
              Resource: !GetAtt Table.Arn
        - !If [IsProd, Managed, !Ref "AWS::NoValue"]
      Events:
        Api:
          Type: HttpApi
          Properties:
            Path: /things/{id}
            Method: any
        Default:
          Type: HttpApi
Outputs:
  Url:
    Value: !Sub "https://${Fn}.example"
`

func TestParse(t *testing.T) {
	tpl := parse(t, src)
	f, err := tpl.Function("Fn")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("Globals", func(t *testing.T) {
		if got, want := f.Runtime, "provided.al2023"; got != want {
			t.Errorf("Runtime = %q, want %q from Globals", got, want)
		}
		if got, want := f.Timeout, 9; got != want {
			t.Errorf("Timeout = %d, want the function's own %d", got, want)
		}
	})
	t.Run("ShortForms", func(t *testing.T) {
		got := fmt.Sprint(f.Policies)
		want := "[map[Statement:[map[Action:[dynamodb:GetItem] Resource:map[Fn::GetAtt:[Table Arn]]]]] map[Fn::If:[IsProd Managed map[Ref:AWS::NoValue]]]]"
		if got != want {
			t.Errorf("Policies =\n  %s\nwant\n  %s", got, want)
		}
		if got, want := fmt.Sprint(tpl.Outputs["Url"]), "map[Value:map[Fn::Sub:https://${Fn}.example]]"; got != want {
			t.Errorf("Outputs.Url = %s, want %s", got, want)
		}
	})
	t.Run("Env", func(t *testing.T) {
		env, err := tpl.Env("Fn", map[string]string{"Table": "t1"})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := fmt.Sprint(env), "map[ADDR:t1:8080/${Literal} LEVEL:info PLAIN:1 PORT:8080 TABLE:t1]"; got != want {
			t.Errorf("Env = %s, want %s", got, want)
		}
		if _, err := tpl.Env("Fn", nil); err == nil {
			t.Error("Env without a value for !Ref Table: no error")
		}
		if p := tpl.Parameters["Port"]; fmt.Sprint(p.MinValue, p.MaxValue) != "1 65535" {
			t.Errorf("Port bounds %v..%v, want 1..65535", p.MinValue, p.MaxValue)
		}
	})
	t.Run("EnvSubAttribute", func(t *testing.T) {
		attr := parse(t, "Resources: {Fn: {Type: AWS::Serverless::Function, Properties: {Environment: {Variables: {ARN: !Sub \"${Table.Arn}\"}}}}}\n")
		if env, err := attr.Env("Fn", map[string]string{"Table": "t1"}); err == nil {
			t.Errorf("Env of !Sub ${Table.Arn} = %v, want an error", env)
		}
	})
	t.Run("ResourcesByType", func(t *testing.T) {
		if got, want := fmt.Sprint(tpl.RefsOfType("AWS::KMS::Key", "k1"), tpl.TableRefs("t1"), tpl.IDsOfType("AWS::KMS::Key")), "map[Key:k1] map[Table:t1] [Key]"; got != want {
			t.Errorf("RefsOfType, TableRefs, IDsOfType = %s, want %s", got, want)
		}
		if got := tpl.Resources["Key"].DeletionPolicy; got != "Retain" {
			t.Errorf("DeletionPolicy = %q, want Retain", got)
		}
	})
	t.Run("Routes", func(t *testing.T) {
		routes, err := tpl.Routes()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := fmt.Sprint(routes), "map[$default:Fn ANY /things/{id}:Fn]"; got != want {
			t.Errorf("Routes = %s, want %s", got, want)
		}
	})
}

// parse parses the template src, failing t on an error.
func parse(t *testing.T, src string) *samtemplate.Template {
	t.Helper()
	tpl, err := samtemplate.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

func TestParseUnknownTag(t *testing.T) {
	if _, err := samtemplate.Parse([]byte("Resources: !Bogus x\n")); err == nil {
		t.Error("Parse accepted an unknown short-form tag")
	}
}

// routing has routes of every kind API Gateway ranks, one function each.
const routing = `
Resources:
  Exact: {Type: AWS::Serverless::Function, Properties: {Events: {E: {Type: HttpApi, Properties: {Path: /pets/dog/1, Method: get}}}}}
  Variable: {Type: AWS::Serverless::Function, Properties: {Events: {E: {Type: HttpApi, Properties: {Path: "/pets/dog/{id}", Method: GET}}}}}
  AnyVariable: {Type: AWS::Serverless::Function, Properties: {Events: {E: {Type: HttpApi, Properties: {Path: "/pets/dog/{id}", Method: ANY}}}}}
  Greedy: {Type: AWS::Serverless::Function, Properties: {Events: {E: {Type: HttpApi, Properties: {Path: "/pets/{proxy+}", Method: GET}}}}}
  AnyGreedy: {Type: AWS::Serverless::Function, Properties: {Events: {E: {Type: HttpApi, Properties: {Path: "/{proxy+}", Method: ANY}}}}}
  Queue:
    Type: AWS::Serverless::Function
    Properties:
      Events:
        E: {Type: HttpApi, Properties: {Path: "/api/v1/queues/programs/{programId}", Method: ANY}}
        D: {Type: HttpApi}
`

func TestRouteFor(t *testing.T) {
	tpl := parse(t, routing)
	for _, tt := range []struct{ method, path, wantKey, wantFunction string }{
		{"GET", "/pets/dog/1", "GET /pets/dog/1", "Exact"},
		{"GET", "/pets/dog/2", "GET /pets/dog/{id}", "Variable"},
		{"DELETE", "/pets/dog/2", "ANY /pets/dog/{id}", "AnyVariable"},
		{"DELETE", "/pets/dog/1", "ANY /pets/dog/{id}", "AnyVariable"},
		{"GET", "/pets/cat/1/toys", "GET /pets/{proxy+}", "Greedy"},
		{"POST", "/pets/cat", "ANY /{proxy+}", "AnyGreedy"},
		{"GET", "/api/v1/queues/programs/demo", "ANY /api/v1/queues/programs/{programId}", "Queue"},
		{"POST", "/api/v1/queues/programs/demo", "ANY /api/v1/queues/programs/{programId}", "Queue"},
		{"GET", "/api/v1/queues/programs/demo/x", "ANY /{proxy+}", "AnyGreedy"},
		{"GET", "/", "$default", "Queue"},
	} {
		key, fn, err := tpl.RouteFor(tt.method, tt.path)
		if err != nil || key != tt.wantKey || fn != tt.wantFunction {
			t.Errorf("RouteFor(%s, %s) = %q, %q, %v; want %q, %q", tt.method, tt.path, key, fn, err, tt.wantKey, tt.wantFunction)
		}
	}
	withDefault := parse(t, src)
	if _, _, err := withDefault.RouteFor("GET", "/elsewhere"); err != nil {
		t.Errorf("a template with $default: %v", err)
	}
	bare := parse(t, "Resources: {}\n")
	if _, _, err := bare.RouteFor("GET", "/elsewhere"); err == nil {
		t.Error("no route and no $default: no error")
	}
}
