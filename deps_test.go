package waitingroom_test

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
	found := make(map[string][]string)
	for _, line := range goList(t, append([]string{"-tags", tags, "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`}, patterns...)...) {
		fields := strings.Fields(line)
		for i, dep := range fields {
			if i > 0 && strings.HasPrefix(dep, testingPrefix) {
				found[fields[0]] = append(found[fields[0]], dep)
			}
		}
	}
	return found
}

// goList returns the lines go list prints with args, failing t on an error.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestLayout holds the tree to what docs/design.md ("Code layout") says:
// the Lambdas link every package under internal/ except internal/tools/
// and internal/testing/, and nothing else of this module but passverify.
func TestLayout(t *testing.T) {
	const module = "github.com/example/waitingroom/"
	var product []string
	for _, pkg := range goList(t, "./internal/...") {
		rel := strings.TrimPrefix(pkg, module)
		if !strings.HasPrefix(rel, "internal/tools/") && !strings.HasPrefix(rel, "internal/testing/") {
			product = append(product, rel)
		}
	}
	for _, tags := range []string{"", "lambda.norpc"} {
		var linked []string
		for _, pkg := range goList(t, "-tags", tags, "-deps", "./functions/...") {
			rel, ok := strings.CutPrefix(pkg, module)
			if ok && strings.HasPrefix(rel, "internal/") {
				linked = append(linked, rel)
			} else if ok && !strings.HasPrefix(rel, "functions/") && !strings.HasPrefix(rel, "passverify") {
				t.Errorf("tags %q: the Lambdas link %s, outside internal/ and passverify/", tags, rel)
			}
		}
		slices.Sort(linked)
		if d := cmp.Diff(product, linked); d != "" {
			t.Errorf("tags %q: product packages under internal/ (-) against what ./functions/... link (+):\n%s", tags, d)
		}
	}
}
