package limits

import (
	"math"
	"testing"

	"github.com/enaprobe/enaprobe/internal/units"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		in   string
		want float64
	}{
		{"40Mbit", 40e6},
		{"5Gbit", 5e9},
		{"5gbit", 5e9},
		{"5GBIT", 5e9},
		{"1.5Gbps", 1.5e9},
		{"100Mbps", 100e6},
		{"100mbps", 100e6},
		{"800kbit", 800e3},
		{"800Kbit/s", 800e3},
		{"1e9", 1e9},
		{"1e9bit", 1e9},
		{"2500", 2500},
		{"0", 0},
		{" 4.97 Gbit/s ", 4.97e9},
		{"10MBps", 80e6},
		{"10MB/s", 80e6},
		{"10Mb/s", 10e6},
		{"10MBPS", 80e6}, // the B decides, even when shouted
		{"10mbPS", 10e6},
		{"3MByte/s", 24e6},
		{"3mbytes", 24e6},
		{"1Gibit", 1 << 30},
		{"1GiB/s", 8 << 30},
		{"2kibit", 2048},
		{"1Tbit", 1e12},
		{"12bits/s", 12},
	}
	for _, tc := range tests {
		got, err := ParseRate(tc.in)
		if err != nil {
			t.Errorf("ParseRate(%q): %v", tc.in, err)
			continue
		}
		if math.Abs(got-tc.want) > 1e-9*math.Max(1, tc.want) {
			t.Errorf("ParseRate(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestParseRateErrors(t *testing.T) {
	for _, in := range []string{
		"", "   ", "fast", "Gbit", "5G", "5 M", "5b", "5B", "5Mb", "-1Gbit", "NaN", "Inf", "1e999",
		"5 Gbitz", "5 megabytes", "1..5Gbit", "5xbit", "5Gbit/h",
	} {
		if got, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) = %v, want an error", in, got)
		}
	}
}

// What units.BitRate writes parses back to the value within its 3-digit
// rounding: reports and the command line write rates one way.
func TestFormatParseRoundTrip(t *testing.T) {
	for _, v := range []float64{1, 999, 1000, 64e3, 745e6, 781.25e6, 4.97e9, 9.54e9, 12.5e9, 37.5e9, 200e9, 3.2e12} {
		s := units.BitRate(v)
		back, err := ParseRate(s)
		if err != nil {
			t.Errorf("ParseRate(units.BitRate(%v) = %q): %v", v, s, err)
			continue
		}
		if math.Abs(back-v) > 0.005*v {
			t.Errorf("round trip %v -> %q -> %v", v, s, back)
		}
	}
}
