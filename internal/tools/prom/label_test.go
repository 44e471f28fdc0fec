package prom

import "testing"

func TestLabelName(t *testing.T) {
	for in, want := range map[string]string{"ProgramId": "program_id", "HttpStatus": "http_status", "Code": "code"} {
		if got := labelName(in); got != want {
			t.Errorf("labelName(%q) = %q, want %q", in, got, want)
		}
	}
}
