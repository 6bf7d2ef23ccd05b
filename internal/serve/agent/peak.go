package agent

import (
	"github.com/enaprobe/enaprobe/internal/record"
)

// peakWindowNs is the window of the peak rate: 1 ms, the scale of a
// micro-burst that a 1-minute average hides.
const peakWindowNs = int64(1e6)

// peakTracker finds the highest 1 ms rate of each direction since the
// last take. Buckets come a drain at a time and a straggler of a bucket
// already seen may come later, so windows stay open a few ms behind the
// newest before they count.
type peakTracker struct {
	open [record.NumDirections]map[int64]uint64 // bytes per window start
	max  [record.NumDirections]uint64           // bytes of the fullest closed window
}

// openWindows is how many windows behind the newest stay open.
const openWindows = 8

func (p *peakTracker) add(d record.Direction, buckets []record.Bucket) {
	if p.open[d] == nil {
		p.open[d] = map[int64]uint64{}
	}
	var newest int64
	for _, b := range buckets {
		w := b.StartNs / peakWindowNs
		p.open[d][w] += b.Bytes
		newest = max(newest, w)
	}
	for w, n := range p.open[d] {
		if w < newest-openWindows {
			p.max[d] = max(p.max[d], n)
			delete(p.open[d], w)
		}
	}
}

// take returns the peak in bits per second since the last take, open
// windows included, and starts over (a straggler of a window taken then
// starts a window of its own: a peak is never counted twice).
func (p *peakTracker) take(d record.Direction) float64 {
	m := p.max[d]
	for _, n := range p.open[d] {
		m = max(m, n)
	}
	p.max[d] = 0
	clear(p.open[d])
	return float64(m) * 8 / (float64(peakWindowNs) / 1e9)
}
