// The waiting room's service worker, registered by push.js with the scope of
// one program's page: it shows the queue's push messages,
// {"program": <display name>, "stage": "ready"|"turn"}, as notifications in
// the browser's language, tells that program's open pages (which poll at
// once at the turn), and a click on one brings the page back.
'use strict';
const TEXT = /*TEXT*/{};
const lang = (navigator.languages || []).map((l) => l.split('-')[0].toLowerCase())
  .find((l) => Object.prototype.hasOwnProperty.call(TEXT, l)) || 'en';
const t = (key) => TEXT[lang][key];
// The pages of this registration's program: the scope is the page's path.
const pages = () => self.clients.matchAll({ type: 'window', includeUncontrolled: true })
  .then((all) => all.filter((c) => c.url.split(/[?#]/)[0] === self.registration.scope));

self.addEventListener('install', () => self.skipWaiting()); // no fetch handler: nothing to keep consistent

self.addEventListener('push', (event) => {
  let m = {};
  try { m = event.data.json(); } catch { /* still a notification: the browser wants one */ }
  const stage = m.stage === 'turn' ? 'turn' : 'ready';
  // At the turn, "get ready" is old news. The pages hear of it once the
  // notification is up (or failed).
  event.waitUntil(self.registration.showNotification(String(m.program || t('title')), {
    body: t(stage === 'turn' ? 'notifyTurn' : 'notifyReady'),
    tag: 'wr-' + stage, renotify: stage === 'turn', requireInteraction: stage === 'turn', lang,
  }).then(() => stage === 'turn' && self.registration.getNotifications({ tag: 'wr-ready' }))
    .then((old) => old && old.forEach((n) => n.close()))
    .finally(() => pages().then((cs) => cs.forEach((c) => c.postMessage({ type: 'wr-push', stage })))));
});

self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  event.waitUntil(pages().then((cs) => (cs.length ? cs[0].focus() : self.clients.openWindow(self.registration.scope))));
});
