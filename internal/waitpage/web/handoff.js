// Moving a place to another device, fetched by app.js only when needed: a
// link's code (#handoff=CODE) or a code kept from before, a click of
// "Continue on another device", the typed-code form focused or sent. It
// gets what it needs from app.js through root.wr (the API, the stored
// place, the scheduler, the state line and the live region) and puts its
// hooks in wr.ho: open and submit (the button, the form), answer (each
// answer, first), admitted and show. It also asks before a site's enqueue
// token (#enqueue=JWT) replaces a place held here. docs/waiting-room.md
// describes it.
(() => {
  'use strict';
  const TEXT = /*TEXT*/{};
  const root = document.getElementById('wr');
  const wr = root && root.wr;
  if (!wr) return;
  const $ = (id) => document.getElementById(id);
  const t = (key, vars = {}) => {
    let s = TEXT[wr.lang][key] || TEXT.en[key] || key;
    for (const k in vars) s = s.split('{' + k + '}').join(vars[k]);
    return s;
  };

  // The prompts (a link's code: above the button; a site's token: above
  // the handoff's part) and the panel (under the button), as page.html
  // would have them.
  const el = (tag, props, ...kids) => {
    const e = Object.assign(document.createElement(tag), props);
    e.append(...kids);
    return e;
  };
  const button = (id, key, quiet) => el('button', { id, className: quiet ? 'button quiet' : 'button', type: 'button' }, t(key));
  const prompt = (id, key, yes) => el('div', { id: id + 'Ask', className: 'handoff', hidden: true }, el('p', {}, t(key)),
    el('p', {}, button(id + 'Yes', yes), ' ', button(id + 'No', 'handoffKeep', true)));
  const hoOpen = $('hoOpen');
  hoOpen.parentNode.before(prompt('ho', 'handoffAsk', 'handoffMove'));
  const enqAsk = prompt('enq', 'enqueueAsk', 'enqueueEnter');
  $('ho').before(enqAsk);
  // ask shows a prompt, and announces it after the answer's place, which
  // app.js announces next.
  const ask = (p) => {
    p.hidden = false;
    queueMicrotask(() => wr.announce(p.firstChild.textContent));
  };
  const panel = el('section', { id: 'hoPanel', className: 'handoff', hidden: true },
    el('h3', { id: 'hoTitle', tabIndex: -1 }, t('handoffOffer')), el('p', {}, t('handoffHow')),
    el('img', { id: 'hoQr', alt: t('handoffQr') }), el('p', { id: 'hoCode', className: 'code' }),
    el('p', { id: 'hoValid', className: 'muted' }), el('p', {}, button('hoClose', 'close', true)));
  panel.setAttribute('aria-labelledby', 'hoTitle');
  hoOpen.parentNode.after(panel);

  // A code to redeem and its Idempotency-Key stay in the stored place
  // (handoff, handoffKey) until the answer is kept, so that a reload or a
  // retry sends the same.
  const take = (code) => {
    const st = wr.st;
    if (st.handoff !== code) st.handoffKey = wr.newKey();
    st.handoff = code;
    wr.save();
  };
  // A link's code: redeemed at once, unless a place is held here (and the
  // code is not the one it is redeeming): offered after that place's answer.
  let offer = '';
  if (wr.link && wr.st.token && wr.st.handoff !== wr.link) offer = wr.link;
  else if (wr.link) take(wr.link);
  wr.link = '';
  // leave: this device's place, given up once a code it chose moved here.
  let leave = wr.st.handoff && wr.st.token || '';
  let askCode = ''; // a link's code, while the prompt asks
  let kept = false; // a link's code not used: this device was admitted
  // A site's token where a place is held: kept here, out of app.js's
  // enter, until that place's answer (see answer) or the choice.
  // chosen: "Enter with my account"; stall: an ADMITTED place waits for
  // the choice; held: the place held, WAITING before the enter, given up
  // after it.
  let enq = wr.st.token ? wr.enqueue : '';
  if (enq) wr.enqueue = '';
  let chosen = false;
  let stall = false;
  let held = '';

  // giveUp gives up a place of this device that another took over, if it
  // is still WAITING: one poll, then one DELETE, best effort. A place
  // admitted meanwhile keeps its turn (a DELETE would give it up).
  const giveUp = (token) => {
    const send = (method) => fetch(wr.api, { method, headers: { Accept: 'application/json', 'X-Queue-Token': token }, cache: 'no-store', credentials: 'same-origin' });
    send('GET').then((r) => r.json()).then((b) => b.status === 'WAITING' && send('DELETE')).catch(() => {});
  };

  // "Continue on another device": a code, and its QR, that move this place
  // to the browser that opens its link; for a place of an account, the
  // server refuses.
  const show = (open) => { $('hoPanel').hidden = !open; hoOpen.hidden = open; };
  const close = () => { show(false); hoOpen.focus(); };
  let asking = false;
  const open = async () => {
    if (asking) return;
    asking = true;
    wr.say('');
    let res;
    let b = {};
    try {
      res = await fetch(wr.api + '/handoff', {
        method: 'POST', headers: { Accept: 'application/json', 'Content-Type': 'application/json', 'X-Queue-Token': wr.st.token },
        body: JSON.stringify({ page: location.origin + location.pathname }), cache: 'no-store', credentials: 'same-origin',
      });
      b = await res.json();
    } catch { /* said below */ }
    asking = false;
    if (!res || !res.ok || !b.code) return wr.say(t(b.code === 'HANDOFF_REFUSED' ? 'handoffRefused' : 'handoffFailed'));
    $('hoCode').textContent = b.code.match(/.{1,4}/g).join(' ');
    $('hoQr').src = 'data:image/svg+xml,' + encodeURIComponent(b.qrSvg);
    const valid = t('handoffValid', { d: wr.unit(Math.max(1, Math.round((Date.parse(b.expiresAt) - Date.now()) / 60000)), 'minute') });
    $('hoValid').textContent = valid;
    show(true);
    $('hoTitle').focus();
    wr.announce($('hoTitle').textContent + '. ' + valid);
  };
  $('hoClose').addEventListener('click', close);
  $('hoPanel').addEventListener('keydown', (e) => { if (e.key === 'Escape') close(); });

  // A code typed, or a link's code taken: redeemed at once (between
  // requests); this device's place is given up once the other moved here.
  const redeemNow = (code) => {
    const st = wr.st;
    if (st.handoff || !st.token) return;
    $('hoSay').textContent = '';
    leave = st.token;
    take(code);
    wr.renderState();
    root.dispatchEvent(new Event('wr-poll'));
  };
  const submit = () => {
    const code = $('hoIn').value.trim();
    if (code) redeemNow(code);
  };
  const answered = (yes) => {
    $('hoAsk').hidden = true;
    if (yes) redeemNow(askCode);
    askCode = '';
  };
  $('hoYes').addEventListener('click', () => answered(true));
  $('hoNo').addEventListener('click', () => answered(false));
  // The site's token: chosen, the place is asked at once and its answer
  // enters (see answer); kept, the token goes (an ADMITTED place is asked
  // again, and goes on).
  const choose = (yes) => {
    enqAsk.hidden = true;
    chosen = yes;
    if (!yes) enq = '';
    if (yes || stall) wr.schedule(performance.now(), 0);
  };
  $('enqYes').addEventListener('click', () => choose(true));
  $('enqNo').addEventListener('click', () => choose(false));

  // answer sees each answer before app.js: true when it has scheduled
  // what comes next.
  const answer = (res, body, at, ok, redeem) => {
    const st = wr.st;
    // A redeem refused, or MOVED (a retry after the new token moved on):
    // the code goes, said (by the form where a place is held), and the page
    // goes on without it.
    if (redeem && (ok ? body.status === 'MOVED' : !res.ok && res.status !== 429 && res.status < 500)) {
      delete st.handoff;
      delete st.handoffKey;
      wr.save();
      const msg = t({ HANDOFF_NOT_FOUND: 'handoffNotFound', INVALID_HANDOFF_CODE: 'handoffNotFound', HANDOFF_REFUSED: 'handoffAccount',
        NOT_WAITING: 'handoffNotWaiting' }[body.code] || (res.ok || body.code === 'HANDOFF_USED' ? 'handoffUsed' : 'errorGeneric'));
      if (leave) { leave = ''; $('hoSay').textContent = msg; } else wr.say(msg);
      wr.tick();
      return true;
    }
    if (redeem && ok && leave && body.tokenId !== leave) { // the place moved here: give up this device's own
      giveUp(leave);
      $('hoIn').value = '';
    }
    if (redeem) leave = '';
    // The site's token entered: the place held gives way to the account's.
    if (held && ok && !redeem) {
      if (body.tokenId !== held) giveUp(held);
      held = '';
    }
    // A site's token where a place is held, after that place's answer:
    // WAITING or ADMITTED asks (ADMITTED stays until the choice); chosen,
    // or a place that ended or is unknown (404), enters with the token.
    if (enq && !redeem && (ok || res.status === 404)) {
      const s = body.status;
      if (!chosen && (s === 'WAITING' || s === 'ADMITTED')) {
        if (enqAsk.hidden) ask(enqAsk);
        return stall = s === 'ADMITTED';
      }
      held = s === 'WAITING' ? body.tokenId : '';
      wr.enqueue = enq;
      enq = '';
      wr.schedule(at, 0);
      return true;
    }
    // A link's code where a place is held, after that place's answer:
    // WAITING asks, ADMITTED keeps its turn, an ended place redeems it.
    if (offer && (ok || res.status === 404)) {
      const code = offer;
      offer = '';
      if (body.status === 'WAITING') { askCode = code; ask($('hoAsk')); }
      else if (body.status === 'ADMITTED') kept = true;
      else { take(code); wr.schedule(at, 0); return true; }
    }
    return false;
  };
  const admitted = () => {
    if (kept) $('doneText').textContent = t('handoffAdmitted') + ' ' + $('doneText').textContent;
  };

  wr.ho = { open, submit, answer, admitted, show };
})();
