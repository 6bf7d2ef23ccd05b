package report

import (
	"fmt"
	"time"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/record"
)

// htmlTable is a table of the HTML report. Columns from NumFrom on (up to
// NumTo when set) are numbers (right-aligned, never wrapped); column 0 is
// monospace when Mono (flows).
type htmlTable struct {
	Header  []string
	Rows    [][]string
	NumFrom int
	NumTo   int
	Mono    bool
}

// Num tells the template whether column i holds numbers.
func (t htmlTable) Num(i int) bool {
	return t.NumFrom > 0 && i >= t.NumFrom && (t.NumTo == 0 || i < t.NumTo)
}

func evidenceTable(f analyzer.Finding) htmlTable {
	t := htmlTable{Header: []string{"evidence", "value"}, NumFrom: 1}
	for _, e := range f.Evidence {
		t.Rows = append(t.Rows, []string{evidenceName(e), fmtEvidence(e)})
	}
	return t
}

func flowShareHTMLTable(f analyzer.Finding) htmlTable {
	t, _ := flowShareTable(f, false)
	return htmlTable{Header: t.rows[0], Rows: t.rows[1:], NumFrom: 1, Mono: true}
}

// topFlowsTable lists the top flows; when each was active is one column of
// offsets, so that the table fits its box.
func topFlowsTable(flows []analyzer.FlowProfile, traceStart time.Time) htmlTable {
	// When each was active and its owner are text that may wrap, so the
	// table fits its card.
	t := htmlTable{Header: []string{"flow", "iface", "direction", "bytes", "packets", "mean size", "mean rate",
		"peak rate", "active"}, NumFrom: 3, NumTo: 8, Mono: true}
	owned := false
	for _, f := range flows {
		name := flowString(f.Proto, f.Src, f.Dst)
		if f.Service != "" {
			name += " (" + f.Service + ")"
		}
		t.Rows = append(t.Rows, []string{name, f.Interface, f.Directions, fmtBytes(float64(f.Bytes)),
			fmtCount(f.Packets), fmt.Sprintf("%.0f B", f.MeanSize), fmtBps(f.MeanBps), fmtBps(f.PeakBps),
			fmt.Sprintf("%+.3f to %+.3f s", f.FirstSeen.Sub(traceStart).Seconds(), f.LastSeen.Sub(traceStart).Seconds())})
		if f.Owner != nil {
			owned = true
		}
	}
	if owned {
		t.Header = append(t.Header, "owner")
		for i, f := range flows {
			t.Rows[i] = append(t.Rows[i], ownerString(f.Owner))
		}
	}
	return t
}

func linkLocalTable(ll []analyzer.LinkLocalProfile) htmlTable {
	t := htmlTable{Header: []string{"iface", "direction", "service", "packets", "peak 1 s", "peak short window",
		"limit", "1 s peak of limit"}, NumFrom: 3}
	for _, l := range ll {
		t.Rows = append(t.Rows, []string{l.Interface, l.Direction, l.Service, fmtCount(l.Packets), fmtPPS(l.PeakPPS1s),
			fmtPPS(l.PeakPPSShort) + " over " + fmtSeconds(l.ShortWindowS), fmtPPS(l.LimitPPS), fmtShare(l.PeakShare1s)})
	}
	return t
}

func sizeMixTable(mix []analyzer.SizeMix) htmlTable {
	t := htmlTable{Header: []string{"iface", "direction"}, NumFrom: 2}
	t.Header = append(t.Header, record.SizeClassNames...)
	t.Header = append(t.Header, "mean size", "GSO/GRO skbs")
	for _, m := range mix {
		row := []string{m.Interface, m.Direction}
		for ci := range record.SizeClassNames {
			cell := "-"
			if ci < len(m.Classes) {
				cell = fmtCount(m.Classes[ci].Packets) + " (" + fmtShare(m.Classes[ci].Share) + ")"
			}
			row = append(row, cell)
		}
		row = append(row, fmt.Sprintf("%.0f B", m.MeanSize), fmtCount(m.SuperPackets))
		t.Rows = append(t.Rows, row)
	}
	return t
}

func latencyTable(lat []analyzer.ReadLatency) htmlTable {
	t := htmlTable{Header: []string{"iface", "reads", "min", "median", "max", "lock held in all"}, NumFrom: 1}
	for _, l := range lat {
		t.Rows = append(t.Rows, []string{l.Interface, fmtCount(l.Reads), fmtSeconds(l.MinUs / 1e6),
			fmtSeconds(l.MedianUs / 1e6), fmtSeconds(l.MaxUs / 1e6), fmtSeconds(l.HeldMs / 1e3)})
	}
	return t
}

func countersTable(cs []analyzer.CounterDelta) htmlTable {
	t := htmlTable{Header: []string{"iface", "counter", "change over the trace", "resets"}, NumFrom: 2}
	for _, c := range cs {
		change := "+" + fmtCount(c.Delta)
		if c.Gauge != nil {
			change = fmt.Sprintf("gauge %s → %s (lowest %s, highest %s)", fmtCount(c.Gauge.First),
				fmtCount(c.Gauge.Last), fmtCount(c.Gauge.Min), fmtCount(c.Gauge.Max))
		}
		t.Rows = append(t.Rows, []string{c.Interface, c.Name, change, fmtCount(c.Resets)})
	}
	return t
}

func rowsTable(header []string, rows [][]string, numFrom int) htmlTable {
	return htmlTable{Header: header, Rows: rows, NumFrom: numFrom}
}
