package browser

import (
	"context"
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
		case ctx.Err() == nil && navigatedAway(err):
			// The page went to another while it evaluated (a redirect
			// the page made): evaluate again once the next one is there.
			if err := Await(ctx, "document.readyState !== 'loading'"); err == nil {
				continue
			}
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

// Await waits until expr is truthy in the page of the tab ctx, checked by
// the page itself (awaitScript), across navigations. It returns ctx's error
// if ctx ends first: ctx's deadline is the hang guard.
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

// clockScript replaces a document's timers and performance.now by
// window.__clock, a clock at 0 that moves only by advance or next, which
// fire the timers due in order, each with the clock at its due time.
const clockScript = `(() => {
  if (window.__clock) return;
  let now = 0, seq = 0;
  const timers = new Map(); // id → {due, fn, args, every}
  const arm = (fn, ms, args, repeat) => {
    const id = ++seq;
    const d = Math.max(0, Number(ms) || 0);
    timers.set(id, { due: now + d, fn, args, every: repeat ? Math.max(1, d) : 0 });
    return id;
  };
  const earliest = (limit) => {
    let id = 0, t = null;
    for (const [k, v] of timers) {
      if (v.due <= limit && (t === null || v.due < t.due)) { id = k; t = v; }
    }
    return [id, t];
  };
  const advance = (ms) => {
    const target = now + Math.max(0, Number(ms) || 0);
    let fired = 0;
    for (;;) {
      const [id, t] = earliest(target);
      if (!t) break;
      now = t.due;
      if (t.every) t.due += t.every; else timers.delete(id);
      fired++;
      try {
        if (typeof t.fn === 'function') t.fn(...t.args); else (0, eval)(String(t.fn));
      } catch (e) {
        reportError(e);
      }
    }
    now = target;
    return fired;
  };
  window.setTimeout = (fn, ms, ...args) => arm(fn, ms, args, false);
  window.setInterval = (fn, ms, ...args) => arm(fn, ms, args, true);
  window.clearTimeout = window.clearInterval = (id) => { timers.delete(id); };
  performance.now = () => now;
  window.__clock = {
    get now() { return now; },
    advance,
    // next advances to the earliest timer and fires it (and any due with
    // it); it returns the time advanced, or -1 when no timer is armed.
    next() {
      const [, t] = earliest(Infinity);
      if (!t) return -1;
      const d = t.due - now;
      advance(d);
      return d;
    },
    // pending lists the armed timers' delays from now, shortest first.
    pending() { return [...timers.values()].map((t) => t.due - now).sort((a, b) => a - b); },
  };
})();`

// FakeClock makes every document the tab ctx loads from now on run its
// timers and performance.now on a clock that only [Advance] and [Next]
// move; call it before navigating. Date and Date.now stay real.
func FakeClock(t testing.TB, ctx context.Context) {
	t.Helper()
	AddScript(t, ctx, clockScript)
}

// AddScript makes script run in every document the tab ctx loads from now
// on, before the document's own scripts.
func AddScript(t testing.TB, ctx context.Context, script string) {
	t.Helper()
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: script}); err != nil {
		t.Fatalf("browser: add a script to new documents: %v", err)
	}
}

// Advance moves the fake clock of the tab's page by ms, firing the timers
// that fall due on the way, and returns how many fired.
func Advance(t testing.TB, ctx context.Context, ms float64) int {
	t.Helper()
	return Eval[int](t, ctx, fmt.Sprintf("__clock.advance(%v)", ms))
}

// Next moves the fake clock of the tab's page to its earliest timer and
// fires it; it returns the time moved, or -1 when no timer was armed.
func Next(t testing.TB, ctx context.Context) float64 {
	t.Helper()
	return Eval[float64](t, ctx, "__clock.next()")
}

// Pending is the delays, from the fake clock's now, of the timers armed in
// the tab's page, shortest first.
func Pending(t testing.TB, ctx context.Context) []float64 {
	t.Helper()
	return Eval[[]float64](t, ctx, "__clock.pending()")
}
