// Notifications of the person's turn (Web Push), on a page whose deployment
// sends them. Loaded before app.js, it offers them while the person waits
// (the prompt only on a click), sends the subscription with the token, and
// asks app.js for a poll at once (the wr-poll event) when the service
// worker says it is the person's turn. app.js tells it each answer
// (wr-answer) and sends root.pushBody() with an enter: the subscription of
// an earlier visit, when the person chose notifications and still has them.
(() => {
  'use strict';
  const TEXT = /*TEXT*/{};
  const root = document.getElementById('wr');
  const box = document.getElementById('push');
  const key = root && root.dataset.pushKey;
  if (!key || !box || !('serviceWorker' in navigator && 'PushManager' in window && 'Notification' in window)) return;
  const $ = (id) => document.getElementById(id);
  const t = (k) => (TEXT[document.documentElement.lang] || TEXT.en)[k] || TEXT.en[k];
  const program = root.dataset.program;
  const api = root.dataset.api + encodeURIComponent(program) + '/push';
  const scope = new URL(location.pathname, location.href).href;
  const CHOICE = 'waitingroom:' + program + ':push';
  const chosen = () => { try { return localStorage.getItem(CHOICE) === '1'; } catch { return false; } };
  const choose = (on) => { try { if (on) localStorage.setItem(CHOICE, '1'); else localStorage.removeItem(CHOICE); } catch { /* this visit only */ } };
  // This page's own registration: getRegistration matches a scope by its
  // prefix, and /waiting-room/gal's would match /waiting-room/gala.
  const mine = () => navigator.serviceWorker.getRegistration(scope).then((r) => (r && r.scope === scope ? r : null));
  const active = (r) => r.active ? r : new Promise((ok, no) => {
    const w = r.installing || r.waiting;
    w.addEventListener('statechange', () => (w.state === 'activated' ? ok(r) : w.state === 'redundant' && no(w)));
  });
  const bytes = (s) => Uint8Array.from(atob(s.replace(/-/g, '+').replace(/_/g, '/')), (c) => c.charCodeAt(0));
  root.pushBody = async () => {
    try {
      const r = chosen() && await mine();
      const s = r && await r.pushManager.permissionState({ userVisibleOnly: true }) === 'granted' && await r.pushManager.getSubscription();
      return s ? JSON.stringify({ push: s }) : '';
    } catch {
      return '';
    }
  };

  let token = '';
  let on = false; // the token is subscribed
  let sub = null; // the subscription this page made
  let busy = false;
  const say = (s) => { $('pushSay').textContent = s; };
  const show = (now) => {
    if (now !== on) say(now ? t('notifyOn') : '');
    on = now;
    const [offer, stop] = [$('pushOffer'), $('pushStop')];
    const focused = document.activeElement === (on ? offer : stop);
    offer.hidden = on;
    stop.hidden = !on;
    if (focused) (on ? stop : offer).focus();
  };
  root.addEventListener('wr-answer', (e) => {
    box.hidden = e.detail.status !== 'WAITING';
    token = e.detail.tokenId;
    if (!busy) show(e.detail.push === true);
  });
  const send = (method, body) => fetch(api, {
    method, body, cache: 'no-store', credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', 'X-Queue-Token': token },
  }).then((res) => { if (res.status !== 204) throw res; });
  const act = (fn) => async () => {
    if (busy) return;
    busy = true;
    say('');
    try {
      await fn();
    } catch (e) {
      say(t(e === 'denied' ? 'notifyDenied' : 'notifyFailed'));
    }
    busy = false;
  };
  $('pushOffer').addEventListener('click', act(async () => {
    if (await Notification.requestPermission() !== 'granted') throw 'denied';
    const r = await active(await navigator.serviceWorker.register('/waiting-room/push-worker.js', { scope }));
    sub = await r.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: bytes(key) });
    await send('PUT', JSON.stringify(sub));
    choose(true);
    show(true);
  }));
  $('pushStop').addEventListener('click', act(async () => {
    await send('DELETE');
    choose(false);
    const s = sub || await mine().then((r) => r && r.pushManager.getSubscription());
    if (s) await s.unsubscribe();
    sub = null;
    show(false);
    say(t('notifyOff'));
  }));
  // The service worker's word of a push: at the turn, ask at once.
  navigator.serviceWorker.onmessage = (e) => {
    const m = e.data || {};
    if (m.type !== 'wr-push') return;
    if (m.stage === 'turn') root.dispatchEvent(new Event('wr-poll'));
    else if (m.stage === 'ready') say(t('notifyReady'));
  };
})();
