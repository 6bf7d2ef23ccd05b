package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/units"
)

// Human formatting shared by the text and HTML reports: every quantity is
// written by package units, which the analyzer's summaries use too, so a
// number reads the same in a summary, a table and a chart.

func sig(v float64) string                 { return units.Sig(v) }
func scaled(v float64, unit string) string { return units.Scaled(v, unit) }
func fmtBps(v float64) string              { return units.BitRate(v) }
func fmtPPS(v float64) string              { return units.PacketRate(v) }
func fmtBytes(v float64) string            { return units.Bytes(v) }

// fmtCount writes a count with thousands separators: 1,234,567.
func fmtCount[T ~int | ~uint64 | ~uint32](v T) string { return units.Count(v) }

// fmtShare formats a ratio as a percentage.
func fmtShare(r float64) string {
	p := 100 * r
	switch {
	case p == 0:
		return "0%"
	case p < 0.01:
		return "<0.01%"
	case p < 10:
		return strconv.FormatFloat(p, 'f', 2, 64) + "%"
	}
	return strconv.FormatFloat(p, 'f', 1, 64) + "%"
}

// fmtSeconds formats a duration given in seconds: 250 µs, 8 ms, 1.5 s,
// 2 min 5 s.
func fmtSeconds(s float64) string { return units.Seconds(s) }

// fmtOffset formats an offset from the trace start with millisecond
// precision: +4.345 s.
func fmtOffset(s float64) string { return fmt.Sprintf("%+.3f s", s) }

// fmtClock formats a wall-clock instant in UTC to the millisecond; with the
// date when it differs from the trace's start date.
func fmtClock(t, traceStart time.Time) string {
	t = t.UTC()
	if y, m, d := t.Date(); y == traceStart.UTC().Year() && m == traceStart.UTC().Month() && d == traceStart.UTC().Day() {
		return t.Format("15:04:05.000")
	}
	return t.Format("2006-01-02 15:04:05.000")
}

// fmtEvidence formats one evidence value with its unit.
func fmtEvidence(e analyzer.Evidence) string {
	switch e.Unit {
	case "bps":
		return fmtBps(e.Value)
	case "pps":
		return fmtPPS(e.Value)
	case "per_s":
		return units.EventRate(e.Value, "/s")
	case "bytes":
		return fmtBytes(e.Value)
	case "s":
		return fmtSeconds(e.Value)
	case "ratio":
		return fmtShare(e.Value)
	case "bool":
		if e.Value != 0 {
			return "yes"
		}
		return "no"
	case "packets", "count":
		if e.Value == math.Trunc(e.Value) && e.Value >= 0 && e.Value < 1e18 {
			if e.Unit == "count" { // the name says what is counted
				return fmtCount(uint64(e.Value))
			}
			return fmtCount(uint64(e.Value)) + " " + e.Unit
		}
	}
	return sig(e.Value) + " " + e.Unit
}

// evidenceName is an evidence's name as a report shows it beside its
// value: without a unit suffix the value's own unit replaces
// (counter_lag_s 0.0501 reads "counter_lag 50.1 ms"; JSON keeps the name).
func evidenceName(e analyzer.Evidence) string {
	if e.Unit == "s" {
		return strings.TrimSuffix(e.Name, "_s")
	}
	return e.Name
}

// fmtLimit formats a limit's value, or "unknown".
func fmtLimit(l analyzer.Limit, format func(float64) string) string {
	if !l.Known {
		return "unknown"
	}
	return format(l.Value)
}

// fmtRatio says how many times larger a is than b: "31x", "1.4x".
func fmtRatio(a, b float64) string {
	if b <= 0 {
		return "n/a"
	}
	r := a / b
	if r >= 10 {
		return strconv.FormatFloat(r, 'f', 0, 64) + "x"
	}
	return strconv.FormatFloat(r, 'f', 1, 64) + "x"
}

// flowString is "proto src -> dst".
func flowString(proto, src, dst string) string { return proto + " " + src + " -> " + dst }

// severityRank orders severities, most severe first.
func severityRank(s string) int {
	switch s {
	case analyzer.SeverityCritical:
		return 0
	case analyzer.SeverityWarning:
		return 1
	case analyzer.SeverityInfo:
		return 2
	}
	return 3
}
