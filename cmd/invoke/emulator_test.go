//go:build emulator

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/example/waitingroom/internal/testing/emfspec"
	"github.com/example/waitingroom/internal/tools/lambdaemu"
)

// TestInvoke runs `make invoke` as a user would with an event written by
// hand (routeKey "GET …", which no template route has): it prints the
// function's answer and the function's logs, and nothing of the emulator's
// own (no credential warning, no complaint when it is stopped).
func TestInvoke(t *testing.T) {
	root := filepath.Join("..", "..")
	rie, err := lambdaemu.Find(root)
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, fn := range []string{"queue", "admin"} {
		build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", filepath.Join(bin, fn, "bootstrap"), "./functions/"+fn)
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", fn, err, out)
		}
	}
	raw, err := os.ReadFile(filepath.Join(root, "events", "poll-waiting.json"))
	if err != nil {
		t.Fatal(err)
	}
	evFile := filepath.Join(t.TempDir(), "poll.json")
	if err := os.WriteFile(evFile, bytes.ReplaceAll(raw, []byte("ANY /api"), []byte("GET /api")), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DYNAMODB_ENDPOINT", "")
	var stdout, stderr bytes.Buffer
	err = run(context.Background(), []string{"-rie", rie, "-bin", bin, "-template", filepath.Join(root, "template.yaml"), evFile}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(stdout.Bytes(), &resp); err != nil || resp.StatusCode != 200 || !strings.Contains(resp.Body, `"ticket":734`) {
		t.Errorf("stdout is not the poll's answer (%v):\n%s", err, stdout.String())
	}
	metricLines := 0
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		switch {
		case emfspec.IsEMF([]byte(line)):
			metricLines++
		case strings.Contains(line, "failed to get the next invoke: "):
			// The runtime's line when the emulator is stopped after the
			// invocation, before the bootstrap: not the invocation's.
		case !strings.HasPrefix(line, "START RequestId:") && !strings.HasPrefix(line, "END RequestId:") && !strings.HasPrefix(line, "REPORT RequestId:"):
			t.Errorf("stderr line %q: want only the function's logs (here its metrics lines) and Lambda's START, END and REPORT", line)
		}
	}
	if metricLines == 0 || !strings.Contains(stderr.String(), `"Operation":"poll"`) {
		t.Errorf("%d EMF lines, want the invocation's metrics, its poll Latency among them:\n%s", metricLines, stderr.String())
	}
}
