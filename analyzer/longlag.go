package analyzer

import (
	"math"
	"slices"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
)

// The lag of a long incident (traffic over its allowance for many reads),
// placed by the shares of its drops its jumps showed under the bucket its
// timing shows: estimateLag's finer path.

// longIncidentReads is how many reads an incident's traffic must span to
// be placed by longClusterRange.
const longIncidentReads = 10

// minLongLags is how many jumps' lags (all but the last jump's) place a
// long incident: two say how deep its bucket was (the one under which
// both lags agree) and so when its first drop came. Behind a 1 s refresh
// a 2 s overshoot changes its counter three times: with five required, its
// lag was its first and last drops' ranges only, 220 to 318 ms from the
// lab's in four runs of five.
const minLongLags = 2

// longLag is what longClusterRange learned of a long incident: the lag's
// range and its jumps' centre, the bucket's depth and the level the drops
// were modeled over (in val's unit a window), from how many jumps' lags.
type longLag struct {
	lag          lagRange
	centre       int64
	depth, level float64
	lags         int
}

// longClusterRange is the lag of a long incident (its traffic over many
// reads, a jump at most of them): the middle half of its jumps' lags,
// under the depth of bucket and queue its jumps' timing shows
// (bucketDepth), widened by what one jump cannot tell. Its first and last
// drops are left out: the first comes only once what the bucket held is
// spent, the last may be a queue's drain, and the many jumps between say
// more than both. The middle half, not the ranges' agreement: where the
// device's delay varies from read to read (the lab's poller, once 3 to 40
// ms a poll on a busy host) a hundred ranges agree on a sliver that holds none
// of the delays.
//
// Each jump's lag is the middle of its share range, with one exception:
// a device that refreshes every refreshNs shows each refresh at one phase
// of that period (refreshPhase), so the instant a jump became visible is
// known far closer than its read interval, and its lag is that instant
// less when its share was reached. Without it, the lab's 100 ms refresh
// read every 10 ms put every jump of a run at the same place in its read
// interval, up to 5 ms off.
//
// Each lag is cut at maxNs, a read past the longest lag (lagReach): cut
// at 1 s, a link-local flood's or a packet-rate overshoot's 1 s lag,
// which the lab's poll shows 0.5 to 9 ms later, was stated 1,000 ms in
// every run, a collapse onto the cut (over d1 to d6, 69 lags changed,
// their mean error 2.1 ms to 1.0). The lag stated is the middle of the
// middle half (centre), not of the range, which is cut at 0.
//
// passedLevel says s.level is what passed over the traffic (no allowance
// known): the bucket learned is then taken off it, and learned again.
func (a *analysis) longClusterRange(cluster []counters.Jump, s span, passedLevel bool, val func(int) float64, refreshNs, readNs, maxNs int64) (longLag, bool) {
	var visible []int64
	var widen int64
	locked := false
	if refreshNs > 0 {
		visible, widen, locked = a.refreshPhase(cluster, refreshNs)
	}
	// lagsAt is each jump's lag (but the last's) under depth, and when
	// its read showed it, of those up to capNs; a jump out of the
	// refresh's rhythm has none. reach is, for each, the span of the
	// modeled drops its share was looked for in.
	var reach []lagRange
	lagsAt := func(depth float64, capNs int64) (lags, at []int64) {
		reach = reach[:0]
		ranges, reached := a.shareRanges(cluster, s, val, depth, true, refreshNs, 2*readNs)
		for k, r := range ranges {
			if _, ok := keepLag(r.from, r.to, capNs); !ok {
				continue
			}
			lag := r.mid()
			from, to := a.certain(cluster[k])
			if locked {
				// The instant at the refresh's phase within the
				// jump's reads, less where the share was reached.
				shown := visible[k]
				if shown == 0 {
					continue
				}
				lag = shown - reached[k]
			}
			lags, at = append(lags, lag), append(at, to)
			reach = append(reach, lagRange{to - r.to, from - r.from})
		}
		return lags, at
	}
	// The depth is learned from every share's lag, however long: under
	// too shallow a bucket the first shares' lags come out past the
	// longest lag, and left out there they cannot tell it (the lab's
	// pps-overshoot behind a 1 s refresh and a 1 s lag, three changes:
	// its first, 106 drops, put 1.2 s late under none, left one lag, and
	// the lag was stated 223 to 1,010 ms where it was 1,002).
	depth := bucketDepth(s, val, func(depth float64) ([]int64, []int64) { return lagsAt(depth, math.MaxInt64/4) })
	if passedLevel && depth > 0 && s.hi > s.lo {
		// What passed over the traffic holds what the bucket let
		// through beyond the allowance: the level is that much lower,
		// and the bucket learned again under it (a sender's 30 ms pause
		// in a 2 s overshoot, its bucket 800 packets and refilled 240,
		// put the level at 8.4 kpps for 8, and the lag 14 ms short).
		if level := s.level - depth/float64(s.hi-s.lo); level > 0 {
			s.level = level
			depth = bucketDepth(s, val, func(depth float64) ([]int64, []int64) { return lagsAt(depth, math.MaxInt64/4) })
		}
	}
	lags, _ := lagsAt(depth, maxNs)
	if len(lags) < minLongLags {
		// Two changes behind a refresh, the packet-rate allowance given:
		// placed from the traffic's end instead (endLag), a little
		// before the first change allowed as the model's error.
		if len(cluster) == 2 && locked && visible[0] != 0 && !passedLevel && overAllowance(s) && cluster[0].Name == counters.PPSAllowanceExceeded {
			w := widen + readNs/2
			if lag, ok := a.endLag(cluster, s, val, visible[0], readNs); ok && lag > -w && lag <= maxNs {
				return longLag{lag: lagRange{max(lag-w, 0), lag + w}, centre: max(lag, 0), level: s.level, lags: 1}, true
			}
		}
		return longLag{}, false
	}
	for k := range lags {
		lags[k] = min(max(lags[k], 0), maxNs)
	}
	if !locked {
		// One jump's read interval (with a refresh) or read (without)
		// is what each lag cannot tell apart.
		widen = a.readUncertainty(cluster, refreshNs) / 2
	} else {
		// A refresh's snapshot, placed to a millisecond, in a pause of
		// the drops (a sender in pulses) shows the same count anywhere
		// in it, and a share off by a pulse's drops falls a pulse
		// away: the lag is known no finer than the pauses (2 ms pulses
		// every 20 ms behind a 1 s refresh and a 30 ms lag: 3.9 to
		// 24.3 ms stated).
		// Pauses shorter than a read, as a sender's 10 ms ticks leave,
		// are within what the lags' spread already says.
		widen += a.pauseWiden(bucketDrops(val, s, depth), a.g.startNs(s.lo), reach, readNs)
	}
	if len(lags) < longIncidentReads/2 {
		// Too few jumps to average out where the model's drops fall
		// against the device's within a read interval of the traffic
		// (sent in ticks, jittered): half a read interval more. The
		// interval the sampler reads at, not the reads around the
		// jumps: reads locked onto a refresh narrow those to a
		// millisecond or two, where the lab's sender ticks every 10 ms
		// (two lags put the lab's lag at 31 to 36 ms, where it was 23).
		widen += readNs / 2
	}
	slices.Sort(lags)
	q1, q3 := lags[len(lags)/4], lags[3*len(lags)/4]
	return longLag{lag: lagRange{max(q1-widen, 0), q3 + widen}, centre: q1 + (q3-q1)/2, depth: depth, level: s.level, lags: len(lags)}, true
}

// endLag is the lag of a long packet-rate overshoot whose counter changed
// twice behind a refresh, its allowance given: one share, two unknowns
// (the bucket's depth and the lag), so no bucket is learned. Its last
// change counted the drops from the refresh before it (shown at shownNs,
// the first change's instant) to the traffic's end, and those are the
// traffic's packets over the allowance however deep the bucket that
// held back its first drops: the refresh came where the excess still to
// come was the last change's count. The excess is modeled through a
// bucket one read interval of the allowance deep: a sender's 10 ms
// ticks stand out of their 1 ms windows, and with none their packets
// over the level are all taken for drops (12,104 where the counter rose
// by 7,214 in the lab: the lag 665 ms where it was 1,002). Not where the
// excess before that refresh could not have made the first change.
// Without the allowance, what passed over the traffic holds the bucket,
// and the lag, the bucket and the allowance are three unknowns to two
// changes.
func (a *analysis) endLag(cluster []counters.Jump, s span, val func(int) float64, shownNs, readNs int64) (int64, bool) {
	drops := bucketDrops(val, s, s.level*float64(max(readNs/a.g.widthNs, 1)))
	last, first := float64(cluster[1].Delta), float64(cluster[0].Delta)
	var after float64
	for i := len(drops) - 1; i >= 0; i-- {
		if drops[i] > 0 && after+drops[i] >= last {
			before := sumIn(func(k int) float64 { return drops[k] }, 0, i) + drops[i] - (last - after)
			if before < first {
				return 0, false // the excess before it could not have made the first change
			}
			at := a.g.startNs(s.lo+i+1) - int64((last-after)/drops[i]*float64(a.g.widthNs))
			return shownNs - at, true
		}
		after += drops[i]
	}
	return 0, false
}

// dropsRecurAt tells whether drops (per fine window) came in runs, each
// after a pause of a read or longer, whose starts recur every periodNs
// (their median spacing within half a read of it), at least
// longIncidentReads of them.
func (a *analysis) dropsRecurAt(drops []float64, periodNs, readNs int64) bool {
	pause := int(max(readNs/a.g.widthNs, 1))
	var starts []int
	quiet := pause // a run at the very start counts
	for i, d := range drops {
		if d <= 0 {
			quiet++
			continue
		}
		if quiet >= pause {
			starts = append(starts, i)
		}
		quiet = 0
	}
	if len(starts) < longIncidentReads {
		return false
	}
	gaps := make([]int64, 0, len(starts)-1)
	for k := 1; k < len(starts); k++ {
		gaps = append(gaps, int64(starts[k]-starts[k-1])*a.g.widthNs)
	}
	slices.Sort(gaps)
	d := gaps[len(gaps)/2] - periodNs
	return max(d, -d) <= readNs/2
}

// pauseWiden is how much a long cluster's lags are widened by the pauses
// in its modeled drops (per fine window from startNs): the longest pause
// of a read or more that the share of a jump was looked for in (reach,
// one per lag), or touches it. Only where such jumps are a quarter of the
// lags or more: fewer move neither quartile of the lags past the others'
// spread. One stall of a sender in a 2 s overshoot behind a 100 ms
// refresh, its drops pausing 28 ms, had widened all 18 lags by it, and
// with the lag 0 the range's middle fell 16 ms late (0 to 32 ms). Most
// likely the same in a CI run of the lab's pps-overshoot: 0 to 76 ms, the
// middle 38 where the lab's jumps' median was 21.4.
func (a *analysis) pauseWiden(drops []float64, startNs int64, reach []lagRange, readNs int64) int64 {
	var pauses []lagRange // in ns, each a read or longer
	dropPauses(drops, func(x, y int) {
		if int64(y-x)*a.g.widthNs >= readNs {
			pauses = append(pauses, lagRange{startNs + int64(x)*a.g.widthNs, startNs + int64(y)*a.g.widthNs})
		}
	})
	var widest int64
	n := 0
	for _, r := range reach {
		var p int64
		for _, q := range pauses {
			if q.from <= r.to && q.to >= r.from {
				p = max(p, q.to-q.from)
			}
		}
		if p > 0 {
			n++
			widest = max(widest, p)
		}
	}
	if 4*n < len(reach) {
		return 0
	}
	return widest
}

// longestPause is the longest run of windows without drops between the
// first and the last of drops, in ns.
func (a *analysis) longestPause(drops []float64) int64 {
	longest := 0
	dropPauses(drops, func(x, y int) { longest = max(longest, y-x) })
	return int64(longest) * a.g.widthNs
}

// dropPauses calls pause for each run [x, y) of windows without drops
// between two windows with drops.
func dropPauses(drops []float64, pause func(x, y int)) {
	last := -1 // the last window with drops
	for i, d := range drops {
		if d <= 0 {
			continue
		}
		if last >= 0 && i > last+1 {
			pause(last+1, i)
		}
		last = i
	}
}

// readUncertainty is the median width of the span a cluster's jumps
// became visible in: the read interval before each where the device
// refreshes now and then, the read itself where it refreshes at every
// read.
func (a *analysis) readUncertainty(cluster []counters.Jump, refreshNs int64) int64 {
	w := make([]int64, 0, len(cluster))
	for _, j := range cluster {
		from, to := a.certain(j)
		if refreshNs == 0 {
			from = j.ToNs
		}
		w = append(w, to-from)
	}
	slices.Sort(w)
	return w[len(w)/2]
}

// bucketDepth is the depth of the bucket (and queue) in front of a long
// incident's allowance, in val's unit: the one under which its jumps' lags
// (lagsAt, under a depth) neither fall nor rise over the incident (the
// Theil-Sen slope of lag over time crosses 0). Too shallow a bucket puts
// the early drops where the excess began, before the bucket was spent:
// each jump's lag comes out long by the time the excess took to spend it,
// times the share of the drops still to come, the first jumps' the most.
// The lab's pps-overshoot (an 800-packet bucket, 200 ms of its excess)
// was stated 63 to 127 ms late under none, where its counters were 27 ms.
// The last tenth of the jumps is left out: a queue draining behind the
// traffic makes them late whatever the depth. How deep a device's bucket
// is, and which packets it counts against it, the device does not say
// (the excess at the hook can be twice the counter's rise), so the depth
// is learned from the jumps' timing, not from the excess beyond the rise.
func bucketDepth(s span, val func(int) float64, lagsAt func(depth float64) (lags, at []int64)) float64 {
	if s.level <= 0 {
		return 0
	}
	// falls is how fast the lags fall over the incident under depth: it
	// drops as the depth grows.
	falls := func(depth float64) (float64, bool) {
		lags, at := lagsAt(depth)
		n := len(lags) - len(lags)/10
		if n < minLongLags {
			return 0, false
		}
		return -theilSen(at[:n], lags[:n]), true
	}
	if f, ok := falls(0); !ok || f <= 0 {
		return 0
	}
	// The deepest worth trying leaves a tenth of what none would drop.
	most := 0.9 * sumIn(func(i int) float64 { return max(val(i)-s.level, 0) }, s.lo, s.hi)
	lo, hi := 0.0, most
	if f, ok := falls(hi); ok && f > 0 {
		return hi
	}
	for hi-lo > max(s.level/10, most/1e4) {
		mid := (lo + hi) / 2
		if f, ok := falls(mid); ok && f > 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// theilSen is the median of the slopes between pairs of points (x, y),
// at most 100 points (evenly chosen) of them: a slope a few outliers do
// not move.
func theilSen(x, y []int64) float64 {
	step := max(len(x)/100, 1)
	var slopes []float64
	for i := 0; i < len(x); i += step {
		for j := i + step; j < len(x); j += step {
			if x[j] != x[i] {
				slopes = append(slopes, float64(y[j]-y[i])/float64(x[j]-x[i]))
			}
		}
	}
	if len(slopes) == 0 {
		return 0
	}
	slices.Sort(slopes)
	return slopes[len(slopes)/2]
}
