package dynamowire_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/example/waitingroom/internal/tools/dynamowire"
)

func TestOperation(t *testing.T) {
	req := httptest.NewRequest("POST", "/", nil)
	if got := dynamowire.Operation(req); got != "" {
		t.Errorf("no header: %q", got)
	}
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.UpdateItem")
	if got, want := dynamowire.Operation(req), "UpdateItem"; got != want {
		t.Errorf("Operation = %q, want %q", got, want)
	}
}

// ReadBody leaves the caller's request alone and forwards one that can be
// read again (GetBody), as a retrying transport does.
func TestReadBody(t *testing.T) {
	orig := httptest.NewRequest("POST", "/", strings.NewReader(`{"TableName":"t"}`))
	req, body, err := dynamowire.ReadBody(orig)
	if err != nil || string(body) != `{"TableName":"t"}` {
		t.Fatalf("ReadBody = %q, %v", body, err)
	}
	if req == orig {
		t.Error("ReadBody returned the caller's request")
	}
	for i := range 2 {
		rc, err := req.GetBody()
		if err != nil {
			t.Fatal(err)
		}
		again, _ := io.ReadAll(rc)
		if string(again) != string(body) {
			t.Errorf("GetBody #%d = %q, want %q", i, again, body)
		}
	}
}
