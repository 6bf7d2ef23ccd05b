package analyzer

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
)

// How a device's counters are timed is documented nowhere (AWS-LIMITS.md):
// it may publish the values a read returns only every so often (its
// refresh period) and show a drop some time after it (its lag). Both are
// learned here from the run, per counter, and bound the look-back before
// every jump.

// MaxCounterRefresh bounds the refresh period learned from the reads.
const MaxCounterRefresh = 1000 * time.Millisecond

// counterRefresh is the spacing of the reads at which a counter changes:
// 0 when it changed at two successive reads (the device shows every
// change at the next read), else the typical gap between its changes (the
// median of those within half again the shortest) when at least two gaps
// agree on it, at most MaxCounterRefresh. One gap alone is no rhythm: two
// bursts a second apart, each shown at one read, change a counter a
// second apart whatever the device's refresh. When the counter's own
// changes cannot tell, the changes of every counter of the interface (one
// device publishes them together) stand in, and with none, known is false
// and the refresh is taken as 0.
func (a *analysis) counterRefresh(iface string, jumps []counters.Jump) (ns int64, known bool) {
	changes := make([]int64, 0, len(jumps))
	for _, j := range jumps {
		changes = append(changes, j.ToNs)
	}
	if ns, known := a.refreshOf(iface, changes); known {
		return ns, true
	}
	return a.refreshOf(iface, a.interfaceChanges(iface))
}

// refreshOf is counterRefresh of one list of change times.
func (a *analysis) refreshOf(iface string, changes []int64) (ns int64, known bool) {
	if len(changes) < 2 {
		return 0, false
	}
	ri := a.readInterval(iface)
	gaps := make([]int64, 0, len(changes)-1)
	for k := 1; k < len(changes); k++ {
		gaps = append(gaps, changes[k]-changes[k-1])
	}
	slices.Sort(gaps)
	if gaps[0] <= ri+ri/2 {
		return 0, true
	}
	near := gaps[:1]
	for k := 1; k < len(gaps) && gaps[k] <= gaps[0]+gaps[0]/2; k++ {
		near = gaps[:k+1]
	}
	if len(near) < 2 {
		return 0, false
	}
	return min(near[len(near)/2], int64(MaxCounterRefresh)), true
}

// interfaceChanges are the starts of the reads of an interface at which
// any counter or gauge changed since the read before.
func (a *analysis) interfaceChanges(iface string) []int64 {
	var out []int64
	var last map[string]uint64
	for _, s := range a.rec.Counters {
		if s.Interface != iface || s.Err != "" {
			continue
		}
		if last != nil {
			for k, v := range s.Values {
				if w, ok := last[k]; ok && w != v {
					out = append(out, s.BeforeNs)
					break
				}
			}
		}
		last = s.Values
	}
	return out
}

// estimateLag learns a counter's lag from the ends of its incidents: the
// jumps at successive refreshes are one cluster, the traffic that stands
// out over the longest look-back before it (locate, over MaxCounterLag
// and one refresh before the cluster's first read) is its cause, and its
// last window ends at most as the last drop did. The last drop was shown
// after the read before the cluster's last jump and by that jump's read,
// at most one refresh late: so the lag lies in (R_{l-1} - end - refresh,
// R_l - end]. Each jump of a cluster but its last says more (val, the
// traffic located, given): see below. The lag's range is the one most of
// these agree with; its point the middle of it, or with two clusters or
// more the median of each one's own range's middle. ok is false when no cluster ended inside its
// look-back.
//
// With the refresh unknown it is taken as 0 while the incidents agree on
// one lag with it (within a read interval: a refresh of its own would
// show each incident after a wait of its own), else as
// MaxCounterRefresh; either way the range stated starts at 0, since a
// refresh the run could not see may account for any part of the delay.
func (a *analysis) estimateLag(jumps []counters.Jump, refreshNs int64, known bool, readNs int64, locate func(lo, hi int) span, val func(int) float64) (lag counterLag, ok bool) {
	if known {
		lag, ok, _ = a.estimateLagWith(jumps, refreshNs, readNs, locate, val)
		return lag, ok
	}
	lag, ok, agreed := a.estimateLagWith(jumps, 0, readNs, locate, val)
	if !ok || !agreed {
		lag, ok, _ = a.estimateLagWith(jumps, int64(MaxCounterRefresh), readNs, locate, val)
	}
	lag.lowNs = 0
	return lag, ok
}

// agreed is false when two incidents' ranges of their last drop lie more
// than readNs apart.
func (a *analysis) estimateLagWith(jumps []counters.Jump, refreshNs, readNs int64, locate func(lo, hi int) span, val func(int) float64) (lag counterLag, ok, agreed bool) {
	maxNs := int64(MaxCounterLag)
	type bound struct {
		ns   int64
		open int // +1: a range opens, -1: one closes
	}
	var bounds []bound
	var ends []int64 // the middle of each cluster's range of its last drop
	// The latest start and earliest end of those ranges.
	latestFrom, earliestTo := int64(math.MinInt64), int64(math.MaxInt64)
	for f := 0; f < len(jumps); {
		l := f
		// Reads that come late on a busy host, or a read the drops
		// missed, do not split a cluster: up to two refreshes or reads.
		for l+1 < len(jumps) && jumps[l+1].FromNs-jumps[l].ToNs <= 2*max(refreshNs, readNs)+readNs/2 {
			l++
		}
		first, _ := a.certain(jumps[f])
		prevRead, lastRead := a.certain(jumps[l])
		fc := f
		f = l + 1
		lo, hi := a.g.span(first-maxNs-max(refreshNs, int64(MaxCounterRefresh)), lastRead)
		add := func(from, to int64) (mid int64, ok bool) {
			// A range just past the bound (a lag at it, and a queue's
			// drain or a bucket on top) agrees with the bound; one far
			// past it is other traffic.
			if from > maxNs+maxNs/10 {
				return 0, false
			}
			if from, to = min(max(from, 0), maxNs), min(to, maxNs); from <= to {
				bounds = append(bounds, bound{from, 1}, bound{to, -1})
				return from + (to-from)/2, true
			}
			return 0, false
		}
		s := locate(lo, hi)
		// The latest traffic at the level the most excess stood out
		// from, before the read, is the cause: the most over so long a
		// look-back may be an earlier incident's, as large or larger.
		// Traffic at that level again within MergeGap is the same
		// incident going on (a sustained overshoot sent in batches).
		for val != nil && s.level > 0 && s.hi < hi {
			x, y, ok := excessSpan(val, s.hi, hi, s.level)
			if !ok {
				break
			}
			if x-s.hi > a.mergeGapWindows() {
				s.lo = x
			}
			s.hi = y
		}
		if s.levelName == levelNone || s.hi >= hi {
			continue // nothing there, or still going at the read: no end seen
		}
		end := a.g.startNs(s.hi)
		if mid, ok := add(prevRead-end-refreshNs, lastRead-end); ok {
			ends = append(ends, mid)
			latestFrom, earliestTo = max(latestFrom, prevRead-end-refreshNs), min(earliestTo, lastRead-end)
		}
		if val == nil || s.level <= 0 || l == fc {
			continue
		}
		// Every jump but the last showed the drops made until a
		// refresh: when the traffic's excess had reached the same share
		// of the cluster's as the counter's rise had of its whole (the
		// drops go with the excess). That refresh came R_{k-1} - lag to
		// R_k - lag: a range a read interval wide, however long the
		// refresh.
		excess := func(i int) float64 { return max(val(i)-s.level, 0) }
		total := sumIn(excess, s.lo, s.hi)
		var rise uint64
		for k := fc; k <= l; k++ {
			rise += jumps[k].Delta
		}
		if total <= 0 || rise == 0 {
			continue
		}
		var sofar uint64
		i, cum := s.lo, 0.0
		for k := fc; k < l; k++ {
			sofar += jumps[k].Delta
			target := total * float64(sofar) / float64(rise)
			for i < s.hi && cum+excess(i) < target {
				cum += excess(i)
				i++
			}
			at := a.g.startNs(i)
			if i < s.hi && excess(i) > 0 {
				at += int64((target - cum) / excess(i) * float64(a.g.widthNs))
			}
			from, to := a.certain(jumps[k])
			_, _ = add(from-at, to-at)
		}
	}
	if len(bounds) == 0 {
		return counterLag{}, false, false
	}
	// Opens before closes at one instant: touching ranges agree.
	slices.SortFunc(bounds, func(x, y bound) int { return cmp.Or(cmp.Compare(x.ns, y.ns), cmp.Compare(y.open, x.open)) })
	n, best := 0, 0
	var low, high int64
	for k, b := range bounds {
		n += b.open
		if b.open > 0 && n > best {
			best, low = n, b.ns
			high = bounds[k+1].ns
		}
	}
	point := low + (high-low)/2
	if len(ends) >= 2 {
		// Incidents shown at different lags (a device, or the lab's
		// poller, busier at one than at another) do not agree on one
		// range, and the range most agree with is one incident's or
		// as wide as the look-back: the lag stated is the median of
		// each incident's own (lab, micro-burst, two bursts shown 39
		// and 52 ms late: 28.6 ms stated before, in a range of 0 to 57).
		slices.Sort(ends)
		point = min(max(ends[len(ends)/2], low), high)
		if len(ends)%2 == 0 {
			point = min(max((ends[len(ends)/2-1]+ends[len(ends)/2])/2, low), high)
		}
	}
	agreed = len(ends) < 2 || latestFrom-earliestTo <= readNs
	return counterLag{lowNs: low, highNs: high, pointNs: point, refreshNs: refreshNs,
		source: lagEstimated}, true, agreed
}

// maxShiftLag bounds the lag shortestShift learns: with nothing but
// where the traffic was, a longer shift only finds other traffic.
const maxShiftLag = int64(100 * time.Millisecond)

// shortestShift is the shortest shift d (up to maxShiftLag) that puts
// traffic marked by seen in the most jump intervals moved back by d: the
// smallest lag the jumps agree with. The true lag then lies between d and
// d plus one read interval (the last jump of an incident was seen by the
// first read after its last drop plus the lag).
func (a *analysis) shortestShift(iface string, jumps []counters.Jump, seen func(int) bool) (counterLag, bool) {
	if len(jumps) == 0 {
		return counterLag{}, false
	}
	maxNs := maxShiftLag
	prefix := make([]int, a.g.n+1)
	for i := range a.g.n {
		prefix[i+1] = prefix[i]
		if seen(i) {
			prefix[i+1]++
		}
	}
	type interval struct{ from, to int64 }
	ivs := make([]interval, len(jumps))
	for k, j := range jumps {
		ivs[k].from, ivs[k].to = a.certain(j)
	}
	best, bestD := 0, int64(0)
	for d := int64(0); d <= maxNs; d += a.g.widthNs {
		n := 0
		for _, iv := range ivs {
			if lo, hi := a.g.span(iv.from-d, iv.to-d); prefix[hi] > prefix[lo] {
				n++
			}
		}
		if n > best {
			best, bestD = n, d
		}
	}
	if best == 0 {
		return counterLag{}, false
	}
	ri := a.readInterval(iface)
	high := min(bestD+ri, maxNs)
	return counterLag{lookNs: high, pointNs: min(bestD+ri/2, maxNs), lowNs: bestD, highNs: high, source: lagEstimated}, true
}
