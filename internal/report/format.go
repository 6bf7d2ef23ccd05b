package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/enaprobe/enaprobe/analyzer"
)

// Human formatting shared by the text and HTML reports. Rates and sizes use
// decimal SI prefixes, as AWS quotes bandwidth (10 Gbit/s = 10^10 bit/s).

// sig formats v with three significant digits, no exponent and no
// trailing zeros: 20.3, 10, 1.5, 0.25.
func sig(v float64) string {
	a := math.Abs(v)
	var s string
	switch {
	case a == 0:
		return "0"
	case a >= 99.95:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 9.995:
		s = strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 0.9995:
		s = strconv.FormatFloat(v, 'f', 2, 64)
	default:
		s = strconv.FormatFloat(v, 'f', 3+int(math.Max(0, -math.Floor(math.Log10(a))-1)), 64)
	}
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// scaled formats v with the largest SI prefix that keeps it at or above 1.
func scaled(v float64, unit string) string {
	prefixes := []struct {
		f float64
		p string
	}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}}
	for _, p := range prefixes {
		if math.Abs(v) >= p.f*0.9995 { // 999.96 kbit/s prints as 1.00 Mbit/s, not 1000 kbit/s
			return sig(v/p.f) + " " + p.p + unit
		}
	}
	return sig(v) + " " + unit
}

func fmtBps(v float64) string { return scaled(v, "bit/s") }

// fmtPPS writes packet rates below 10,000 whole (1,024 pps, the link-local
// limit, reads better than 1.02 kpps).
func fmtPPS(v float64) string {
	if v >= 99.95 && v < 9999.5 {
		return fmtCount(uint64(math.Round(v))) + " pps"
	}
	return scaled(v, "pps")
}
func fmtBytes(v float64) string { return scaled(v, "B") }

// fmtCount writes a count with thousands separators: 1,234,567.
func fmtCount[T ~int | ~uint64 | ~uint32](v T) string {
	s := strconv.FormatUint(uint64(v), 10)
	if v < 0 {
		s = "-" + strconv.FormatUint(uint64(-v), 10)
	}
	digits := strings.TrimPrefix(s, "-")
	var b strings.Builder
	b.WriteString(s[:len(s)-len(digits)])
	for i, c := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

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

// fmtSeconds formats a duration given in seconds: 250 µs, 8 ms, 1.50 s,
// 2 min 5 s.
func fmtSeconds(s float64) string {
	switch a := math.Abs(s); {
	case a == 0:
		return "0 s"
	case a < 0.9995e-3:
		return sig(s*1e6) + " µs"
	case a < 0.9995:
		return sig(s*1e3) + " ms"
	case a < 120:
		return sig(s) + " s"
	}
	d := time.Duration(s * float64(time.Second)).Round(time.Second)
	return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
}

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
		return strings.TrimSuffix(fmtPPS(e.Value), "pps") + "/s"
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
			return fmtCount(uint64(e.Value)) + " " + e.Unit
		}
	}
	return sig(e.Value) + " " + e.Unit
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
