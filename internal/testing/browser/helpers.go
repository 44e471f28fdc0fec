package browser

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	for {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
		switch {
		case err == nil:
			return v
		case ctx.Err() == nil && navigatedAway(err):
			// The page went to another while it evaluated (a redirect
			// the page made): evaluate again in the next one.
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		t.Fatalf("%s: %v", expr, err)
	}
}

// navigatedAway tells an evaluation that failed because a navigation
// replaced the page's context.
func navigatedAway(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "navigated or closed") || strings.Contains(msg, "context was destroyed") || strings.Contains(msg, "Cannot find context")
}

// Text is the text content of the element with id.
func Text(t testing.TB, ctx context.Context, id string) string {
	t.Helper()
	return Eval[string](t, ctx, `document.getElementById('`+id+`').textContent`)
}

// WaitFor waits up to limit until expr is truthy in the page, across
// navigations, and fails t with the page's address and text otherwise.
// limit is a hang guard: see [Await].
func WaitFor(t testing.TB, ctx context.Context, limit time.Duration, expr string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	if err := Await(wctx, expr); err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + '\n' + (document.body ? document.body.innerText : '')`))
		t.Fatalf("waiting %v for %s: %v\npage:\n%s", limit, expr, err, body)
	}
}

// awaitScript is a promise that resolves once EXPR is truthy, checked now,
// on every change to the document and on every animation frame; an
// exception counts as false.
const awaitScript = `new Promise((resolve) => {
  const ok = () => { try { return !!(EXPR); } catch { return false; } };
  if (ok()) return resolve(true);
  let frame = 0;
  const observer = new MutationObserver(() => check());
  const check = () => {
    if (!ok()) return false;
    observer.disconnect();
    cancelAnimationFrame(frame);
    resolve(true);
    return true;
  };
  const loop = () => { if (!check()) frame = requestAnimationFrame(loop); };
  observer.observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
  frame = requestAnimationFrame(loop);
})`

// Await waits until expr is truthy in the page of the tab ctx: the page
// itself checks it on every change and animation frame and answers once
// it holds, so that nothing is polled from here. A navigation that
// replaces the page is waited out, and expr checked again in the new one.
// It returns ctx's error if ctx ends first: ctx's deadline is the hang
// guard.
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
		// The page went away while it waited (a navigation destroyed its
		// context): ask again once the next one is there.
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
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
