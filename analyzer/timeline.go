package analyzer

import (
	"time"

	"github.com/enaprobe/enaprobe/internal/knobs"
	"github.com/enaprobe/enaprobe/internal/record"
)

// grid is the fine-window time axis shared by every interface and direction:
// window i covers [originNs + i*widthNs, originNs + (i+1)*widthNs). Windows
// sit on multiples of widthNs of the monotonic clock, the grid the recorded
// buckets and window events are aligned to.
type grid struct {
	originNs int64
	widthNs  int64
	n        int
}

// index returns the window holding instant ns, clamped to the grid.
func (g grid) index(ns int64) int {
	i := int((ns - g.originNs) / g.widthNs)
	if ns < g.originNs {
		i = 0
	}
	return min(max(i, 0), g.n)
}

// span returns the windows [lo, hi) overlapping the interval (fromNs, toNs].
func (g grid) span(fromNs, toNs int64) (lo, hi int) {
	lo = g.index(fromNs + 1)
	hi = g.index(toNs-1) + 1
	return lo, min(max(hi, lo), g.n)
}

func (g grid) startNs(i int) int64 { return g.originNs + int64(i)*g.widthNs }

// fineSeries is one interface and direction summed per fine window, dense
// over the grid so that every detection is a linear scan.
type fineSeries struct {
	iface     string
	dir       record.Direction
	bytes     []uint64
	packets   []uint64
	syns      []uint64
	linkLocal [record.NumServices][]uint64
}

func newFineSeries(g grid, iface string, dir record.Direction) *fineSeries {
	fs := &fineSeries{iface: iface, dir: dir,
		bytes: make([]uint64, g.n), packets: make([]uint64, g.n), syns: make([]uint64, g.n)}
	for i := range fs.linkLocal {
		fs.linkLocal[i] = make([]uint64, g.n)
	}
	return fs
}

// add sums a bucket series into the windows. A bucket wider than a window
// lands whole in the window of its start (the grid is never finer than the
// buckets, see newGrid).
func (fs *fineSeries) add(g grid, s record.Series) {
	for _, b := range s.Buckets {
		i := g.index(b.StartNs)
		if i >= g.n {
			continue
		}
		fs.bytes[i] += b.Bytes
		fs.packets[i] += b.Packets
		fs.syns[i] += b.SYNs
		for j, v := range b.LinkLocal {
			fs.linkLocal[j][i] += v
		}
	}
}

// linkLocalAt is the link-local packets of every service in window i.
func (fs *fineSeries) linkLocalAt(i int) uint64 {
	var n uint64
	for j := range fs.linkLocal {
		n += fs.linkLocal[j][i]
	}
	return n
}

// newGrid spans the trace (and any bucket outside the recorded start and
// end) with windows of the requested width as the datapath's rule makes it
// (knobs.Window: a whole number of buckets, so that no bucket straddles two
// windows).
func newGrid(rec *record.Recording, fineNs int64) grid {
	w := int64(knobs.Window(time.Duration(rec.GridBucketNs()), time.Duration(max(fineNs, 1))))
	lo, hi := rec.Meta.Start.MonoNs, rec.Meta.End.MonoNs
	for _, s := range rec.Series {
		if n := len(s.Buckets); n > 0 {
			lo = min(lo, s.Buckets[0].StartNs)
			hi = max(hi, s.Buckets[n-1].StartNs+max(s.WidthNs, 1))
		}
	}
	origin := floorDiv(lo, w) * w
	n := 0
	if hi > origin {
		n = int((hi - origin + w - 1) / w)
	}
	return grid{originNs: origin, widthNs: w, n: n}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// seriesKey names one interface and direction.
type seriesKey struct {
	iface string
	dir   record.Direction
}

// buildFineSeries sums every recorded series onto the grid.
func buildFineSeries(rec *record.Recording, g grid) map[seriesKey]*fineSeries {
	out := make(map[seriesKey]*fineSeries)
	for _, s := range rec.Series {
		k := seriesKey{s.Interface, s.Direction}
		fs := out[k]
		if fs == nil {
			fs = newFineSeries(g, s.Interface, s.Direction)
			out[k] = fs
		}
		fs.add(g, s)
	}
	return out
}
