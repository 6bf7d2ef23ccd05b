package report

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strings"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/record"
)

// impactVictimsTable lays out who paid for an incident: each victim flow,
// its owner, what it sent again (and what needlessly: D-SACKed), its srtt
// before and during, how long its
// ACKs were held back (the longest wait in the span, usually; stalled
// for a timeout's silence past its segments' wait), and how
// much longer than usual its slowest segment waited for its answer (the
// echoed TCP timestamps).
func impactVictimsTable(im *analyzer.Impact) *table {
	t := newTable("FLOW", "OWNER", "RETRANSMITTED", "SRTT BEFORE", "SRTT DURING", "ACK WAIT", "SEGMENT WAIT").rightAlign(2, 3, 4, 5, 6)
	for _, v := range im.Victims {
		owner := v.Owner
		if owner == "" {
			owner = "-"
		}
		wait := fmtSRTT(v.AckWaitDuringUs)
		if v.AckWaitDuringUs > 0 && v.AckWaitBeforeUs > 0 {
			wait += " (usually " + fmtSRTT(v.AckWaitBeforeUs) + ")"
		}
		if v.Stalled {
			wait += ", stalled"
		}
		seg := "-"
		if v.SegmentWaitUs > 0 {
			seg = "+" + fmtSRTT(v.SegmentWaitUs)
		}
		retrans := fmtCount(v.Retransmitted)
		if v.Spurious > 0 {
			retrans += " (+" + fmtCount(v.Spurious) + " needless)"
		}
		t.add(v.Flow+" ("+v.Direction+")", owner, retrans, fmtSRTT(v.SRTTBeforeUs), fmtSRTT(v.SRTTDuringUs), wait, seg)
	}
	return t
}

// impactVictimsHead says how many victims the table shows.
func impactVictimsHead(im *analyzer.Impact) string {
	if im.VictimsTotal > len(im.Victims) {
		return fmt.Sprintf("%d flows paid, the %d that lost the most:", im.VictimsTotal, len(im.Victims))
	}
	if im.VictimsTotal == 1 {
		return "1 flow paid:"
	}
	return fmt.Sprintf("%d flows paid:", im.VictimsTotal)
}

// fmtSRTT writes an srtt in microseconds, "-" when there is none.
func fmtSRTT(us float64) string {
	if us <= 0 {
		return "-"
	}
	return fmtSeconds(us / 1e6)
}

// textImpact writes a finding's impact: the verdict line, then the
// victims table.
func textImpact(p *page, ind string, lw int, im *analyzer.Impact) {
	if im == nil {
		return
	}
	p.field(ind, "Impact", lw, im.Summary)
	if len(im.Victims) == 0 {
		return
	}
	p.field(ind, "", lw, impactVictimsHead(im))
	p.lines(impactVictimsTable(im).renderFitting(ind + "  "))
}

// impactHTMLTable is the victims table of the HTML page.
func impactHTMLTable(im *analyzer.Impact) htmlTable {
	t := impactVictimsTable(im)
	return htmlTable{Header: t.rows[0], Rows: t.rows[1:], NumFrom: 2}
}

// impactStripBins is how many bars the retransmission row of the strip
// has across the zoom.
const impactStripBins = 120

// impactStrip draws, on the time axis [x0, x1] (offsets in seconds) of
// a finding's zoom chart, the segments sent again on its interface (egress
// above the axis, ingress below, summed into bins) and the srtt of its
// victims with a local socket (each snapshot interval's highest, one step
// line per victim): where TCP lost, and where it waited.
func impactStrip(rec *record.Recording, f analyzer.Finding, x0, x1 float64) template.HTML {
	im := f.Impact
	if rec == nil || im == nil || !rec.Meta.Impact || x1 <= x0 {
		return ""
	}
	start := rec.Meta.Start.MonoNs
	atNs := func(s float64) int64 { return start + int64(s*1e9) }
	from, to := atNs(x0), atNs(x1)
	binNs := max((to-from)/impactStripBins, 1)
	var bins [record.NumDirections][impactStripBins]uint64
	var most uint64
	for _, s := range rec.Series {
		if s.Interface != f.Interface {
			continue
		}
		for _, b := range s.Buckets {
			if b.Retrans == 0 || b.StartNs < from || b.StartNs >= to {
				continue
			}
			i := min(int((b.StartNs-from)/binNs), impactStripBins-1)
			bins[s.Direction][i] += b.Retrans
			most = max(most, bins[s.Direction][i])
		}
	}
	victims := map[string]bool{}
	for _, v := range im.Victims {
		if v.SRTTDuringUs > 0 {
			victims[v.Flow] = true
		}
	}
	type step struct {
		fromNs, toNs int64
		us           float64
	}
	lines := map[string][]step{}
	var topUs float64
	last := map[string]int64{}
	for _, s := range rec.Flows {
		name := s.Key.String()
		if s.Interface != f.Interface || !victims[name] {
			continue
		}
		prev, ok := last[name]
		last[name] = s.TimeNs
		if !ok || s.SRTTMaxUs == 0 || s.TimeNs <= from || prev >= to {
			continue
		}
		lines[name] = append(lines[name], step{max(prev, from), min(s.TimeNs, to), float64(s.SRTTMaxUs)})
		topUs = max(topUs, float64(s.SRTTMaxUs))
	}
	if most == 0 && len(lines) == 0 {
		return ""
	}
	const rowH, gap = 40, 8
	height := 2*rowH + gap + 4
	xAt := func(ns int64) float64 {
		return clampX(marginLeft + float64(ns-from)/float64(to-from)*plotWidth)
	}
	var b strings.Builder
	label := fmt.Sprintf("impact: %s, TCP segments sent again and victims' srtt", im.Verdict)
	fmt.Fprintf(&b, `<svg class="strip impact" viewBox="0 0 %d %d" role="img" aria-label="%s">`, chartWidth, height, html.EscapeString(label))
	// Row 1: retransmissions, egress up from the middle, ingress down.
	mid := float64(rowH)/2 + 2
	fmt.Fprintf(&b, `<rect class="plot" x="%d" y="2" width="%d" height="%d"/>`, marginLeft, plotWidth, rowH)
	fmt.Fprintf(&b, `<text x="%d" y="%.0f">resent</text>`, marginLeft-6, mid+4)
	for d := range bins {
		for i, n := range bins[d] {
			if n == 0 {
				continue
			}
			h := math.Max((float64(rowH)/2-2)*float64(n)/float64(most), 1.5)
			y := mid - h
			if record.Direction(d) == record.Ingress {
				y = mid
			}
			x := xAt(from + int64(i)*binNs)
			w := math.Max(xAt(from+int64(i+1)*binNs)-x, 1.5)
			fmt.Fprintf(&b, `<g class="resent-%s"><title>%s segments sent again %s at %s</title><rect x="%.1f" y="%.1f" width="%.1f" height="%.1f"/></g>`,
				record.Direction(d), fmtCount(n), record.Direction(d), fmtOffset(x0+float64(int64(i)*binNs)/1e9), x, y, w, h)
		}
	}
	// Row 2: srtt, from 0 to the highest.
	top := float64(rowH + gap + 2)
	fmt.Fprintf(&b, `<rect class="plot" x="%d" y="%.0f" width="%d" height="%d"/>`, marginLeft, top, plotWidth, rowH)
	fmt.Fprintf(&b, `<text x="%d" y="%.0f">srtt</text>`, marginLeft-6, top+float64(rowH)/2+4)
	if topUs > 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%.0f">%s</text>`, marginLeft-6, top+10, html.EscapeString(fmtSRTT(topUs)))
	}
	for name, steps := range lines {
		var pts []string
		for _, st := range steps {
			y := top + float64(rowH) - (float64(rowH)-4)*st.us/topUs
			pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", xAt(st.fromNs), y, xAt(st.toNs), y))
		}
		fmt.Fprintf(&b, `<g class="srtt"><title>%s</title><polyline points="%s"/></g>`, html.EscapeString(name), strings.Join(pts, " "))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
