package waitingroom_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// testingPrefix is where the test-only helpers live; no binary may link them.
const testingPrefix = "github.com/example/waitingroom/internal/testing/"

// TestBinariesLinkNoTestHelpers fails when a command or a Lambda function
// depends on a package under internal/testing/, as built for this machine
// and as built for Lambda (tag lambda.norpc).
func TestBinariesLinkNoTestHelpers(t *testing.T) {
	for _, tags := range []string{"", "lambda.norpc"} {
		for pkg, deps := range testHelperDeps(t, tags, "./cmd/...", "./functions/...") {
			t.Errorf("%s (tags %q) links %s", pkg, tags, strings.Join(deps, ", "))
		}
	}
	// The check itself: a helper that uses another is caught.
	got := testHelperDeps(t, "", "./internal/testing/kmstest")
	if deps := got[testingPrefix+"kmstest"]; len(deps) == 0 {
		t.Errorf("kmstest's dependency on dynamotest not found: %v", got)
	}
}

// testHelperDeps returns, for each package matched by patterns, the
// packages under internal/testing/ it depends on (itself excluded).
func testHelperDeps(t *testing.T, tags string, patterns ...string) map[string][]string {
	t.Helper()
	args := append([]string{"list", "-tags", tags, "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`}, patterns...)
	var stderr bytes.Buffer
	cmd := exec.Command("go", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	found := make(map[string][]string)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		for _, dep := range fields[1:] {
			if strings.HasPrefix(dep, testingPrefix) {
				found[fields[0]] = append(found[fields[0]], dep)
			}
		}
	}
	return found
}
