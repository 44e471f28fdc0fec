package browser

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
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
	for {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
		switch {
		case err == nil:
			return v
		case ctx.Err() == nil && navigatedAway(err): // evaluate again on the next page
			if err := Await(ctx, "document.readyState !== 'loading'"); err == nil {
				continue
			}
		}
		t.Fatalf("%s: %v", expr, err)
	}
}

// navigatedAway tells an evaluation that failed as a navigation replaced the page.
func navigatedAway(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "navigated or closed") || strings.Contains(msg, "context was destroyed") || strings.Contains(msg, "Cannot find context")
}

// Text is the text content of the element with id.
func Text(t testing.TB, ctx context.Context, id string) string {
	t.Helper()
	return Eval[string](t, ctx, `document.getElementById('`+id+`').textContent`)
}

// WaitFor waits up to limit (a hang guard) until expr is truthy in the page,
// across navigations, and fails t with the page's address and text otherwise.
func WaitFor(t testing.TB, ctx context.Context, limit time.Duration, expr string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	if err := Await(wctx, expr); err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + '\n' + (document.body ? document.body.innerText : '')`))
		t.Fatalf("waiting %v for %s: %v\npage:\n%s", limit, expr, err, body)
	}
}

//go:embed await.js
var awaitScript string // a promise resolved once EXPR, replaced by Await, is truthy

// Await waits until expr is truthy in the page of the tab ctx, across
// navigations, or returns ctx's error: its deadline is the hang guard.
func Await(ctx context.Context, expr string) error {
	script := strings.Replace(awaitScript, "EXPR", expr, 1)
	for {
		_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](script, chromedp.EvalAwaitPromise))
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("await %s: %w (last error: %w)", expr, ctx.Err(), err)
		}
		select { // a navigation destroyed the page's context: ask the next one
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Screenshot saves a full-page PNG of the tab ctx as name in t's artifact
// directory (go test -artifacts) and returns it.
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

//go:embed clock.js
var clockScript string // a fake clock, window.__clock, for a document's timers

// FakeClock makes the documents the tab ctx loads from now on run timers and
// performance.now on a clock only [Advance] and [Next] move (Date stays real).
func FakeClock(t testing.TB, ctx context.Context) {
	t.Helper()
	AddScript(t, ctx, clockScript)
}

// AddScript runs script in every document the tab ctx loads from now on,
// before the document's own scripts.
func AddScript(t testing.TB, ctx context.Context, script string) {
	t.Helper()
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: script}); err != nil {
		t.Fatalf("browser: add a script to new documents: %v", err)
	}
}

// Advance moves the page's fake clock by ms, firing the timers due on the
// way, and returns how many fired.
func Advance(t testing.TB, ctx context.Context, ms float64) int {
	t.Helper()
	return Eval[int](t, ctx, fmt.Sprintf("__clock.advance(%v)", ms))
}

// Next moves the page's fake clock to its earliest timer and fires it; it
// returns the time moved, or -1 when no timer was armed.
func Next(t testing.TB, ctx context.Context) float64 {
	t.Helper()
	return Eval[float64](t, ctx, "__clock.next()")
}

// Pending is the delays of the timers armed in the page, shortest first.
func Pending(t testing.TB, ctx context.Context) []float64 {
	t.Helper()
	return Eval[[]float64](t, ctx, "__clock.pending()")
}
