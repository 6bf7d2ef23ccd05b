// Package units is the one way enaprobe writes a quantity for people: the
// text and HTML reports, the analyzer's summaries and the command line all
// format a rate, a count, a size or a duration here, so one number reads
// the same wherever it appears. Decimal SI prefixes throughout, as AWS
// quotes bandwidth (10 Gbit/s = 10^10 bit/s). It imports nothing of
// enaprobe's, so every package can use it.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Sig formats v with three significant digits, no exponent and no
// trailing zeros: 20.3, 10, 1.5, 0.25; 100 and above whole.
func Sig(v float64) string {
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

// Scaled formats v with the largest SI prefix that keeps it at or above 1,
// three significant digits: 40 Mbit/s, 2.44 Gbit/s, 304 kB.
func Scaled(v float64, unit string) string {
	switch {
	case math.IsNaN(v):
		return "NaN " + unit
	case math.IsInf(v, 0):
		return strconv.FormatFloat(v, 'f', -1, 64) + " " + unit
	}
	prefixes := []struct {
		f float64
		p string
	}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}}
	for _, p := range prefixes {
		if math.Abs(v) >= p.f*0.9995 { // 999.96 kbit/s prints as 1 Mbit/s, not 1000 kbit/s
			return Sig(v/p.f) + " " + p.p + unit
		}
	}
	return Sig(v) + " " + unit
}

// BitRate writes bits per second: 40 Mbit/s, 2.44 Gbit/s. The command
// line's rates read it back (limits.ParseRate).
func BitRate(bps float64) string { return Scaled(bps, "bit/s") }

// PacketRate writes packets per second (EventRate's rule): 1,024 pps,
// 12.6 kpps.
func PacketRate(pps float64) string { return EventRate(pps, "pps") }

// EventRate writes a rate of things counted, unit being what is counted
// per second ("pps", "SYN/s", "/s" for drops): below 10,000 whole with
// thousands separators (1,024 pps, the link-local limit, reads better than
// 1.02 kpps), above with an SI prefix and three significant digits
// (146 k/s). A unit starting with '/' follows the number without a space.
func EventRate(v float64, unit string) string {
	sep := " "
	if strings.HasPrefix(unit, "/") {
		sep = ""
	}
	switch a := math.Abs(v); {
	case a >= 99.95 && a < 9999.5:
		return Count(int64(math.Round(v))) + sep + unit
	case a < 99.95:
		return Sig(v) + sep + unit
	}
	return Scaled(v, unit) // "146 k/s": a prefix goes with its unit
}

// Bytes writes a size: 1496 B, 304 kB, 2.1 MB.
func Bytes(b float64) string { return Scaled(b, "B") }

// Count writes a whole count with thousands separators: 1,234,567.
func Count[T ~int | ~int64 | ~uint64 | ~uint32 | ~int32](v T) string {
	neg := v < 0
	var u uint64
	if neg {
		u = uint64(-int64(v))
	} else {
		u = uint64(v)
	}
	digits := strconv.FormatUint(u, 10)
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Counted writes a count and what is counted, singular for one:
// "1 flow", "300 flows", "12,000 SYNs" (plural adds "s").
func Counted[T ~int | ~int64 | ~uint64 | ~uint32 | ~int32](v T, singular string) string {
	if v == 1 {
		return "1 " + singular
	}
	return Count(v) + " " + singular + "s"
}

// Seconds writes a duration given in seconds, three significant digits:
// 250 µs, 50.1 ms, 1.75 s, 2 min 5 s.
func Seconds(s float64) string {
	switch a := math.Abs(s); {
	case a == 0:
		return "0 s"
	case a < 0.9995e-3:
		return Sig(s*1e6) + " µs"
	case a < 0.9995:
		return Sig(s*1e3) + " ms"
	case a < 120:
		return Sig(s) + " s"
	}
	d := time.Duration(s * float64(time.Second)).Round(time.Second)
	return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
}

// Duration writes a time.Duration as Seconds does.
func Duration(d time.Duration) string { return Seconds(d.Seconds()) }
