package main

import (
	"os"
	"testing"
)

// TestDocumentIsCurrent fails when docs/openapi.yaml's generated schemas
// differ from what internal/api's types make: run go generate ./internal/api.
func TestDocumentIsCurrent(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want, err := withSchemas(doc, "../../api")
	if err != nil {
		t.Fatal(err)
	}
	if string(doc) != string(want) {
		t.Error("docs/openapi.yaml's schemas differ from internal/api's types: run go generate ./internal/api")
	}
}
