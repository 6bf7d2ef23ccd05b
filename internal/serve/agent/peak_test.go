package agent

import (
	"testing"

	"github.com/enaprobe/enaprobe/internal/record"
)

// TestPeakTracker: the peak is the fullest 1 ms of 100 µs buckets, a
// straggler of a window already seen adds to it, and take starts over.
func TestPeakTracker(t *testing.T) {
	var p peakTracker
	var bs []record.Bucket
	for i := range int64(50) { // 5 ms of 1000 bytes per 100 µs: 80 Mbit/s
		bs = append(bs, record.Bucket{StartNs: i * 100_000, Bytes: 1000})
	}
	bs[25].Bytes = 6000 // the third ms holds 15000 bytes: 120 Mbit/s
	p.add(record.Egress, bs)
	// A straggler of the third ms, in a later drain.
	p.add(record.Egress, []record.Bucket{{StartNs: 2_500_000, Bytes: 5000}})
	if got, want := p.take(record.Egress), 20000*8/1e-3; got != want {
		t.Errorf("peak %v bit/s, want %v", got, want)
	}
	if got := p.take(record.Egress); got != 0 {
		t.Errorf("after take: %v, want 0", got)
	}
	if got := p.take(record.Ingress); got != 0 {
		t.Errorf("ingress %v, want 0", got)
	}
}
