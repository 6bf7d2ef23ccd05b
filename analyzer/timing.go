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

// counterRefresh is the period of the reads at which a counter changes: 0
// when it changed at two successive reads (the device shows every change
// at the next read), else a period, at most MaxCounterRefresh, that every
// gap between its changes is a multiple of, within a read and a half (a
// change is seen at the first read after the device published it): see
// refreshOf. One gap alone is no rhythm: two bursts a second apart, each shown
// at one read, change a counter a second apart whatever the device's
// refresh. Gaps of 1.0 and 1.1 s are a 100 ms refresh, not a 1 s one. When
// the counter's own changes cannot tell, the changes of every counter of
// the interface (one device publishes them together) stand in, and with
// none, known is false and the refresh is taken as 0. A period found so
// may still be the traffic's rhythm: estimateLag tests it against 0.
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
	ri := max(a.readInterval(iface), 1)
	gaps := make([]int64, 0, len(changes)-1)
	for k := 1; k < len(changes); k++ {
		gaps = append(gaps, changes[k]-changes[k-1])
	}
	slices.Sort(gaps)
	if gaps[0] <= ri+ri/2 {
		return 0, true
	}
	if len(gaps) < 2 {
		return 0, false
	}
	// The shortest gap is k periods. Of the periods every gap is a
	// multiple of within a read and a half, the one they fit best, the
	// longest where another fits better by less than a quarter read (so
	// half or a third of the period, which fits as well, is not taken).
	// A period under three reads is no longer told from the reads' own
	// jitter.
	tol := ri + ri/2
	maxNs := int64(MaxCounterRefresh)
	best, bestDev := int64(0), int64(math.MaxInt64)
	for k := max((gaps[0]+maxNs-1)/maxNs, 1); gaps[0]/k >= 3*ri; k++ {
		period, ok := fitPeriod(gaps, gaps[0]/k, tol)
		if !ok {
			continue
		}
		if dev := periodDeviation(gaps, period); dev < bestDev-ri/4 {
			best, bestDev = period, dev
		}
	}
	if best == 0 {
		return 0, false
	}
	return min(best, maxNs), true
}

// fitPeriod refines a guess of the period that every gap is a multiple
// of (the median of each gap over its multiple), or says no gap is within
// tol of a multiple of it.
func fitPeriod(gaps []int64, guess, tol int64) (int64, bool) {
	per := make([]int64, 0, len(gaps))
	for _, g := range gaps {
		m, d := nearestMultiple(g, guess)
		if m == 0 || d > tol || d < -tol {
			return 0, false
		}
		per = append(per, g/m)
	}
	slices.Sort(per)
	return per[len(per)/2], true
}

// periodDeviation is how far the gap furthest from a multiple of period
// lies from it.
func periodDeviation(gaps []int64, period int64) int64 {
	var dev int64
	for _, g := range gaps {
		_, d := nearestMultiple(g, period)
		dev = max(dev, d, -d)
	}
	return dev
}

// nearestMultiple is the multiple m of period nearest to g, and g's
// distance from it.
func nearestMultiple(g, period int64) (m, d int64) {
	m = (g + period/2) / period
	return m, g - m*period
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

// estimateLag learns a counter's lag from its incidents: the jumps at
// successive refreshes are one cluster, the traffic that stands out over
// the longest look-back before it (locate, over MaxCounterLag and one
// refresh before the cluster's first read) is its cause, from its start S
// to its end E. Each cluster gives ranges of the lag, each the span of
// lags one fact allows (R_k is the read of the cluster's jump k, R_k-1 the
// one before; a drop is shown at most one refresh late):
//   - its first drop came while the traffic was over, after S and by E,
//     and was shown after R_f-1 and by R_f: (R_f-1 - E - refresh, R_f - S];
//   - every jump but the last showed the drops made until a refresh (val,
//     the traffic located, given): see below;
//   - its last drop came at E (the last of the traffic over) and was shown
//     after R_l-1 and by R_l: (R_l-1 - E - refresh, R_l - E].
//
// The last is the narrowest, and the one a queue draining behind the
// traffic breaks: its drops go on past E, and the jumps that show them
// come late (lab, micro-burst: a jump of 24 drops 15 ms after the burst's
// own put its lag 9 ms late). So a cluster's own range is the one most of
// its ranges agree with (clusterRange), and its middle the cluster's lag.
// A bucket that lets the traffic run over before its first drop biases
// the first jumps' ranges, late, as a drain does the last ones: the lab's
// pps-overshoot (an 800-packet bucket, 200 ms of its excess) is stated
// 60 to 130 ms late with its allowance given. Inferring the bucket from
// the excess beyond the drops would need to know which packets the device
// counts against its packet rate, which it does not say.
//
// The lag stated is the median of the clusters' (an incident shown later
// than another, by a device or the lab's poller busier at one than at the
// other, pulls it no further than the middle); its range the one every
// cluster agrees with, or where they do not, all of theirs (two bursts of
// one run shown 23 and 34 ms late were stated 19.5 to 19.7 ms by the range
// most agreed with).
//
// A refresh learned from the gaps between changes may be the traffic's
// rhythm, not the device's (the lab's micro-burst: the conntrack gauge
// moved as it began and at each of its bursts, a second apart each time).
// So it must beat a refresh of 0, under which every incident is shown as
// soon as the lag allows: the counter changed at about as many reads as
// each incident's traffic spanned (a device with a refresh stays silent
// at the reads between, however long the traffic goes on), and the
// incidents agree on one lag (within a read interval: a refresh would
// show each after a wait of its own). Where 0 fits so, the refresh is
// taken as 0 but not known; a refresh the run could not tell at all is
// taken as 0 where 0 fits, else as MaxCounterRefresh. Wherever the refresh
// is not known, the range stated starts at 0: a refresh the run could not
// see may account for any part of the delay.
func (a *analysis) estimateLag(jumps []counters.Jump, refreshNs int64, known bool, readNs int64, locate func(lo, hi int) span, val func(int) float64) (lag counterLag, ok bool) {
	if known && refreshNs == 0 {
		lag, ok, _ = a.estimateLagWith(jumps, 0, readNs, locate, val)
		lag.refreshKnown = true
		return lag, ok
	}
	zero, zeroOK, fits := a.estimateLagWith(jumps, 0, readNs, locate, val)
	switch {
	case known && (!zeroOK || !fits || zero.clusters < 2):
		lag, ok, _ = a.estimateLagWith(jumps, refreshNs, readNs, locate, val)
		lag.refreshKnown = true
		return lag, ok
	case !known && (!zeroOK || !fits):
		lag, ok, _ = a.estimateLagWith(jumps, int64(MaxCounterRefresh), readNs, locate, val)
	default:
		lag, ok = zero, zeroOK
	}
	lag.lowNs = 0
	return lag, ok
}

// lagRange is a span of lags, (from, to].
type lagRange struct{ from, to int64 }

func (r lagRange) mid() int64 { return r.from + (r.to-r.from)/2 }

// agreement is the range that most of rs share (the earliest where
// several do) and how many share it.
func agreement(rs []lagRange) (lagRange, int) {
	type bound struct {
		ns   int64
		open int // +1: a range opens, -1: one closes
	}
	bounds := make([]bound, 0, 2*len(rs))
	for _, r := range rs {
		bounds = append(bounds, bound{r.from, 1}, bound{r.to, -1})
	}
	// Opens before closes at one instant: touching ranges agree.
	slices.SortFunc(bounds, func(x, y bound) int { return cmp.Or(cmp.Compare(x.ns, y.ns), cmp.Compare(y.open, x.open)) })
	n, best := 0, 0
	var out lagRange
	for k, b := range bounds {
		n += b.open
		if b.open > 0 && n > best {
			best, out = n, lagRange{b.ns, bounds[k+1].ns}
		}
	}
	return out, best
}

// clusterRange is the range most of a cluster's ranges share, each
// narrowed by half a fine window at both ends first: their edges come
// from the located traffic's, known to a window only, so ranges that
// touch in a sliver do not agree (a queue draining behind a burst gave
// ranges that touched the true one in 0.1 ms, and the most agreed was
// that sliver, 5 ms off).
func (a *analysis) clusterRange(rs []lagRange) (lagRange, bool) {
	if len(rs) == 0 {
		return lagRange{}, false
	}
	half := a.g.widthNs / 2
	narrowed := make([]lagRange, 0, len(rs))
	for _, r := range rs {
		if r.to-r.from > 2*half {
			r = lagRange{r.from + half, r.to - half}
		}
		narrowed = append(narrowed, r)
	}
	r, _ := agreement(narrowed)
	return lagRange{max(r.from-half, 0), r.to + half}, true
}

// estimateLagWith is estimateLag with the refresh taken as refreshNs.
// fits is false when two clusters' ranges lie more than readNs apart, or
// a cluster's traffic spanned more than two reads beyond those its
// counter changed at (a refresh of 0 would have shown it at each).
func (a *analysis) estimateLagWith(jumps []counters.Jump, refreshNs, readNs int64, locate func(lo, hi int) span, val func(int) float64) (lag counterLag, ok, fits bool) {
	fits = true
	maxNs := int64(MaxCounterLag)
	var clusters []lagRange
	for f := 0; f < len(jumps); {
		l := f
		// Reads that come late on a busy host, or a read the drops
		// missed, do not split a cluster: up to two refreshes or reads.
		for l+1 < len(jumps) && jumps[l+1].FromNs-jumps[l].ToNs <= 2*max(refreshNs, readNs)+readNs/2 {
			l++
		}
		firstPrev, firstRead := a.certain(jumps[f])
		prevRead, lastRead := a.certain(jumps[l])
		fc := f
		f = l + 1
		lo, hi := a.g.span(firstPrev-maxNs-max(refreshNs, int64(MaxCounterRefresh)), lastRead)
		var own []lagRange
		add := func(from, to int64) {
			// A range just past the bound (a lag at it, and a queue's
			// drain or a bucket on top) agrees with the bound; one far
			// past it is other traffic.
			if from > maxNs+maxNs/10 {
				return
			}
			if from, to = min(max(from, 0), maxNs), min(to, maxNs); from <= to {
				own = append(own, lagRange{from, to})
			}
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
		start, end := a.g.startNs(s.lo), a.g.startNs(s.hi)
		if (end-start)/max(readNs, 1)-int64(l-fc+1) > 2 {
			fits = false
		}
		add(firstPrev-end-refreshNs, firstRead-start)
		if val != nil && s.level > 0 {
			a.shareRanges(jumps[fc:l+1], s, val, add)
		}
		add(prevRead-end-refreshNs, lastRead-end)
		if r, ok := a.clusterRange(own); ok {
			clusters = append(clusters, r)
		}
	}
	if len(clusters) == 0 {
		return counterLag{}, false, false
	}
	r, n := agreement(clusters)
	mids := make([]int64, len(clusters))
	latestFrom, earliestTo := clusters[0].from, clusters[0].to
	for k, c := range clusters {
		mids[k] = c.mid()
		latestFrom, earliestTo = max(latestFrom, c.from), min(earliestTo, c.to)
		if n < len(clusters) {
			r.from, r.to = min(r.from, c.from), max(r.to, c.to)
		}
	}
	slices.Sort(mids)
	point := mids[len(mids)/2]
	if len(mids)%2 == 0 {
		point = (mids[len(mids)/2-1] + point) / 2
	}
	point = min(max(point, r.from), r.to)
	fits = fits && latestFrom-earliestTo <= readNs
	return counterLag{lowNs: r.from, highNs: r.to, pointNs: point, refreshNs: refreshNs,
		clusters: len(clusters), source: lagEstimated}, true, fits
}

// shareRanges adds the range of the lag that each jump of a cluster but
// its last gives: it showed the drops made until a refresh, when the
// traffic's excess over s's level (val per window) had reached the same
// share of the cluster's as the counter's rise had of its whole (the drops
// go with the excess). That refresh came R_k-1 - lag to R_k - lag: a range
// a read interval wide, however long the refresh.
func (a *analysis) shareRanges(cluster []counters.Jump, s span, val func(int) float64, add func(from, to int64)) {
	excess := func(i int) float64 { return max(val(i)-s.level, 0) }
	total := sumIn(excess, s.lo, s.hi)
	var rise uint64
	for _, j := range cluster {
		rise += j.Delta
	}
	if total <= 0 || rise == 0 {
		return
	}
	var sofar uint64
	i, cum := s.lo, 0.0
	for _, j := range cluster[:len(cluster)-1] {
		sofar += j.Delta
		target := total * float64(sofar) / float64(rise)
		for i < s.hi && cum+excess(i) < target {
			cum += excess(i)
			i++
		}
		at := a.g.startNs(i)
		if i < s.hi && excess(i) > 0 {
			at += int64((target - cum) / excess(i) * float64(a.g.widthNs))
		}
		from, to := a.certain(j)
		add(from-at, to-at)
	}
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
