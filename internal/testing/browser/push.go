package browser

// Push in a tab: the push service stood in for, the permission, the
// service worker registrations and a push delivered to one.

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/serviceworker"
	"github.com/chromedp/chromedp"
)

// fakePushManager stands in for the browser's push service, which headless
// Chromium cannot reach: PushManager's subscribe resolves a subscription
// whose toJSON() is FAKE and whose unsubscribe() resolves true (counted in
// __unsubscribed), recording subscribe's options in __subscribed;
// getSubscription resolves it once made in this profile (localStorage
// __fakeSub), as a real one would.
const fakePushManager = `(() => {
  if (!window.PushManager) return;
  const sub = {
    endpoint: JSON.parse(FAKE).endpoint,
    toJSON: () => JSON.parse(FAKE),
    unsubscribe: () => { localStorage.removeItem('__fakeSub'); window.__unsubscribed = (window.__unsubscribed || 0) + 1; return Promise.resolve(true); },
  };
  PushManager.prototype.subscribe = function (opts) {
    window.__subscribed = { userVisibleOnly: opts.userVisibleOnly, key: Array.from(new Uint8Array(opts.applicationServerKey)) };
    localStorage.setItem('__fakeSub', '1');
    return Promise.resolve(sub);
  };
  PushManager.prototype.getSubscription = function () {
    return Promise.resolve(localStorage.getItem('__fakeSub') ? sub : null);
  };
})();`

// FakePush makes the pages the tab ctx loads subscribe to push with the
// subscription whose toJSON() is subJSON, and sets the notification
// permission of origin to setting.
func FakePush(t testing.TB, ctx context.Context, subJSON, origin string, setting cdpbrowser.PermissionSetting) {
	t.Helper()
	quoted, _ := json.Marshal(subJSON)
	AddScript(t, ctx, strings.ReplaceAll(fakePushManager, "FAKE", string(quoted)))
	if _, err := chromedp.CallBrowser(ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
		Permission: &cdpbrowser.PermissionDescriptor{Name: "notifications"}, Setting: setting,
		Origin: origin, BrowserContextID: chromedp.FromContext(ctx).BrowserContextID,
	}); err != nil {
		t.Fatalf("Browser.setPermission: %v", err)
	}
}

// Workers keeps the service worker registrations of a tab's browser
// context as CDP's ServiceWorker domain reports them.
type Workers struct {
	mu      sync.Mutex
	byScope map[string]serviceworker.RegistrationID
	changed chan struct{}
}

// WatchWorkers enables the ServiceWorker domain on the tab ctx and
// watches its registrations.
func WatchWorkers(t testing.TB, ctx context.Context) *Workers {
	t.Helper()
	w := &Workers{byScope: map[string]serviceworker.RegistrationID{}, changed: make(chan struct{})}
	if err := chromedp.Listen(ctx, func(ev any) {
		e, ok := ev.(*serviceworker.EventWorkerRegistrationUpdated)
		if !ok {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, r := range e.Registrations {
			if r.IsDeleted {
				delete(w.byScope, r.ScopeURL)
			} else {
				w.byScope[r.ScopeURL] = r.RegistrationID
			}
		}
		close(w.changed)
		w.changed = make(chan struct{})
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, serviceworker.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("ServiceWorker.enable: %v", err)
	}
	return w
}

// Await waits for the registration of scope and returns its id.
func (w *Workers) Await(t testing.TB, ctx context.Context, scope string) serviceworker.RegistrationID {
	t.Helper()
	for {
		w.mu.Lock()
		id, ok := w.byScope[scope]
		changed := w.changed
		w.mu.Unlock()
		if ok {
			return id
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("waiting for the service worker registration of %s: %v", scope, ctx.Err())
		}
	}
}

// DeliverPush delivers data to the service worker of origin's registration
// id as its push service would, decrypted.
func DeliverPush(t testing.TB, ctx context.Context, origin string, id serviceworker.RegistrationID, data string) {
	t.Helper()
	if _, err := chromedp.Call(ctx, serviceworker.DeliverPushMessage, serviceworker.DeliverPushMessageParams{Origin: origin, RegistrationID: id, Data: data}); err != nil {
		t.Fatalf("ServiceWorker.deliverPushMessage: %v", err)
	}
}
