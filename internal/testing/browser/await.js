// A promise that resolves once the expression is truthy (an exception counts as false),
// checked now, on every change to the document and on every animation frame.
new Promise((resolve) => {
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
})
