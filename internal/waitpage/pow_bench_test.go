package waitpage_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/example/waitingroom/internal/testing/browser"
	"github.com/example/waitingroom/internal/waitpage"
)

// BenchmarkWorkerSolve solves fresh random challenges of each size with
// the page's own Web Worker in Chromium, one a loop; tries/op is the mean
// number of hashes a solve took (2^bits expected), ns/try the page's cost
// of one. docs/benchmarks.md, "Proof of work".
func BenchmarkWorkerSolve(b *testing.B) {
	q := newFakeQueue()
	q.add("gala", gala())
	srv, _ := q.serve(b, waitpage.Options{})
	ctx := browser.Tab(b)
	browser.Do(b, ctx, chromedp.Navigate(srv.URL+"/waiting-room/gala"))
	for bits := 14; bits <= 22; bits += 2 {
		b.Run(fmt.Sprintf("bits=%d", bits), func(b *testing.B) {
			var tries float64
			for b.Loop() {
				solution, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`new Promise((resolve) => {
					const w = new Worker(document.getElementById('wr').dataset.pow);
					w.onmessage = (e) => { if (e.data.solution !== undefined) { w.terminate(); resolve(e.data.solution); } };
					w.postMessage({ challenge: crypto.randomUUID(), bits: %d });
				})`, bits), chromedp.EvalAwaitPromise))
				if err != nil {
					b.Fatal(err)
				}
				n, err := strconv.ParseInt(solution, 36, 64)
				if err != nil {
					b.Fatalf("solution %q: %v", solution, err)
				}
				tries += float64(n + 1)
			}
			b.ReportMetric(tries/float64(b.N), "tries/op")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/tries, "ns/try")
		})
	}
}
