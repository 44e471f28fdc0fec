import cf from 'cloudfront';
import crypto from 'crypto';

// Edge gate of the waiting room (CloudFront Function, cloudfront-js-2.0, viewer-request):
// a valid session cookie passes, a valid wrEdge token is traded for one, the rest
// queue. Formats: internal/edgetoken (Go reference), docs/edge-gate.md.

const kvs = cf.kvs();
const TOKEN = 'wrEdge';
const STANDBY = 'wrsb';
const DEFAULTS = {
  routes: [],
  bypass: ['/robots.txt', '/favicon.ico', '/health', '/static/'],
  static: ['css', 'js', 'mjs', 'png', 'jpg', 'jpeg', 'gif', 'svg', 'webp', 'avif',
    'ico', 'woff', 'woff2', 'ttf', 'map', 'txt'],
  api: ['/api/'],
  json: true,
};

// read returns the JSON value of key k, or d if k does not exist. get rejects
// for a missing key; exists tells that apart from a failure, which is rethrown.
async function read(k, d) {
  try {
    return await kvs.get(k, {format: 'json'});
  } catch (e) {
    if ((await kvs.exists(k)) === false) return d;
    throw e;
  }
}

function mac(key, kind, body) {
  return crypto.createHmac('sha256', key.k).update(kind + '.' + body).digest('base64url');
}

// same compares two MACs by their own MACs under key (the runtime has no
// constant-time compare): what a difference takes to find says nothing of them.
function same(key, a, b) {
  return mac(key, 'cmp', a) === mac(key, 'cmp', b);
}

// verify checks a credential of kind for prog: the key named kid (current or
// previous) must have made mac, and exp (Unix seconds, digits) must be ahead.
function verify(keys, kind, kid, prog, exp, jti, m, now) {
  const key = [keys.current, keys.previous].find((k) => k && typeof k.k === 'string' && k.kid === kid);
  return !!key && /^[0-9]{1,15}$/.test(exp) && now < Number(exp) &&
    same(key, m, mac(key, kind, kid + '.' + prog + '.' + exp + '.' + jti));
}

// canonical is the path an origin may serve for uri: percent-decoded, \ read
// as /, ;params and empty, . and .. segments dropped. Rules match it, not uri.
function canonical(uri) {
  let p = uri;
  try {
    p = decodeURIComponent(uri);
  } catch (e) {
    // malformed escapes: matched as they are
  }
  const out = [];
  p.replace(/\\/g, '/').split('/').forEach((seg) => {
    seg = seg.split(';')[0];
    if (seg === '..') out.pop();
    else if (seg !== '' && seg !== '.') out.push(seg);
  });
  return '/' + out.join('/') + (out.length && p.endsWith('/') ? '/' : '');
}

// bypassed: a listed path (exact, or as a prefix ending in /), or a static
// extension on a path sent as it is with no dot before its last segment.
function bypassed(s, path, clean) {
  const hit = (p) => typeof p === 'string' && (path === p || path.startsWith(p.endsWith('/') ? p : p + '/'));
  if (s.bypass.some(hit)) return true;
  const seg = path.slice(path.lastIndexOf('/') + 1);
  const dot = seg.lastIndexOf('.');
  return clean && dot > 0 && path.indexOf('.') === path.length - seg.length + dot &&
    s.static.includes(seg.slice(dot + 1).toLowerCase());
}

// route names the program of the longest prefix (without case; /x/ also
// covers /x) that matches, or '' for none.
function route(routes, path) {
  let best = '', prog = '';
  const lp = path.toLowerCase();
  routes.forEach((r) => {
    const pre = Array.isArray(r) && typeof r[0] === 'string' ? r[0].toLowerCase() : '';
    if (pre.length > best.length && (lp.startsWith(pre) || pre.endsWith('/') && lp === pre.slice(0, -1))) {
      best = pre;
      prog = String(r[1]);
    }
  });
  return prog;
}

// values is every value a querystring or cookies field holds.
function values(f) {
  return !f ? [] : (f.multiValue && f.multiValue.length ? f.multiValue : [f]).map((v) => String(v.value));
}

// query rebuilds the query string (values as CloudFront gives them, still encoded).
function query(qs) {
  const out = [];
  for (const n in qs) {
    const mv = qs[n].multiValue;
    (mv && mv.length ? mv : [qs[n]]).forEach((v) => out.push(n + '=' + v.value));
  }
  return out.join('&');
}

// here is uri with qs, from one leading / (//host would name another site).
function here(uri, qs) {
  const q = query(qs), u = '/' + uri.replace(/^[\/\\]+/, '');
  return q ? u + '?' + q : u;
}

// answer is a generated response; every one of them is no-store.
function answer(statusCode, statusDescription, headers, cookies, body) {
  headers['cache-control'] = {value: 'no-store'};
  return {statusCode: statusCode, statusDescription: statusDescription, headers: headers,
    cookies: cookies || {}, body: body};
}

function redirect(location, cookies) {
  return answer(302, 'Found', {location: {value: location}}, cookies);
}

// session mints a session cookie for prog with the signing key: current once
// its from (Unix s) has come, else previous, so that every edge knows the key.
function session(keys, prog, jti, secs, now) {
  const k = keys.current.from > now && keys.previous ? keys.previous : keys.current, exp = now + secs;
  const v = [k.kid, exp, jti, mac(k, 'wr-edge-session', [k.kid, prog, exp, jti].join('.'))].join('.');
  const c = {};
  c['wr-edge-' + prog] = {value: v, attributes: 'Path=/; Secure; HttpOnly; SameSite=Lax; Max-Age=' + secs};
  return c;
}

async function handler(event) {
  const req = event.request, uri = req.uri, qs = req.querystring;
  let site = null;
  try {
    site = await read('site', null);
  } catch (e) {
    // Without site no route is known: the request passes, as with no site.
  }
  const s = Object.assign({}, DEFAULTS, site && typeof site === 'object' ? site : {});
  ['routes', 'bypass', 'static', 'api'].forEach((n) => { if (!Array.isArray(s[n])) s[n] = DEFAULTS[n]; });
  const path = canonical(uri);
  if (bypassed(s, path, path === uri)) return req;
  const prog = route(s.routes, path);
  if (!prog) return req;

  const now = Math.floor(Date.now() / 1000);
  const toks = values(qs[TOKEN]);
  delete qs[TOKEN]; // a token is never passed on to the origin
  let p, keys = {};
  try {
    p = await read('p.' + prog, {mode: 'off'});
    if (!p || typeof p !== 'object') p = {mode: 'on'};
    if (p.mode !== 'off' && !(p.failOpenUntil > now)) keys = (await read('keys', null)) || {};
  } catch (e) {
    p = {mode: 'on'}; // closed: no keys, so no credential verifies
    keys = {};
  }
  if (p.mode === 'off' || p.failOpenUntil > now) return req;
  const sb = p.mode === 'standby' && qs[STANDBY] && qs[STANDBY].value === '1';
  if (p.mode === 'standby') delete qs[STANDBY];

  // Every cookie and token of the name is tried: a planted one locks nobody out.
  const ok = values(req.cookies['wr-edge-' + prog]).some((v) => {
    const f = v.split('.');
    return f.length === 4 && verify(keys, 'wr-edge-session', f[0], prog, f[1], f[2], f[3], now);
  });
  if (ok) return req;

  const secs = Number.isInteger(p.session) && p.session > 0 ? p.session : 3600;
  const t = toks.map((v) => v.split('.')).find((t) =>
    t.length === 5 && t[1] === prog && verify(keys, 'wr-edge-token', t[0], prog, t[2], t[3], t[4], now));
  if (t) {
    if (!keys.current) return req;
    return redirect(here(uri, qs), session(keys, prog, t[3], secs, now));
  }

  const accept = req.headers.accept ? String(req.headers.accept.value) : '';
  const json = s.api.some((a) => typeof a === 'string' && uri.startsWith(a)) ||
    (s.json === true && accept.includes('application/json') && !accept.includes('text/html'));
  const page = (req.method === 'GET' || req.method === 'HEAD') && !json;
  if (p.mode === 'standby') {
    if (!page || sb || !keys.current) return req; // wrsb=1: cookies refused, no loop
    const jti = 'sb' + Math.random().toString(36).slice(2) + Math.random().toString(36).slice(2);
    qs[STANDBY] = {value: '1'};
    return redirect(here(uri, qs), session(keys, prog, jti, secs, now));
  }

  const room = '/waiting-room/' + encodeURIComponent(prog);
  if (json) {
    return answer(429, 'Too Many Requests',
      {'retry-after': {value: '10'}, 'content-type': {value: 'application/json'}}, {},
      {encoding: 'text', data: JSON.stringify({code: 'WAITING_ROOM',
        message: 'This site is queueing visitors: open the waiting room to take your place.', waitingRoom: room})});
  }
  return redirect(room + '?return=' + encodeURIComponent(here(uri, qs)));
}
