package browser

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Do runs steps in the tab ctx and fails t on an error.
func Do(t testing.TB, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// Eval evaluates the JavaScript expression expr in the tab ctx.
func Eval[T any](t testing.TB, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// Text is the text content of the element with id.
func Text(t testing.TB, ctx context.Context, id string) string {
	t.Helper()
	return Eval[string](t, ctx, `document.getElementById('`+id+`').textContent`)
}

// WaitFor waits up to limit until expr is truthy in the page, across
// navigations, and fails t with the page's address and text otherwise.
func WaitFor(t testing.TB, ctx context.Context, limit time.Duration, expr string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	var err error
	for time.Now().Before(deadline) {
		var ok bool
		if ok, err = chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+expr+")")); err == nil && ok {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + '\n' + (document.body ? document.body.innerText : '')`))
	t.Fatalf("waiting %v for %s (last error: %v)\npage:\n%s", limit, expr, err, body)
}

// Screenshot saves a full-page PNG of the tab ctx as name in t's artifact
// directory (kept with go test -artifacts) and returns it.
func Screenshot(t testing.TB, ctx context.Context, name string) []byte {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return png
}
