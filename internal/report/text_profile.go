package report

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/record"
)

func textProfile(p *page, res *analyzer.Result) {
	pr := res.Profile
	p.heading("PROFILE")
	textTotals(p, res.Totals)
	textRates(p, pr.Rates)
	textTopFlows(p, pr.TopFlows)
	textLinkLocal(p, res, pr.LinkLocal)
	textSizeMix(p, pr.SizeMix)
	textReadLatency(p, pr.CounterReadLatency)
}

func textTotals(p *page, totals []analyzer.Total) {
	p.subheading("Traffic since attach (packets per protocol class)")
	if len(totals) == 0 {
		p.para("  ", "No totals recorded.")
		return
	}
	header, rows := totalsRows(totals)
	t := newTable(header...).rightAlign(2, 3, 4, 5, 6, 7, 8)
	for _, r := range rows {
		t.add(r...)
	}
	p.lines(t.render("  "))
}

// peakAt returns the peak of a window width, if the profile has it.
func peakAt(r analyzer.RateProfile, windowS float64) (analyzer.Peak, bool) {
	for _, pk := range r.Peaks {
		if pk.WindowS == windowS {
			return pk, true
		}
	}
	return analyzer.Peak{}, false
}

func averageOf(r analyzer.RateProfile, periodS float64) (analyzer.Average, bool) {
	for _, a := range r.Averages {
		if a.PeriodS == periodS {
			return a, true
		}
	}
	return analyzer.Average{}, false
}

func windowLabel(s float64) string {
	switch {
	case s >= 60:
		return fmt.Sprintf("%g-min", s/60)
	case s >= 1:
		return fmt.Sprintf("%g s", s)
	}
	return fmt.Sprintf("%g ms", s*1e3)
}

// dashboardGap is the sentence that explains why a dashboard missed a
// burst: the shortest peak beside the 1-minute average.
func dashboardGap(r analyzer.RateProfile) string {
	if len(r.Peaks) == 0 || len(r.Averages) == 0 {
		return ""
	}
	pk, avg := r.Peaks[0], r.Averages[0]
	if pk.Bps == 0 {
		return fmt.Sprintf("%s %s: no traffic", r.Interface, r.Direction)
	}
	s := fmt.Sprintf("%s %s: %s peak %s vs %s average %s: %s", r.Interface, r.Direction, windowLabel(pk.WindowS),
		fmtBps(pk.Bps), windowLabel(avg.PeriodS), fmtBps(avg.Bps), fmtRatio(pk.Bps, avg.Bps))
	if avg.Partial {
		s += fmt.Sprintf(" (average over the %s traced, shorter than the period)", fmtSeconds(avg.CoveredS))
	}
	return s
}

func textRates(p *page, rates []analyzer.RateProfile) {
	p.subheading("Peaks beside CloudWatch-style averages (what a 1-minute or 5-minute graph shows)")
	if len(rates) == 0 {
		p.para("  ", "No bucket series recorded.")
		return
	}
	header, rows, partial := rateRows(rates)
	t := newTable(header...).rightAlign(3, 4, 5, 6, 7)
	for _, r := range rows {
		t.add(r...)
	}
	p.lines(t.render("  "))
	if partial {
		p.para("  ", partialNote)
	}
	p.blank()
	for _, r := range rates {
		if s := dashboardGap(r); s != "" {
			p.para("  ", s)
		}
	}
}

func textTopFlows(p *page, flows []analyzer.FlowProfile) {
	p.subheading("Top flows by bytes")
	if len(flows) == 0 {
		p.para("  ", "No flows recorded.")
		return
	}
	// One table per interface, in the order of their biggest flow: without
	// an interface column the rows of IPv4 flows fit the page.
	var ifaces []string
	for _, f := range flows {
		if !slices.Contains(ifaces, f.Interface) {
			ifaces = append(ifaces, f.Interface)
		}
	}
	for _, iface := range ifaces {
		t := newTable(iface, "DIR", "BYTES", "PACKETS", "SIZE", "PEAK").rightAlign(2, 3, 4, 5)
		owned := false
		for _, f := range flows {
			owned = owned || (f.Interface == iface && f.Owner != nil)
		}
		if owned {
			t.rows[0] = append(t.rows[0], "OWNER")
			t.right = append(t.right, false)
		}
		for _, f := range flows {
			if f.Interface != iface {
				continue
			}
			name := flowString(f.Proto, f.Src, f.Dst)
			if f.Service != "" {
				name += " (" + f.Service + ")"
			}
			row := []string{name, f.Directions, fmtBytes(float64(f.Bytes)), fmtCount(f.Packets),
				fmt.Sprintf("%.0f B", f.MeanSize), fmtBps(f.PeakBps)}
			if owned {
				row = append(row, ownerString(f.Owner))
			}
			t.add(row...)
		}
		p.lines(t.renderFitting("  "))
	}
	p.para("  ", "SIZE is the mean packet size; PEAK the highest throughput over one flow drain interval.")
}

func textLinkLocal(p *page, res *analyzer.Result, ll []analyzer.LinkLocalProfile) {
	p.subheading(fmt.Sprintf("Link-local services: packets/s against the %s per-interface limit",
		fmtLimit(res.Trace.Limits.LinkLocalPPS, func(v float64) string { return fmtCount(uint64(v)) + " pps" })))
	if len(ll) == 0 {
		p.para("  ", "No packets to or from DNS, IMDS or NTP.")
		return
	}
	t := newTable("IFACE", "DIR", "SERVICE", "PACKETS", "PEAK 1 s", "PEAK "+fmtSeconds(ll[0].ShortWindowS),
		"OF LIMIT").rightAlign(3, 4, 5, 6)
	for _, l := range ll {
		short := fmtPPS(l.PeakPPSShort)
		if l.ShortWindowS != ll[0].ShortWindowS {
			short += " /" + fmtSeconds(l.ShortWindowS)
		}
		t.add(l.Interface, l.Direction, l.Service, fmtCount(l.Packets), fmtPPS(l.PeakPPS1s), short, fmtShare(l.PeakShare1s))
	}
	p.lines(t.render("  "))
	p.para("  ", `"all" is DNS + IMDS + NTP together, the rate the limit applies to; OF LIMIT is the 1 s peak's share of it.`)
}

func textSizeMix(p *page, mix []analyzer.SizeMix) {
	p.subheading("Packet sizes (layer-3 bytes, wire packets)")
	if len(mix) == 0 {
		p.para("  ", "No size histogram recorded.")
		return
	}
	var ifaces []string
	for _, m := range mix {
		if len(ifaces) == 0 || ifaces[len(ifaces)-1] != m.Interface {
			ifaces = append(ifaces, m.Interface)
		}
	}
	for _, iface := range ifaces {
		var dirs []analyzer.SizeMix
		header := []string{iface}
		for _, m := range mix {
			if m.Interface == iface {
				dirs = append(dirs, m)
				header = append(header, strings.ToUpper(m.Direction), "SHARE")
			}
		}
		t := newTable(header...)
		for i := 1; i < len(header); i++ {
			t.rightAlign(i)
		}
		for ci, name := range record.SizeClassNames {
			row := []string{name}
			for _, d := range dirs {
				if ci < len(d.Classes) {
					row = append(row, fmtCount(d.Classes[ci].Packets), fmtShare(d.Classes[ci].Share))
				} else {
					row = append(row, "-", "-")
				}
			}
			t.add(row...)
		}
		mean, super := []string{"mean size"}, []string{"GSO/GRO skbs"}
		for _, d := range dirs {
			mean = append(mean, fmt.Sprintf("%.0f B", d.MeanSize), "")
			super = append(super, fmtCount(d.SuperPackets), "")
		}
		t.add(mean...)
		t.add(super...)
		p.lines(t.render("  "))
	}
}

func textReadLatency(p *page, lat []analyzer.ReadLatency) {
	p.subheading("Counter read latency (the uncertainty of every counter timestamp)")
	if len(lat) == 0 {
		p.para("  ", "No counter reads.")
		return
	}
	t := newTable("IFACE", "READS", "MIN", "MEDIAN", "MAX", "LOCK HELD").rightAlign(1, 2, 3, 4, 5)
	for _, l := range lat {
		t.add(l.Interface, fmtCount(l.Reads), fmtSeconds(l.MinUs/1e6), fmtSeconds(l.MedianUs/1e6), fmtSeconds(l.MaxUs/1e6), fmtSeconds(l.HeldMs/1e3))
	}
	p.lines(t.render("  "))
}

func textCounters(p *page, res *analyzer.Result) {
	p.heading("NIC COUNTERS (change over the trace)")
	for _, e := range res.Trace.ENA {
		if !e.ENA {
			p.para("", fmt.Sprintf("%s (%s): no ENA allowance counters; packet profile only.", e.Interface,
				cmp.Or(e.Driver, "driver unknown")))
		}
	}
	if len(res.Counters) == 0 {
		p.para("", "No counter was read.")
		return
	}
	t := newTable("IFACE", "COUNTER", "CHANGE", "RESETS").rightAlign(2, 3)
	for _, c := range res.Counters {
		change := "+" + fmtCount(c.Delta)
		if c.Gauge != nil {
			change = fmt.Sprintf("gauge %s -> %s (lowest %s)", fmtCount(c.Gauge.First), fmtCount(c.Gauge.Last), fmtCount(c.Gauge.Min))
		}
		t.add(c.Interface, c.Name, change, fmtCount(c.Resets))
	}
	p.lines(t.render("  "))
}

func textLoss(p *page, res *analyzer.Result) {
	l := res.Loss
	p.heading("LOSS (what the trace could not see)")
	p.para("", lossSentence(l))
	header, rows := lossRows(l)
	t := newTable(header...)
	for i := 1; i < len(header); i++ {
		t.rightAlign(i)
	}
	for _, r := range rows {
		t.add(r...)
	}
	p.blank()
	p.lines(t.render("  "))
	if len(l.ReadFailures)+len(l.Resets) > 0 {
		p.blank()
	}
	for _, f := range l.ReadFailures {
		p.field("  ", "read failed", 13, readFailureText(f, res.Trace.Start))
	}
	for _, r := range l.Resets {
		p.field("  ", "reset", 13, resetText(r, res.Trace.Start))
	}
}
