package report

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/testing/browser"
)

func TestMain(m *testing.M) { browser.Main(m) }

// figure is what the page shows of a chart.
type figure struct {
	Caption string   `json:"caption"`
	Title   string   `json:"title"`  // the svg's <title>
	XLabel  string   `json:"xLabel"` // the axes' labels, when drawn with a size
	YLabel  string   `json:"yLabel"`
	Ticks   int      `json:"ticks"`   // tick labels drawn
	Changes []string `json:"changes"` // the change markers' labels drawn inside the chart
}

// figuresJS reads every figure of the page, counting only the texts laid out
// with a size.
const figuresJS = `[...document.querySelectorAll('figure')].map((f) => {
  const svg = f.querySelector('svg[role=img]'), box = svg.getBoundingClientRect();
  const shown = (el) => { if (!el) return false; const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && getComputedStyle(el).visibility === 'visible' &&
      r.left >= box.left - 1 && r.right <= box.right + 1 && r.top >= box.top - 1 && r.bottom <= box.bottom + 1; };
  const label = (sel) => { const el = svg.querySelector(sel); return shown(el) ? el.textContent : ''; };
  const title = svg.querySelector(':scope > title');
  return {
    caption: f.querySelector('figcaption').textContent,
    title: title && svg.getAttribute('aria-labelledby').split(' ').includes(title.id) ? title.textContent : '',
    xLabel: label('text.xlabel'), yLabel: label('text.ylabel'),
    ticks: [...svg.querySelectorAll(':scope > text:not([class])')].filter(shown).length,
    changes: [...svg.querySelectorAll('g.change text')].filter(shown).map((t) => t.textContent),
  };
})`

// TestReportInBrowser opens the HTML report of a sale in Chromium: five
// labelled charts, the admin changes marked on the two over time, no
// request but the page's own, and three A4 pages at most in print.
// UPDATE_SCREENSHOT=1 writes docs/img/report.png.
func TestReportInBrowser(t *testing.T) {
	ctx, cancel := context.WithTimeout(browser.Tab(t), time.Minute)
	defer cancel()
	var page bytes.Buffer
	if err := WriteHTML(&page, sale()); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var served, sent []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		served = append(served, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(page.Bytes())
	}))
	defer srv.Close()
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			sent = append(sent, e.Request.URL)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	browser.Do(t, ctx, chromedp.EmulateViewport(900, 1400), chromedp.Navigate(srv.URL+"/"))
	browser.WaitFor(t, ctx, 10*time.Second, "document.readyState === 'complete'")

	figs := browser.Eval[[]figure](t, ctx, figuresJS)
	want := []struct{ title, x, y string }{
		{"People waiting over time", "time (UTC)", "people waiting"},
		{"Arrivals and admissions per minute", "time (UTC)", "people a minute"},
		{"Wait distribution of the admitted", "wait", "people"},
		{"Abandonment by position", "position in the line", "people"},
		{"Abandonment by the estimate shown", "estimated wait shown", "people"},
	}
	if len(figs) != len(want) {
		t.Fatalf("%d figures, want %d: %+v", len(figs), len(want), figs)
	}
	for i, w := range want {
		f := figs[i]
		if f.Caption != w.title || f.Title != w.title || f.XLabel != w.x || f.YLabel != w.y || f.Ticks < 4 {
			t.Errorf("figure %d: %+v, want the title %q and the labels %q, %q, with ticks", i, f, w.title, w.x, w.y)
		}
		var changes []string
		if i < 2 {
			changes = []string{"alice: pause", "bob: rate"}
		}
		if d := cmp.Diff(changes, f.Changes, cmpEmpty); d != "" {
			t.Errorf("figure %d's change markers shown (-want +got):\n%s", i, d)
		}
	}

	pdf, err := chromedp.Run(ctx, chromedp.PrintToPDF(chromedp.PDFPaper(chromedp.PaperSize{Width: 8.27, Height: 11.69})))
	if err != nil {
		t.Fatalf("print to PDF: %v", err)
	}
	pages := len(regexp.MustCompile(`/Type\s*/Page[^s]`).FindAll(pdf, -1))
	if pages < 1 || pages > 3 {
		t.Errorf("%d A4 pages, want 1 to 3", pages)
	}
	t.Logf("%d A4 pages, %d bytes of PDF", pages, len(pdf))

	if os.Getenv("UPDATE_SCREENSHOT") == "1" {
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("../../docs/img/report.png", png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("docs/img/report.png: %d bytes", len(png))
	}

	mu.Lock()
	defer mu.Unlock()
	if d := cmp.Diff([]string{"/"}, served); d != "" {
		t.Errorf("requests served (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{srv.URL + "/"}, sent); d != "" {
		t.Errorf("requests the browser sent (-want +got):\n%s", d)
	}
}

// cmpEmpty makes a nil slice equal to an empty one.
var cmpEmpty = cmp.FilterValues(func(a, b []string) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())
