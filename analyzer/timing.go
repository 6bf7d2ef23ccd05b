package analyzer

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
)

// How a device's counters are timed is documented nowhere (AWS-LIMITS.md):
// it may publish the values a read returns only every so often (its
// refresh period) and show a drop some time after it (its lag). Both are
// learned from the run, per counter, and bound the look-back before every
// jump: the refresh and its phase in refresh.go, the lag here (a long
// incident's in longlag.go).

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
// taken as 0 where 0 fits and finds a cause for as many jumps as any
// refresh the reads allow (explainedByLongest), else as the longest the
// reads allow (longestRefresh: changes 900 and 500 ms apart are no 1 s
// refresh's). Wherever the refresh is not known, the range stated reaches
// down by that longest refresh: a refresh the run could not see may
// account for as much of the delay (before, it started at 0: behind a
// 100 ms refresh and a 1 s lag, three bursts' changes, taken as a 1 s
// refresh's, each looked back over every burst before it, and the lag was
// stated 0 to 194 ms).
func (a *analysis) estimateLag(jumps []counters.Jump, refreshNs int64, known, given bool, readNs int64, src lagTraffic) (lag counterLag, ok bool) {
	if known && (refreshNs == 0 || given) {
		// A refresh given is the device's: no contest with 0.
		lag, ok, _ = a.estimateLagWith(jumps, refreshNs, refreshNs > 0, readNs, src)
		lag.refreshKnown = true
		return lag, ok
	}
	zero, zeroOK, fits := a.estimateLagWith(jumps, 0, false, readNs, src)
	// The longest refresh the changes' reads allow: a refresh the run
	// could not tell is no longer.
	bound := a.longestRefresh(jumps)
	var longer counterLag
	if !known && zeroOK && fits {
		longer = a.explainedByLongest(jumps, zero, bound, readNs, src)
	}
	switch {
	case known && (!zeroOK || !fits || zero.clusters < 2 && zero.changesShown < longIncidentReads):
		lag, ok, _ = a.estimateLagWith(jumps, refreshNs, true, readNs, src)
		lag.refreshKnown = true
		if lag.pulsedAtRefresh || lag.delayAsCauses {
			// Pulses as far apart as the period: a device that shows
			// every change at once changes the counter at the same
			// reads, and each change tells the lag only modulo the
			// pulses' period (2 ms pulses every 40 ms shown 250 ms late
			// were stated as a known refresh of 40 ms and a lag of
			// 233.6 ms). The range holds it either way. Nor where each
			// incident was shown at one change as long after its cause
			// as the others: the changes came as far apart as their
			// causes, and any refresh that divides that spacing fits
			// them as well (two bursts a second apart behind a 100 ms
			// refresh, each read 1,080 ms after it, past the longest
			// lag, were stated as a known refresh of 1 s; the same
			// changes behind a 1 s refresh were told from them by
			// luck alone).
			lag.refreshKnown, lag.refreshFollowsTraffic, lag.bounded = false, true, true
		}
		return lag, ok
	case !known && (!zeroOK || !fits):
		lag, ok, _ = a.estimateLagWith(jumps, bound, false, readNs, src)
	case !known && longer.explained > zero.explained:
		lag, ok = longer, true
	default:
		// The period the changes' spacing suggests is the traffic's
		// rhythm, not a refresh's. One incident fits a refresh of 0 so
		// where a device that shows every change at the next read would
		// have changed at each read that held its drops, and it did, at
		// longIncidentReads reads or more (2 ms pulses every 40 ms,
		// shown at once 30 ms late, were stated as a known refresh of
		// 40 ms and a lag 16.4 ms short).
		lag, ok = zero, zeroOK
		lag.refreshFollowsTraffic = known
		// Its delay is what the clusters agreed on (delayLowNs),
		// where two or more narrowed it down: one cluster, or ranges
		// only bounded, agree with any refresh's share of it (taken as
		// the delay there too, 27 of the synthetic timing cases failed).
		if zero.clusters >= 2 && !zero.boundedOnly() {
			lag.delayLowNs, lag.delayKnown = zero.lowNs, true
		}
	}
	// A refresh the run could not see may account for as much of the
	// delay as it may be long: no longer than the changes' reads allow.
	// The lag is then bounded as where the range started at 0 (before,
	// it always did): a range a refresh wide has no middle worth stating.
	lag.lowNs = max(lag.lowNs-bound, 0)
	// With the refresh untold, a change a read past the longest lag may
	// be the refresh's part of the delay, not the lag's: the lag is then
	// the longest (behind a 100 ms refresh, a burst's changes put it at
	// 1,010.1 ms where the lab's was 1,001.7).
	lag.pointNs = min(lag.pointNs, int64(MaxCounterLag))
	lag.bounded = lag.bounded || boundsLag(0, lag.pointNs, lag.highNs)
	return lag, ok
}

// explainedByLongest is the lag learned under a refresh the run could not
// tell, taken as the longest the reads allow (bound), where it finds
// causes for more of jumps than a refresh of 0 did (zero); else the zero
// counterLag. A device that shows
// every change at the next read shows each within the longest lag of its
// cause, so where 0 leaves a jump with no cause in that reach and the
// longest refresh gives it one, 0 is not the better fit however well its
// other jumps agree: two bursts of packets 825 ms apart behind a 1 s
// refresh and a 1 s lag, the first burst's change read 1.8 s after it,
// were taken as the second's under 0, the second's change had none, and
// the lag was stated 0 to 952 ms where devices lagging 957 ms to 1 s gave
// the same reads (twinscore: 19 of seed 7's 55 ranges that missed the
// lag). Not where a refresh was told: there the told one is contested
// with 0 as before (the same test there changed no range in three seeds
// but one, for the worse).
func (a *analysis) explainedByLongest(jumps []counters.Jump, zero counterLag, bound, readNs int64, src lagTraffic) counterLag {
	if zero.explained >= len(jumps) {
		return counterLag{}
	}
	if long, ok, _ := a.estimateLagWith(jumps, bound, false, readNs, src); ok && long.explained > zero.explained {
		return long
	}
	return counterLag{}
}

// lagClusters are the jumps shown at successive refreshes, each as the
// indexes of its first and last jump. Reads that come late on a busy host,
// or a read the drops missed, do not split one: up to two refreshes or
// reads between.
func lagClusters(jumps []counters.Jump, refreshNs, readNs int64) [][2]int {
	var out [][2]int
	for f := 0; f < len(jumps); {
		l := f
		for l+1 < len(jumps) && jumps[l+1].FromNs-jumps[l].ToNs <= 2*max(refreshNs, readNs)+readNs/2 {
			l++
		}
		out = append(out, [2]int{f, l})
		f = l + 1
	}
	return out
}

// splitDominant parts a long cluster (longIncidentReads reads or more)
// around the few jumps that counted most of its rise (at most
// longIncidentReads/2 in a row, each more than the jumps outside them
// together or than dominantOver times any of them): the counter went on
// moving a little at
// each read (a download's drops, or what a shaper held back at each poll)
// and a burst's drops came in at once. The share model of a long cluster
// spreads its rise over its traffic's excess, which an inbound burst's
// shaped arrival hardly shows: a burst's 1,204 drops of 1,921 were put
// 611 ms before their read, on the download.
func splitDominant(jumps []counters.Jump, c [2]int, readNs int64) [][2]int {
	f, l := c[0], c[1]
	if l-f+1 < longIncidentReads || jumps[l].ToNs-jumps[f].FromNs < longIncidentReads*readNs {
		return [][2]int{c}
	}
	rise := riseOf(jumps[f : l+1])
	// The shortest run of jumps counting over half the rise.
	x, y := -1, -1
	var sum uint64
	for lo, hi := f, f; hi <= l; hi++ {
		sum += jumps[hi].Delta
		for 2*(sum-jumps[lo].Delta) > rise {
			sum -= jumps[lo].Delta
			lo++
		}
		if 2*sum > rise && (x < 0 || hi-lo < y-x) {
			x, y = lo, hi
		}
	}
	if x < 0 || y-x+1 > longIncidentReads/2 {
		return [][2]int{c}
	}
	// Each of them more than all the others together, or more than
	// dominantOver times any other: a burst paced over many reads,
	// evenly counted, is one cause (TestBurstFirstPart: parted, its lag
	// came out 40 ms short), and a burst counted in two jumps beside a
	// drip is not (630 and 642 of 1,915, the drip's largest 14: the lag
	// learned as 704 ms where it was 0).
	var run, other uint64
	for k := f; k <= l; k++ {
		if k < x || k > y {
			other = max(other, jumps[k].Delta)
		} else {
			run += jumps[k].Delta
		}
	}
	for k := x; k <= y; k++ {
		if jumps[k].Delta <= rise-run && jumps[k].Delta <= dominantOver*other {
			return [][2]int{c}
		}
	}
	var out [][2]int
	if x > f {
		out = append(out, [2]int{f, x - 1})
	}
	out = append(out, [2]int{x, y})
	if y < l {
		out = append(out, [2]int{y + 1, l})
	}
	return out
}

// dominantOver is how many times any other jump of its cluster a jump
// that splitDominant parts off counts at least, where it counts less than
// all of them together: a drip counts a few packets a read (a download's,
// its shaper holding back what it sent at each poll), a burst hundreds.
const dominantOver = 4

// lagRange is a span of lags, (from, to].
type lagRange struct{ from, to int64 }

func (r lagRange) mid() int64 { return r.from + (r.to-r.from)/2 }

// learnedLagSpread is the widest range of lags that states a lag, however
// short: wider, a range only bounds it where it is wider than the lag too.
// Its middle is then within 5 ms of any lag in it. At 25 ms, a deep queue
// behind a single burst, first read 15 ms after the burst began, stated
// "about 7.6 ms (0 to 15.2)" where the lab's lag was 0; 38 of the lab's
// 186 bundles stated a lag more than 5 ms off, 3 do at 10 ms.
const learnedLagSpread = 10 * time.Millisecond

// boundsLag tells a range of lags the run only bounded from one it
// narrowed down: wider than its middle and than learnedLagSpread. A
// single burst behind a 1 s refresh leaves 0 to 728 ms, whose middle is
// no estimate (the lab's counters were 25 ms late); one behind a 100 ms
// refresh it could not tell, 0 to 33 ms, stated as 28 where the device
// had none.
func boundsLag(from, mid, to int64) bool {
	return to-from > max(mid, int64(learnedLagSpread))
}

func (r lagRange) boundedOnly() bool { return boundsLag(r.from, r.mid(), r.to) }

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
// that sliver, 5 ms off; a burst's drops counted over 80 ms, its shares'
// ranges in a chain, each touching the next, put the lag at 10.4 ms where
// it was 0). Where every range holds a sliver, no fact disagrees, and the
// sliver, a window wide at both ends, is the lag: the share of a burst's
// drops shown at its first read ended where its last drop's range began
// (0.2 ms apart), and narrowed apart, the first drop's range and the
// share's alone put the lag at 15.2 ms where the lab's was 21.2.
func (a *analysis) clusterRange(rs []lagRange) (lagRange, bool) {
	if len(rs) == 0 {
		return lagRange{}, false
	}
	half := a.g.widthNs / 2
	if r, n := agreement(rs); n == len(rs) && r.to-r.from < 2*half {
		m := r.mid()
		return lagRange{max(m-2*half, 0), m + 2*half}, true
	}
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

// keepLag is the lag range (from, to] bounded to [0, maxNs], false when
// nothing of it is left. A range just past the bound (a lag at it, and a
// queue's drain or a bucket on top) agrees with the bound; one far past it
// is other traffic.
func keepLag(from, to, maxNs int64) (lagRange, bool) {
	if from > maxNs+maxNs/10 {
		return lagRange{}, false
	}
	if from, to = min(max(from, 0), maxNs), min(to, maxNs); from <= to {
		return lagRange{from, to}, true
	}
	return lagRange{}, false
}

// estimateLagWith is estimateLag with the refresh taken as refreshNs;
// phased where the changes told it (counterRefresh, known): each jump's
// reads are then narrowed to its phase (shownWindow). fits is false when
// two clusters' ranges lie more than readNs apart, or a cluster's traffic
// spanned more than two reads beyond those its counter changed at (a
// refresh of 0 would have shown it at each).
func (a *analysis) estimateLagWith(jumps []counters.Jump, refreshNs int64, phased bool, readNs int64, src lagTraffic) (lag counterLag, ok, fits bool) {
	locate, val := src.locate, src.val
	fits = true
	maxNs := int64(MaxCounterLag)
	// Ranges are cut a read past the longest lag (lagReach), not at it:
	// a lag at it shows at the next read, and a range cut at 1 s put its
	// middle under it (992.2 to 1,000 ms, stated 996.1, where the lab's
	// "1 s" was 1,003.8; 27 of d1 to d6's run-ways more than 5 ms off).
	capNs := lagReach(maxNs, readNs)
	var levels []float64 // of the long overshoots located with no allowance known
	var depths []float64 // the buckets long incidents' timing showed
	rough := false       // some from few lags
	var clusters []lagRange
	var of []lagCause // the jumps and cause of each of clusters
	var queue []lagPart
	shownAtOnce := 0 // changes of long incidents, at each read that held their drops
	pulsed := false  // a long incident's drops came in pulses a refresh apart
	for _, c := range lagClusters(jumps, refreshNs, readNs) {
		for _, p := range splitDominant(jumps, c, readNs) {
			queue = append(queue, lagPart{fc: p[0], l: p[1]})
		}
	}
	var shown func(level float64) float64 // the bucket the run shows, per level, once needed
	if len(jumps) > 0 && val != nil {
		shown = a.shownDepths(jumps[0].Interface, jumps[0].Name, val, maxNs+refreshNs+readNs)
	}
	// window is when a jump became visible: within its reads, and behind
	// a refresh the changes told, at its phase (phaseWindows).
	window := a.certain
	if phased {
		window = func(j counters.Jump) (int64, int64) { return a.shownWindow(j, refreshNs) }
	}
	for qi := 0; qi < len(queue); qi++ {
		fc, l, floor := queue[qi].fc, queue[qi].l, queue[qi].floor
		firstPrev, firstRead := window(jumps[fc])
		_, lastRead := window(jumps[l])
		lo, hi := a.g.span(firstPrev-maxNs-max(refreshNs, int64(MaxCounterRefresh)), lastRead)
		if c := queue[qi].ceil; c > 0 {
			hi = min(hi, c)
		}
		reachLo := lo // before a parting's floor (earlierInReach)
		lo = min(max(lo, floor), hi)
		var own []lagRange
		add := func(from, to int64) {
			if r, ok := keepLag(from, to, capNs); ok {
				own = append(own, r)
			}
		}
		if src.drops != nil {
			r, ok := a.exactRange(jumps, fc, l, hi, refreshNs, readNs, src.drops)
			if ok {
				clusters, of = append(clusters, r), append(of, lagCause{part: queue[qi]})
				continue
			}
		}
		s := locate(lo, hi)
		locatedLo := s.lo
		passedLevel := false // s.level is what passed over the traffic
		long := val != nil && l > fc && lastRead-firstPrev >= longIncidentReads*readNs
		raisedLevel := 0.0
		if src.raised && s.levelName == levelIntervalOwn {
			// Its cause is the long burst it peaks on, not the peak (a
			// TCP flow's 83 kB bunch on a 25 kB/ms burst put the lab's
			// lag at 43 ms where it was 0), as where its incident is
			// placed. Later traffic is looked for at the peak's level
			// still (below): a later bunch over the burst's lower
			// level is not a later cause.
			if x, y, level, ok := a.raisedSpan(val, s, lo, hi, src.sentFirst); ok && y < hi {
				s.lo, s.hi, raisedLevel = x, y, level
			}
		}
		if !long && refreshNs == 0 && val != nil && s.levelName == levelIntervalOwn {
			// A counter that changed at a read or two, with a long
			// overshoot just before: a device that showed every change
			// at the next read would have changed all through it (a
			// trace that ended before a 1 s refresh showed its last
			// drops: two changes a second apart, each with a 1 ms blip
			// standing out of the overshoot as its cause, fit a refresh
			// of 0 and stated a lag of 0 to 0).
			// Each read whose interval held its traffic over its level
			// would have shown a change: an overshoot sent in pulses
			// (2 ms every 40 ms) changes the counter only at the reads
			// after its pulses, each a cluster of one, which fit a
			// refresh of 0; counted by the reads it spanned, a refresh
			// of 40 ms was taken as known.
			if x, y, lv, ok := a.longOvershoot(val, lo, hi, readNs); ok && a.g.startNs(y) > firstPrev-maxNs {
				over, shown := a.readsOver(val, x, y, readNs, lv), changesIn(jumps, a.g.startNs(x), a.g.startNs(y)+maxNs)
				if over-shown > 2 {
					fits = false
				} else if over >= longIncidentReads {
					// Every read that held its pulses changed the
					// counter: a refresh the changes' spacing
					// suggests is the pulses'.
					shownAtOnce = max(shownAtOnce, shown)
				}
			}
		}
		if long && s.levelName == levelIntervalOwn {
			// No allowance known, and the counter moved over many reads:
			// an overshoot sustained so long that it is most of its own
			// look-back, where what stands out of it is its jitter (the
			// lab's pps-overshoot: a 1 ms catch-up of its sender, which
			// put the lag at 2 to 5 ms where it was 27).
			if x, y, lv, ok := a.longOvershoot(val, lo, hi, readNs); ok && !a.wentOnUnshown(val, y, lv, jumps, l, refreshNs, readNs) {
				s.lo, s.hi, s.level = x, y, lv
				// What passed over it is about the allowance (what
				// learnAllowance reports), a better level for the drops
				// than the split, below it or above: the lab's 8 kpps
				// split at 5.6 to 6.8, and the drops of its sender's
				// slower stretches came out early; 20 ms pulses every
				// 40 ms split over pulseSpan at 14 kpps, and each
				// pulse's drops came out late (the lag 14.4 ms short).
				if src.perDrop != nil {
					passed := passedPerWindow(val, x, y, float64(riseOf(jumps[fc:l+1]))*src.perDrop(x, y))
					if passed > 0 && passed < sumIn(val, x, y)/float64(y-x) {
						s.level, passedLevel = passed, true
					}
				}
				levels = append(levels, s.level)
			}
		} else if long && overAllowance(s) && src.shapedPackets == nil {
			// The allowance known, a long overshoot whose sender paused
			// more than MergeGap now and then is located in parts; the
			// cluster's cause is the whole stretch over the level that
			// splits its rates (the lab's pps-overshoot beside the lab's
			// own reads, its sender starved of CPU, paused 11 to 13 ms
			// every 60 to 110 ms: parted at each, its lag stated 0.3 ms,
			// 0 to 23.5, where it was 39.4, in 3 fresh runs of 4; found
			// whole without the allowance, within 5 ms in all 4). Only
			// where that stretch was over the allowance on the whole: a
			// TCP flow under it, over it only in its bunches' windows,
			// overflowed the bucket now and then, each time of its own
			// (its 8 jumps of 2 to 5 drops, read over 150 ms beside
			// load, were put on 1.2 s of its bunches, 38 to 725 ms; the
			// lag stated 5.8 to 725 ms, a jump's look-back reached a
			// bunch 0.7 s before it, an extra finding: c11/load/d4).
			if x, y, _, ok := a.longOvershoot(val, lo, hi, readNs); ok && x <= s.lo && y >= s.hi && sumIn(val, x, y) > s.level*float64(y-x) {
				s.lo, s.hi = x, y
			}
		}
		// Two causes a refresh apart (an overshoot and a burst) have
		// their jumps at successive refreshes, one cluster: each part is
		// a cluster of its own. Only where the host saw the traffic
		// before the device counted it: inbound traffic over its
		// allowance reaches the host after the device's queue, up to its
		// delay late (the lab's impact-inbound: 20 ms), and the jumps
		// read before it came may show its drops.
		// The jumps before the cluster may have shown a burst's parts
		// before theirs (burstStart's floor).
		burstFloor := lo
		if fc > 0 {
			_, prevRead := a.certain(jumps[fc-1])
			burstFloor = max(burstFloor, a.g.index(prevRead))
		}
		// With no allowance known, a counter that moved at many reads
		// over a short cause: the catch-up of a sender that stalled, the
		// most over its level, where the paced runs before it made the
		// first drops. Beside two CPU-bound processes, counters 250 ms
		// late, the lab's 80 ms burst stalled 12 ms and sent 380 kB in 2
		// ms after: that 1 ms, taken for the cause of all 10 jumps, as a
		// queue counted as it drains, stated the lag 184 to 203 ms where
		// it was 251, in 4 of 4 fresh runs; 30 ms late, a catch-up that
		// stood out most parted the cluster (ofCause), the burst's paced
		// part its first two jumps' cause, the catch-up the rest's, and
		// the lag was stated 5.1 ms (0 to 10.1) where it was 31.6 (c17).
		// The burst, followed back over its stalls (bornBurst) at the
		// level its runs were followed at, goes on while its traffic
		// over that level does, before the cluster is parted, and its
		// shares tell the lag.
		stalledBurst := false
		if src.burstStart != nil && long && s.levelName == levelIntervalOwn && !a.lastsLong(s.lo, s.hi, readNs) {
			level := s.level
			s = src.burstStart(s, burstFloor, true)
			if stalledBurst = s.level < level; stalledBurst {
				for {
					x, y, ok := excessSpan(val, s.hi, hi, s.level)
					if !ok || x-s.hi > a.mergeGapWindows() || y >= hi {
						break
					}
					s.hi = y
				}
			}
		}
		var parts *parting
		if long && s.levelName != levelNone && src.perDrop != nil {
			parts = &parting{a: a, jumps: jumps, c: queue[qi], val: val, perDrop: src.perDrop, window: window, refreshNs: refreshNs, shown: shown}
			if earlier, later, ok := parts.ofCause(s, lo, hi, readNs); ok {
				queue = append(queue, earlier, later)
				continue
			}
		}
		// The latest traffic at the level the most excess stood out
		// from, before the read, is the cause: the most over so long a
		// look-back may be an earlier incident's, as large or larger.
		// Traffic at that level again within MergeGap is the same
		// incident going on (a sustained overshoot sent in batches). A
		// counter that moved at many reads has a long cause: a blip
		// after it (the lab's sender catching up 14 ms after its 2 s
		// overshoot) is not it.
		parted := false
		// Traffic sent after the first jump was read did not make it,
		// where the host saw the traffic before the device counted it:
		// the cluster's cause came before (a TCP bunch that overflowed
		// the bucket after a burst, one drop read with the burst's last,
		// was taken as the cause: the lab's lag, 24.5 ms, came out 2).
		// Nor did later traffic too small to have made the jump read
		// after it (couldMake), whatever the allowance.
		causeHi := hi
		if src.sentFirst && !long {
			causeHi = min(hi, max(a.g.index(firstRead), s.hi))
		}
		// Outbound, the allowance known (the host saw the traffic before
		// the device's bucket and queue did, so they can be modeled on
		// it; inbound, it sees what they let through):
		//   - the bucket is at least as deep as what traffic over the
		//     allowance built where no lag up to the longest could have
		//     shown a drop the counter did not (a TCP flow's bunches
		//     before a burst), and traffic that builds no more makes no
		//     drop of its own;
		//   - what s left queued drains after it, and traffic over the
		//     allowance while it does (a TCP flow's bunches behind a
		//     burst, each over 40 Mbit/s in its 1 ms window, counted as
		//     they wait) waited behind it: not a later cause (the latest
		//     such bunch before the cluster's last read was taken for
		//     it: 2 to 12 ms where the device's lag was 30). Only while
		//     the counter has kept moving since s (a change the cluster
		//     before showed after s, then silence, says its queue
		//     emptied), and s is short: after a long one, a blip may be
		//     the next cause (ofBlip; an upload's modeled queue, counted
		//     whole, outlasted the 1.2 s to a burst after it).
		modeled := src.sentFirst && val != nil && overAllowance(s)
		depth, quiet := 0.0, 0.0
		if modeled {
			depth = shown(s.level)
		} else if src.sentFirst && val != nil && s.levelName == levelIntervalOwn && s.level > 0 {
			// With no allowance known, the same holds over the level the
			// cause stood out from and the levels under it, where the
			// allowance may lie (heldLikeQuiet): later traffic that held
			// no more over them than traffic that moved nothing did (a
			// TCP flow's bunches, each over a paced burst's level) made
			// no drop of its own. What a queue holds is carried from
			// twice MergeGap before such traffic at most: fed from the
			// cause's end, 1.3 s before a TCP flow's bunch, at a 32nd of
			// the level (under the flow's mean rate) it held more than
			// any quiet stretch, and the bunch before it, 85 ms before
			// the read, was taken for the cause.
			quiet = shown(s.level)
		}
		drainsHere := modeled && !a.lastsLong(s.lo, s.hi, readNs) && (fc == 0 || a.g.startNs(s.lo) >= jumps[fc-1].ToNs)
		// Inbound, a drop means the device's queue was full, and the host
		// then sees it sending at the allowance. Later traffic it saw
		// whole, with no queue sending behind it, filled none: it
		// counted no more than its own packets, queued a moment, and is
		// no later cause of a first jump that counted more, where the
		// cause shows a queue (a download's bunches, bigger as it
		// recovered behind a burst, were taken for the cause of its
		// 1,091 drops, even after their read: behind a 34 ms lag, the
		// lab's burst was placed 15 ms late and its lag stated as 0 to
		// 6 ms).
		//
		// Where the cause shows no queue (a device that drops what its
		// bucket cannot pass at once, the rest of a burst unseen), such
		// a bunch is no later cause either where it built no more over
		// the level than traffic that moved nothing did: what passed a
		// full bucket whole (behind a 1 s lag, a download's 60 kB
		// bunches every 20 ms, the latest 3 ms before the read, were
		// taken for the cause of a burst's 1,566 drops, its head 66 kB,
		// and the download named). A jump no larger than the bunch may
		// be its own (a download's one drop, read 1.8 ms after its
		// bunch, behind a burst that left the bucket short). With no
		// allowance known only: over a given one, the lab's queue hides
		// under it and the rule set aside the bunches that were the
		// burst's queue, its range falling short of the lag (0 to 24.9
		// ms where it was 51.2, in 2 of 54 fresh inbound runs).
		// noMoreThanQuiet: traffic that built no more over its level
		// than traffic that moved nothing did (the bucket the run shows).
		noMoreThanQuiet := func(sp span) bool { return builtOver(val, sp) <= shown(sp.level) }
		// headOf is where the head of s began, inbound: over an
		// allowance given, s may begin with a download's bunches before
		// the burst, each over the allowance in its window and passed
		// whole, and the burst's head is that of the first stretch of
		// the device's queue sending (shapedHead), within MergeGap of
		// s's start (the lab's impact-inbound, read every 10 ms: with no
		// lag, 0 to 11.6 ms stated from a bunch 6 ms before the burst,
		// 0 to 7.6 without the allowance, whose level no bunch reaches;
		// behind 31 ms, no queue seen from the bunch, and a bunch after
		// the read taken for the cause, 0 to 100 ms).
		headOf := func(s span) int {
			if src.shapedPackets != nil && val != nil && overAllowance(s) {
				gap := a.mergeGapWindows()
				if k, ok := shapedHead(val, s.lo, min(hi, s.lo+gap+headWindows+shapedRun), s.level); ok && k <= s.lo+gap {
					return k
				}
			}
			return s.lo
		}
		sQueued, shapedQuiet := false, false
		if src.shapedPackets != nil && val != nil {
			_, sQueued = queueBegan(val, headOf(s), hi)
			shapedQuiet = !sQueued && s.levelName == levelIntervalOwn && s.level > 0 && shown(s.level) > 0
		}
		countedMore := func(x, y int) bool {
			return float64(jumps[fc].Delta) > src.shapedPackets(x, y) && !queuedStretch(val, x, queueEnd(val, y, hi))
		}
		// farBehind: inbound over an allowance given, traffic that began
		// lateHorizon or more after s, no part of any queue s left, so
		// none of the bunches the rule above sets aside only with no
		// allowance known. One that built no more over it than traffic
		// that moved nothing did is no later cause either: behind a 1 s
		// refresh and a 250 ms lag beside load, a download's 5-packet
		// bunch 520 ms after a burst, 55 ms before the read, was taken
		// for the cause of its 1,508 drops, the lag stated 0 to 55.4 ms
		// (the burst's queue unseen, and the download after the bunch
		// looking like one).
		farBehind := func(x int) bool {
			return src.shapedPackets != nil && overAllowance(s) && a.g.startNs(x)-a.g.startNs(s.hi) >= lateHorizon
		}
		sameFlowOn := false // s's flow went on after a stall (sameFlow)
		for at := s.hi; val != nil && s.level > 0 && at < causeHi; {
			x, y, ok := excessSpan(val, at, causeHi, s.level)
			if !ok {
				break
			}
			at = y
			if x-s.hi > a.mergeGapWindows() {
				if src.sameFlow != nil && x-s.hi <= 2*a.mergeGapWindows() && a.g.startNs(y)-a.g.startNs(s.lo) <= int64(stalledBurstReach) && src.sameFlow(s, x, y) {
					// The flow that carried most of s again, after a
					// stall of its sender's (up to twice MergeGap, as
					// bornBurst follows one back): its burst going on,
					// counted as it came, not a later cause nor what
					// waited behind s. Beside two CPU-bound processes,
					// counters 250 ms late, the lab's burst stalled 11
					// ms after 42 and sent what it owed after: taken
					// for what queued behind its first part (queuedTail),
					// its 2,453 drops were spread over that part, and
					// with the allowance given the lag was stated 283.3
					// ms (282.7 to 283.9) where it was 253.8 (c16/load/l1;
					// 258.9 where it was 251.8, c15/load/l1 and l2).
					s.hi, sameFlowOn = y, true
					continue
				}
				if (sQueued || shapedQuiet && noMoreThanQuiet(span{lo: x, hi: y, level: s.level})) && countedMore(x, y) ||
					farBehind(x) && noMoreThanQuiet(span{lo: x, hi: y, level: s.level}) {
					continue
				}
				if src.shapedPackets != nil && overAllowance(s) && !overByAPacket(val, src.shapedPackets, x, y, s.level) {
					// Inbound, over an allowance given, windows no
					// more than a packet over it are what it passes,
					// counted in whole packets: 3 of a download's
					// 1,514-byte packets in a millisecond are 4,542
					// bytes, over 40 Mbit/s by 42 (behind 250 ms, its
					// windows so over, 180 ms after the burst, were
					// taken for the cause, and the lag was stated 0 to
					// 11 ms where it was 251.3: c15/inb/l1).
					continue
				}
				if drainsHere && queuedBehind(val, s, x) || (modeled && builtOver(val, span{lo: x, hi: y, level: s.level}) <= depth || quiet > 0 && heldLikeQuiet(val, shown, s.level, max(s.hi, x-2*a.mergeGapWindows()), x, y)) {
					continue
				}
				if src.sentFirst && src.perDrop != nil && !a.couldMake(jumps[fc:l+1], val, x, y, src.perDrop) {
					continue
				}
				if phased && parts != nil && src.sentFirst && a.g.startNs(x) >= firstRead {
					// Behind a refresh the changes told, traffic begun
					// after the first jump became visible made none of
					// its drops: the jumps before it are s's (two bursts
					// a second apart behind a 1 s refresh, the second
					// begun 0.5 ms before the read that showed the
					// first's change, took both: the lag stated 0.6 ms
					// where it was 21.7, c15/load/m2). Where it could
					// have made the jumps read after it began: a 2 MB
					// burst 1.2 s after a 2 s upload, behind a 1 s
					// refresh and a 1 s lag, took the upload's last
					// 3,149 drops with its own 1,346 (1,333 packets),
					// the lag stated 0 to 170 ms.
					if k := parts.firstReadAfter(x); k > fc && parts.explains(x, runOn(val, y, hi, s.level, a.mergeGapWindows()), parts.rise(k, l)) {
						earlier, later := parts.at(k, x, s.hi)
						queue = append(queue, earlier, later)
						parted = true
						break
					}
				}
				if long && !a.lastsLong(x, y, readNs) && a.lastsLong(s.lo, s.hi, readNs) {
					// A blip after a long cause is not it; it may be
					// the cause of the jumps after it (ofBlip).
					if earlier, later, ok := parts.ofBlip(s, x, y); ok {
						queue = append(queue, earlier, later)
						parted = true
					}
					break
				}
				if long && src.sentFirst && s.levelName == levelIntervalOwn &&
					float64(a.readWithin(jumps[fc:l+1], a.g.startNs(s.lo), a.g.startNs(x))) > drainTailShare*float64(riseOf(jumps[fc:l+1])) {
					// With no allowance known, a long cluster whose jumps
					// read after s began and before this traffic did
					// counted more than a tenth of its rise: s made those
					// drops (outbound, traffic sent after a read made
					// none of its count), and in one cluster with this
					// traffic, the two are one cause going on, not this
					// one alone. A sender starved of CPU, stalling three
					// times in an 80 ms burst and catching up after each,
					// had its last catch-up taken for the cause of all 12
					// jumps, 1,126 of its 2,335 drops read before it: the
					// lag stated 18.3 ms (12.4 to 24.3) where it was 0.
					s.hi = y
					continue
				}
				if parts != nil && !a.lastsLong(s.lo, s.hi, readNs) && !a.lastsLong(x, y, readNs) {
					// A short cause after s, before the first read, as
					// s's was (ofShortBefore, from the later one): behind
					// a refresh, s may have made the cluster's first
					// jumps and this the rest, a refresh on. Two bursts
					// a second apart behind a 1 s refresh and a 1 s lag
					// stood out alike; the second, the latest, took both
					// jumps, and the lag was stated 0 to 666 ms where it
					// was 1,002 (d4/load, as in d1 to d3).
					//
					// Its whole run, over half the level with no
					// allowance known, as ofShortBefore takes the
					// earlier's: a sender starved of CPU spread the
					// second burst's 4 ms, one window over the level
					// (82 packets, where its jump counted 287).
					runLevel := s.level
					if s.levelName == levelIntervalOwn {
						runLevel /= 2
					}
					later := span{lo: runBack(val, x, s.hi, runLevel, a.mergeGapWindows()), hi: runOn(val, y, causeHi, runLevel, a.mergeGapWindows()), level: s.level, levelName: s.levelName}
					if earlier, after, ok := parts.ofShortBefore(later, lo, readNs); ok {
						queue = append(queue, earlier, after)
						parted = true
						break
					}
				}
				if src.sentFirst && a.g.startNs(x) >= firstRead && !asBig(val, s, x, y) {
					// Outbound, traffic begun after the cluster's first
					// read made none of that jump's drops, and a fraction
					// of s's excess made few of the rest: not the
					// cluster's cause (a deep queue counted as it drained
					// for 500 ms, behind a 1 s lag: a TCP flow's 1 ms
					// bunch 290 ms after the first jump's read took the
					// cluster from the burst, and the lag was stated
					// 141.5 to 155.2 ms where it was 1,001.8, with the
					// allowance given). As big, it may be (a TCP flow's
					// drip of its own overflows, each jump its bunch's).
					continue
				}
				s.lo = x
			}
			s.hi = y
		}
		// A cause still going at the first read goes on while its
		// traffic does.
		if !parted && val != nil && s.level > 0 && s.hi >= causeHi {
			s.hi = runOn(val, s.hi, hi, s.level, a.mergeGapWindows())
		}
		if !parted && s.levelName != levelNone && s.hi >= hi && refreshNs == 0 && (src.sentFirst || src.shapedPackets == nil) {
			// Still going at the read, its end unseen: its first drop,
			// at its start or after, was shown by the first jump's read,
			// which bounds the lag from above. A device that shows every
			// change at the next read would have changed the counter at
			// each read through the rest of it; one that changed again
			// only a refresh later is no such device, and the bound says
			// so against the later jump's (behind a 100 ms refresh and no
			// lag, a burst's head read 11 ms in and its tail 97 ms after
			// it left the head no range, the tail's 87 to 97 ms was taken
			// for the lag, and the first change, looked for before 283
			// ms, was put on a steady flow's first packets: a finding at
			// no burst, twinscore seed 7 run 270). Not inbound bytes, seen
			// only after the device's queue.
			if r, ok := keepLag(0, firstRead-a.g.startNs(s.lo), capNs); ok {
				clusters, of = append(clusters, r), append(of, lagCause{part: queue[qi], lo: s.lo, hi: s.hi, level: s.level})
			}
			continue
		}
		if parted || s.levelName == levelNone || s.hi >= hi {
			continue // parted, nothing there, or still going at the read: no end seen
		}
		if src.burstStart != nil && !stalledBurst {
			// Its sender's pauses split a burst: its first drop may lie
			// in a part before the one that stood out most. Not in one
			// before the jump before the cluster, which may have shown
			// that part's drops (10 ms reads with no lag: a cluster of
			// the burst's third part, taken back to its first, shown by
			// the cluster before, put the lag at 6 ms).
			s = src.burstStart(s, burstFloor, false)
		}
		if raisedLevel > 0 {
			s.level = raisedLevel
		}
		if modeled {
			// The drops began in the run of traffic that emptied a
			// bucket that deep, not in a bunch before it (incidentStart),
			// and ended before what waited behind it (queuedTail), where
			// that was not s's own flow going on (sameFlowOn).
			s.lo = a.incidentStart(val, s, depth, true)
			if drainsHere && !sameFlowOn {
				s = queuedTail(val, s, a.mergeGapWindows())
			}
		}
		if src.shapedPackets != nil && val != nil && s.levelName != levelNone && s.level > 0 &&
			float64(riseOf(jumps[fc:l+1])) <= src.shapedPackets(s.lo, s.hi) &&
			!queuedStretch(val, s.lo, queueEnd(val, s.hi, hi)) && noMoreThanQuiet(s) {
			// Inbound, a few drops whose cause the host saw whole, no
			// queue sending behind it, and that built no more over its
			// level than traffic that moved nothing did: one bunch of
			// many like it, and which made the drops its timing cannot
			// tell (behind a 47 ms lag, a download's bunches just before
			// the reads of its own 1 to 3 drops, taken for their causes,
			// put the lag at 0 to 8 ms and outvoted the burst's 34.6 to
			// 50.7: the lag stated 0 to 1 s, and without the allowance
			// the download's drops a finding of their own).
			continue
		}
		// Behind a refresh, traffic as big before the cause, within the
		// reach of the cluster's first jump, made drops it showed too
		// (earlierInReach). Its shares are then those of several bursts,
		// whose drops the model places only roughly: each is taken as
		// reached within half a mean jump of it, as a long incident's.
		extended := false
		if refreshNs > 0 && l > fc && val != nil && s.level > 0 {
			if x := a.earlierInReach(val, s, firstPrev, firstRead, refreshNs, capNs, reachLo); x < s.lo {
				s.lo, extended = x, true
			}
		}
		start, end := a.g.startNs(s.lo), a.g.startNs(s.hi)
		// A device that shows every change at the next read changes the
		// counter at every read whose interval held the cause's traffic
		// over its level (a long cause's: its modeled drops, below); a
		// counter that changed at far fewer was refreshed less often.
		// Not at every read the cause spanned: an overshoot sent in 2 ms
		// pulses every 20 ms, shown at once, changes it at every other
		// read (its lag, then learned under a refresh the run could not
		// tell, came out 6.5 ms short).
		changes := int64(l - fc + 1)
		reads := (end - start) / max(readNs, 1)
		if val != nil && s.level > 0 {
			reads = int64(a.readsOver(val, s.lo, s.hi, readNs, s.level))
		}
		longTraffic := val != nil && s.level > 0 && end-start >= longIncidentReads*max(readNs, 1)
		// Inbound, the share model of a long cluster does not hold: the
		// host sees what the device's queue let through, not what it
		// dropped (below). Over a download's drops before a burst it
		// stated 82 to 117 ms where the lag was 0.
		if longTraffic && src.shapedPackets == nil {
			if ll, ok := a.longClusterRange(jumps[fc:l+1], s, passedLevel, val, refreshNs, readNs, capNs); ok {
				r, centre, depth, n := ll.lag, ll.centre, ll.depth, ll.lags
				s.level = ll.level
				// Its bucket, learned, held its first pulses' drops
				// back: those reads had none to show.
				drops := bucketDrops(val, s, depth)
				if int64(a.readsDropping(drops, readNs))-changes > 2 {
					fits = false
				} else if refreshNs == 0 {
					shownAtOnce += int(changes)
				}
				if refreshNs > 0 && a.dropsRecurAt(drops, refreshNs, readNs) {
					pulsed = true
				}
				clusters, of = append(clusters, r), append(of, lagCause{part: queue[qi], lo: s.lo, hi: s.hi, centre: centre, centred: true})
				depths = append(depths, depth)
				rough = rough || n < longIncidentReads/2
				continue
			}
		}
		if reads-changes > 2 {
			fits = false
		}
		// The first drop came no earlier than a bucket that deep, full
		// at the start, ran dry.
		first := start
		if depth > 0 {
			if e := firstDrop(val, s.lo, s.hi, s.level, depth); e >= 0 {
				// (Not from the first jump's count: a device may count
				// a packet more than once; the lab's counts what its
				// shaper holds back at each poll.)
				first = a.g.startNs(e)
			}
		}
		// Inbound, the device's bucket ran dry, and its first count
		// came, no earlier than the head of what its queue sent after.
		headLo := headOf(s)
		first = max(first, a.g.startNs(headLo))
		// It came by the traffic's end, and inbound, where the host saw
		// the device's queue sending, as its first packet queued: a
		// device counts packets queued as well as dropped (AWS-LIMITS.md),
		// and its queue began where its bucket ran dry (queueBegan).
		// Where a jump before the cluster, read after the traffic
		// began, may have shown that first count, the cluster's first
		// is a later one, and inbound any traffic up to its read, queued
		// a moment, may have made it (a burst's first jump parted off
		// the download's drops after it, whose cluster, its cause the
		// same burst, stated 61.8 to 63.8 ms where the lag was 34.5).
		firstBy := end
		if src.shapedPackets != nil && val != nil {
			if fc > 0 && start < jumps[fc-1].ToNs {
				firstBy = firstRead
			} else if i, ok := queueBegan(val, headLo, hi); ok {
				firstBy = min(end, a.g.startNs(i))
			}
		}
		add(firstPrev-firstBy-refreshNs, firstRead-first)
		// Under one lag, the reads that show a cause's drops span its
		// traffic, a refresh and a read at most from the first. Where
		// most of the jumps came later, the counter went on counting
		// after the traffic ended (a deep queue draining, counted as it
		// drains: the lab's tbf counts its held-back dequeues for 500 ms
		// after a 12 ms burst), and the shares and the last drop, which
		// assume the drops were made while the traffic went on, put the
		// lag at 17 to 251 ms where it was 0. The first jump alone tells
		// it. Behind a refresh longer than a queue takes to drain, the
		// reads cannot show it going on: there, where the counter rose
		// by more than all the traffic over the level the cause stood
		// out from (the allowance, where known), from the cause to the
		// last read, could have dropped, it counted what waited (behind
		// a 1 s refresh, two changes, the second a second on, 4,627
		// where that traffic's excess over the allowance was about 2,200
		// packets: the first change's share, put on the burst, stated
		// 44 to 52 ms where the lab's lag was 4.7, given the allowance
		// or not). Outbound only, where the host saw the traffic before
		// the device counted it. Only there: a device that counts
		// the packets that waited as well as those dropped counts a few
		// more than the excess (a burst through a shallow queue, 1,349
		// where its excess was 1,318), and where reads show its changes
		// one by one, their shares place the drops better than the
		// first jump alone.
		countsQueue := false
		if since := (span{lo: s.lo, hi: a.g.index(lastRead), level: s.level}); src.sentFirst && val != nil && s.level > 0 && refreshNs > lateHorizon && src.perDrop != nil && since.hi > since.lo {
			countsQueue = float64(riseOf(jumps[fc:l+1])) > overLevel(val, since, s.level)/src.perDrop(since.lo, since.hi)
		}
		// Outbound, traffic after the first read, past MergeGap, that
		// carried more over the level than the cause did is a cause of
		// its own, not what waited behind it (as in drains): a sender
		// starved of CPU that stalled 11 ms into its burst, then sent
		// what it owed, 300 kB in 1 ms, and went on. The jumps read
		// after it began may count it, and the cause's shares tell
		// nothing (they put the lag at 33.5 ms where it was 0): the
		// first jump alone tells it, as for a queue counted as it
		// drains.
		twoCauses := false
		if src.sentFirst && !long && val != nil && s.level > 0 {
			lastHi := a.g.index(jumps[l].ToNs)
			for at := s.hi; at < lastHi && !twoCauses; {
				x, y, ok := excessSpan(val, at, lastHi, s.level)
				if !ok {
					break
				}
				at = y
				twoCauses = x-s.hi > a.mergeGapWindows() && overLevel(val, span{lo: x, hi: y}, s.level) > overLevel(val, s, s.level)
			}
		}
		drained := !longTraffic && firstRead > start && (countsQueue || twoCauses || 2*a.readAfter(jumps[fc:l+1], firstRead+end-start+refreshNs+max(readNs, 1)) > l-fc+1)
		// Read with no refresh, the first jump's range is narrowed to
		// the read interval where the count's rate fell to the drain's
		// (kneeRange). Outbound only: inbound, the host sees the
		// traffic after the device's queue, and its end is not where
		// the device's count fell.
		if drained && refreshNs == 0 && src.sentFirst && src.perDrop != nil && val != nil && s.level > 0 {
			if b, ok := keepLag(firstPrev-firstBy, firstRead-first, capNs); ok {
				if r, ok := a.kneeRange(jumps[fc:l+1], s, val, src.perDrop(s.lo, s.hi), b, readNs); ok {
					add(r.from, r.to)
				}
			}
		}
		if !drained {
			if src.shapedPackets != nil {
				// Inbound, the host saw the traffic after the device's
				// queue: a drop, made as a packet arrived to a full
				// queue, is seen beside the packets that queue held, up
				// to its delay later. So the drops lie anywhere in the
				// traffic as the host saw it, the last one too, and the
				// traffic's shape tells no share of them: a burst's
				// queue sends at the allowance after its drops ended.
				// Where its delay is, nothing the device publishes
				// says (the lab's was 22 ms: the last drop taken at the
				// traffic's end, and the shares spread over it, stated
				// 0 to 6 ms where the lag was 34, and 11.6 to 15 where
				// it was 0). And later traffic than the cause's, queued
				// a moment, may have made the last count: the cause's
				// end bounds nothing (a download's drip, its cause's
				// end 22 ms before the read before its last jump,
				// stated 22 to 74 ms where the lag was 0).
				//
				// A cause found after the cluster's first read, later
				// traffic having taken the place of what was located
				// first (a download's latest bunch before the last read,
				// of its drops over 2 s), made none of the first jump's
				// counts: the drops lie anywhere from what was located
				// first (behind a 36 ms lag, that bunch stated 0 to
				// 16.6 ms).
				from := start
				if start > firstRead {
					from = min(start, a.g.startNs(locatedLo))
				}
				add(0, lastRead-from)
			} else {
				// A long overshoot's one share range is as late as a
				// bucket made its first drop, which one range cannot
				// tell: its first and last drops' ranges only (wide, and
				// true). Trailing jumps that together count under a
				// tenth of the rise may count what queued behind the
				// traffic, not its drops (TCP segments counted as a
				// shallow queue drained: 88 after 2,365): the last drop
				// was shown by the last jump before them, or by one of
				// them. Taken from the read before the last jump, it had
				// put the lag at 5 to 7 ms at least where the lab's was
				// 0, in 5 of the lab's impact-dropped bundles.
				last := l
				var tail uint64
				for rise := riseOf(jumps[fc : l+1]); last > fc && float64(tail+jumps[last].Delta) < drainTailShare*float64(rise); last-- {
					tail += jumps[last].Delta
				}
				if val != nil && s.level > 0 && !longTraffic {
					// A stalled burst's head, over the lower level its
					// runs were followed at, went into the device's
					// bucket: its drops began where a bucket as deep as
					// traffic that moved nothing held ran dry (from the
					// head, its shares put the lag 5.5 to 19 ms late
					// where it was 0, in 4 of the lab's impact-dropped
					// runs beside load).
					shareDepth := 0.0
					if stalledBurst {
						shareDepth = shown(s.level)
					}
					// Behind a refresh, trailing jumps come a refresh
					// after the last one before them, and the share of
					// that one tells nothing: its drops may be all the
					// burst's (behind 100 ms, a burst's 2,407 drops in one
					// change, 114 counted after it in the next: the
					// first's 95%, reached 19 ms before the burst's end,
					// put the lag at 15.9 to 26.2 ms where it was 1.5,
					// d1). Read every 10 ms with no refresh, they may be
					// its last drops, and its share holds.
					// With no allowance known, read with no refresh, a
					// cause under half of whose traffic was over the
					// level it stood out from sent at about that level:
					// its excess is its pacer's jitter, and its drops,
					// under an allowance somewhere below, follow its
					// traffic, which its shares are then taken over (a
					// burst paced at 200 Mbit/s, its level 197: the share
					// ranges agreed on 35.2 to 37.5 ms where the lab's lag
					// was 30.8, d6/quiet). Over half, the level is far
					// under its rate, and its shares over it hold (taken
					// over all its traffic too, one of the lab's ranges
					// went 3 ms past its lag, d1/load).
					shareSpan := s
					if s.levelName == levelIntervalOwn && refreshNs == 0 && overLevel(val, s, s.level) < sumIn(val, s.lo, s.hi)/2 {
						shareSpan.level = 0
					}
					ranges, _ := a.shareRanges(jumps[fc:l+1], shareSpan, val, shareDepth, extended, refreshNs, 0)
					for k, r := range ranges {
						if fc+k < last || fc+k == last && (tail == 0 || refreshNs == 0) {
							add(r.from, r.to)
						}
					}
				}
				lastFrom, _ := a.certain(jumps[last])
				add(lastFrom-end-refreshNs, lastRead-end)
			}
		}

		if r, ok := a.clusterRange(own); ok {
			clusters, of = append(clusters, r), append(of, lagCause{part: queue[qi], lo: s.lo, hi: s.hi, level: s.level})
		} else if refreshNs == 0 && end < firstPrev-maxNs && !a.madeInReach(jumps[fc:l+1], firstPrev-maxNs, firstRead, src) {
			// A device that shows every change at the next read would
			// have shown this cluster's drops within the longest lag of
			// its cause, and nothing in reach could have made them: a
			// refresh hides them (behind a 1 s lag and a 1 s refresh, a
			// 2 MB burst's 1,380 drops were put on a TCP flow's 40-packet
			// bunch just before the read, the lag stated as 1 ms).
			fits = false
		}
	}
	var level float64
	if len(levels) > 0 {
		slices.Sort(levels)
		level = levels[len(levels)/2]
	}
	if len(clusters) == 0 {
		// No lag, but a long overshoot's level, for its incidents to be
		// located by all the same.
		return counterLag{overshootLevel: level}, false, false
	}
	if _, n := agreement(clusters); n < len(clusters) {
		clusters, of = a.oneLagForAll(clusters, of, jumps, refreshNs, window, shown, src)
	}
	var deferred map[int64]int
	if _, n := agreement(clusters); n < len(clusters) {
		clusters, deferred = a.deferToMost(clusters, of, jumps, refreshNs, src)
	}
	r, n := agreement(clusters)
	// A cluster that only bounded the lag (a single burst behind a 1 s
	// refresh: 0 to 723 ms) has no middle worth a vote where others
	// narrowed it down (beside an overshoot's 26 ms, one put the lag at
	// 193); where none did, the lag is the middle of the range they
	// agree on (two overshoots each shown in two changes: 0 to 900 and
	// 0 to 200 ms, whose middles' mean, 275, put the lag at the range's
	// edge, where it read as learned). Nor, where all agree, one cut at
	// the reach: it reached past any lag looked for, and the middle of
	// what is left of it is no estimate (behind a 1 s refresh and a 1 s
	// lag, a burst's one change left 853 to 1,010 ms, cut, beside an
	// upload's 983 to 1,003, centred at 993: its middle, 931, put the lag
	// at 983, the agreed range's edge). Where they disagree, it still
	// votes: its lower half is evidence of a long lag (the lab's queue
	// counted as it drained beside 0 to 1.2 ms).
	var mids []int64
	latestFrom, earliestTo := clusters[0].from, clusters[0].to
	for k, c := range clusters {
		switch {
		case len(of) == len(clusters) && of[k].centred:
			// A long cluster's lag is its jumps', which its range
			// only widens (cut at 0 there, its middle had put the
			// lab's lag of 2 ms at 11, 0 to 22).
			mids = append(mids, of[k].centre)
		case !c.boundedOnly() && !(n == len(clusters) && c.to == capNs && c.to-c.from > int64(learnedLagSpread)):
			mids = append(mids, c.mid())
		}
		latestFrom, earliestTo = max(latestFrom, c.from), min(earliestTo, c.to)
		if n < len(clusters) {
			r.from, r.to = min(r.from, c.from), max(r.to, c.to)
		}
	}
	r.to = min(r.to, capNs)
	point := r.mid()
	if len(mids) > 0 {
		slices.Sort(mids)
		point = mids[len(mids)/2]
		if len(mids)%2 == 0 {
			point = (mids[len(mids)/2-1] + point) / 2
		}
	}
	// A middle at the reach or past it is no lag looked for: half its
	// range or more lay past any, and told only that the lag is the
	// longest.
	if point >= capNs {
		point = maxNs
	}
	point = min(max(point, r.from), r.to)
	// A range at which some jump is where no burst like the causes lies,
	// or such a burst where no jump is, paired some jump with the wrong
	// burst: the lags at which every one is paired hold the device's.
	refuted := false
	c, ok := a.consistentLags(jumps, of, refreshNs, readNs, capNs, window, src)
	if ok && (c.to < r.from-lagScanStep || c.from > r.to+lagScanStep) {
		r, point, refuted = c, c.mid(), true
	}
	fits = fits && latestFrom-earliestTo <= readNs
	var depth float64
	if len(depths) > 0 {
		slices.Sort(depths)
		depth = depths[len(depths)/2]
	}
	explained := 0
	for _, c := range of {
		explained += c.part.l - c.part.fc + 1
	}
	lag = counterLag{lowNs: r.from, highNs: r.to, pointNs: point, refreshNs: refreshNs,
		clusters: len(clusters), explained: explained, source: lagEstimated, overshootLevel: level, bucketDepth: depth, depthRough: rough,
		changesShown: shownAtOnce, pulsedAtRefresh: pulsed, delayAsCauses: sameDelay(clusters, of, readNs)}
	if refuted {
		// The clusters' pairings are what the run refuted: no cause
		// is looked for before a part's or a deferred cluster's edge.
		return lag, true, fits
	}
	if n == len(clusters) && len(of) == len(clusters) {
		for _, c := range of {
			if !c.part.placed {
				continue
			}
			if lag.causeBefore == nil {
				lag.causeBefore = map[int64]int{}
			}
			for k := c.part.fc; k <= c.part.l; k++ {
				lag.causeBefore[jumps[k].ToNs] = c.part.ceil
			}
		}
	}
	if lag.causeBefore == nil {
		lag.causeBefore = deferred
	} else {
		maps.Copy(lag.causeBefore, deferred)
	}
	return lag, true, fits
}

// sameDelay tells clusters of one change each whose lag ranges agree
// within a read: each change came as long after its cause as the others.
func sameDelay(clusters []lagRange, of []lagCause, readNs int64) bool {
	if len(clusters) < 2 || len(of) != len(clusters) {
		return false
	}
	for k, c := range clusters {
		if of[k].part.fc != of[k].part.l {
			return false
		}
		from, to := c.from-clusters[0].from, c.to-clusters[0].to
		if max(from, -from, to, -to) > readNs {
			return false
		}
	}
	return true
}

// overByAPacket tells whether some window of [x, y) carried more than a
// packet (their mean size, packets per window) over level.
func overByAPacket(val func(int) float64, packets func(lo, hi int) float64, x, y int, level float64) bool {
	n := packets(x, y)
	if n <= 0 {
		return true
	}
	packet := sumIn(val, x, y) / n
	for i := x; i < y; i++ {
		if val(i)-level > packet {
			return true
		}
	}
	return false
}

// lagCause is the jumps a cluster's lag range came from and the windows
// of the traffic taken for their cause (none: lo == hi), and the level it
// stood out from (0: a cause told otherwise, a long one's or exact).
type lagCause struct {
	part   lagPart
	lo, hi int
	level  float64
	// centre is a long cluster's lag from its jumps' own (centred: there
	// is one), where its range, widened by what one jump cannot tell and
	// cut at 0, need not be centred on it (longClusterRange).
	centre  int64
	centred bool
}

// oneLagForAll is clusters (of: their jumps and causes) where they
// disagree and one cluster's range is the only one at which every other
// cluster has a cause too: the device has one lag. Each cluster took the
// latest traffic that stood out before its reads for its cause, which
// need not be the one that lag puts there. A cluster is explained at a
// lag where traffic over the level its own cause stood out from lies
// where that lag puts its drops, and, outbound, could have made its first
// jump (couldMake); its range is then the one that traffic gives. Behind
// a 1 s lag, the lab's two bursts a second apart: the first burst's drops
// were read 8 ms into the second, which took them (a lag of 0 to 6 ms),
// and the second's, read a second after it, said 1 s; the lag was stated
// 0 to 1 s, and both jumps put on the second burst, the first missed (6 of
// 6 micro-burst runs behind 1 s, d1). A lag of 6 ms explains the second
// jump by nothing; 1 s explains both. Where several ranges explain every
// cluster, or none does, clusters are as they were.
func (a *analysis) oneLagForAll(clusters []lagRange, of []lagCause, jumps []counters.Jump, refreshNs int64, window func(counters.Jump) (int64, int64), shown func(float64) float64, src lagTraffic) ([]lagRange, []lagCause) {
	if shown == nil || !src.sentFirst && src.shapedPackets != nil || src.perDrop == nil || src.val == nil || len(of) != len(clusters) || len(clusters) < 2 {
		return clusters, of
	}
	// Touching ranges agree, as in agreement.
	overlap := func(x, y lagRange) bool { return x.from <= y.to && y.from <= x.to }
	var found []lagRange
	var foundOf []lagCause
	var foundLag lagRange // the range that explained them
	for h, lag := range clusters {
		if lag.boundedOnly() || of[h].level <= 0 || of[h].lo >= of[h].hi {
			continue
		}
		ranges, causes := slices.Clone(clusters), slices.Clone(of)
		all := true
		for j, c := range clusters {
			if overlap(c, lag) {
				continue
			}
			r, cause, ok := a.causeAtLag(lag, of[j], jumps, refreshNs, window, shown, src)
			if !ok || !overlap(r, lag) {
				all = false
				break
			}
			ranges[j], causes[j] = r, cause
		}
		if !all {
			continue
		}
		if found != nil && !overlap(foundLag, lag) {
			return clusters, of // two lags explain every cluster
		}
		if found == nil {
			found, foundOf, foundLag = ranges, causes, lag
		}
	}
	if found == nil {
		return clusters, of
	}
	return found, foundOf
}

// causeAtLag is the range of lags the traffic that stands out where lag
// puts cluster c's drops gives, and that traffic as its cause; ok is false
// where none stands out there over the level c's own cause stood out from,
// or, outbound, none could have made c's first jump.
func (a *analysis) causeAtLag(lag lagRange, c lagCause, jumps []counters.Jump, refreshNs int64, window func(counters.Jump) (int64, int64), shown func(float64) float64, src lagTraffic) (lagRange, lagCause, bool) {
	if c.level <= 0 {
		return lagRange{}, c, false
	}
	firstPrev, firstRead := window(jumps[c.part.fc])
	// Its range is cut a read past the longest lag again (keepLag,
	// lagReach), as estimateLagWith cuts the ranges it compares it with;
	// the read here is the first jump's own, as its look-back's is.
	lo, hi := a.g.span(firstPrev-lagReach(lag.to, firstRead-firstPrev)-refreshNs, firstRead-lag.from)
	x, y, ok := excessSpan(src.val, lo, hi, c.level)
	if !ok {
		return lagRange{}, c, false
	}
	x, y = splitAtGaps(src.val, x, y, c.level, a.mergeGapWindows())
	if builtOver(src.val, span{lo: x, hi: y, level: c.level}) <= shown(c.level) || src.sentFirst && !explainsDrops(mostCounts(src.val, x, y, src.perDrop), riseOf(jumps[c.part.fc:c.part.l+1])) {
		return lagRange{}, c, false
	}
	_, lastRead := window(jumps[c.part.l])
	r, ok := keepLag(firstPrev-a.g.startNs(y)-refreshNs, lastRead-a.g.startNs(x), lagReach(int64(MaxCounterLag), firstRead-firstPrev))
	c.lo, c.hi = x, y
	return r, c, ok
}

// deferToMost is clusters (of: their jumps and causes) less those that
// counted under 1/dominantOver of what the one that counted most did,
// whose ranges lie wholly under its range though their cause was its
// cause, where the traffic that range puts before their reads could have
// made them. A cause's few drops are not shown sooner than its many:
// some other traffic made them. Behind a lag of 1 s, a TCP flow's one
// drop, its bucket left short by two bunches 10 ms apart, was read 220
// ms after a 2 MB burst and put on it (0.2 s), the burst's own 1,314,
// read a second after it, said 1 s, and the lag was stated 196 to 996
// ms: the bunches' drop became the burst's, no finding of its own. Not
// over a longer lag: a deep queue is counted as it drains, and the
// lab's 888 drops 470 ms after its burst (c10/load/q2), deferred, were
// put on its victim's bunch, a second finding naming it. Outbound only,
// where the host saw the traffic before the device counted it.
//
// Deferred is, by each deferred jump's ToNs, the window its look-back at
// the largest's lag ends at (counterLag.causeBefore): its incident looks
// for its cause there too. Behind a 100 ms refresh the run could not
// tell and a 1 s lag, the drop was read 237 ms after the burst, and each
// jump looked back over the whole range the untold refresh leaves (0 to
// 1.01 s), found the burst, and joined its incident: one finding.
func (a *analysis) deferToMost(clusters []lagRange, of []lagCause, jumps []counters.Jump, refreshNs int64, src lagTraffic) ([]lagRange, map[int64]int) {
	if !src.sentFirst || src.perDrop == nil || src.val == nil || len(of) != len(clusters) {
		return clusters, nil
	}
	riseAt := func(k int) uint64 { return riseOf(jumps[of[k].part.fc : of[k].part.l+1]) }
	most := 0
	for k := range of {
		if riseAt(k) > riseAt(most) {
			most = k
		}
	}
	big, cause := clusters[most], of[most]
	kept := clusters[:0:0]
	var deferred map[int64]int
	for k, c := range clusters {
		p := of[k].part
		sameCause := of[k].lo < of[k].hi && of[k].lo < cause.hi && cause.lo < of[k].hi
		if k != most && c.to < big.from && sameCause {
			if dominantOver*riseAt(k) <= riseAt(most) {
				firstPrev, firstRead := a.certain(jumps[p.fc])
				lo, hi := a.g.span(firstPrev-big.to-refreshNs, firstRead-big.from)
				if w := src.locate(lo, hi); w.levelName != levelNone && a.couldMake(jumps[p.fc:p.l+1], src.val, w.lo, w.hi, src.perDrop) {
					if deferred == nil {
						deferred = map[int64]int{}
					}
					for j := p.fc; j <= p.l; j++ {
						deferred[jumps[j].ToNs] = hi
					}
					continue
				}
			}
		}
		kept = append(kept, c)
	}
	return kept, deferred
}

// drainTailShare is the most of a cluster's rise its trailing jumps may
// count and still be taken as what queued behind its traffic.
const drainTailShare = 0.1

// couldMake tells whether the traffic of windows [x, y) (val per window,
// perDrop of it a packet) could have made a quarter of the first of jumps
// read after it began, each of its packets counted at most twice
// (mostCounts). A TCP flow's 40-packet bunches, each standing
// out near a read, could not have made the 772 drops of a burst shown
// 250 ms late (taken as the cause, they put the lag at 6 ms and the
// incident 220 ms late). Jumps none of which was read after it: true.
func (a *analysis) couldMake(jumps []counters.Jump, val func(int) float64, x, y int, perDrop func(lo, hi int) float64) bool {
	k := len(jumps) - a.readAfter(jumps, a.g.startNs(x))
	return k == len(jumps) || explainsDrops(mostCounts(val, x, y, perDrop), jumps[k].Delta)
}

// madeInReach tells whether the traffic that stands out of [fromNs, toNs)
// could have made the first of jumps (couldMake), outbound only, where the
// host saw it before the device counted it; elsewhere it says nothing
// against it (true). Where nothing stands out (a steady overshoot need
// not), whether all of it could have: a second burst's jump, shown 1.2 s
// after it behind a 1 s refresh the run could not tell, with no traffic at
// all in the second before, fit a refresh of 0, and the lag was stated 0
// to 213 ms where it was 250.
func (a *analysis) madeInReach(jumps []counters.Jump, fromNs, toNs int64, src lagTraffic) bool {
	if !src.sentFirst || src.perDrop == nil || src.val == nil {
		return true
	}
	lo, hi := a.g.span(fromNs, toNs)
	w := src.locate(lo, hi)
	if w.levelName == levelNone {
		return a.couldMake(jumps, src.val, lo, hi, src.perDrop)
	}
	return a.couldMake(jumps, src.val, w.lo, w.hi, src.perDrop)
}

// readAfter is how many of jumps were read after ns.
func (a *analysis) readAfter(jumps []counters.Jump, ns int64) int {
	n := 0
	for _, j := range jumps {
		if _, read := a.certain(j); read > ns {
			n++
		}
	}
	return n
}

// readWithin is the rise of jumps read after fromNs and by toNs.
func (a *analysis) readWithin(jumps []counters.Jump, fromNs, toNs int64) uint64 {
	var n uint64
	for _, j := range jumps {
		if _, read := a.certain(j); read > fromNs && read <= toNs {
			n += j.Delta
		}
	}
	return n
}

// earlierInReach is where a cluster's cause, located as s, began: at the
// earliest traffic as big (asBig) over s's level, before s, within the
// reach of the cluster's first jump at the longest lag its first drop
// allows (from the read before it, less a refresh and that lag, no
// earlier than floor), looked for again from there (four times at most):
// the device showed what that traffic dropped in the cluster too. The
// floor is the look-back's, not a parting's: a part's cause may be one
// the part before gave up to one lag for all (oneLagForAll), and the
// reads allow the lag either way (behind a told 1 s refresh, three
// bursts each shown at one change, the first change parted off as the
// second burst's, the rest taken as the third's alone: 842 to 853 ms
// where devices lagging 859 ms to 1 s give the same reads). Behind a
// 1 s refresh the run could not tell and a 1 s lag, four bursts, the first
// three shown at one change, the fourth at the next, a second later: one
// cluster, whose cause was taken as the fourth burst alone, its first
// change 49% of that burst's drops, and the lag stated 0 to 499 ms where
// devices lagging 968 ms to 1 s give the same reads. At any lag those
// shares allowed, the first change's reach held the other three.
func (a *analysis) earlierInReach(val func(int) float64, s span, firstPrev, firstRead, refreshNs, capNs int64, floor int) int {
	x := s.lo
	gap := a.mergeGapWindows()
	for range 4 {
		latest := min(firstRead-a.g.startNs(x), capNs)
		found := -1
		for at := max(a.g.index(firstPrev-refreshNs-latest), floor); at < x-gap; {
			lo, hi, ok := excessSpan(val, at, x-gap, s.level)
			if !ok {
				break
			}
			if asBig(val, s, lo, hi) {
				found = lo
				break
			}
			at = hi
		}
		if found < 0 {
			break
		}
		x = found
	}
	return x
}

// shareRanges is the range of the lag that each jump of a cluster but its
// last gives: it showed the drops made until a refresh, when the drops a
// bucket of depth over s's level would have made of the traffic (val per
// window; bucketDrops) had reached the same share of the cluster's as the
// counter's rise had of its whole. That refresh came R_k-1 - lag to
// R_k - lag: a range a read interval wide, however long the refresh.
//
// A long incident's (long) are placed finer, and wider where its traffic
// says less. Its device may refresh at every read (refreshNs 0), and then
// the refresh came while R_k sampled, less the lag: a range as wide as the
// read. And each share is taken as reached anywhere within half a mean
// jump of it: the model's drops are not the device's, and where the drops
// pause (traffic sent in ticks, a read in a pause) the share was reached
// at any point of the pause. reachedAt is, for each, where its share was
// reached: the middle of that reach, or, where the drops paused pauseNs
// or longer within it, of a tenth of it.
func (a *analysis) shareRanges(cluster []counters.Jump, s span, val func(int) float64, depth float64, long bool, refreshNs, pauseNs int64) (ranges []lagRange, reachedAt []int64) {
	drops := bucketDrops(val, s, depth)
	cum := make([]float64, len(drops)+1)
	for i, d := range drops {
		cum[i+1] = cum[i] + d
	}
	total := cum[len(drops)]
	rise := riseOf(cluster)
	if total <= 0 || rise == 0 {
		return nil, nil
	}
	// reached is when the modeled drops reached x: the first window to
	// reach it, in proportion within it; 0 is reached at the first drop,
	// not at the span's start (a bucket's worth of traffic before it).
	window := func(x float64) int { return max(sort.SearchFloat64s(cum, max(x, math.SmallestNonzeroFloat64))-1, 0) }
	reached := func(x float64) int64 {
		i := window(x)
		at := a.g.startNs(s.lo + i)
		if i < len(drops) && drops[i] > 0 {
			at += int64(min(max((x-cum[i])/drops[i], 0), 1) * float64(a.g.widthNs))
		}
		return at
	}
	// pauseIn is the longest the modeled drops paused while reaching
	// from x to y.
	pauseIn := func(x, y float64) int64 {
		return a.longestPause(drops[window(x):max(min(sort.SearchFloat64s(cum, y), len(drops)), window(x))])
	}
	half := 0.0
	if long {
		half = total / float64(len(cluster)) / 2
	}
	out := make([]lagRange, 0, len(cluster)-1)
	reachedAt = make([]int64, 0, len(cluster)-1)
	var sofar uint64
	for _, j := range cluster[:len(cluster)-1] {
		before := total * float64(sofar) / float64(rise)
		sofar += j.Delta
		target := total * float64(sofar) / float64(rise)
		from, to := a.certain(j)
		prev := from
		if long && refreshNs == 0 {
			from = j.ToNs
		}
		// Kept within the modeled drops, evenly: half a mean jump past
		// the first or last drop would put the middle of the range late
		// or early (a 1 s refresh's first jump, 9% of the rise, came out
		// 30 ms early).
		h := min(half, target, total-target)
		// Behind a refresh, a short cause's next change may also count
		// what its queue held after it (up to drainTailShare of the
		// rise, as trailing jumps may: 6% or more of the lab's 82 ms
		// burst's count came in the 25 ms after it, read with no
		// refresh, d4/quiet/impact-dropped-r0-l0-1): this
		// jump's share of the traffic's own drops may be that much
		// larger. Taken as the rise's share alone, the first of two
		// changes 100 ms apart (69%) put the lag 4 to 6 ms late in the
		// lab's impact-dropped, its range missing the lab's in 5 of 32
		// runs a way. Not with a refresh of 0, where the trailing
		// jumps are left out (below) and the shares of the many before
		// place the drops.
		late := target
		if !long && refreshNs > 0 {
			late = min(target/(1-drainTailShare), total)
		}
		r := lagRange{from - reached(late+h), to - reached(target-h)}
		// Where the share was reached: the middle of the range's reach,
		// but where the drops paused pauseNs or longer within it, the
		// middle of where they were within a tenth of it. A pause on
		// one side puts the reach's middle off the share (a sender's 30
		// ms pause, its bucket refilling, stopped the drops for 90 ms
		// beside a 1 s refresh: a lag of 30 ms stated 104); without
		// one, the whole reach evens out the sender's ticks.
		w := h
		if pauseIn(target-h, target+h) >= pauseNs {
			w = h / 10
		}
		reachedAt = append(reachedAt, reached(target-w)+(reached(target+w)-reached(target-w))/2)
		if long && refreshNs == 0 {
			// The read before showed the drops until it, less the
			// lag, and no more than the share before this jump. Where
			// the drops paused just after this jump's share (traffic
			// in pulses, the jump its pulse's last), the pause alone
			// leaves the lag anywhere from the read less the pause's
			// end: 20 ms pulses every 40 ms, shown 30 ms late, put it
			// at 16.5 ms.
			// Only there: elsewhere the model's drops are not the
			// device's to a read interval (the lab's impact-dropped
			// TCP bunches, at once: 2.9 to 8.9 ms where it was 0).
			hb := min(half, before, total-before)
			if low := prev - reached(before+hb); pauseIn(target-h, target+h) >= to-prev && low > r.from && low <= r.to {
				r.from = low
			}
		}
		out = append(out, r)
	}
	return out, reachedAt
}

// exactRange is the lag of a cluster whose drops the traffic tells one by
// one (drops: a full connection-tracking table refuses every SYN past what
// was available; a link-local bucket of a counted depth, refilled at the
// published limit, drops every packet that finds less than one in it):
// the jump that brought the counter's rise to C showed a
// snapshot the device took after the C-th drop and before the next, and
// became visible between the reads around it (at the refresh's phase where
// one is learned: refreshPhase). Each jump gives a range; with a refresh of
// 0 the read before each jump gives one more, since it showed the drops
// until it less the lag. They agree on one lag where the model holds and
// the device's lag is steady: the range they all share. Where the lag
// varies from read to read, the ranges of the jumps (a tenth of the
// outermost left out) fall within a read interval or 10 ms of each other,
// and the lag is between their edges. Otherwise the model is wrong here (the table
// freed connections, SYNs counted against it the host did not see), and
// ok is false. A snapshot taken where no drop came for long (between a
// flood and its retries a second later) gives a range as long.
func (a *analysis) exactRange(jumps []counters.Jump, fc, l, hi int, refreshNs, readNs int64, dropsIn func(first counters.Jump, hi int) exactDrops) (lagRange, bool) {
	cluster := jumps[fc : l+1]
	d := dropsIn(cluster[0], hi)
	if !d.ok {
		return lagRange{}, false
	}
	cum := make([]float64, len(d.perWin)+1)
	for i, v := range d.perWin {
		cum[i+1] = cum[i] + v
	}
	// window is the fine window the n-th modeled drop fell in, false
	// past the last.
	window := func(n uint64) (int, bool) {
		i := sort.SearchFloat64s(cum, float64(n)) - 1
		return d.lo + i, n > 0 && i < len(d.perWin)
	}
	// The rise since the model's read, before the cluster.
	var shown uint64
	for _, j := range jumps[:fc] {
		if j.FromNs >= d.sinceNs {
			shown += j.Delta
		}
	}
	var visible []int64
	var widen int64
	locked := false
	if refreshNs > 0 {
		visible, widen, locked = a.refreshPhase(cluster, refreshNs)
	}
	froms := make([]int64, 0, len(cluster))
	tos := make([]int64, 0, len(cluster))
	for k, j := range cluster {
		before := shown
		shown += j.Delta
		at, ok := window(shown)
		if !ok {
			return lagRange{}, false // more shown than the model dropped
		}
		vFrom, vTo := a.certain(j)
		switch {
		case refreshNs == 0:
			vFrom = j.ToNs
		case locked && visible[k] != 0:
			vFrom, vTo = visible[k]-widen, visible[k]+widen
		}
		from := int64(math.MinInt64)
		if next, ok := window(shown + 1); ok {
			from = vFrom - a.g.startNs(next+1)
		}
		if refreshNs == 0 {
			// The read before showed the drops before this jump's only.
			prev, _ := a.certain(j)
			if next, ok := window(before + 1); ok {
				from = max(from, prev-a.g.startNs(next+1))
			}
		}
		froms, tos = append(froms, from), append(tos, vTo-a.g.startNs(at))
	}
	slices.Sort(froms)
	slices.Sort(tos)
	if from, to := froms[len(froms)-1], tos[0]; from <= to {
		return keepExactLag(from, to)
	}
	trim := len(cluster) / 10
	from, to := froms[len(froms)-1-trim], tos[trim]
	if from-to > max(readNs, int64(10*time.Millisecond)) {
		return lagRange{}, false
	}
	return keepExactLag(min(from, to), max(from, to))
}

// keepExactLag is keepLag for exactRange, its top not cut at the longest
// lag: a lag at it, told to a read, is the middle of a range that ends a
// read past it, and estimateLagWith cuts the range it states there
// (lagReach).
func keepExactLag(from, to int64) (lagRange, bool) {
	r, ok := keepLag(from, to, int64(MaxCounterLag))
	return lagRange{r.from, max(r.to, to)}, ok
}

// lastsLong tells whether fine windows [lo, hi) last longIncidentReads
// reads or more.
func (a *analysis) lastsLong(lo, hi int, readNs int64) bool {
	return int64(hi-lo)*a.g.widthNs >= longIncidentReads*readNs
}

// longOvershoot is the stretch of [lo, hi) over the level that splits its
// rates per read interval into low and high (splitLevel), and that level,
// when the stretch lasts longIncidentReads reads or more; for a sender
// that pulses, its rates per pulseSpan.
func (a *analysis) longOvershoot(val func(int) float64, lo, hi int, readNs int64) (x, y int, level float64, ok bool) {
	read := int(max(readNs/a.g.widthNs, 1))
	if level = splitLevel(val, lo, hi, read); level > 0 {
		if x, y, ok = excessSpan(val, lo, hi, level); ok && a.lastsLong(x, y, readNs) {
			return x, y, level, true
		}
	}
	// Sent in pulses (2 or 5 ms every 20 or 40 ms), an overshoot leaves
	// read intervals of nothing inside it, as low as the traffic around
	// it, and the split per read interval is between the pulses and the
	// rest: each pulse a stretch of its own. Split over pulseSpan
	// instead, it is one stretch, whose read intervals, a quarter of them
	// or more, fall under its level: pulsed. (Not otherwise: a burst
	// beside a steady overshoot, which splits per read interval at the
	// burst, would have the overshoot's level learned too low.)
	coarse := int(max(int64(pulseSpan), readNs) / a.g.widthNs)
	if coarse <= read {
		return 0, 0, 0, false
	}
	if level = splitLevel(val, lo, hi, coarse); level <= 0 {
		return 0, 0, 0, false
	}
	if x, y, ok = excessSpan(val, lo, hi, level); !ok || !a.lastsLong(x, y, readNs) {
		return 0, 0, 0, false
	}
	n := (y - x) / read
	if under := n - a.readsOver(val, x, x+n*read, readNs, level); 4*under < n {
		return 0, 0, 0, false
	}
	return x, y, level, true
}

// lagReach is how far back a lag up to toNs puts drops: toNs, and where
// toNs reaches the longest lag looked for, at least a read (readNs) past
// that, so that a range already cut there is not widened again. A lag
// there may be a read past it: the lab's "1 s", shown at its next poll,
// is 1.0007 to 1.006 s.
func lagReach(toNs, readNs int64) int64 {
	if toNs >= int64(MaxCounterLag) {
		return max(toNs, int64(MaxCounterLag)+readNs)
	}
	return toNs
}

// wentOnUnshown tells whether traffic over level, a stretch of it ending
// at window y, went on as it was for longer than the longest lag and a
// refresh after the read of jumps[l], with no later change of the
// counter: what went on so, moving nothing, was under the allowance, and
// is no long overshoot of it. Behind a 100 ms refresh and 250 ms, beside
// load, an inbound burst's two changes, a refresh apart, spanned more than
// longIncidentReads reads; with no allowance known, the download that
// had run for 1.9 s, at 25 Mbit/s under 40, was taken for an overshoot
// they showed, still going at the last read: no end seen, no lag learned,
// and the burst, out of a read's look-back, missed (d1/load). False where
// the trace ended too soon to tell.
func (a *analysis) wentOnUnshown(val func(int) float64, y int, level float64, jumps []counters.Jump, l int, refreshNs, readNs int64) bool {
	_, lastRead := a.certain(jumps[l])
	until := lastRead + int64(MaxCounterLag) + max(refreshNs, readNs)
	if l+1 < len(jumps) {
		if from, _ := a.certain(jumps[l+1]); from < until {
			return false
		}
	}
	from, to := a.g.index(lastRead), a.g.index(until)
	if to >= a.g.n || y < from-1 {
		return false
	}
	n := a.readsIn(from, to, readNs)
	return n > 0 && 2*a.readsOver(val, from, to, readNs, level) >= n
}

// readsIn is how many whole read intervals (readNs of fine windows each)
// windows [x, y) hold.
func (a *analysis) readsIn(x, y int, readNs int64) int {
	return (y - x) / int(max(readNs/a.g.widthNs, 1))
}

// readsOver is how many read intervals (readNs of fine windows each) of
// [x, y) carried val over level: those in which a device that shows every
// change at the next read would have had drops to show.
func (a *analysis) readsOver(val func(int) float64, x, y int, readNs int64, level float64) int {
	read := int(max(readNs/a.g.widthNs, 1))
	n := 0
	for i := x; i < y; i += read {
		if sumIn(val, i, min(i+read, y)) >= level*float64(min(read, y-i)) {
			n++
		}
	}
	return n
}

// readsDropping is how many read intervals (readNs of fine windows each,
// from the first) held drops (per fine window, bucketDrops).
func (a *analysis) readsDropping(drops []float64, readNs int64) int {
	read := int(max(readNs/a.g.widthNs, 1))
	n, last := 0, -1
	for i, d := range drops {
		if k := i / read; d > 0 && k != last {
			n, last = n+1, k
		}
	}
	return n
}

// changesIn is how many of jumps were read in (fromNs, toNs].
func changesIn(jumps []counters.Jump, fromNs, toNs int64) int {
	n := 0
	for _, j := range jumps {
		if j.ToNs > fromNs && j.ToNs <= toNs {
			n++
		}
	}
	return n
}

// pulseSpan is what an overshoot's rate is taken over where it is sent in
// pulses that leave read intervals empty (longOvershoot).
const pulseSpan = 50 * time.Millisecond

// splitLevel is the level, per fine window, that best splits the rates of
// [lo, hi) taken per coarse windows into low and high (Otsu's threshold:
// the most variance between the two), 0 when they do not split. Where an
// overshoot is most of the look-back, the rates before and after it are
// the low ones, whatever the allowance between.
func splitLevel(val func(int) float64, lo, hi, coarse int) float64 {
	var rates []float64
	for i := lo; i+coarse <= hi; i += coarse {
		rates = append(rates, sumIn(val, i, i+coarse))
	}
	if len(rates) < 2 {
		return 0
	}
	slices.Sort(rates)
	total := 0.0
	for _, r := range rates {
		total += r
	}
	best, level, below := 0.0, 0.0, 0.0
	for k := 1; k < len(rates); k++ {
		below += rates[k-1]
		if rates[k] == rates[k-1] {
			continue
		}
		n0, n1 := float64(k), float64(len(rates)-k)
		m0, m1 := below/n0, (total-below)/n1
		if v := n0 * n1 * (m1 - m0) * (m1 - m0); v > best {
			best, level = v, (rates[k-1]+rates[k])/2
		}
	}
	return level / float64(coarse)
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
