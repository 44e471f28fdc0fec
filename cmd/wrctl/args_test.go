package main

import (
	"flag"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseInterspersed: flags go anywhere among the positional
// arguments, and a token id or kid that starts with '-' is positional,
// not an unknown flag; a mistyped flag is still refused.
func TestParseInterspersed(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    []string
		json    bool
		wantErr bool
	}{
		{"flags after", []string{"gala", "tok", "-json"}, []string{"gala", "tok"}, true, false},
		{"flags between", []string{"gala", "-json", "tok"}, []string{"gala", "tok"}, true, false},
		{"a token id with a dash", []string{"gala", "-d363Zw48WaJts4opduvcw", "-json"}, []string{"gala", "-d363Zw48WaJts4opduvcw"}, true, false},
		{"a kid with a dash", []string{"revoke", "-Mmfp_Pgh7fn-kLmVDcUVfNmqJ6Lvr7kZ1Ebdr6zwzw"}, []string{"revoke", "-Mmfp_Pgh7fn-kLmVDcUVfNmqJ6Lvr7kZ1Ebdr6zwzw"}, false, false},
		{"after --", []string{"gala", "--", "-json"}, []string{"gala", "-json"}, false, false},
		{"a mistyped flag", []string{"gala", "-jsn"}, nil, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("token", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			json := fs.Bool("json", false, "")
			got, err := parseInterspersed(fs, tt.args)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want an error: %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" || *json != tt.json {
				t.Errorf("positional (-want +got):\n%s; -json %v, want %v", diff, *json, tt.json)
			}
		})
	}
}
