package report

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/ena/counters"
)

// rankedFindings returns the findings most severe first, and within a
// severity in the analyzer's order: the incidents that cost the most first.
func rankedFindings(res *analyzer.Result) []analyzer.Finding {
	fs := slices.Clone(res.Findings)
	slices.SortStableFunc(fs, func(a, b analyzer.Finding) int {
		return cmp.Compare(severityRank(a.Severity), severityRank(b.Severity))
	})
	return fs
}

// findingCounters names the allowance counters a finding kind is about.
func findingCounters(f analyzer.Finding) []string {
	switch f.Kind {
	case analyzer.KindMicroburstIn:
		return []string{counters.BwInAllowanceExceeded}
	case analyzer.KindMicroburstOut:
		return []string{counters.BwOutAllowanceExceeded}
	case analyzer.KindBaselineExhausted:
		switch f.Direction {
		case "ingress":
			return []string{counters.BwInAllowanceExceeded}
		case "egress":
			return []string{counters.BwOutAllowanceExceeded}
		}
		return []string{counters.BwInAllowanceExceeded, counters.BwOutAllowanceExceeded}
	case analyzer.KindPPSExceeded:
		return []string{counters.PPSAllowanceExceeded}
	case analyzer.KindConntrackExceeded, analyzer.KindConntrackNearLimit:
		return []string{counters.ConntrackAllowanceExceeded, counters.ConntrackAllowanceAvailable}
	case analyzer.KindLinkLocalExceeded, analyzer.KindLinkLocalHot:
		return []string{counters.LinklocalAllowanceExceeded}
	}
	return nil
}

// counterDeltaText describes how one counter moved over the trace.
func counterDeltaText(c analyzer.CounterDelta) string {
	if c.Gauge != nil {
		g := c.Gauge
		return fmt.Sprintf("%s: first %s, lowest %s, highest %s, last %s", c.Name,
			fmtCount(g.First), fmtCount(g.Min), fmtCount(g.Max), fmtCount(g.Last))
	}
	s := fmt.Sprintf("%s +%s", c.Name, fmtCount(c.Delta))
	if c.Resets > 0 {
		s += fmt.Sprintf(" (%d resets: a lower bound)", c.Resets)
	}
	return s
}

// findingCounterText says how the finding's counters moved over the trace.
func findingCounterText(res *analyzer.Result, f analyzer.Finding) string {
	names := findingCounters(f)
	if f.Kind == analyzer.KindIMDSHopLimit {
		return "none: a reply that dies one hop short moves no allowance counter; the IMDS packets show it"
	}
	if len(names) == 0 {
		return "none: the per-flow limit has no counter, only the traffic shows it"
	}
	for _, e := range res.Trace.ENA {
		if e.Interface == f.Interface && !e.ENA {
			return "none: " + f.Interface + " has no ENA allowance counters"
		}
	}
	var parts []string
	for _, name := range names {
		for _, c := range res.Counters {
			if c.Interface == f.Interface && c.Name == name {
				parts = append(parts, counterDeltaText(c))
			}
		}
	}
	if len(parts) == 0 {
		return "not read on " + f.Interface
	}
	return strings.Join(parts, "; ") + " over the whole trace"
}

func findingTitle(i int, f analyzer.Finding) string {
	where := f.Interface
	if f.Direction != "" {
		where += " " + f.Direction
	}
	return fmt.Sprintf("#%d  %s  %s  %s", i+1, strings.ToUpper(f.Severity), f.Kind, where)
}

func findingWhen(f analyzer.Finding, traceStart time.Time) string {
	return fmt.Sprintf("%s -> %s UTC (%s -> %s, %s)", fmtClock(f.Start, traceStart), fmtClock(f.End, traceStart),
		fmtOffset(f.StartOffsetS), fmtOffset(f.EndOffsetS), fmtSeconds(f.EndOffsetS-f.StartOffsetS))
}

// flowSourceText says how precisely a culprit flow is placed in the window.
func flowSourceText(s string) string {
	switch s {
	case "window_events":
		return "per window"
	case "snapshots":
		return "per drain"
	}
	return s
}

func textFindings(p *page, res *analyzer.Result) {
	fs := rankedFindings(res)
	count := map[string]int{}
	for _, f := range fs {
		count[f.Severity]++
	}
	p.heading(fmt.Sprintf("FINDINGS: %d (%d critical, %d warning, %d info)", len(fs),
		count[analyzer.SeverityCritical], count[analyzer.SeverityWarning], count[analyzer.SeverityInfo]))
	if len(fs) == 0 {
		p.para("", "Nothing exceeded or came near a known allowance, and no allowance counter moved.")
		return
	}
	const ind, lw = "    ", 10
	first := 0 // the first of a run of repeated info findings
	for i, f := range fs {
		p.blank()
		p.line(findingTitle(i, f))
		p.field(ind, "When", lw, findingWhen(f, res.Trace.Start))
		p.field(ind, "What", lw, f.Summary)
		if i > 0 && repeatsInfo(fs[i-1], f) {
			// Info findings of one kind repeat their evidence and fix.
			p.field(ind, "", lw, fmt.Sprintf("(evidence and fix as #%d: %s)", first+1, f.Kind))
			continue
		}
		first = i
		if f.Incident != nil {
			p.field(ind, "Incident", lw, incidentText(f.Incident))
		}
		if len(f.Gauge) > 0 {
			p.field(ind, "Gauge", lw, gaugeText(f.Gauge))
		}
		if d := f.IMDS; d != nil {
			p.field(ind, "Client", lw, imdsClientText(d))
			for j, l := range imdsRequestTexts(d) {
				label := ""
				if j == 0 {
					label = "Requests"
				}
				p.field(ind, label, lw, l)
			}
		}
		if d := f.LinkLocal; d != nil {
			for j, l := range linkLocalFixTexts(d) {
				label := ""
				if j == 0 {
					label = "Fixes"
				}
				p.field(ind, label, lw, l)
			}
			p.field(ind, "Asked", lw, linkLocalBasis(d))
			for _, c := range d.Clients {
				p.field(ind, "", lw, linkLocalClientTitle(c))
				for _, r := range linkLocalClientRows(c) {
					p.field(ind, "", lw, "  "+r[0]+": "+r[1])
				}
			}
		}
		ev := &table{right: []bool{false, true}} // no header
		for _, e := range f.Evidence {
			ev.add(evidenceName(e), fmtEvidence(e))
		}
		for j, l := range ev.render("") {
			label := ""
			if j == 0 {
				label = "How big"
			}
			p.field(ind, label, lw, l)
		}
		p.field(ind, "Counters", lw, findingCounterText(res, f))
		textImpact(p, ind, lw, f.Impact)
		if len(f.Flows) == 0 {
			p.field(ind, "Flows", lw, "none recorded in the window")
		} else {
			t, placed := flowShareTable(f, true)
			head := "ranked by " + rankedByText(f.FlowsRankedBy) + " in the window"
			if placed != "" {
				head += ", each placed " + placed
			}
			p.field(ind, "Flows", lw, head)
			p.lines(t.renderFitting(ind + "  "))
		}
		if len(f.Owners) > 0 {
			p.field(ind, "Owners", lw, "ranked by "+rankedByText(f.FlowsRankedBy)+": "+ownersText(f.Owners))
		}
		if len(f.Victims) > 0 {
			p.field(ind, "Victims", lw, victimsLine(f))
		}
		p.field(ind, "Fix", lw, f.Recommendation)
	}
}

// rankedByText says what a finding's flows are ranked by.
func rankedByText(rankedBy string) string {
	if rankedBy == "bytes_above_usual" {
		return "bytes above each flow's own rate of the second before"
	}
	return rankedBy
}

// repeatsInfo tells an info finding of the same kind and interface as the
// one before it, which the text report shows in short.
func repeatsInfo(prev, f analyzer.Finding) bool {
	return f.Severity == analyzer.SeverityInfo && prev.Severity == f.Severity && prev.Kind == f.Kind && prev.Interface == f.Interface
}

// flowShareTable lays out a finding's flows, with their owners when any
// is known. narrow (the text page) makes room for the owner by moving how
// the flows were placed out of the table when it is the same for all; that
// is then returned, to be said once.
func flowShareTable(f analyzer.Finding, narrow bool) (*table, string) {
	withSYNs := f.FlowsRankedBy == "syns"
	for _, fl := range f.Flows {
		withSYNs = withSYNs || fl.SYNs > 0
	}
	t := newTable("FLOW", "BYTES", "PACKETS", "SYNS", "SHARE", "PLACED").rightAlign(1, 2, 3, 4)
	if !withSYNs {
		t = newTable("FLOW", "BYTES", "PACKETS", "SHARE", "PLACED").rightAlign(1, 2, 3)
	}
	owned := anyFlowOwner(f.Flows)
	placed := ""
	if owned && narrow {
		placed = flowSourceText(f.Flows[0].Source)
		for _, fl := range f.Flows {
			if flowSourceText(fl.Source) != placed {
				placed = ""
			}
		}
	}
	if placed != "" {
		t.rows[0] = t.rows[0][:len(t.rows[0])-1]
		t.right = t.right[:len(t.right)-1]
	}
	if owned {
		t.rows[0] = append(t.rows[0], "OWNER")
		t.right = append(t.right, false)
	}
	for _, fl := range f.Flows {
		name := flowString(fl.Proto, fl.Src, fl.Dst)
		if fl.Service != "" {
			name += " (" + fl.Service + ")"
		}
		if fl.Flows > 1 {
			name += fmt.Sprintf(" [%s flows]", fmtCount(fl.Flows))
		}
		row := []string{name, fmtBytes(float64(fl.Bytes)), fmtCount(fl.Packets), fmtCount(fl.SYNs),
			fmtShare(fl.Share), flowSourceText(fl.Source)}
		if !withSYNs {
			row = slices.Delete(row, 3, 4)
		}
		if placed != "" {
			row = row[:len(row)-1]
		}
		if owned {
			row = append(row, ownerString(fl.Owner))
		}
		t.add(row...)
	}
	return t, placed
}
