package analyzer

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/analyzer/internal/synth"
	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/record"
)

// TestPacketDrops: a packet passes where the bucket holds a whole one,
// and what is left of it stays.
func TestPacketDrops(t *testing.T) {
	ms := func(x int64) int64 { return x * int64(time.Millisecond) }
	// A bucket of 2 refilled at 1 a second: 2 -> 1 -> 1.1 -> 0.1, then
	// 0.2 and 0.3 drop, and a second later 1.3 passes one.
	got := packetDrops([]int64{0, ms(100), ms(200), ms(300), ms(1300)}, 1, 2)
	if want := []int64{ms(200), ms(300)}; !slices.Equal(got, want) {
		t.Errorf("drops at %v, want %v", got, want)
	}
	if got := packetDrops([]int64{0, 1, 2}, 1000, 0); len(got) != 3 {
		t.Errorf("an empty bucket let %d of 3 through, want none", 3-len(got))
	}
}

// TestCountedDepth: the count of a flood's drops gives its bucket's depth
// where the counter showed them all, and nothing where the trace ended
// before a 1 s refresh could show the last of them (their count would
// make the bucket deep by as many, the first drop that much late).
func TestCountedDepth(t *testing.T) {
	for _, c := range []struct {
		name    string
		end     time.Duration // of the flood
		trace   time.Duration
		counted bool
	}{
		{"shown", 6 * time.Second, 9 * time.Second, true},
		{"cut short", 6200 * time.Millisecond, 6300 * time.Millisecond, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dns := synth.Flow{Interface: "eth0", Dir: record.Egress, Proto: 17, Src: netip.AddrPortFrom(incHost, 53535),
				Dst: netip.AddrPortFrom(incDNS, 53), Size: 80, Phases: []synth.Phase{{From: 2 * time.Second, To: c.end, Bps: 1100 * 80 * 8}}}
			rec, _ := synth.Generate(synth.Spec{Name: "counted_depth", Duration: c.trace, Seed: 39,
				SampleNs: incSampleNs, CounterLag: 30 * time.Millisecond, CounterRefresh: time.Second, RefreshPhase: 370 * time.Millisecond,
				Interfaces: []synth.Interface{{Name: "eth0", ENA: true, LinkLocalBurst: 64}}, Flows: []synth.Flow{dns}})
			a := newAnalysis(rec, DefaultOptions())
			fs := a.seriesOrEmpty("eth0", record.Egress)
			perWindow := a.opt.LinkLocalPPS * float64(a.g.widthNs) / 1e9
			lag := counterLag{lowNs: int64(25 * time.Millisecond), highNs: int64(35 * time.Millisecond), pointNs: int64(30 * time.Millisecond),
				refreshNs: int64(time.Second), refreshKnown: true, source: lagEstimated}
			jumps := a.jumps("eth0", counters.LinklocalAllowanceExceeded)
			if len(jumps) < 2 {
				t.Fatalf("premise: %d jumps, want a few", len(jumps))
			}
			d, ok := a.countedDepth(fs, jumps, lag, func(i int) float64 { return float64(fs.linkLocalAt(i)) }, perWindow,
				a.opt.LinkLocalPPS*a.opt.IncidentRefill.Seconds())
			if ok != c.counted {
				t.Fatalf("counted %v (depth %.2f to %.2f), want %v", ok, d.from, d.to, c.counted)
			}
			// Within the half packet the device's buckets of 100 µs
			// (refilled whole before their packets) may differ by.
			if ok && (d.from > 64.5 || d.to < 63.5 || d.to-d.from > 1.5) {
				t.Errorf("depth %.2f to %.2f, the device's 64", d.from, d.to)
			}
		})
	}
}
