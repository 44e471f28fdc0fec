// The waiting-room page: enters the queue (or resumes with the token kept in
// localStorage), then polls exactly when each answer says, and shows the
// place. docs/waiting-room.md describes the behaviour.
(() => {
  'use strict';
  const TEXT = /*TEXT*/{};
  const root = document.getElementById('wr');
  const live = document.getElementById('live');
  if (!root || !live) return;
  const $ = (id) => document.getElementById(id);
  const program = root.dataset.program;
  const api = root.dataset.api + encodeURIComponent(program);
  const target = root.dataset.target || '';
  // back is the path of this site the edge gate sent the person from.
  const back = root.dataset.return || '';
  const closed = root.dataset.closed === 'true';
  // closesAt is the scheduled close to new entries (null: none), from the
  // page, then from each WAITING answer.
  let closesAt = root.dataset.closesAt || null;
  const closedNow = () => closed || (closesAt !== null && Date.parse(closesAt) <= Date.now());
  let paused = root.dataset.paused === 'true';

  // Language: the one the server chose and rendered the page in (?lang=,
  // then Accept-Language, then English), so that the program's texts and
  // the page's agree. Only TEXT's own keys are languages.
  const html = document.documentElement.lang;
  const lang = Object.prototype.hasOwnProperty.call(TEXT, html) ? html : 'en';
  const t = (key, vars = {}) => {
    let s = TEXT[lang][key] || TEXT.en[key] || key;
    for (const k in vars) s = s.split('{' + k + '}').join(vars[k]);
    return s;
  };
  const num = new Intl.NumberFormat(lang);
  const timeOf = (s) => new Intl.DateTimeFormat(lang, { timeStyle: 'short' }).format(new Date(s));
  const dateTimeOf = (s) => new Intl.DateTimeFormat(lang, { dateStyle: 'medium', timeStyle: 'short' }).format(new Date(s));
  const unit = (n, u) => {
    try {
      return new Intl.NumberFormat(lang, { style: 'unit', unit: u, unitDisplay: 'long', maximumFractionDigits: 1 }).format(n);
    } catch {
      return t(u === 'minute' ? 'minutes' : 'hours', { n: num.format(n) });
    }
  };
  const wait = (ms) => {
    if (typeof ms !== 'number') return t('notKnownYet');
    const min = ms / 60000;
    if (min < 1) return t('lessThanMinute');
    if (min < 60) return t('about', { d: unit(Math.round(min), 'minute') });
    return t('about', { d: unit(Math.round(min / 30) / 2, 'hour') });
  };

  // The place, kept per program: {token, key, first, handoff, handoffKey}.
  // key is the Idempotency-Key of an enter whose answer has not been kept
  // yet; first is the first position seen, for the progress bar; handoff
  // and handoffKey are a code to redeem and its Idempotency-Key, likewise.
  const KEY = 'waitingroom:' + program;
  const load = () => {
    try { return JSON.parse(localStorage.getItem(KEY)) || {}; } catch { return {}; }
  };
  const save = () => {
    try { localStorage.setItem(KEY, JSON.stringify(st)); } catch { /* private mode: this tab only */ }
  };
  const newKey = () => (crypto.randomUUID ? crypto.randomUUID()
    : Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join(''));
  let st = load();
  addEventListener('storage', (e) => {
    if (e.key !== KEY) return;
    const other = load();
    if (other.token && other.token !== st.token) st = other; // another tab entered: share its place
  });
  // The fragment goes before any request. A handoff link (#handoff=CODE):
  // handoff.js takes it (wr.link), before any request. A site's enqueue
  // token (#enqueue=JWT): in memory only (wr.enqueue), for this page's
  // enter; where a place is held, handoff.js takes it and asks first.
  const link = (/handoff=([\w-]+)/.exec(location.hash) || [])[1] || '';
  const enqueue = (/enqueue=([\w.-]{1,4096})(?![\w.-])/.exec(location.hash) || [])[1] || '';
  if (/(handoff|enqueue)=/.test(location.hash)) history.replaceState(null, '', location.pathname + location.search);

  // Scheduling: one request at a time, never before `due`.
  let due = 0;
  let timer = 0;
  let inFlight = false;
  let offline = false;
  let stopped = false;
  let trouble = '';
  let failures = 0;
  const schedule = (at, ms) => {
    clearTimeout(timer);
    due = at + Math.max(0, ms);
    timer = setTimeout(tick, Math.max(0, due - performance.now()));
  };
  function tick() {
    clearTimeout(timer);
    timer = 0;
    if (stopped || inFlight) return;
    const left = due - performance.now();
    if (left > 0) { timer = setTimeout(tick, left); return; }
    if (!navigator.onLine) { offline = true; renderState(); return; }
    request();
  }
  addEventListener('online', () => {
    if (!offline) return;
    offline = false;
    renderState();
    tick();
  });
  // push.js: the service worker says it is the person's turn; handoff.js: a
  // code chosen: ask at once instead of at the scheduled time (only between
  // requests, once).
  root.addEventListener('wr-poll', () => { if (timer) { due = 0; tick(); } });
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible' && timer && performance.now() >= due) tick();
  });

  async function request() {
    inFlight = true;
    const headers = { Accept: 'application/json' };
    let method = 'GET';
    let url = api;
    let push;
    // A link's code, a code kept (a redeem to retry), or a site's token
    // where a place is held: handoff.js first.
    if ((wr.link || st.handoff || wr.enqueue && st.token) && !await hoLoad()) {
      inFlight = false;
      return retry(performance.now(), null);
    }
    const redeem = !!st.handoff;
    if (redeem) {
      method = 'POST';
      url += '/handoff/redeem';
      headers['Idempotency-Key'] = st.handoffKey;
      headers['Content-Type'] = 'application/json';
      push = JSON.stringify({ code: st.handoff });
    } else if (st.token && !wr.enqueue) {
      headers['X-Queue-Token'] = st.token;
    } else {
      if (!st.key) { st.key = newKey(); save(); }
      method = 'POST';
      headers['Idempotency-Key'] = st.key;
      if (wr.enqueue) headers['X-Enqueue-Token'] = wr.enqueue;
      // push.js: the subscription of an earlier visit goes with the enter.
      push = root.pushBody && await root.pushBody();
      if (push) headers['Content-Type'] = 'application/json';
      if (proof) {
        headers['X-Queue-Challenge'] = proof.challenge;
        headers['X-Queue-Solution'] = proof.solution;
        proof = null; // one enter
      }
    }
    let res;
    let body = {};
    let at;
    try {
      res = await fetch(url + '?lang=' + lang, { method, headers, body: push || undefined, cache: 'no-store', credentials: 'same-origin' });
      at = performance.now();
      body = await res.json().catch(() => ({}));
    } catch {
      inFlight = false;
      if (!navigator.onLine) { offline = true; renderState(); return; }
      retry(performance.now(), null);
      return;
    }
    inFlight = false;
    answer(res, body, at, redeem);
  }

  // The proof of work a program may ask of an enter (docs/api.md): the
  // challenge solved in a Web Worker, so that the page stays live, its
  // progress on the state line; at most three in a row.
  let proof = null;
  let checking = null; // the progress, 0 to 1, while solving
  let solves = 0;
  function solve() {
    if (++solves > 3) return ended(t('errorGeneric'), '', t('tryAgain'), false);
    checking = 0;
    renderState();
    fetch(api + '/challenge', { headers: { Accept: 'application/json' }, cache: 'no-store', credentials: 'same-origin' })
      .then((r) => (r.ok ? r.json() : Promise.reject(r)))
      .then((c) => new Promise((resolve, reject) => {
        const w = new Worker(root.dataset.pow);
        w.onerror = reject;
        w.onmessage = (e) => {
          if (e.data.solution === undefined) { checking = e.data.progress; renderState(); return; }
          w.terminate();
          resolve({ challenge: c.challenge, solution: e.data.solution });
        };
        w.postMessage({ challenge: c.challenge, bits: c.bits });
      }))
      .then((p) => { proof = p; checking = null; renderState(); schedule(performance.now(), 0); })
      .catch(() => { checking = null; retry(performance.now(), null); });
  }

  // retry shows the trouble line and tries again after ms, or after a
  // growing, jittered delay when the server named none.
  function retry(at, ms) {
    failures++;
    trouble = t('retrying');
    renderState();
    if (ms == null) ms = Math.min(30000, 1000 * 2 ** Math.min(failures - 1, 5)) * (0.8 + 0.4 * Math.random());
    schedule(at, ms);
  }

  function answer(res, body, at, redeem) {
    const retryAfter = parseFloat(res.headers.get('Retry-After'));
    const retryMs = retryAfter >= 0 ? retryAfter * 1000 : null;
    const ok = res.ok && body.tokenId && body.status;
    // handoff.js sees a redeem's answer, or a poll's with a link's code
    // pending, first: true when it has scheduled what comes next.
    if (wr.ho && wr.ho.answer(res, body, at, ok, redeem)) return;
    if (ok) {
      failures = 0;
      trouble = '';
      if (!redeem) wr.enqueue = '';
      return view(body, at, retryMs);
    }
    if (res.status === 429 || res.status >= 500 || res.ok) return retry(at, retryMs);
    switch (body.code) {
      case 'ENQUEUE_TOKEN_REQUIRED': case 'INVALID_ENQUEUE_TOKEN': {
        stopped = true;
        done(t('signInTitle'), '');
        const go = $('go');
        go.href = passURL(target, '') || '#';
        go.textContent = t('signIn');
        go.hidden = !passURL(target, '');
        return;
      }
      case 'TOKEN_NOT_FOUND': case 'INVALID_TOKEN': return ended(t('lostTitle'), t('lost'), t('join'), true);
      case 'PROGRAM_NOT_FOUND': return ended(t('notFoundTitle'), t('notFound'), t('tryAgain'), false);
      case 'PROGRAM_CLOSED': return ended(t('closedEnter'), closesAt ? t('closedAt', { t: dateTimeOf(closesAt) }) : '', t('tryAgain'), false);
      case 'QUEUE_FULL': return ended(t('fullEnter'), '', t('tryAgain'), false);
      case 'CHALLENGE_REQUIRED': case 'CHALLENGE_FAILED': return solve();
    }
    return ended(t('errorGeneric'), '', t('tryAgain'), false);
  }

  function view(b, at, retryMs) {
    solves = 0;
    if (b.status === 'MOVED') { // to another device: forget it (not a newer place another tab keeps)
      if (load().token === b.tokenId) { st = {}; save(); }
      stopped = true;
      return done(t('moved'), '');
    }
    if (b.tokenId !== st.token) st = { token: b.tokenId };
    delete st.key;
    save();
    root.dispatchEvent(new CustomEvent('wr-answer', { detail: b })); // for push.js
    switch (b.status) {
      case 'WAITING': {
        if (!st.first || b.position > st.first) { st.first = b.position; save(); }
        waiting(b);
        const ms = typeof b.retryAfterMs === 'number' ? b.retryAfterMs : (retryMs ?? 5000);
        return schedule(at, st.handoff ? 0 : ms); // a code chosen meanwhile goes at once
      }
      case 'ADMITTED': {
        admitted(b);
        return wr.ho && wr.ho.admitted();
      }
      case 'EXPIRED': return ended(t('expiredTitle'), b.expiresAt ? t('expired', { t: timeOf(b.expiresAt) }) : t('noShow'), t('enterAgain'), true);
      case 'LEFT': return ended(t('leftTitle'), t('left', { t: timeOf(b.leftAt) }), t('enterAgain'), true);
      case 'REVOKED': return ended(t('revokedTitle'), t('revoked', { t: timeOf(b.revokedAt) }), t('enterAgain'), true);
    }
    return retry(at, retryMs);
  }

  // Rendering.
  let last = { pos: null, state: '', said: -Infinity };
  let opensAt = null;
  let note = ''; // about a handoff, on the state line (handoff.js)
  const announce = (s) => { $('announce').textContent = s; };
  const say = (s) => { note = s; renderState(); };

  function waiting(b) {
    paused = b.paused === true;
    opensAt = b.opensAt && Date.parse(b.opensAt) > Date.now() ? b.opensAt : null;
    closesAt = b.closesAt || null;
    $('ho').hidden = false;
    $('pos').textContent = num.format(b.position);
    const bar = $('bar');
    bar.max = st.first;
    bar.value = st.first - b.position;
    bar.setAttribute('aria-valuetext', Math.round(100 * bar.value / st.first) + '%');
    $('eta').textContent = wait(b.estimatedWaitMs);
    $('notice').hidden = !b.notice;
    $('noticeText').textContent = b.notice || '';
    $('updated').textContent = t('lastUpdate', { t: new Intl.DateTimeFormat(lang, { timeStyle: 'medium' }).format(new Date()) });
    // Announce the place at most every 30 s: near the front polls come
    // every second, too often for a screen reader.
    if (b.position !== last.pos && !(performance.now() - last.said < 30000)) {
      announce(t('position') + ': ' + num.format(b.position) + '. ' + t('estimatedWait') + ': ' + $('eta').textContent);
      last.said = performance.now();
    }
    last.pos = b.position;
    renderState();
  }

  function renderState() {
    const line = offline ? t('offline') : trouble || note
      || (checking !== null ? t('checking', { p: Math.round(checking * 100) + '%' }) : '')
      || (opensAt ? t('opensAt', { t: dateTimeOf(opensAt) }) : '')
      || (paused ? t('paused') : '') || (closedNow() && st.token ? t('closedWaiting') : '')
      || (st.handoff || wr.link && !st.token ? t('redeeming') : '') || (!st.token ? t('joining') : '');
    const el = $('state');
    el.hidden = !line;
    el.textContent = line;
    // Progress changes the line often: announced once, as it starts.
    const said = checking !== null ? 'checking' : line;
    if (said !== last.state && line) announce(line);
    last.state = said;
    const closing = $('closing');
    closing.hidden = !closesAt;
    if (closesAt) closing.textContent = t(closedNow() ? 'closedAt' : 'closesAt', { t: dateTimeOf(closesAt) });
  }

  function done(title, text) {
    $('waiting').hidden = true;
    $('notice').hidden = true;
    $('ho').hidden = true;
    if (wr.ho) wr.ho.show(false);
    $('done').hidden = false;
    $('doneTitle').textContent = title;
    $('doneText').textContent = text;
    document.title = title;
    announce(title + ' ' + text);
  }

  function admitted(b) {
    stopped = true;
    const url = back && b.edgeToken ? withParams(back, '', b.edgeToken) : passURL(target, b.admissionPass);
    if (!url) return done(t('admittedTitle'), t('admittedNoTarget', { t: timeOf(b.expiresAt) }));
    done(t('admittedTitle'), t('redirecting'));
    const go = $('go');
    go.href = url;
    go.hidden = false;
    location.replace(url);
  }

  // passURL adds admissionPass to target's query, keeping the rest as it
  // is; '' unless target is an http(s) URL.
  function passURL(target, pass) {
    if (!target) return '';
    try {
      const u = new URL(target, location.href);
      if (u.protocol !== 'https:' && u.protocol !== 'http:') return '';
      return withParams(u.href, pass, '');
    } catch {
      return '';
    }
  }

  // withParams adds admissionPass and wrEdge, those given, to url's query,
  // keeping the rest as it is.
  function withParams(url, pass, edgeToken) {
    let add = '';
    if (pass) add += '&admissionPass=' + encodeURIComponent(pass);
    if (edgeToken) add += '&wrEdge=' + encodeURIComponent(edgeToken);
    const hash = url.indexOf('#');
    const [base, frag] = hash < 0 ? [url, ''] : [url.slice(0, hash), url.slice(hash)];
    if (!add) return url;
    return base + (base.includes('?') ? add : '?' + add.slice(1)) + frag;
  }

  // ended stops polling and offers a button: a fresh place (a new key, the
  // old token forgotten) or, after an error, the same request again.
  let fresh = false;
  function ended(title, text, label, freshPlace) {
    stopped = true;
    fresh = freshPlace;
    done(title, text);
    const btn = $('again');
    btn.textContent = label;
    btn.hidden = false;
  }

  $('again').addEventListener('click', () => {
    if (inFlight) return;
    if (fresh) { st = { key: newKey() }; save(); }
    stopped = false;
    failures = 0;
    last = { pos: null, state: '', said: -Infinity };
    $('again').hidden = true;
    $('done').hidden = true;
    $('waiting').hidden = false;
    $('pos').textContent = '–';
    $('eta').textContent = '–';
    renderState();
    tick();
  });

  // "Continue on another device", the typed code and a link's code are
  // handoff.js's, fetched only when needed: a link's code or a code kept
  // (by request, above), a click of the button, the form focused or sent.
  // It gets what it needs through wr, and puts its hooks in wr.ho.
  const wr = root.wr = {
    api, lang, link, enqueue, unit, save, newKey, say, announce, renderState, tick, schedule,
    get st() { return st; },
  };
  let hoP = null;
  function hoLoad() {
    return hoP || (hoP = new Promise((ok) => {
      const s = document.createElement('script');
      s.src = root.dataset.handoff;
      s.onload = () => ok(wr.ho);
      s.onerror = () => { hoP = null; s.remove(); ok(null); };
      document.head.append(s);
    }));
  }
  const hoDo = (what) => hoLoad().then((h) => (h ? h[what]() : say(t('errorGeneric'))));
  $('hoOpen').addEventListener('click', () => hoDo('open'));
  $('hoForm').addEventListener('focusin', hoLoad);
  $('hoForm').addEventListener('submit', (e) => { e.preventDefault(); hoDo('submit'); });
  if (link || st.handoff) hoLoad();

  live.hidden = false;
  renderState();
  tick();
})();
