package report

import (
	"fmt"
	"html/template"
	"math"
	"strings"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/record"
)

// figure is a chart with its title and the caption that says how to read it.
type figure struct {
	Title   string
	SVG     template.HTML
	Caption string
	// X0 and X1 are the time axis of a zoom, as offsets, for what is
	// drawn under it.
	X0, X1 float64
}

func (w window) endNs() int64 { return w.fromNs + w.slots()*w.slotNs }

func (tl *timeline) chartFor(w window, unit string) *lineChart {
	return &lineChart{X0: tl.seconds(w.fromNs), X1: tl.seconds(w.endNs()), Unit: unit}
}

// interfaceFigures are the whole-trace throughput and packet-rate charts of
// one interface at bucket resolution, with counter jumps and findings.
func (tl *timeline) interfaceFigures(iface string) []figure {
	w := tl.window(tl.startNs, tl.endNs, tl.bucketNs())
	markers := tl.markers(iface, counters.AllowanceExceeded, w.fromNs, w.endNs())
	var notes []string
	jumps, other := 0, 0
	for _, m := range markers {
		if m.Class == "jump" {
			jumps++
		} else {
			other++
		}
	}
	switch {
	case !tl.isENA(iface):
		notes = append(notes, iface+" has no ENA allowance counters: packet profile only.")
	case jumps == 0:
		notes = append(notes, "No allowance counter rose on "+iface+".")
	default:
		notes = append(notes, "Red bands are the counter sample intervals in which an allowance counter rose "+
			"(labelled with the counter and its increase): the jump happened somewhere inside the band.")
	}
	if other > 0 {
		notes = append(notes, "Grey: counter resets (over the interval they happened in) and failed reads.")
	}
	if wins := tl.findingWindows(iface); len(wins) > 0 {
		notes = append(notes, "#N under the axis marks finding N.")
	}

	var figs []figure
	for _, spec := range []struct {
		title string
		m     bucketMetric
	}{{"throughput (bits/s)", metricBits}, {"packet rate (packets/s)", metricPackets}} {
		c := tl.chartFor(w, spec.m.unit)
		c.Series = tl.directionSeries(iface, nil, w, spec.m)
		c.Markers = markers
		c.Windows = tl.findingWindows(iface)
		if spec.m.unit == "bps" && tl.isENA(iface) {
			c.Limits = tl.bandwidthLimits()
		}
		if len(c.Series) == 0 {
			continue
		}
		title := iface + " " + spec.title
		figs = append(figs, figure{Title: title, SVG: c.svg(title),
			Caption: w.resolutionText("Bucket series") + " " + strings.Join(notes, " ") + offScaleText(c)})
	}
	return figs
}

// zoomContext is how much of the trace a finding's zoom shows on each side
// of the finding: half its length, at least 10 ms, at most 5 s.
func zoomContext(durS float64) float64 { return math.Min(math.Max(durS/2, 0.01), 5) }

// zoom is the chart of one finding's window with some context, at bucket
// resolution (link-local findings: at the analyzer's short window, the
// resolution the 1024 pps limit is judged at).
func (tl *timeline) zoom(n int, f analyzer.Finding) (figure, bool) {
	ctx := zoomContext(f.EndOffsetS - f.StartOffsetS)
	x0, x1 := zoomRange(f)
	var dirs []record.Direction
	for _, d := range directions {
		if f.Direction == d.String() {
			dirs = []record.Direction{d}
		}
	}
	slot, metric, what := tl.bucketNs(), metricBits, "throughput"
	var limits []chartLimit
	switch f.Kind {
	case analyzer.KindPPSExceeded:
		metric, what = metricPackets, "packet rate"
	case analyzer.KindConntrackExceeded, analyzer.KindConntrackNearLimit:
		// A SYN per bucket is already 10,000/s at 100 µs: count them
		// per fine window, as the analyzer does.
		metric, what = metricSYNs, "new connections (TCP SYNs)"
		slot = tl.fineWindowNs()
	case analyzer.KindLinkLocalExceeded, analyzer.KindLinkLocalHot:
		metric, what = metricLinkLocal(-1), "link-local packet rate (DNS + IMDS + NTP)"
		slot = tl.linkLocalSlotNs()
		if l := tl.res.Trace.Limits.LinkLocalPPS; l.Known {
			limits = append(limits, chartLimit{Y: l.Value, Label: "limit " + fmtPPS(l.Value), Always: true})
		}
	case analyzer.KindIMDSHopLimit:
		metric, what = metricLinkLocal(record.ServiceIMDS.Index()), "IMDS packet rate"
		slot = tl.linkLocalSlotNs()
	case analyzer.KindFlowAtCap:
		if l := tl.res.Trace.Limits.FlowLimitBps; l.Known {
			limits = append(limits, chartLimit{Y: l.Value, Label: "per-flow limit " + fmtBps(l.Value)})
		}
	default:
		if tl.isENA(f.Interface) {
			limits = tl.bandwidthLimits()
		}
	}
	w := tl.window(tl.mono(x0), tl.mono(x1), slot)
	c := tl.chartFor(w, metric.unit)
	c.Limits = limits
	if f.Kind == analyzer.KindPPSExceeded {
		// The pps allowance counts both directions together.
		in, _ := tl.series(f.Interface, record.Ingress)
		out, _ := tl.series(f.Interface, record.Egress)
		c.Series = []chartSeries{{Name: "ingress + egress", Class: "total",
			Values: columns(sumBuckets(in.Buckets, out.Buckets), w.fromNs, w.toNs, w.slotNs, plotWidth, metric)}}
	} else {
		c.Series = tl.directionSeries(f.Interface, dirs, w, metric)
	}
	if len(c.Series) == 0 {
		return figure{}, false
	}
	c.Windows = []chartSpan{{From: f.StartOffsetS, To: f.EndOffsetS, Class: f.Severity,
		Label: fmt.Sprintf("#%d", n), Title: fmt.Sprintf("finding #%d: %s", n, f.Kind)}}

	// A counter interval that encloses most of the zoom would shade all of
	// it: say it in the caption instead.
	var enclosing []string
	for _, m := range tl.markers(f.Interface, findingCounters(f), w.fromNs, w.endNs()) {
		if m.To-m.From > 0.8*(c.X1-c.X0) {
			enclosing = append(enclosing, m.Title)
		} else {
			c.Markers = append(c.Markers, m)
		}
	}
	title := fmt.Sprintf("#%d %s: %s on %s", n, f.Kind, what, f.Interface)
	caption := w.resolutionText(strings.ToUpper(what[:1])+what[1:]) + fmt.Sprintf(
		" The finding (%s to %s) is shaded, with %s of context on each side.", fmtOffset(f.StartOffsetS),
		fmtOffset(f.EndOffsetS), fmtSeconds(ctx))
	if x1 > f.EndOffsetS+ctx {
		caption = strings.TrimSuffix(caption, " on each side.") + " before it, and after it up to the last read that saw the counter rise."
	}
	if len(enclosing) > 0 {
		caption += " " + strings.Join(enclosing, "; ") + ", an interval enclosing this whole chart."
	}
	caption += offScaleText(c)
	return figure{Title: title, SVG: c.svg(title), Caption: caption, X0: c.X0, X1: c.X1}, true
}

// zoomRange is the time a finding's zoom shows, as offsets: the finding
// with context on each side, and the reads that saw its counter rise (a
// lagging counter shows a burst's drops after it).
func zoomRange(f analyzer.Finding) (x0, x1 float64) {
	ctx := zoomContext(f.EndOffsetS - f.StartOffsetS)
	x0, x1 = f.StartOffsetS-ctx, f.EndOffsetS+ctx
	if f.Incident != nil {
		for _, j := range f.Incident.Timeline {
			x1 = max(x1, j.OffsetS+ctx/4)
		}
	}
	return x0, x1
}

// fineWindowNs is the analyzer's fine window, on the bucket grid.
func (tl *timeline) fineWindowNs() int64 {
	b := tl.bucketNs()
	return max(tl.res.Trace.FineWindowUs*1000/b, 1) * b
}

// linkLocalSlotNs is the analyzer's short link-local window (100 ms by
// default), on the bucket grid.
func (tl *timeline) linkLocalSlotNs() int64 {
	slot := int64(100e6)
	for _, l := range tl.res.Profile.LinkLocal {
		if l.ShortWindowS > 0 {
			slot = int64(math.Round(l.ShortWindowS * 1e9))
			break
		}
	}
	b := tl.bucketNs()
	return max(slot/b, 1) * b
}

// linkLocalFigures chart the packet rate to each link-local service, per
// interface and direction that had any, against the per-interface limit.
func (tl *timeline) linkLocalFigures() []figure {
	slot := tl.linkLocalSlotNs()
	w := tl.window(tl.startNs, tl.endNs, slot)
	limit := tl.res.Trace.Limits.LinkLocalPPS
	var figs []figure
	for _, l := range tl.res.Profile.LinkLocal {
		if l.Service != "all" || l.Packets == 0 {
			continue
		}
		dir := record.Ingress
		if l.Direction == record.Egress.String() {
			dir = record.Egress
		}
		s, ok := tl.series(l.Interface, dir)
		if !ok {
			continue
		}
		c := tl.chartFor(w, "pps")
		for _, svc := range record.Services {
			for _, p := range tl.res.Profile.LinkLocal {
				if p.Interface == l.Interface && p.Direction == l.Direction && p.Service == svc.String() && p.Packets > 0 {
					c.Series = append(c.Series, chartSeries{Name: svc.String(), Class: svc.String(),
						Values: columns(s.Buckets, w.fromNs, w.toNs, w.slotNs, plotWidth, metricLinkLocal(svc.Index()))})
				}
			}
		}
		c.Series = append(c.Series, chartSeries{Name: "all", Class: "all", NoArea: true,
			Values: columns(s.Buckets, w.fromNs, w.toNs, w.slotNs, plotWidth, metricLinkLocal(-1))})
		if limit.Known {
			c.Limits = []chartLimit{{Y: limit.Value, Label: "limit " + fmtPPS(limit.Value) + " (DNS + IMDS + NTP)", Always: true}}
		}
		c.Markers = tl.markers(l.Interface, []string{counters.LinklocalAllowanceExceeded}, w.fromNs, w.endNs())
		title := fmt.Sprintf("%s %s link-local packets/s per service", l.Interface, l.Direction)
		caption := w.resolutionText("Packets per second in "+fmtSeconds(float64(slot)/1e9)+" slots") +
			fmt.Sprintf(" Highest 1 s average: %s (%s of the limit). A slot can be above the limit while the "+
				"second around it is not.", fmtPPS(l.PeakPPS1s), fmtShare(l.PeakShare1s))
		figs = append(figs, figure{Title: title, SVG: c.svg(title), Caption: caption})
	}
	return figs
}

// sizeMixFigures are the packet-size bars of each interface, ingress
// beside egress, as shares of the direction's packets.
func sizeMixFigures(res *analyzer.Result) []figure {
	var figs []figure
	done := map[string]bool{}
	for _, m := range res.Profile.SizeMix {
		if done[m.Interface] {
			continue
		}
		done[m.Interface] = true
		var names, classes []string
		var dirs []analyzer.SizeMix
		for _, d := range res.Profile.SizeMix {
			if d.Interface == m.Interface {
				dirs = append(dirs, d)
				names = append(names, d.Direction)
				classes = append(classes, d.Direction)
			}
		}
		var groups []barGroup
		for ci, class := range record.SizeClassNames {
			g := barGroup{Label: class}
			for _, d := range dirs {
				var share float64
				var packets uint64
				if ci < len(d.Classes) {
					share, packets = d.Classes[ci].Share, d.Classes[ci].Packets
				}
				g.Values = append(g.Values, 100*share)
				g.Titles = append(g.Titles, fmt.Sprintf("%s %s bytes: %s packets, %s", d.Direction, class,
					fmtCount(packets), fmtShare(share)))
			}
			groups = append(groups, g)
		}
		title := m.Interface + " packet sizes (share of packets, layer-3 bytes)"
		var means []string
		for _, d := range dirs {
			means = append(means, fmt.Sprintf("%s mean %.0f B", d.Direction, d.MeanSize))
		}
		figs = append(figs, figure{Title: title, SVG: barChart(title, "%", names, classes, groups),
			Caption: "Share of each direction's packets per size class; " + strings.Join(means, ", ") + "."})
	}
	return figs
}
