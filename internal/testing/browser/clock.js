// Replaces a document's timers and performance.now by window.__clock, a clock
// at 0 that moves only by advance or next, which fire the timers due in order,
// each with the clock at its due time.
(() => {
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
})();
