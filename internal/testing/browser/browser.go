// Package browser runs headless Chromium for tests with chromedp: one browser
// per test binary, stopped by Main, and one isolated tab per test (Tab); a
// second, Chromium itself, for the tests of notifications (NotifyingTab). A
// missing browser fails the test except under -short; BROWSER_VERBOSE=1
// passes its output to stderr. Import it from _test.go files only.
package browser

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// ErrNotInstalled is wrapped by ExecPath's error when no browser is found.
var ErrNotInstalled = errors.New("chromium not installed (Debian: apt-get install -y chromium-headless-shell)")

// candidates are what ExecPath looks for on PATH, the headless shell first
// (the same Blink at a third of the CPU).
var candidates = []string{"chromium-headless-shell", "headless-shell", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// startTimeout is a hang guard on the browser's start, for a busy machine.
const startTimeout = 2 * time.Minute

// notifying are the browsers that show notifications, in NotifyingTab's
// order: the headless shell has no notification service (Blink reports the
// permission denied whatever CDP grants).
var notifying = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// ExecPath returns the browser to run: $CHROMIUM when set, else the first
// candidate found on PATH.
func ExecPath() (string, error) { return execPath("CHROMIUM", candidates) }

// execPath returns $env when set, else the first of names on PATH.
func execPath(env string, names []string) (string, error) {
	if p := os.Getenv(env); p != "" {
		found, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("%s=%q: %w: %w", env, p, ErrNotInstalled, err)
		}
		return found, nil
	}
	for _, name := range names {
		if found, err := exec.LookPath(name); err == nil {
			return found, nil
		}
	}
	return "", fmt.Errorf("none of %v on PATH: %w", names, ErrNotInstalled)
}

// running and showing start the browsers on first use; stop.cancel stops them.
var (
	running = sync.OnceValues(func() (context.Context, error) { return start(ExecPath) })
	showing = sync.OnceValues(func() (context.Context, error) {
		return start(func() (string, error) { return execPath("CHROMIUM_NOTIFYING", notifying) })
	})
	stop struct {
		sync.Mutex
		cancel []context.CancelFunc
	}
)

// Tab returns a chromedp context for a new tab in a fresh browser context
// (no cookies, no storage), closed when t ends.
func Tab(t testing.TB) context.Context { return tabOf(t, running) }

// NotifyingTab is Tab in Chromium itself ($CHROMIUM_NOTIFYING, else the
// first of chromium, chromium-browser, google-chrome on PATH), whose pages
// can show notifications.
func NotifyingTab(t testing.TB) context.Context { return tabOf(t, showing) }

func tabOf(t testing.TB, browser func() (context.Context, error)) context.Context {
	t.Helper()
	parent, err := browser()
	if err != nil {
		if errors.Is(err, ErrNotInstalled) && testing.Short() {
			t.Skipf("browser: %v (skipped under -short)", err)
		}
		t.Fatalf("browser: %v", err)
	}
	if parent.Err() != nil {
		t.Fatal("browser: already stopped")
	}
	ctx, cancel := chromedp.NewContext(parent, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // opens the tab
		t.Fatalf("browser: open a tab: %v", err)
	}
	return ctx
}

// Main runs the tests and stops the browser; call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop closes the browser if it is running; a later Tab does not restart it.
func Stop() {
	stop.Lock()
	defer stop.Unlock()
	for _, cancel := range stop.cancel {
		cancel()
	}
}

// start starts the browser at the path find gives and returns its chromedp context.
func start(find func() (string, error)) (context.Context, error) {
	path, err := find()
	if err != nil {
		return nil, err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, // as root in containers the sandbox cannot start
		chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
	if os.Getenv("BROWSER_VERBOSE") != "" {
		opts = append(opts, chromedp.CombinedOutput(os.Stderr))
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	cancel := func() { cancelCtx(); cancelAlloc() }
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }() // starts the browser
	select {
	case err = <-started:
	case <-time.After(startTimeout):
		err = fmt.Errorf("no answer within %v", startTimeout)
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	stop.Lock()
	defer stop.Unlock()
	stop.cancel = append(stop.cancel, cancel)
	return ctx, nil
}
