package report

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strings"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/units"
)

// incidentText is the one line that says how an incident's counter moved:
// "linklocal_allowance_exceeded +374 in 41 jumps over 3.4 s (95/s)", how
// many incidents of one flow it folds, its peak sub-window and the counter
// lag its culprits were looked for with.
func incidentText(inc *analyzer.Incident) string {
	jumps := "1 jump"
	if inc.Jumps != 1 {
		jumps = fmtCount(inc.Jumps) + " jumps"
	}
	if inc.Recurrences > 1 {
		jumps += fmt.Sprintf(" (%d incidents of one flow)", inc.Recurrences)
	}
	peak := fmtEvidence(analyzer.Evidence{Value: inc.Peak.Rate, Unit: inc.Peak.Unit})
	return fmt.Sprintf("%s +%s in %s over %s (%s); peak %s over %s from %s; %s",
		inc.Counter, fmtCount(inc.Delta), jumps, fmtSeconds(inc.DurationS), units.EventRate(inc.DropRate, "/s"),
		peak, fmtSeconds(inc.Peak.WindowS), fmtOffset(inc.Peak.OffsetS), timingText(inc))
}

// timingText is what the run showed of the counter's timing: "refreshed
// every 1.0 s, counter lag 250 ms (240 ms to 260 ms, estimated), looked
// back 1.3 s".
func timingText(inc *analyzer.Incident) string {
	refresh := "refreshed at every read"
	switch {
	case !inc.CounterRefreshKnown:
		refresh = "refresh unknown"
	case inc.CounterRefreshS > 0:
		refresh = "refreshed at most every " + fmtSeconds(inc.CounterRefreshS)
	}
	source := strings.ReplaceAll(inc.CounterLagSource, "_", " ")
	lag := fmt.Sprintf("counter lag %s (%s)", fmtSeconds(inc.CounterLagS), source)
	switch {
	case inc.CounterLagBounded:
		lag = fmt.Sprintf("counter lag %s to %s (%s, no closer)", fmtSeconds(inc.CounterLagLowS), fmtSeconds(inc.CounterLagHighS), source)
	case inc.CounterLagHighS > inc.CounterLagLowS:
		lag = fmt.Sprintf("counter lag %s (%s to %s, %s)", fmtSeconds(inc.CounterLagS), fmtSeconds(inc.CounterLagLowS),
			fmtSeconds(inc.CounterLagHighS), source)
	}
	learned := ""
	if l := inc.LearnedAllowance; l != nil {
		rate := units.PacketRate
		if l.Unit == "bps" {
			rate = units.BitRate
		}
		learned = fmt.Sprintf("; drops began above about %s (%s to %s), learned from the run", rate(l.Value), rate(l.Low), rate(l.High))
	}
	return fmt.Sprintf("%s, %s, looked back %s%s", refresh, lag, fmtSeconds(inc.LookBackS), learned)
}

// gaugeText is a gauge's course as "150 at +2.000 s, 0 at +2.501 s".
func gaugeText(points []analyzer.GaugePoint) string {
	parts := make([]string, 0, len(points))
	for _, p := range points {
		parts = append(parts, fmt.Sprintf("%s at %s", fmtCount(p.Value), fmtOffset(p.OffsetS)))
	}
	return "conntrack_allowance_available " + strings.Join(parts, ", ")
}

// jumpStrip draws an incident's counter jumps on the time axis [x0, x1]
// of the finding's zoom chart: one bar per read that saw the counter rise,
// its height the rise (against the largest), so a steady overshoot shows
// as a comb and two bursts as two bars.
func jumpStrip(f analyzer.Finding, x0, x1 float64) template.HTML {
	inc := f.Incident
	if inc == nil || len(inc.Timeline) == 0 || x1 <= x0 {
		return ""
	}
	const height, top = 46, 6
	xAt := func(s float64) float64 { return clampX(marginLeft + (s-x0)/(x1-x0)*plotWidth) }
	var most uint64
	for _, j := range inc.Timeline {
		most = max(most, j.Delta)
	}
	label := fmt.Sprintf("%s: %d jumps", inc.Counter, inc.Jumps)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="strip" viewBox="0 0 %d %d" role="img" aria-label="%s">`, chartWidth, height, html.EscapeString(label))
	fmt.Fprintf(&b, `<rect class="plot" x="%d" y="%d" width="%d" height="%d"/>`, marginLeft, top, plotWidth, height-top-2)
	fmt.Fprintf(&b, `<text x="%d" y="%d">jumps</text>`, marginLeft-6, height/2+4)
	for _, j := range inc.Timeline {
		h := math.Max(float64(height-top-4)*float64(j.Delta)/float64(max(most, 1)), 2)
		x := xAt(j.OffsetS)
		rise := "+" + fmtCount(j.Delta)
		if j.Of > 0 {
			// A rise shared with other incidents: this one's share.
			rise += " of +" + fmtCount(j.Of)
		}
		fmt.Fprintf(&b, `<g class="jump"><title>%s: %s at %s</title><rect x="%.1f" y="%.1f" width="2" height="%.1f"/></g>`,
			html.EscapeString(inc.Counter), rise, fmtOffset(j.OffsetS), x-1, float64(height-2)-h, h)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// victimsLine names the flows whose packets came behind an incident's
// culprits: "udp 10.0.0.10:40100 -> 10.0.1.30:443 (12 packets), behind
// the culprits while the queue drained for 30 ms".
func victimsLine(f analyzer.Finding) string {
	parts := make([]string, 0, len(f.Victims))
	for _, v := range f.Victims {
		parts = append(parts, fmt.Sprintf("%s %s -> %s (%s packets)", v.Proto, v.Src, v.Dst, fmtCount(v.Packets)))
	}
	drain := 0.0
	if f.Incident != nil {
		drain = f.Incident.DrainS
	}
	return strings.Join(parts, ", ") + fmt.Sprintf("; behind the culprits while the queue drained for %s", fmtSeconds(drain))
}
