package limits

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseRate reads a rate and returns it in bits per second.
//
// A rate is a number (anything strconv.ParseFloat accepts, so 1e9 and 1.5
// work), optional spaces, and a unit. No unit means bits per second.
//
// A unit is an optional prefix and a base unit. Prefixes are decimal,
// k=1e3, M=1e6, G=1e9, T=1e12, or binary, Ki=2^10, Mi=2^20, Gi=2^30,
// Ti=2^40, in any case: "m" is always mega, never milli.
//
// Base units meaning bits: "bit", "bits", "bit/s", "bits/s" in any case, and
// "bps" or "b/s" with a lower-case b ("ps" in any case).
// Base units meaning bytes (the value is multiplied by 8): "byte", "bytes",
// "byte/s", "bytes/s" in any case, and "Bps" or "B/s" with an upper-case B.
// So 100Mbps, 100MBIT and 100mbit/s are 1e8 bit/s while 10MBps and 10MB/s are
// 8e7 bit/s. Where the case of one letter is too fragile, write bit or byte.
//
// Refused: a prefix with no base unit ("5G"), a bare "b" or "B", negative,
// infinite or NaN values.
func ParseRate(s string) (bitsPerSecond float64, err error) {
	in := strings.TrimSpace(s)
	end := 0
	for end < len(in) && strings.IndexByte("0123456789.eE+-", in[end]) >= 0 {
		end++
	}
	if end == 0 {
		return 0, fmt.Errorf("parse rate %q: no number", s)
	}
	v, err := strconv.ParseFloat(in[:end], 64)
	if err != nil {
		return 0, fmt.Errorf("parse rate %q: bad number %q", s, in[:end])
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("parse rate %q: must be a finite number >= 0", s)
	}
	mult, err := rateUnit(strings.TrimSpace(in[end:]))
	if err != nil {
		return 0, fmt.Errorf("parse rate %q: %w", s, err)
	}
	return v * mult, nil
}

// rateUnit returns how many bits per second one unit is.
func rateUnit(u string) (float64, error) {
	if u == "" {
		return 1, nil
	}
	scale, rest := splitPrefix(u)
	if rest == "" {
		return 0, fmt.Errorf("unit %q has a prefix but no bit or byte", u)
	}
	switch strings.ToLower(rest) {
	case "bit", "bits", "bit/s", "bits/s":
		return scale, nil
	case "byte", "bytes", "byte/s", "bytes/s":
		return scale * 8, nil
	}
	if tail := strings.ToLower(rest[1:]); tail == "ps" || tail == "/s" {
		switch rest[0] {
		case 'b':
			return scale, nil
		case 'B':
			return scale * 8, nil
		}
	}
	if rest == "b" || rest == "B" {
		return 0, fmt.Errorf("unit %q is ambiguous: write bit or byte", u)
	}
	return 0, fmt.Errorf("unknown unit %q (want e.g. bit, Mbit, Gbps, MBps, MB/s)", u)
}

// splitPrefix splits a decimal or binary prefix off u. No base unit starts
// with k, m, g, t or i, so the split is never ambiguous.
func splitPrefix(u string) (scale float64, rest string) {
	lower := strings.ToLower(u)
	for i, p := range []string{"k", "m", "g", "t"} {
		if strings.HasPrefix(lower, p+"i") {
			return math.Pow(1024, float64(i+1)), u[2:]
		}
		if strings.HasPrefix(lower, p) {
			return math.Pow(1000, float64(i+1)), u[1:]
		}
	}
	return 1, u
}
