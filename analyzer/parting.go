package analyzer

import (
	"math"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
)

// lagPart is a cluster of a counter's jumps, fc to l, and the windows its
// traffic lies within where it was parted from another's: from floor (the
// other's cause came first) and before ceil (it came after), where set.
// placed: the incidents look for its cause before ceil too, where the
// lag agreed (ofShortBefore).
type lagPart struct {
	fc, l, floor, ceil int
	placed             bool
}

// parting parts a cluster of jumps at successive refreshes between two
// causes a refresh apart (an overshoot and a burst, either first), by what
// each cause's traffic could have made: every drop is one of its packets.
// Before, behind a 1 s refresh, one cause was taken for both: a burst
// after an overshoot stood out over it, and both findings stated the lag
// as 0 to 723 ms (639 ms, the range missing the device's 30, with the
// allowance given); a burst before it, 724 ms (719 to 729).
type parting struct {
	a       *analysis
	jumps   []counters.Jump
	c       lagPart
	val     func(int) float64
	perDrop func(lo, hi int) float64
	// window is when a jump became visible: its reads (certain), or
	// behind a refresh the changes told, its phase (shownWindow).
	window func(j counters.Jump) (fromNs, toNs int64)
	// refreshNs is the refresh the cluster was gathered under.
	refreshNs int64
	// shown is the bucket the run shows at a level (shownDepths).
	shown func(level float64) float64
}

// at is the cluster parted before jump k: the earlier part's traffic
// before ceil, the later's from floor.
func (p *parting) at(k, ceil, floor int) (earlier, later lagPart) {
	return lagPart{fc: p.c.fc, l: k - 1, floor: p.c.floor, ceil: ceil}, lagPart{fc: k, l: p.c.l, floor: floor, ceil: p.c.ceil}
}

// rise is the counter's rise over jumps from to to.
func (p *parting) rise(from, to int) uint64 { return riseOf(p.jumps[from : to+1]) }

// riseOf is a counter's rise over jumps.
func riseOf(jumps []counters.Jump) (n uint64) {
	for _, j := range jumps {
		n += j.Delta
	}
	return n
}

// firstReadAfter is the first of the cluster's jumps read after window x
// began, where some were read before it; -1 where none or all were.
func (p *parting) firstReadAfter(x int) int {
	for k := p.c.fc; k <= p.c.l; k++ {
		if _, read := p.window(p.jumps[k]); read > p.a.g.startNs(x) {
			if k == p.c.fc {
				return -1
			}
			return k
		}
	}
	return -1
}

// explains tells whether the traffic of windows [x, y) could have made n
// drops (maxCountsPerPacket).
func (p *parting) explains(x, y int, n uint64) bool {
	return y > x && mostCounts(p.val, x, y, p.perDrop) >= float64(n)
}

// mostCounts is the most a counter can count for the traffic of windows
// [x, y) (val per window, perDrop of it a packet): maxCountsPerPacket a
// packet; unbounded where the packets' size is unknown, none where there
// is no traffic.
func mostCounts(val func(int) float64, x, y int, perDrop func(lo, hi int) float64) float64 {
	sum := sumIn(val, x, y)
	if sum <= 0 {
		return 0
	}
	per := perDrop(x, y)
	if per <= 0 {
		return math.Inf(1)
	}
	return maxCountsPerPacket * sum / per
}

// ofCause parts a cluster whose counter moved at many reads by its
// located cause s, where another's jumps are among its own ([lo, hi): its
// look-back).
func (p *parting) ofCause(s span, lo, hi int, readNs int64) (earlier, later lagPart, ok bool) {
	fc, l := p.c.fc, p.c.l
	long := p.a.lastsLong(s.lo, s.hi, readNs)
	if long || p.firstReadAfter(s.lo) > fc {
		// A cause's jumps are the latest ones its traffic could have
		// made: those before showed something else's drops. A long
		// cause's: a burst's, read 20 ms after an overshoot over an
		// allowance given began (2,068 drops: the overshoot's lag
		// stated as 0 to 125 ms, where it was 250). A short one's, with
		// jumps read before it began: not those read after it that
		// showed an overshoot's last drops a second late (1 s behind a
		// 1 s refresh: 3,149 drops put on a burst of 1,333 packets, the
		// lag stated 155 to 165 ms).
		if k := p.firstOwn(s); k > fc && k <= l {
			if long {
				k = p.sameBucket(s, lo, k, readNs)
			}
			earlier, later = p.at(k, s.lo, p.c.floor)
			return earlier, later, true
		}
		if long {
			return p.ofShortBefore(s, lo, readNs)
		}
	}
	// A short cause that stood out over a long one, with no jump read
	// before it: the first jump read after it showed its drops, where it
	// could have made them all, and the rest another's (a burst, then an
	// overshoot a refresh later: every jump put on the burst, the lag
	// stated 724 ms, 719 to 729, where it was 30). Not the next too while
	// the burst could have made theirs: a burst of 3,000 packets explained
	// the overshoot's first 240 drops with its own, and that put the lag
	// at 1 s, where it was 250 ms. (A snapshot taken within the burst
	// leaves some of its drops to the next jump, which the overshoot's
	// model then counts as its own.) Only where such a cause came after
	// it: the jump after a burst's may show its queue draining. And
	// only where that cause could have made the rest: the lab's TCP
	// flow catching up at 33 Mbit/s for 116 ms, 400 ms after a burst
	// whose deep queue was counted as it drained, had 361 packets
	// where the jumps after the burst's first counted 5,695 (its lag
	// stated 230 ms, 24 to 434, where it was 0, and a second finding).
	if x, y, _, after := p.a.longOvershoot(p.val, s.hi, hi, readNs); after && fc < l && p.explains(s.lo, s.hi, p.rise(fc, fc)) && p.explains(x, y, p.rise(fc+1, l)) && p.over(s, x, y) && !p.movedNothing(s, x, y) {
		earlier, later = p.at(fc+1, p.c.ceil, s.hi)
		return earlier, later, true
	}
	if earlier, later, ok := p.ofShortAfter(s, hi, readNs); ok {
		return earlier, later, true
	}
	return p.ofShortBefore(s, lo, readNs)
}

// shortLevel is the level another short cause beside s must stand out
// over: s's, and with no allowance known half the level s stood out from
// (the interval's own): a sender starved of CPU spreads its burst over
// more windows, none of them over it (beside load, the first burst's 310
// kB came in 8 ms, its windows at 57 to 82 kB where the second's two stood
// at 150 over a level of 93). Over an allowance given, the traffic between
// is over half of it.
func shortLevel(s span) float64 {
	if s.levelName == levelIntervalOwn {
		return s.level / 2
	}
	return s.level
}

// oneLag tells whether two causes' delays to the jumps they made, d0 and
// d1, fit one lag: within a refresh and a read of each other, each jump
// having waited for a refresh of its own.
func (p *parting) oneLag(d0, d1, readNs int64) bool {
	return max(d0-d1, d1-d0) <= p.refreshNs+readNs
}

// ofShortAfter parts a cluster gathered behind a refresh whose first jump
// its short cause s could have made where another short cause came after
// that jump was read and before the next one was, stood out over the same
// level with half as much as s or more, could have made the rest, and one
// lag puts both there: each jump's delay from its cause within a refresh
// of the other's. What was sent after a read made none of its drops, and
// the rest are that cause's, not s's queue counted a refresh later, nor a
// cause's before s: four bursts 0.73 to 0.91 s apart behind a 1 s
// refresh, the first two shown at one change and the others at the next
// two, one cluster, had the third change put on the second burst, the lag
// stated 152 to 170 ms where it was 30 and the reads allowed 0.7 to 162,
// and two of the bursts named (TestLagTwins' bw-four).
func (p *parting) ofShortAfter(s span, hi int, readNs int64) (earlier, later lagPart, ok bool) {
	fc, l := p.c.fc, p.c.l
	if l == fc || p.refreshNs <= 0 || p.a.lastsLong(s.lo, s.hi, readNs) {
		return lagPart{}, lagPart{}, false
	}
	_, firstRead := p.window(p.jumps[fc])
	_, nextRead := p.window(p.jumps[fc+1])
	level := shortLevel(s)
	from, to := max(s.hi+p.a.mergeGapWindows(), p.a.g.index(firstRead)), min(hi, p.a.g.index(nextRead))
	if from >= to {
		return lagPart{}, lagPart{}, false
	}
	x, y, found := excessSpan(p.val, from, to, level)
	if !found {
		return lagPart{}, lagPart{}, false
	}
	x, y = splitAtGaps(p.val, x, y, level, p.a.mergeGapWindows())
	if p.a.lastsLong(x, y, readNs) || sumIn(p.val, x, y) < sumIn(p.val, s.lo, s.hi)/2 ||
		!p.explains(s.lo, s.hi, p.rise(fc, fc)) || !p.explains(x, y, p.rise(fc+1, l)) {
		return lagPart{}, lagPart{}, false
	}
	if !p.oneLag(firstRead-p.a.g.startNs(s.lo), nextRead-p.a.g.startNs(x), readNs) {
		return lagPart{}, lagPart{}, false
	}
	earlier, later = p.at(fc+1, x, s.hi)
	return earlier, later, true
}

// sameBucket is where a cluster parts between a long cause s over an
// allowance known and a long overshoot before it over the same allowance,
// from k, the first jump s could have made every drop from (firstOwn) on:
// the jump after which the earlier overshoot's share of the rise is
// nearest what one bucket, its depth what the whole rise implies, would
// have dropped of it. The counts alone let s take a jump that shows the
// earlier one's last drops: behind a 1 s refresh and a 1 s lag, two 1.5 s
// overshoots 1.2 s apart changed the counter by 1,940, then 260 (the
// first one's tail), 540 and 1,660; s took the 260 as its first, and
// the lag was stated 759 ms (498 to 870) where it was 1 s
// (TestTwoCausesApart). Each of them, through an 800-packet bucket, made
// about 2,200 drops.
func (p *parting) sameBucket(s span, lo, k int, readNs int64) int {
	fc, l := p.c.fc, p.c.l
	if !overAllowance(s) || k >= l {
		return k
	}
	x, y, ok := excessSpan(p.val, max(lo, p.c.floor), s.lo-p.a.mergeGapWindows(), s.level)
	if !ok || !p.a.lastsLong(x, y, readNs) {
		return k
	}
	// The bucket ran dry from the earlier overshoot's start, which may
	// lie before the look-back.
	x = runBack(p.val, x, 0, s.level, p.a.mergeGapWindows())
	whole := span{lo: x, hi: s.hi, level: s.level}
	per := p.perDrop(x, s.hi)
	if per <= 0 {
		return k
	}
	// before is what a bucket depth deep drops of the earlier
	// overshoot; all, of both.
	drops := func(depth float64) (before, all float64) {
		for i, d := range bucketDrops(p.val, whole, depth) {
			if x+i < s.lo {
				before += d
			}
			all += d
		}
		return before / per, all / per
	}
	// The depth whose drops of both make the rise, to a window's worth
	// of the allowance: deeper, fewer.
	rise := float64(p.rise(fc, l))
	shallow, deep := 0.0, sumIn(p.val, x, s.hi)
	if _, all := drops(shallow); all <= rise {
		deep = shallow
	}
	for deep-shallow > max(s.level, 1) {
		mid := (shallow + deep) / 2
		if _, all := drops(mid); all > rise {
			shallow = mid
		} else {
			deep = mid
		}
	}
	before, _ := drops((shallow + deep) / 2)
	best, off := k, math.Abs(float64(p.rise(fc, k-1))-before)
	for n := k + 1; n <= l; n++ {
		if d := math.Abs(float64(p.rise(fc, n-1)) - before); d < off && p.explains(x, y, p.rise(fc, n-1)) {
			best, off = n, d
		}
	}
	return best
}

// ofShortBefore parts a cluster gathered behind a refresh whose first jump
// was read after its short cause s where, before s, another short cause
// stood out over the same level, with nothing over it between the two,
// carried half as much as s or more, could have made the first jump, s
// the rest, and one lag puts both there: each jump's delay from its cause
// within a refresh of the other's. Or, where none did so, the one part
// before s that held more than the run shows moved nothing
// (onlyOverflow): a TCP flow's two bunches 10 ms apart, 120 kB beside a
// 2 MB burst, whose one drop was read a second before the burst's, among
// bunches alike every 20 ms that each stood over the level too
// (TestBunchesClose, behind a 1 s refresh and a 1 s lag: one finding,
// the lag stated 0 to 370 ms). The earlier part's jumps look for
// their cause before s in the incidents too (lagPart.placed), where the
// lag agreed. Behind a 1 s refresh and a 1 s lag, the lab's two bursts a
// second apart were shown at successive refreshes, one cluster: the
// second burst, the latest to stand out, took both jumps, the first burst
// was missed, and the lag was stated 0 to 296 ms where it was 1,001 (d1
// and d2, quiet/micro-burst-r1s-l1s-1, both ways). For the second burst
// to have made the first jump, the lag would have to be under 296 ms, the
// first burst's drops unshown, and the second's split by a refresh that
// fell within the 2 ms they took. Not a burst's parts, its sender paused
// between (with no refresh, or more over the level between them: a burst
// in four parts, TestLongPausedBurst, had its lag stated 24 and 27 ms
// short), nor a TCP flow's recurring bunches (an extra finding,
// TestRecurringBunches).
//
// A long s (an upload, an overshoot) may have such a cause before it too,
// whatever their sizes, but more than stalledBurstReach before it: a 2 MB
// burst 1.2 s before a 2 s upload, behind a 1 s refresh and a 1 s lag,
// had its one jump taken as the upload's first and the lag stated 421 to
// 966 ms (TestTwoCausesApart); closer, it may be the overshoot's own
// pulse, or the part before its sender paused (a pulsed overshoot's
// finding began 1.1 s early, its lag stated 20 to 23 ms where it was 0,
// TestPulsedOvershoot; the lab's pps-overshoot beside load, 254 to 471
// ms where it had been 251 to 259).
func (p *parting) ofShortBefore(s span, lo int, readNs int64) (earlier, later lagPart, ok bool) {
	fc, l := p.c.fc, p.c.l
	_, firstRead := p.window(p.jumps[fc])
	if l == fc || p.refreshNs <= 0 || firstRead <= p.a.g.startNs(s.lo) {
		return lagPart{}, lagPart{}, false
	}
	long := p.a.lastsLong(s.lo, s.hi, readNs)
	level := shortLevel(s)
	x, y, found := excessSpan(p.val, max(lo, p.c.floor), s.lo-p.a.mergeGapWindows(), level)
	if !found {
		return lagPart{}, lagPart{}, false
	}
	x, y = splitAtGaps(p.val, x, y, level, p.a.mergeGapWindows())
	tooClose := func(y int) bool { return long && p.a.g.startNs(s.lo)-p.a.g.startNs(y) <= int64(stalledBurstReach) }
	overflow := false
	if _, _, between := excessSpan(p.val, y+p.a.mergeGapWindows(), s.lo-p.a.mergeGapWindows(), level); between ||
		p.a.lastsLong(x, y, readNs) || !long && sumIn(p.val, x, y) < sumIn(p.val, s.lo, s.hi)/2 || tooClose(y) {
		var ok bool
		if x, y, ok = p.onlyOverflow(s, max(lo, p.c.floor), s.lo-p.a.mergeGapWindows()); !ok || p.a.lastsLong(x, y, readNs) || tooClose(y) {
			return lagPart{}, lagPart{}, false
		}
		overflow = true
	}
	if !p.explains(x, y, p.rise(fc, fc)) || !p.explains(s.lo, s.hi, p.rise(fc+1, l)) {
		return lagPart{}, lagPart{}, false
	}
	_, nextRead := p.window(p.jumps[fc+1])
	if !p.oneLag(firstRead-p.a.g.startNs(x), nextRead-p.a.g.startNs(s.lo), readNs) {
		return lagPart{}, lagPart{}, false
	}
	earlier, later = p.at(fc+1, s.lo, y)
	earlier.placed = true
	if overflow {
		// Its cause is that part, not what else stands out before s:
		// looked for up to MergeGap past it, where its end is seen
		// (up to s, with no allowance known, the latest bunch stood
		// out instead, and the earlier part got no lag).
		earlier.ceil = min(earlier.ceil, y+p.a.mergeGapWindows())
	}
	return earlier, later, true
}

// onlyOverflow is the one part of windows [from, to) (traffic over the
// level, gaps of up to MergeGap bridged) that held more than the bucket
// the run shows (shown), with what the traffic just before it left: one
// that must have dropped over the allowance s was located over, or with
// none known, could have at some level under s's (heldLikeQuiet),
// however small beside s. None where more than one did: a TCP flow's
// bunches, each as large, tell no one cause.
func (p *parting) onlyOverflow(s span, from, to int) (x, y int, ok bool) {
	if p.shown == nil || to <= from || s.level <= 0 {
		return 0, 0, false
	}
	gap := p.a.mergeGapWindows()
	known := overAllowance(s)
	if !known && s.levelName != levelIntervalOwn {
		return 0, 0, false
	}
	// The parts are over the allowance, or with none known over the
	// lowest level heldLikeQuiet tries.
	level := s.level
	if !known {
		level /= float64(int(1) << (quietLevels - 1))
	}
	held := func(a, b int) bool {
		if known {
			return heldIn(p.val, s.level, max(from, a-2*gap), a, b) > p.shown(s.level)
		}
		return !heldLikeQuiet(p.val, p.shown, s.level, max(from, a-2*gap), a, b)
	}
	n := 0
	eachPart(p.val, from, to, level, gap, func(a, b int) {
		if held(a, b) {
			x, y, n = a, b, n+1
		}
	})
	return x, y, n == 1
}

// over tells whether the traffic of windows [x, y) ran over the allowance
// that cause s was located over, where one is known: below it, it made no
// drops of its own. With the allowance given (40 Mbit/s), a TCP flow at
// 33 Mbit/s while a 2 MB burst's queue drained for 400 ms, counted as it
// drained, split off the burst's jumps; its own bunches over the allowance
// in 1 ms windows became their causes, and the lag was stated 7.2 ms (7.2
// to 7.3) where it was 0.
func (p *parting) over(s span, x, y int) bool {
	return s.levelName == levelIntervalOwn || sumIn(p.val, x, y) > s.level*float64(y-x)
}

// movedNothing tells whether the traffic of windows [x, y), after cause
// s, ran no higher than a stretch before s that moved nothing (no jump
// read after it began, before the cluster): no cause of its own, but what
// came while s's queue drained, counted as it drained. A device that
// counts a packet as it leaves a deep queue had a TCP flow at 24 Mbit/s,
// going on as before a 2 MB burst, taken for an overshoot whose jumps
// were the drain's: the burst kept one jump, and the lag was stated 15 to
// 25 ms where it was 30. The stretch before is as long as [x, y) or, where
// the traffic began later, down to half as long, its rate compared: a TCP
// flow's bunches that began 631 ms before a burst and went on 1.1 s after
// it, behind a 1 s lag with no allowance known, found no stretch as long
// that held as much, were taken for a cause that ran up to the last read,
// and the lag was stated 0 to 1 ms, or 0 to 926, where it was 1 s
// (TestBurstAfterBunchChain).
func (p *parting) movedNothing(s span, x, y int) bool {
	from := max(s.lo-(y-x), p.c.floor, 0)
	if p.c.fc > 0 {
		_, read := p.window(p.jumps[p.c.fc-1])
		from = max(from, p.a.g.index(read)+1)
	}
	// Within a tenth: a flow sent in bunches has one more or fewer in
	// either stretch.
	after := sumIn(p.val, x, y)
	step := max((y-x)/16, 1)
	for n := s.lo - from; 2*n >= y-x; n -= step {
		if sumIn(p.val, s.lo-n, s.lo)*float64(y-x) >= 0.9*after*float64(n) {
			return true
		}
	}
	return false
}

// ofBlip parts a cluster whose long cause s has a blip after it, windows
// [x, y): where the blip could have made every drop of the jumps read
// after it began (a burst, not the lab's sender catching up 14 ms after
// its overshoot), those are its own. With them, the overshoot's shares
// were matched to the burst's drops too, and its lag stated 639 ms where
// it was 30. Nothing where p is nil: a cluster not to part.
func (p *parting) ofBlip(s span, x, y int) (earlier, later lagPart, ok bool) {
	if p == nil {
		return lagPart{}, lagPart{}, false
	}
	if k := p.firstReadAfter(x); k > p.c.fc && p.explains(x, y, p.rise(k, p.c.l)) {
		earlier, later = p.at(k, p.c.ceil, s.hi)
		return earlier, later, true
	}
	return lagPart{}, lagPart{}, false
}

// maxCountsPerPacket is how many drops a counter may count for each packet
// of the traffic located as their cause, when telling whether it could
// have made them: an ENA counts packets "queued or dropped" (one queued
// and then dropped may count twice), and the packets that queued behind
// the cause, after it, count too; which it counts it does not say.
// (TestSustainedBandwidth, behind a 1 s refresh: the counter rose by
// 10,995 over an upload whose span held 10,988 packets, a steady flow's
// among them.)
const maxCountsPerPacket = 2

// firstOwn is the first of the cluster's jumps from which on a cause
// (span s) could have made every drop: each jump's rise, with those from
// the first to it, no more than the traffic from s's start to the jump's
// read could have made (maxCountsPerPacket). One past the last where it
// could not have made even the last's. Not s's traffic alone: a sender
// that stalled inside its burst, then sent what it owed in a millisecond
// and went on paced, under the level that catch-up set, made the drops
// of the reads after it with what it sent on; counted to the catch-up's
// end, those were left to the burst's head before it, and with no
// allowance known, the lag was stated 21.7 ms (6.2 to 42) where it was 0
// (the lab's impact-dropped beside two CPU-bound processes: 16 to 22 ms
// where it was 0, in 4 of 19 fresh runs).
func (p *parting) firstOwn(s span) int {
	a, jumps, fc, l := p.a, p.jumps, p.c.fc, p.c.l
	per := p.perDrop(s.lo, s.hi)
	// could[k]: the drops the cause could have made before jump fc+k's
	// read; cum[k]: the rise of the jumps before it.
	n := l - fc + 1
	could, cum := make([]float64, n), make([]float64, n+1)
	sum, w := 0.0, s.lo
	for k := range n {
		_, read := p.window(jumps[fc+k])
		for end := a.g.index(read); w < end; w++ {
			sum += p.val(w)
		}
		could[k] = maxCountsPerPacket * sum / per
		cum[k+1] = cum[k] + float64(jumps[fc+k].Delta)
	}
	// From t on, every jump j: cum[j+1]-cum[t] <= could[j].
	first, need := l+1, math.Inf(-1)
	for t := n - 1; t >= 0; t-- {
		need = max(need, cum[t+1]-could[t])
		if cum[t] < need {
			break
		}
		first = fc + t
	}
	return first
}
