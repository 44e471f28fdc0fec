package bench

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// Chart draws requests per second over time, one line per result, as a
// self-contained SVG (no script, no external font).
type Chart struct {
	Title   string
	Results []Result
	// Smooth is the width in seconds of the centred moving average, applied
	// twice, drawn bold over each per-second line; 0 picks
	// max(5, duration/40), 1 draws only the per-second line.
	Smooth int
}

// palette colours the lines in result order: Before red, After blue, then more.
var palette = []string{"#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"}

// SVG renders the chart.
func (c Chart) SVG() []byte {
	const (
		width, left, right, bottom = 960.0, 78.0, 24.0, 56.0
		plotH                      = 330.0
	)
	top := 62 + 18*float64(len(c.Results)) // a legend line per result
	height := top + plotH + bottom
	plotW := width - left - right
	var xmax, ymax float64 = 1, 1
	for _, r := range c.Results {
		xmax = math.Max(xmax, float64(len(r.RpsSeries)))
		for _, v := range r.RpsSeries {
			ymax = math.Max(ymax, float64(v))
		}
	}
	smooth := c.Smooth
	if smooth <= 0 {
		smooth = max(5, int(xmax)/40) | 1
	}
	ystep := niceStep(ymax / 5)
	ytop := math.Ceil(ymax/ystep) * ystep
	xstep := niceStep(xmax / 8)
	x := func(s float64) float64 { return left + s/xmax*plotW }
	y := func(v float64) float64 { return top + plotH - v/ytop*plotH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="Helvetica, Arial, sans-serif" font-size="13">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="26" font-size="%.1f" font-weight="bold">%s</text>`+"\n", left, titleSize(c.Title, width-left-right), html.EscapeString(c.Title))
	// Grid and axes.
	for v := 0.0; v <= ytop+ystep/2; v += ystep {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e5e5e5"/>`+"\n", left, y(v), left+plotW, y(v))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#444">%s</text>`+"\n", left-8, y(v)+4, SI(v))
	}
	for s := 0.0; s <= xmax+xstep/2; s += xstep {
		if s > xmax {
			break
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#f0f0f0"/>`+"\n", x(s), top, x(s), top+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#444">%s</text>`+"\n", x(s), top+plotH+18, SI(s))
	}
	fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", left, top, plotW, plotH)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#222">seconds since start</text>`+"\n", left+plotW/2, height-14)
	fmt.Fprintf(&b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle" fill="#222">requests per second</text>`+"\n", top+plotH/2)

	for i, r := range c.Results {
		color := palette[i%len(palette)]
		raw := make([]float64, len(r.RpsSeries))
		for j, v := range r.RpsSeries {
			raw[j] = float64(v)
		}
		width := 2.5
		if smooth > 1 {
			writeLine(&b, raw, x, y, color, 1, 0.35)
			raw = movingAverage(movingAverage(raw, smooth), smooth)
		}
		writeLine(&b, raw, x, y, color, width, 1)
		// Legend, above the plot.
		ly, lx := 50.0+float64(i)*18, left
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3"/>`+"\n", lx, ly-4, lx+22, ly-4, color)
		label := fmt.Sprintf("%s — %s requests, avg %s/s, peak %s/s", r.Policy, Thousands(r.Requests), Thousands(int64(math.Round(r.AvgRps))), Thousands(r.PeakRps))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+28, ly, html.EscapeString(label))
	}
	if smooth > 1 && len(c.Results) > 0 {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" font-size="11" fill="#666">thin: per second; bold: smoothed over ±%d s</text>`+"\n", left+plotW, top-6, smooth-1)
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// titleSize is the font size, at most 17 px, at which a bold title fits
// in width (about 0.6 em a character).
func titleSize(title string, width float64) float64 {
	n := float64(len([]rune(title)))
	return math.Max(10, math.Min(17, width/(0.6*n)))
}

// writeLine draws one series as a polyline, each value at the middle of
// its second.
func writeLine(b *strings.Builder, vals []float64, x, y func(float64) float64, color string, width, opacity float64) {
	if len(vals) == 0 {
		return
	}
	fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="%.1f" stroke-opacity="%.2f" stroke-linejoin="round" points="`, color, width, opacity)
	for j, v := range vals {
		if j > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(b, "%.1f,%.1f", x(float64(j)+0.5), y(v))
	}
	b.WriteString(`"/>` + "\n")
}

// movingAverage returns the centred moving average of vals over w points,
// the window clipped at both ends.
func movingAverage(vals []float64, w int) []float64 {
	out := make([]float64, len(vals))
	h := w / 2
	for i := range vals {
		lo, hi := max(0, i-h), min(len(vals)-1, i+h)
		sum := 0.0
		for _, v := range vals[lo : hi+1] {
			sum += v
		}
		out[i] = sum / float64(hi-lo+1)
	}
	return out
}

// niceStep returns 1, 2 or 5 times a power of ten, at least raw.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return math.Max(m*p, 1)
		}
	}
	return 10 * p
}

// SI formats v with a k or M suffix (1500 → 1.5k).
func SI(v float64) string {
	f := func(x float64, suffix string) string {
		return strconv.FormatFloat(x, 'f', -1, 64) + suffix
	}
	switch a := math.Abs(v); {
	case a >= 1e6:
		return f(math.Round(v/1e6*10)/10, "M")
	case a >= 1e3:
		return f(math.Round(v/1e3*10)/10, "k")
	}
	return f(math.Round(v*10)/10, "")
}
