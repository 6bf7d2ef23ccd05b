package main

import (
	"strings"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/record"
)

// TestCountersRefresh: at the end, counters says how often the device
// refreshed what its reads returned, and what to give a trace: reads 10
// ms apart of counters that change every 100 ms (the gauge too, at the
// same refreshes) tell 100 ms (101 before the period was refined over the
// span), every second 1 s; changes at every read tell 0 at the
// trace's own interval, and only "at least that often" at 1 s; two
// changes tell nothing.
func TestCountersRefresh(t *testing.T) {
	const ms = int64(time.Millisecond)
	stretch := 1.0 // the reads' clock against the device's
	reads := func(every, n int, refreshEvery int, changes int) []record.CounterSample {
		var out []record.CounterSample
		v, g := uint64(0), uint64(1024)
		for k := range n {
			at := int64(float64(int64(k*every)*ms)*stretch) + int64(k%3)*ms/2 // reads dithered by up to 1 ms
			if k > 0 && k%refreshEvery == 0 && (changes < 0 || k/refreshEvery <= changes) {
				v += 7
				g--
			}
			out = append(out, record.CounterSample{Interface: "ens5", BeforeNs: at, AfterNs: at + ms/10,
				Values: map[string]uint64{"bw_out_allowance_exceeded": v, "conntrack_allowance_available": g}})
		}
		return out
	}
	slowClock := func() []record.CounterSample {
		stretch = 1.001
		defer func() { stretch = 1 }()
		return reads(10, 3000, 100, -1)
	}
	for _, c := range []struct {
		name     string
		interval time.Duration
		reads    []record.CounterSample
		want     string
	}{
		// A 1 s refresh seen on a clock 0.1% fast is 1,001 ms, which
		// --counter-refresh refuses: said as 1 s.
		{"1s-refresh-fast-clock", 10 * time.Millisecond, slowClock(), "give trace and analyze --counter-refresh 1s"},
		{"100ms-refresh", 10 * time.Millisecond, reads(10, 1000, 10, -1), "at most once per 100ms (learned from 99 changes): give trace and analyze --counter-refresh 100ms"},
		{"1s-refresh", 10 * time.Millisecond, reads(10, 3000, 100, -1), "at most once per 1s (learned from 29 changes): give trace and analyze --counter-refresh 1s"},
		{"every-read", 10 * time.Millisecond, reads(10, 300, 1, -1), "the device shows a change at the next read; give trace and analyze --counter-refresh 0"},
		{"every-slow-read", time.Second, reads(1000, 30, 1, -1), "they refresh at least that often; read at a shorter --interval"},
		{"two-changes", 10 * time.Millisecond, reads(10, 1000, 100, 2), "changed 2 times, too few or too unevenly to tell"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &counterReader{iface: "ens5", reads: c.reads}
			if got := r.refreshText(c.interval); !strings.Contains(got, c.want) {
				t.Errorf("%q, want %q", got, c.want)
			}
		})
	}
}

// TestCountersEndsWithRefresh: counters run to --count ends with the
// refresh line of each interface.
func TestCountersEndsWithRefresh(t *testing.T) {
	code, out := execute(t, "counters", "--counters-file", "eth9=../../testdata/ethtool/ena-2.10.txt", "--count", "2", "--interval", "1ms")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 4 || !strings.HasPrefix(lines[3], "eth9: the counters changed 0 times, too few") {
		t.Errorf("exit %d, output:\n%s\nwant three reads and the refresh line", code, out)
	}
}
