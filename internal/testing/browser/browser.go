// Package browser runs headless Chromium for tests, driven with
// github.com/chromedp/chromedp: one browser per test binary, started on
// first use and stopped when the binary exits, and one isolated tab (its
// own cookies and storage) per test. Import it from _test.go files only.
//
// The browser is $CHROMIUM, or the first of chromium-headless-shell,
// headless-shell, chromium, chromium-browser, google-chrome and
// google-chrome-stable on PATH: the headless shell first, as Playwright
// does, for the same Blink at a third of full Chromium's CPU. A missing
// browser fails the test rather than skipping it, so that CI cannot pass
// without running the browser tests; under go test -short it is skipped
// instead. Debian: apt-get install -y chromium-headless-shell (.ci/run does
// it).
//
// Use it as:
//
//	func TestMain(m *testing.M) { browser.Main(m) }
//
//	func TestPage(t *testing.T) {
//		ctx := browser.Tab(t)
//		err := chromedp.Do(ctx, chromedp.Navigate(url))
//		...
//	}
//
// BROWSER_VERBOSE=1 passes the browser's output through to stderr.
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

// candidates are the executables ExecPath looks for on PATH, in order.
var candidates = []string{"chromium-headless-shell", "headless-shell", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// startTimeout bounds the browser's start: a hang guard, generous enough
// for a busy 2-core machine.
const startTimeout = 2 * time.Minute

// ExecPath returns the browser to run: $CHROMIUM when set, else the first
// candidate found on PATH.
func ExecPath() (string, error) {
	if p := os.Getenv("CHROMIUM"); p != "" {
		found, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("CHROMIUM=%q: %w: %w", p, ErrNotInstalled, err)
		}
		return found, nil
	}
	for _, name := range candidates {
		if found, err := exec.LookPath(name); err == nil {
			return found, nil
		}
	}
	return "", fmt.Errorf("none of %v on PATH: %w", candidates, ErrNotInstalled)
}

var shared struct {
	once    sync.Once
	mu      sync.Mutex
	ctx     context.Context // the browser's chromedp context; nil once stopped
	cancel  context.CancelFunc
	err     error
	missing bool
}

// Tab returns a chromedp context for a new tab in a fresh browser context
// (no cookies, no storage), closed when t ends. It starts the browser on
// first use; it fails t if the browser cannot start, or skips it under
// -short when none is installed.
func Tab(t testing.TB) context.Context {
	t.Helper()
	shared.once.Do(start)
	if shared.err != nil {
		if shared.missing && testing.Short() {
			t.Skipf("browser: %v (skipped under -short)", shared.err)
		}
		t.Fatalf("browser: %v", shared.err)
	}
	shared.mu.Lock()
	parent := shared.ctx
	shared.mu.Unlock()
	if parent == nil {
		t.Fatal("browser: already stopped")
	}
	ctx, cancel := chromedp.NewContext(parent, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // opens the tab
		t.Fatalf("browser: open a tab: %v", err)
	}
	return ctx
}

// Main runs the tests and stops the browser, if one was started, before the
// binary exits. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop closes the browser if it is running. Main calls it; a later Tab
// does not restart it.
func Stop() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cancel != nil {
		shared.cancel()
		shared.ctx, shared.cancel = nil, nil
	}
}

func start() {
	path, err := ExecPath()
	if err != nil {
		shared.err, shared.missing = err, true
		return
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		// Tests run as root in containers, where Chromium's sandbox cannot
		// start; the pages are our own.
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
	)
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
		shared.err = fmt.Errorf("start %s: %w", path, err)
		return
	}
	shared.mu.Lock()
	shared.ctx, shared.cancel = ctx, cancel
	shared.mu.Unlock()
}
