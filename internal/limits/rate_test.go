package limits

import (
	"math"
	"testing"
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

func TestFormatBps(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{4.97e9, "4.97 Gbit/s"},
		{4_971_234_567, "4.97 Gbit/s"},
		{10e9, "10 Gbit/s"},
		{12.5e9, "12.5 Gbit/s"},
		{0.781e9, "781 Mbit/s"},
		{745e6, "745 Mbit/s"},
		{999.6e6, "1 Gbit/s"},
		{64e6, "64 Mbit/s"},
		{1500, "1.5 kbit/s"},
		{12, "12 bit/s"},
		{0, "0 bit/s"},
		{-2e9, "-2 Gbit/s"},
		{400e12, "400 Tbit/s"},
		{2e15, "2000 Tbit/s"},
		{math.NaN(), "NaN bit/s"},
		{math.Inf(1), "+Inf bit/s"},
	}
	for _, tc := range tests {
		if got := FormatBps(tc.in); got != tc.want {
			t.Errorf("FormatBps(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestFormatPPS(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{1024, "1.02 kpps"},
		{512, "512 pps"},
		{3.2e6, "3.2 Mpps"},
		{0, "0 pps"},
	}
	for _, tc := range tests {
		if got := FormatPPS(tc.in); got != tc.want {
			t.Errorf("FormatPPS(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FormatBps output parses back to the value within its 3-digit rounding.
func TestFormatParseRoundTrip(t *testing.T) {
	for _, v := range []float64{1, 999, 1000, 64e3, 745e6, 781.25e6, 4.97e9, 9.54e9, 12.5e9, 37.5e9, 200e9, 3.2e12} {
		s := FormatBps(v)
		back, err := ParseRate(s)
		if err != nil {
			t.Errorf("ParseRate(FormatBps(%v) = %q): %v", v, s, err)
			continue
		}
		if math.Abs(back-v) > 0.005*v {
			t.Errorf("round trip %v -> %q -> %v", v, s, back)
		}
	}
}
