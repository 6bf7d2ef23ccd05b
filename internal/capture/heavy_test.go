package capture

import (
	"testing"
	"time"
)

func TestHeavyWindowBytes(t *testing.T) {
	for _, c := range []struct {
		bps    float64
		share  float64
		window time.Duration
		want   uint64
	}{
		{5e9, 0.1, time.Millisecond, 62_500},    // the trace's default: 10% of 5 Gbit/s over 1 ms
		{100e6, 0.5, time.Millisecond, 6_250},   // the lab's 100 Mbit/s flow cap, half of it
		{5e9, 0.1, 10 * time.Microsecond, 1500}, // below one packet: one packet
		{25e9, 1, 10 * time.Millisecond, 31_250_000},
	} {
		if got := HeavyWindowBytes(c.bps, c.share, c.window); got != c.want {
			t.Errorf("HeavyWindowBytes(%v, %v, %v) = %d, want %d", c.bps, c.share, c.window, got, c.want)
		}
	}
}
