package analyzer

import (
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/record"
)

// TestConsistentLags: twinscore's seed 7 run 190 reduced. Two 14 ms
// bursts 200 ms apart behind a 100 ms refresh and a 1 s lag, each shown at
// two changes: at 900 ms the last change would show nothing, at 1 s every
// change shows a burst. A third burst whose drops a lag would show while
// the reads went on, where no change came, leaves no lag; one whose drops
// would come after the last read leaves them as they were. None with no
// refresh, nor beside a cause that lasts long.
func TestConsistentLags(t *testing.T) {
	const ms = int64(time.Millisecond)
	const readNs = 10 * ms
	bursts := [][2]int64{{398, 412}, {598, 612}}
	changes := []int64{1400, 1500, 1600, 1700} // each read's start, ms
	build := func(changes []int64, readsUntil int64, extra ...[2]int64) (*analysis, []counters.Jump, func(int) float64) {
		n := 3000 // 1 ms windows
		vals := make([]float64, n)
		for i := range vals {
			vals[i] = 10
		}
		for _, b := range append(append([][2]int64{}, bursts...), extra...) {
			for i := b[0]; i < b[1]; i++ {
				vals[i] = 1000
			}
		}
		rec := &record.Recording{}
		for at := int64(0); at <= readsUntil; at += readNs / ms {
			rec.Counters = append(rec.Counters, record.CounterSample{Interface: "eth0", BeforeNs: at * ms, AfterNs: at*ms + ms, Values: map[string]uint64{}})
		}
		var jumps []counters.Jump
		for _, c := range changes {
			jumps = append(jumps, counters.Jump{Interface: "eth0", FromNs: (c-readNs/ms)*ms + ms, ToNs: c*ms + ms, Delta: 1000})
		}
		a := &analysis{g: grid{widthNs: ms, n: n}, rec: rec, opt: DefaultOptions()}
		return a, jumps, func(i int) float64 { return vals[i] }
	}
	// The clusters' causes as the estimate paired them: the second
	// burst took the last three changes.
	of := []lagCause{{part: lagPart{fc: 0, l: 0}, lo: 398, hi: 412, level: 100}, {part: lagPart{fc: 1, l: 3}, lo: 598, hi: 612, level: 100}}
	window := func(j counters.Jump) (int64, int64) { return j.FromNs, j.ToNs }
	capNs := lagReach(int64(MaxCounterLag), readNs)
	var a *analysis
	var jumps []counters.Jump
	var val func(int) float64
	scan := func(of []lagCause, refreshNs int64) (lagRange, bool) {
		return a.consistentLags(jumps, of, refreshNs, readNs, capNs, window, lagTraffic{val: val, sentFirst: true})
	}

	a, jumps, val = build(changes, 3000)
	r, ok := scan(of, 100*ms)
	if !ok || r.from > 1000*ms || r.to < 1000*ms || r.from <= 900*ms {
		t.Errorf("two bursts at two changes each: lags %v to %v (found %v), want a range holding 1 s and not 900 ms", time.Duration(r.from), time.Duration(r.to), ok)
	}
	long := []lagCause{{part: lagPart{fc: 0, l: 3}, lo: 398, hi: 612, level: 100}}
	if _, ok := scan(long, 100*ms); ok {
		t.Error("beside a cause 214 ms long: a range, want none")
	}
	// Each burst at one change: a refresh of 0 fits (the window only
	// a read wide), but is not tested.
	a, jumps, val = build([]int64{1400, 1600}, 3000)
	one := []lagCause{{part: lagPart{fc: 0, l: 0}, lo: 398, hi: 412, level: 100}, {part: lagPart{fc: 1, l: 1}, lo: 598, hi: 612, level: 100}}
	if _, ok := scan(one, 0); ok {
		t.Error("with no refresh: a range, want none")
	}
	if _, ok := scan(one, 100*ms); !ok {
		t.Error("each burst at one change behind a refresh: no range")
	}
	a, jumps, val = build(changes, 3000, [2]int64{1100, 1114})
	if r, ok := scan(of, 100*ms); ok {
		t.Errorf("a third burst no change shows: lags %v to %v, want none", time.Duration(r.from), time.Duration(r.to))
	}
	a, jumps, val = build(changes, 1800, [2]int64{1100, 1114})
	if r2, ok := scan(of, 100*ms); !ok || r2 != r {
		t.Errorf("a third burst shown after the last read: lags %v to %v (found %v), want %v to %v", time.Duration(r2.from), time.Duration(r2.to), ok, time.Duration(r.from), time.Duration(r.to))
	}
}
