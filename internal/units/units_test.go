package units

import (
	"math"
	"testing"
	"time"
)

func TestFormats(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{BitRate(40e6), "40 Mbit/s"},
		{BitRate(2.4449e9), "2.44 Gbit/s"},
		{BitRate(999_960), "1 Mbit/s"},
		{BitRate(0), "0 bit/s"},
		{PacketRate(1024), "1,024 pps"},
		{PacketRate(12_600), "12.6 kpps"},
		{PacketRate(40), "40 pps"},
		{EventRate(145_500, "/s"), "146 k/s"},
		{EventRate(4000, "/s"), "4,000/s"},
		{EventRate(3871, "SYN/s"), "3,871 SYN/s"},
		{EventRate(2.5, "/s"), "2.5/s"},
		{Bytes(304_000), "304 kB"},
		{Bytes(1496), "1.5 kB"},
		{Count(7000), "7,000"},
		{Count(-1234567), "-1,234,567"},
		{Count(uint64(12)), "12"},
		{Counted(1, "flow"), "1 flow"},
		{Counted(300, "flow"), "300 flows"},
		{Counted(12000, "SYN"), "12,000 SYNs"},
		{Seconds(0.0501), "50.1 ms"},
		{Seconds(1.75), "1.75 s"},
		{Seconds(250e-6), "250 µs"},
		{Seconds(125), "2 min 5 s"},
		{Duration(30 * time.Second), "30 s"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestBitRate(t *testing.T) {
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
		if got := BitRate(tc.in); got != tc.want {
			t.Errorf("BitRate(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
