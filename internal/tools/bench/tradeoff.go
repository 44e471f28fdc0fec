package bench

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// TradeoffPoint is one policy setting placed by what it costs (requests
// per user, the enter included) and what it gives (the p99 notify delay).
type TradeoffPoint struct {
	// Label names the setting ("fraction=0.6", "tiers").
	Label string
	// RequestsPerUser and PollsPerUser are Result's.
	RequestsPerUser float64
	PollsPerUser    float64
	// P99Ms is the p99 notify delay, ms.
	P99Ms float64
	// Curve is true for the points of the swept parameter, joined by a
	// line; false for the reference policies, drawn apart.
	Curve bool
	// Marked highlights a point (the chosen setting).
	Marked bool
}

// PointOf places a result on the trade-off.
func PointOf(label string, r Result, curve bool) TradeoffPoint {
	return TradeoffPoint{Label: label, RequestsPerUser: r.RequestsPerUser, PollsPerUser: r.PollsPerUser, P99Ms: r.NotifyDelayMs.P99, Curve: curve}
}

// Tradeoff draws requests per user against the p99 notify delay as a
// self-contained SVG: the swept settings as a labelled curve, the
// reference policies as squares, optional goal lines.
type Tradeoff struct {
	Title  string
	Points []TradeoffPoint
	// GoalRequests and GoalP99Ms draw dashed goal lines when positive.
	GoalRequests float64
	GoalP99Ms    float64
}

// SVG renders the chart. The delay axis is logarithmic from 0.1 s, since
// the policies span 0.2 s to tens of seconds.
func (c Tradeoff) SVG() []byte {
	const width, height = 960.0, 520.0
	pl := newTradeoffPlot(c, width, height)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="Helvetica, Arial, sans-serif" font-size="13">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="26" font-size="%.1f" font-weight="bold">%s</text>`+"\n", pl.left, titleSize(c.Title, pl.plotW), html.EscapeString(c.Title))
	fmt.Fprintf(&b, `<text x="%.0f" y="46" fill="#444">lower left is better; the delay axis is logarithmic (values under 0.1 s drawn at 0.1 s)</text>`+"\n", pl.left)
	pl.writeAxes(&b, height)
	pl.writeGoals(&b, c)
	var curve []string
	for _, p := range c.Points {
		if p.Curve {
			curve = append(curve, fmt.Sprintf("%.1f,%.1f", pl.x(p.RequestsPerUser), pl.y(p.P99Ms)))
		}
	}
	if len(curve) > 1 {
		fmt.Fprintf(&b, `<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="%s"/>`+"\n", strings.Join(curve, " "))
	}
	pl.writeLabels(&b, c.Points)
	for _, p := range c.Points {
		px, py := pl.x(p.RequestsPerUser), pl.y(p.P99Ms)
		switch {
		case !p.Curve:
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="10" height="10" fill="#d62728"/>`+"\n", px-5, py-5)
		case p.Marked:
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="7" fill="#ff7f0e"/>`+"\n", px, py)
		default:
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="#1f77b4"/>`+"\n", px, py)
		}
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// tradeoffPlot is the plotting area of a Tradeoff chart and its scales:
// requests per user on x from 0 to xtop, log10 of the delay in ms on y
// from ylo to yhi.
type tradeoffPlot struct {
	left, top, plotW, plotH float64
	xtop, xstep, ylo, yhi   float64
}

// newTradeoffPlot sizes the plot of a width × height chart so that every
// point and goal of c fits.
func newTradeoffPlot(c Tradeoff, width, height float64) tradeoffPlot {
	const left, right, top, bottom = 78.0, 24.0, 62.0, 56.0
	xmax, ymax := 1.0, 1000.0
	for _, p := range c.Points {
		xmax = math.Max(xmax, p.RequestsPerUser)
		ymax = math.Max(ymax, p.P99Ms)
	}
	xmax = math.Max(xmax, c.GoalRequests)
	xstep := niceStep(xmax / 8)
	return tradeoffPlot{
		left: left, top: top, plotW: width - left - right, plotH: height - top - bottom,
		xtop: math.Ceil(xmax*1.05/xstep) * xstep, xstep: xstep,
		ylo: math.Log10(100), yhi: math.Ceil(math.Log10(ymax * 1.2)),
	}
}

// x returns the horizontal position of v requests per user.
func (pl tradeoffPlot) x(v float64) float64 { return pl.left + v/pl.xtop*pl.plotW }

// y returns the vertical position of a delay of ms, clamped up to 100 ms.
func (pl tradeoffPlot) y(ms float64) float64 {
	l := math.Log10(math.Max(ms, 100))
	return pl.top + pl.plotH - (l-pl.ylo)/(pl.yhi-pl.ylo)*pl.plotH
}

// writeAxes writes the grid, the ticks, the frame and the axis titles.
func (pl tradeoffPlot) writeAxes(b *strings.Builder, height float64) {
	for e := pl.ylo; e <= pl.yhi+1e-9; e++ {
		for _, m := range []float64{1, 2, 5} {
			ms := m * math.Pow(10, e)
			if math.Log10(ms) > pl.yhi+1e-9 {
				break
			}
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e5e5e5"/>`+"\n", pl.left, pl.y(ms), pl.left+pl.plotW, pl.y(ms))
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#444">%s s</text>`+"\n", pl.left-8, pl.y(ms)+4, strconv.FormatFloat(ms/1000, 'g', -1, 64))
		}
	}
	for v := 0.0; v <= pl.xtop+pl.xstep/2; v += pl.xstep {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#f0f0f0"/>`+"\n", pl.x(v), pl.top, pl.x(v), pl.top+pl.plotH)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#444">%s</text>`+"\n", pl.x(v), pl.top+pl.plotH+18, SI(v))
	}
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", pl.left, pl.top, pl.plotW, pl.plotH)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#222">requests per user (enter + polls)</text>`+"\n", pl.left+pl.plotW/2, height-14)
	fmt.Fprintf(b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle" fill="#222">p99 notify delay</text>`+"\n", pl.top+pl.plotH/2)
}

// writeGoals writes c's goal lines, those that are positive.
func (pl tradeoffPlot) writeGoals(b *strings.Builder, c Tradeoff) {
	if c.GoalP99Ms > 0 {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#2ca02c" stroke-dasharray="6 4"/>`+"\n", pl.left, pl.y(c.GoalP99Ms), pl.left+pl.plotW, pl.y(c.GoalP99Ms))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#2ca02c">goal: p99 ≤ %s s</text>`+"\n", pl.left+pl.plotW-4, pl.y(c.GoalP99Ms)-5, strconv.FormatFloat(c.GoalP99Ms/1000, 'g', -1, 64))
	}
	if c.GoalRequests > 0 {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#2ca02c" stroke-dasharray="6 4"/>`+"\n", pl.x(c.GoalRequests), pl.top, pl.x(c.GoalRequests), pl.top+pl.plotH)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#2ca02c">≤ %s per user</text>`+"\n", pl.x(c.GoalRequests)+4, pl.top+14, strconv.FormatFloat(c.GoalRequests, 'g', -1, 64))
	}
}

// labelBox is the area a label or a point's marker covers.
type labelBox struct{ x0, y0, x1, y1 float64 }

// writeLabels writes the points' labels, the marked point's first, each at
// the first place around its point inside the plot that overlaps no marker
// or earlier label; a label with no such place is left out.
func (pl tradeoffPlot) writeLabels(b *strings.Builder, points []TradeoffPoint) {
	var taken []labelBox
	overlaps := func(a labelBox) bool {
		if a.x0 < pl.left || a.x1 > pl.left+pl.plotW || a.y0 < pl.top || a.y1 > pl.top+pl.plotH {
			return true
		}
		for _, t := range taken {
			if a.x0 < t.x1 && t.x0 < a.x1 && a.y0 < t.y1 && t.y0 < a.y1 {
				return true
			}
		}
		return false
	}
	for _, p := range points {
		px, py := pl.x(p.RequestsPerUser), pl.y(p.P99Ms)
		taken = append(taken, labelBox{px - 6, py - 6, px + 6, py + 6})
	}
	order := make([]int, 0, len(points))
	for i, p := range points {
		if p.Marked {
			order = append([]int{i}, order...)
		} else {
			order = append(order, i)
		}
	}
	for _, i := range order {
		p := points[i]
		px, py := pl.x(p.RequestsPerUser), pl.y(p.P99Ms)
		color := "#1f77b4"
		switch {
		case !p.Curve:
			color = "#d62728"
		case p.Marked:
			color = "#ff7f0e"
		}
		label := p.Label
		if p.Marked {
			label += " (chosen)"
		}
		w := 6.6 * float64(len([]rune(label)))
		for _, at := range [][2]float64{{10, 4}, {-10 - w, 4}, {-w / 2, -12}, {-w / 2, 20}, {10, -10}, {10, 18}, {-10 - w, -10}, {-10 - w, 18}} {
			bx := labelBox{px + at[0], py + at[1] - 11, px + at[0] + w, py + at[1] + 3}
			if overlaps(bx) {
				continue
			}
			taken = append(taken, bx)
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="12" fill="%s">%s</text>`+"\n", bx.x0, py+at[1], color, html.EscapeString(label))
			break
		}
	}
}

// TradeoffTable returns the points as a Markdown table.
func TradeoffTable(points []TradeoffPoint) string {
	var b strings.Builder
	b.WriteString("| setting | polls per user (GETs) | requests per user (enter + GETs) | notify p99 |\n|---|--:|--:|--:|\n")
	for _, p := range points {
		label := p.Label
		if p.Marked {
			label = "**" + label + "** (chosen)"
		}
		fmt.Fprintf(&b, "| %s | %.2f | %.2f | %.2f s |\n", label, p.PollsPerUser, p.RequestsPerUser, p.P99Ms/1000)
	}
	return b.String()
}
