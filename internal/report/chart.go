package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"html"
	"html/template"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Geometry of a line chart, in SVG user units (the SVG scales to the page
// width; PlotWidth is also the number of columns data is reduced to).
const (
	chartWidth   = 960
	chartHeight  = 270
	marginLeft   = 78
	marginRight  = 14
	marginTop    = 30
	marginBottom = 44
	plotWidth    = chartWidth - marginLeft - marginRight
	plotHeight   = chartHeight - marginTop - marginBottom
)

// chartSeries is one line of a chart: a value per column.
type chartSeries struct {
	Name   string
	Class  string // CSS class giving the colour: ingress, egress, total, imds, dns, ntp, all
	Values []float64
	NoArea bool // a line only: a sum drawn over its parts
}

// chartSpan is a stretch of the x axis: a counter jump (the sample interval
// it happened in), or a finding's window.
type chartSpan struct {
	From, To float64 // seconds since the trace start
	Label    string  // short, drawn
	Title    string  // long, shown on hover
	Class    string
}

// chartLimit is a horizontal dashed line: an allowance.
type chartLimit struct {
	Y      float64
	Label  string
	Always bool // drawn even when it flattens the data
}

// lineChart is a time chart whose columns cover [X0, X1) evenly.
type lineChart struct {
	X0, X1  float64 // seconds since the trace start
	Unit    string  // "bps", "pps" or "/s": how values are formatted
	Series  []chartSeries
	Markers []chartSpan // counter jumps: bands with a label on top
	Windows []chartSpan // finding windows: shaded, labelled under the axis
	Limits  []chartLimit
}

// limitScale: a limit is drawn when it is at most this many times the
// highest value, so the data keeps most of the chart's height.
const limitScale = 4

// splitLimits separates the limits drawn from those left out because they
// would flatten the data (a 10 Gbit/s burst allowance over 50 Mbit/s).
func (c *lineChart) splitLimits() (drawn, off []chartLimit) {
	dmax := c.dataMax()
	for _, l := range c.Limits {
		if l.Always || l.Y > 0 && (dmax == 0 || l.Y <= limitScale*dmax) {
			drawn = append(drawn, l)
		} else {
			off = append(off, l)
		}
	}
	return drawn, off
}

func (c *lineChart) columns() int {
	if len(c.Series) == 0 {
		return 0
	}
	return len(c.Series[0].Values)
}

func (c *lineChart) dataMax() float64 {
	m := 0.0
	for _, s := range c.Series {
		for _, v := range s.Values {
			m = math.Max(m, v)
		}
	}
	return m
}

// svg renders the chart. Every series is a <path class="data ..."> with a
// step line (a column is a constant rate over its width); the series'
// values also go into data-series for the hover read-out.
func (c *lineChart) svg(label string) template.HTML {
	ymax := c.dataMax()
	limits, _ := c.splitLimits()
	for _, l := range limits {
		ymax = math.Max(ymax, l.Y)
	}
	ticks, top := niceTicks(ymax)
	n := c.columns()
	xOf := func(i int) float64 { return marginLeft + float64(i)*plotWidth/float64(max(n, 1)) }
	xAt := func(s float64) float64 {
		span := c.X1 - c.X0
		if span <= 0 {
			return marginLeft
		}
		return marginLeft + (s-c.X0)/span*plotWidth
	}
	yOf := func(v float64) float64 { return marginTop + plotHeight - v/top*plotHeight }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s"`, chartWidth, chartHeight, html.EscapeString(label))
	fmt.Fprintf(&b, ` data-series="%s">`, html.EscapeString(c.hoverData()))
	fmt.Fprintf(&b, `<rect class="plot" x="%d" y="%d" width="%d" height="%d"/>`, marginLeft, marginTop, plotWidth, plotHeight)

	// Finding windows, shaded behind everything.
	var centers []float64
	for _, w := range c.Windows {
		x0, x1 := clampX(xAt(w.From)), clampX(xAt(w.To))
		fmt.Fprintf(&b, `<g class="window %s"><title>%s</title><rect x="%.1f" y="%d" width="%.1f" height="%d"/></g>`,
			w.Class, html.EscapeString(w.Title), x0, marginTop, math.Max(x1-x0, 2), plotHeight)
		centers = append(centers, (x0+x1)/2)
	}
	// Their labels under the axis, side by side: windows too close for
	// their own labels share one ("#3, #4, #5").
	for _, l := range clusterLabels(c.Windows, centers) {
		fmt.Fprintf(&b, `<g class="window %s"><title>%s</title><text x="%.1f" y="%d">%s</text></g>`,
			l.class, html.EscapeString(l.title), l.x, chartHeight-4, html.EscapeString(l.text))
	}
	// Grid and y axis.
	for _, t := range ticks {
		y := yOf(t)
		fmt.Fprintf(&b, `<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`, marginLeft, marginLeft+plotWidth, y, y)
		fmt.Fprintf(&b, `<text class="ytick" x="%d" y="%.1f">%s</text>`, marginLeft-6, y+4, html.EscapeString(fmtUnit(t, c.Unit)))
	}
	// x axis.
	for _, t := range timeTicks(c.X0, c.X1) {
		x := xAt(t.at)
		fmt.Fprintf(&b, `<line class="xtick" x1="%.1f" x2="%.1f" y1="%d" y2="%d"/>`, x, x, marginTop+plotHeight, marginTop+plotHeight+4)
		// Centred under its tick, but inside the chart at either end.
		half := svgTextWidth(t.label) / 2
		lx := math.Min(math.Max(x, half+1), chartWidth-half-1)
		fmt.Fprintf(&b, `<text class="xtick" x="%.1f" y="%d">%s</text>`, lx, marginTop+plotHeight+xTickBaseline, t.label)
	}
	// Counter jumps: a band over the sample interval, labelled on top.
	// Their labels go on the first of three rows with room; a label with no
	// room left is not drawn (the band and its hover title stay).
	var rowEnd [markerRows]float64
	for i := range rowEnd {
		rowEnd[i] = math.Inf(-1)
	}
	for _, m := range c.Markers {
		x0, x1 := clampX(xAt(m.From)), clampX(xAt(m.To))
		fmt.Fprintf(&b, `<g class="marker %s"><title>%s</title>`, m.Class, html.EscapeString(m.Title))
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d"/>`, x0, marginTop, math.Max(x1-x0, 1.5), plotHeight)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d"/>`, x1, x1, marginTop, marginTop+plotHeight)
		right := math.Max(x1-3, marginLeft+svgTextWidth(m.Label))
		for row := range rowEnd {
			if right-svgTextWidth(m.Label) > rowEnd[row]+labelGap {
				fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s</text>`, right, marginTop+12+markerRowStep*row, html.EscapeString(m.Label))
				rowEnd[row] = right
				break
			}
		}
		b.WriteString(`</g>`)
	}
	// Data.
	for _, s := range c.Series {
		line, area := stepPaths(s.Values, xOf, yOf)
		if !s.NoArea {
			fmt.Fprintf(&b, `<path class="area %s" d="%s"/>`, s.Class, area)
		}
		fmt.Fprintf(&b, `<path class="data %s" d="%s"><title>%s</title></path>`, s.Class, line, html.EscapeString(s.Name))
	}
	// Limits over the data.
	// A label close above another goes to the right end of its line.
	var leftLabels []float64
	for _, l := range limits {
		y := yOf(l.Y)
		fmt.Fprintf(&b, `<g class="limit"><line x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`, marginLeft, marginLeft+plotWidth, y, y)
		crowded := false
		for _, o := range leftLabels {
			crowded = crowded || math.Abs(o-y) < labelHeight
		}
		if crowded {
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text></g>`, marginLeft+plotWidth-6, y-4, html.EscapeString(l.Label))
			continue
		}
		leftLabels = append(leftLabels, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f">%s</text></g>`, marginLeft+6, y-4, html.EscapeString(l.Label))
	}
	// Legend.
	x := float64(marginLeft + plotWidth)
	for i := len(c.Series) - 1; i >= 0; i-- {
		s := c.Series[i]
		w := 7*float64(len(s.Name)) + 22
		x -= w
		fmt.Fprintf(&b, `<g class="legend %s"><rect x="%.1f" y="8" width="12" height="12"/><text x="%.1f" y="18">%s</text></g>`,
			s.Class, x, x+16, html.EscapeString(s.Name))
	}
	fmt.Fprintf(&b, `<line class="hover" x1="0" x2="0" y1="%d" y2="%d" visibility="hidden"/></svg>`, marginTop, marginTop+plotHeight)
	return template.HTML(b.String())
}

// Chart text sizes in SVG user units (11px text, style.css): an estimate
// of a label's width, its height, the gap kept between labels, and where
// the x tick labels sit below the plot (clear of the lowest y tick label).
const (
	charWidth     = 7.5
	labelHeight   = 13.0
	labelGap      = 8.0
	xTickBaseline = 19
	markerRows    = 3
	markerRowStep = 15
)

func svgTextWidth(s string) float64 { return charWidth * float64(len([]rune(s))) }

// axisLabel is one label under the axis, for one or several windows.
type axisLabel struct {
	x                  float64 // centre
	text, title, class string
}

// clusterLabels places window labels left to right: a label that would
// reach into the one before joins it, so labels never run together.
// Windows come in finding order, not time order: they are placed by where
// they are, so a finding earlier in time never joins a later one's label.
func clusterLabels(windows []chartSpan, centers []float64) []axisLabel {
	order := make([]int, len(windows))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(centers[a], centers[b]) })
	var out []axisLabel
	var left, right float64
	for _, i := range order {
		w := windows[i]
		half := svgTextWidth(w.Label) / 2
		if n := len(out); n > 0 && centers[i]-half < right+labelGap {
			l := &out[n-1]
			l.text += ", " + w.Label
			l.title += "\n" + w.Title
			right = left + svgTextWidth(l.text)
			l.x = (left + right) / 2
			continue
		}
		left = math.Max(centers[i]-half, 0)
		right = left + 2*half
		out = append(out, axisLabel{x: (left + right) / 2, text: w.Label, title: w.Title, class: w.Class})
	}
	// The last label stays inside the chart.
	if n := len(out); n > 0 && right > chartWidth {
		out[n-1].x -= right - chartWidth
	}
	return out
}

func clampX(x float64) float64 {
	return math.Min(math.Max(x, marginLeft), marginLeft+plotWidth)
}

// stepPaths returns the path of the step line through the columns and of
// the area under it. Runs of equal values become one horizontal segment.
func stepPaths(vals []float64, xOf func(int) float64, yOf func(float64) float64) (line, area string) {
	if len(vals) == 0 {
		return "", ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "M%s %s", num(xOf(0)), num(yOf(vals[0])))
	for i := 1; i < len(vals); i++ {
		if vals[i] == vals[i-1] {
			continue
		}
		fmt.Fprintf(&b, "H%sV%s", num(xOf(i)), num(yOf(vals[i])))
	}
	fmt.Fprintf(&b, "H%s", num(xOf(len(vals))))
	line = b.String()
	area = line + fmt.Sprintf("V%sH%sZ", num(yOf(0)), num(xOf(0)))
	return line, area
}

// num writes a coordinate with at most one decimal.
func num(v float64) string {
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
}

// hoverData is the JSON the page's script reads to show the values of the
// column under the pointer.
func (c *lineChart) hoverData() string {
	type series struct {
		Name   string    `json:"name"`
		Values []float64 `json:"values"`
	}
	d := struct {
		X0     float64  `json:"x0"`
		X1     float64  `json:"x1"`
		Left   int      `json:"left"`
		Width  int      `json:"width"`
		Unit   string   `json:"unit"`
		Series []series `json:"series"`
	}{X0: c.X0, X1: c.X1, Left: marginLeft, Width: plotWidth, Unit: c.Unit}
	for _, s := range c.Series {
		vals := make([]float64, len(s.Values))
		for i, v := range s.Values {
			vals[i] = roundSig(v, 4)
		}
		d.Series = append(d.Series, series{s.Name, vals})
	}
	out, _ := json.Marshal(d) // plain numbers and strings: cannot fail
	return string(out)
}

// roundSig rounds v to n significant digits, to keep the page small.
func roundSig(v float64, n int) float64 {
	if v == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0
	}
	p := math.Pow(10, float64(n)-math.Ceil(math.Log10(math.Abs(v))))
	return math.Round(v*p) / p
}

// fmtUnit formats a chart value in its unit.
func fmtUnit(v float64, unit string) string {
	switch unit {
	case "bps":
		return fmtBps(v)
	case "pps":
		return fmtPPS(v)
	case "%":
		return sig(v) + "%"
	}
	if v < 1e6 {
		return fmtCount(uint64(math.Round(v))) + " " + unit
	}
	return scaled(v, unit)
}

// niceTicks returns y-axis ticks from 0 at a 1-2-5 step, and the axis top.
func niceTicks(ymax float64) ([]float64, float64) {
	if ymax <= 0 {
		ymax = 1
	}
	step := niceStep(ymax / 5)
	top := math.Ceil(ymax*1.0001/step) * step
	var ticks []float64
	for v := 0.0; v <= top+step/2; v += step {
		ticks = append(ticks, v)
	}
	return ticks, top
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

type timeTick struct {
	at    float64
	label string
}

// timeTicks labels the x axis in seconds since the trace start, with as
// many decimals as the step needs.
func timeTicks(x0, x1 float64) []timeTick {
	if x1 <= x0 {
		return nil
	}
	step := niceStep((x1 - x0) / 8)
	dec := max(0, int(-math.Floor(math.Log10(step)+1e-9)))
	var out []timeTick
	for t := math.Ceil(x0/step) * step; t <= x1+step*1e-6; t += step {
		// A tick within rounding of zero is zero ("+0 s", not "+-0 s").
		if math.Abs(t) < step*1e-6 {
			t = 0
		}
		sign := "+"
		if t < 0 {
			sign = "-"
		}
		out = append(out, timeTick{t, sign + strconv.FormatFloat(math.Abs(t), 'f', dec, 64) + " s"})
	}
	return out
}

// barGroup is one class of a bar chart with a value per series.
type barGroup struct {
	Label  string
	Values []float64
	Titles []string
}

// barChart renders grouped vertical bars (packet-size mix): each bar is a
// <path class="data ..."> with a title.
func barChart(label, unit string, names, classes []string, groups []barGroup) template.HTML {
	ymax := 0.0
	for _, g := range groups {
		for _, v := range g.Values {
			ymax = math.Max(ymax, v)
		}
	}
	ticks, top := niceTicks(ymax)
	yOf := func(v float64) float64 { return marginTop + plotHeight - v/top*plotHeight }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart bars" viewBox="0 0 %d %d" role="img" aria-label="%s">`, chartWidth, chartHeight, html.EscapeString(label))
	fmt.Fprintf(&b, `<rect class="plot" x="%d" y="%d" width="%d" height="%d"/>`, marginLeft, marginTop, plotWidth, plotHeight)
	for _, t := range ticks {
		y := yOf(t)
		fmt.Fprintf(&b, `<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`, marginLeft, marginLeft+plotWidth, y, y)
		fmt.Fprintf(&b, `<text class="ytick" x="%d" y="%.1f">%s</text>`, marginLeft-6, y+4, html.EscapeString(fmtUnit(t, unit)))
	}
	gw := float64(plotWidth) / float64(max(len(groups), 1))
	bw := gw * 0.8 / float64(max(len(names), 1))
	for gi, g := range groups {
		gx := marginLeft + float64(gi)*gw + gw*0.1
		for si, v := range g.Values {
			x, y := gx+float64(si)*bw, yOf(v)
			h := marginTop + plotHeight - y
			fmt.Fprintf(&b, `<path class="data %s" d="M%s %sh%sv%sh-%sZ"><title>%s</title></path>`, classes[si],
				num(x), num(y), num(bw-2), num(h), num(bw-2), html.EscapeString(g.Titles[si]))
		}
		fmt.Fprintf(&b, `<text class="xtick" x="%.1f" y="%d">%s</text>`, marginLeft+float64(gi)*gw+gw/2,
			marginTop+plotHeight+16, html.EscapeString(g.Label))
	}
	x := float64(marginLeft + plotWidth)
	for i := len(names) - 1; i >= 0; i-- {
		x -= 7*float64(len(names[i])) + 22
		fmt.Fprintf(&b, `<g class="legend %s"><rect x="%.1f" y="8" width="12" height="12"/><text x="%.1f" y="18">%s</text></g>`,
			classes[i], x, x+16, html.EscapeString(names[i]))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
