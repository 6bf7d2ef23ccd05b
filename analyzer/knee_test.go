package analyzer

import (
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/record"
)

// TestKneeRange: a 14 ms burst of 1,500-byte packets, 20 a 100 µs window,
// into a deep queue that the device counts as it drains (8 counts a
// millisecond for 400 ms after the burst), every packet over the bucket
// counted as it came, read every 10 ms (a little late each time, as a busy
// sampler is) behind a lag. The range holds the lag and is at most a read
// interval and two windows wide (so its middle is within 5 ms of it), and
// a sparse tail wider:
//   - no fall: a device that counts only as its queue drains counts at the
//     same rate during the burst and after, and nothing tells where the
//     burst's end was shown;
//   - a sparse tail: the burst's last 3 ms at a 20th of its rate (a
//     sender starved of CPU);
//   - counted twice: the device counts each packet of the burst twice, and
//     the fit over the traffic is no fit (the fall's read interval alone);
//     with a sparse tail of 6 ms, the read after the dense part's fall
//     counts under three times the drain's rate, and the range must
//     reach into it;
//   - head first: a read 0.3 ms into the burst as shown, its jump the
//     burst's head alone, no faster than the drain's (a 24 ms burst's
//     first 32 counts, d3/quiet): the count fell at a later read.
func TestKneeRange(t *testing.T) {
	const (
		width   = int64(100 * time.Microsecond)
		readNs  = int64(10 * time.Millisecond)
		burstAt = int64(2 * time.Second)
		burstNs = int64(14 * time.Millisecond)
		perDrop = 1500.0
		level   = 500.0 // 40 Mbit/s a 100 µs window
		drainNs = int64(400 * time.Millisecond)
		drained = 8.0 / 1e6 // counts a ns
	)
	for _, c := range []struct {
		name      string
		lag       time.Duration
		sparseNs  int64   // the burst's last ns sent at a 20th of its rate
		perPacket float64 // the device's counts per packet over the bucket
		noFall    bool    // counted only as the queue drains
		shiftNs   int64   // the reads' phase: a read 0.3 ms into the shown burst at -1.1 ms
	}{
		{"no-lag", 0, 0, 1, false, 0},
		{"lag-30ms", 30 * time.Millisecond, 0, 1, false, 0},
		{"lag-250ms", 250 * time.Millisecond, 0, 1, false, 0},
		{"sparse-tail", 30 * time.Millisecond, int64(3 * time.Millisecond), 1, false, 0},
		{"counted-twice", 30 * time.Millisecond, 0, 2, false, 0},
		{"counted-twice-sparse-tail", 30 * time.Millisecond, int64(6 * time.Millisecond), 2, false, 0},
		{"no-fall", 30 * time.Millisecond, 0, 1, true, 0},
		{"head-first", 30 * time.Millisecond, 0, 1, false, int64(-1100 * time.Microsecond)},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := int((burstAt + 2*int64(time.Second)) / width)
			a := &analysis{g: grid{widthNs: width, n: n}, rec: &record.Recording{}, opt: DefaultOptions()}
			v := make([]float64, n)
			lo, hi := int(burstAt/width), int((burstAt+burstNs)/width)
			for i := lo; i < hi; i++ {
				v[i] = 20 * perDrop
				if a.g.startNs(i) >= burstAt+burstNs-c.sparseNs {
					v[i] = perDrop
				}
			}
			// counted is the device's count by ns: the burst's packets
			// over the level as they came (or, with no fall, at the
			// drain's rate from the burst's start), then the drain's.
			end := a.g.startNs(hi)
			counted := func(ns int64) float64 {
				if c.noFall {
					return drained * float64(min(max(ns-burstAt, 0), burstNs+drainNs))
				}
				total := 0.0
				for i := lo; i < hi && a.g.startNs(i) < ns; i++ {
					share := min(float64(ns-a.g.startNs(i))/float64(width), 1)
					total += share * (v[i] - level) / perDrop * c.perPacket
				}
				return total + drained*float64(min(max(ns-end, 0), drainNs))
			}
			var jumps []counters.Jump
			prev, shown := burstAt-5*readNs, 0.0
			for k := int64(1); prev < end+drainNs+int64(c.lag)+5*readNs; k++ {
				at := burstAt - 5*readNs + k*readNs + (k%3)*int64(700*time.Microsecond) + c.shiftNs
				now := counted(at - int64(c.lag))
				if d := uint64(now) - uint64(shown); d > 0 {
					jumps = append(jumps, counters.Jump{Interface: "eth0", Name: counters.BwOutAllowanceExceeded, FromNs: prev, ToNs: at, Delta: d})
					shown = float64(uint64(now))
				}
				prev = at
			}
			// The first jump's range: no earlier than the burst's end
			// before the read before it, no later than its start before
			// its read.
			first := jumps[0]
			bound, ok := keepLag(first.FromNs-end, first.ToNs-burstAt, int64(MaxCounterLag))
			if !ok {
				t.Fatalf("no first-jump range: %+v", first)
			}
			s := span{lo: lo, hi: hi, level: level, levelName: "burst_allowance"}
			r, ok := a.kneeRange(jumps, s, series(v), perDrop, bound, readNs)
			if c.noFall {
				if ok {
					t.Errorf("a count that never fell put the lag at %.1f to %.1f ms", float64(r.from)/1e6, float64(r.to)/1e6)
				}
				return
			}
			if !ok {
				t.Fatalf("no range, the first jump's %.1f to %.1f ms", float64(bound.from)/1e6, float64(bound.to)/1e6)
			}
			lag := int64(c.lag)
			if lag < r.from || lag > r.to || r.to-r.from > readNs+int64(time.Millisecond)+2*width+c.sparseNs {
				t.Errorf("lag range %.2f to %.2f ms, the device's %v (the first jump's %.1f to %.1f)", float64(r.from)/1e6, float64(r.to)/1e6, c.lag, float64(bound.from)/1e6, float64(bound.to)/1e6)
			}
		})
	}
}
