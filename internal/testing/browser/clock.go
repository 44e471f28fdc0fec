package browser

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// clockScript replaces a document's timers and performance.now by
// window.__clock, a clock that starts at 0 and moves only when the test
// calls advance or next. Timers fire inside those calls, in order of their
// due time (then of their setting), each with the clock at its due time.
// Date and Date.now stay real, and workers keep their own timers.
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
  const clear = (id) => { timers.delete(id); };
  window.setTimeout = (fn, ms, ...args) => arm(fn, ms, args, false);
  window.setInterval = (fn, ms, ...args) => arm(fn, ms, args, true);
  window.clearTimeout = clear;
  window.clearInterval = clear;
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

// FakeClock makes every document the tab ctx loads from now on (frames
// too) run its timers and performance.now on a clock that only the test
// moves, with [Advance] and [Next]; call it before navigating. Date and
// Date.now stay real, so that times the server sends compare as before.
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
