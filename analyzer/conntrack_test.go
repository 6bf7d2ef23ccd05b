package analyzer

import (
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
)

// TestSameFill: the jumps of one filling of the conntrack table, split in
// two incidents by a pause in the retries, are one incident; a filling
// after the table emptied again is its own.
func TestSameFill(t *testing.T) {
	ms := int64(time.Millisecond)
	// Reads every 10 ms: 150 free, falling to 0 by 50 ms, full until
	// 2 s, 150 free again at 2.01 s, full again from 2.05 s.
	var gauges []counters.GaugeValue
	for ns := int64(0); ns <= 3000*ms; ns += 10 * ms {
		v := uint64(0)
		switch {
		case ns < 50*ms:
			v = uint64(150 - 3*ns/ms)
		case ns > 2000*ms && ns < 2050*ms:
			v = uint64(150 - 3*(ns-2010*ms)/ms)
		}
		gauges = append(gauges, counters.GaugeValue{BeforeNs: ns, AfterNs: ns + ms, Value: v})
	}
	inc := func(jumpNs int64, lo, hi int) incident {
		return incident{span: span{lo: lo, hi: hi, toNs: jumpNs, delta: 10},
			jumps: []counters.Jump{{FromNs: jumpNs - 10*ms, ToNs: jumpNs, Delta: 10}}}
	}
	// Jumps at 60 ms and 80 ms look back to the fall before them; one at
	// 2.07 s to the second fall.
	in := []incident{inc(60*ms, 1, 2), inc(80*ms, 3, 4), inc(2070*ms, 9, 10)}
	got := sameFill(in, gauges, int64(time.Second))
	if len(got) != 2 {
		t.Fatalf("%d incidents, want 2: %+v", len(got), got)
	}
	if got[0].lo != 1 || got[0].hi != 4 || len(got[0].jumps) != 2 || got[0].delta != 20 {
		t.Errorf("first %+v: want windows 1 to 4, both jumps, 20 drops", got[0])
	}
	if got[1].lo != 9 || len(got[1].jumps) != 1 {
		t.Errorf("second %+v: want the refilling alone", got[1])
	}
}
