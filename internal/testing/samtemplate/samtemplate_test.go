package samtemplate_test

import (
	"fmt"
	"testing"

	"github.com/example/waitingroom/internal/testing/samtemplate"
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
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Timeout: 9
      Environment:
        Variables:
          PORT: !Ref Port
          PLAIN: "1"
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
	tpl, err := samtemplate.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
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
		if got, want := fmt.Sprint(env), "map[LEVEL:info PLAIN:1 PORT:8080 TABLE:t1]"; got != want {
			t.Errorf("Env = %s, want %s", got, want)
		}
		if _, err := tpl.Env("Fn", nil); err == nil {
			t.Error("Env without a value for !Ref Table: no error")
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

func TestParseUnknownTag(t *testing.T) {
	if _, err := samtemplate.Parse([]byte("Resources: !Bogus x\n")); err == nil {
		t.Error("Parse accepted an unknown short-form tag")
	}
}
