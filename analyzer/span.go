package analyzer

import (
	"math"
	"slices"
)

// excessSpan returns the contiguous windows [lo, hi) within [from, to) whose
// values, less level each, add up to the most: the stretch that carried the
// most traffic above level (maximum-sum subarray, one linear pass). Its first
// and last windows are above level. ok is false when no window is.
func excessSpan(val func(int) float64, from, to int, level float64) (lo, hi int, ok bool) {
	best, sum := 0.0, 0.0
	start := from
	for i := from; i < to; i++ {
		if sum <= 0 {
			sum, start = 0, i
		}
		sum += val(i) - level
		if sum > best {
			best, lo, hi, ok = sum, start, i+1, true
		}
	}
	return lo, hi, ok
}

// runOn is where traffic over level from window y on, in [y, to), ends:
// each stretch over it within gap windows of the one before goes on.
func runOn(val func(int) float64, y, to int, level float64, gap int) int {
	for y < to {
		x, hi, ok := excessSpan(val, y, to, level)
		if !ok || x-y > gap {
			break
		}
		y = hi
	}
	return y
}

// runBack is where traffic over level that goes on at window x began,
// from floor on: windows over it no more than gap windows apart.
func runBack(val func(int) float64, x, floor int, level float64, gap int) int {
	for i, under := x-1, 0; i >= floor && under <= gap; i-- {
		if val(i) > level {
			x, under = i, 0
		} else {
			under++
		}
	}
	return x
}

// splitAtGaps is the part of [lo, hi) (its first and last windows over
// level) that carries the most above level, the parts being split where
// more than gap windows in a row are at or under it: traffic over an
// allowance further apart than MergeGap is two incidents, whatever the
// excess on either side (a TCP flow's 68 kB bunch 14 ms before a paced
// burst, its excess over 40 Mbit/s just above what the 14 ms under it
// fell short, started the burst's finding at the bunch).
func splitAtGaps(val func(int) float64, lo, hi int, level float64, gap int) (int, int) {
	above := func(i int) float64 { return val(i) - level }
	bestLo, bestHi, best := lo, hi, 0.0
	eachPart(val, lo, hi, level, gap, func(x, y int) {
		if part := sumIn(above, x, y); part > best {
			bestLo, bestHi, best = x, y, part
		}
	})
	return bestLo, bestHi
}

// eachPart calls part for each part of [lo, hi) over level, in order:
// its first and last windows over it, more than gap windows in a row at
// or under it ending it.
func eachPart(val func(int) float64, lo, hi int, level float64, gap int, part func(x, y int)) {
	for x := lo; x < hi; {
		if val(x) <= level {
			x++
			continue
		}
		y, under := x+1, 0
		for i := x + 1; i < hi && under <= gap; i++ {
			if val(i) > level {
				y, under = i+1, 0
			} else {
				under++
			}
		}
		part(x, y)
		x = y
	}
}

// standOutLevel is the level a window must reach to stand out from the rest
// of [from, to) when no allowance is known: StandOutFactor times the median
// window and StandOutPeakShare of the highest one. It returns 0 for an empty
// range. Sorting makes it n log n in the range, done only for the few sample
// intervals where a counter moved.
func standOutLevel(val func(int) float64, from, to int, opt Options) float64 {
	if to <= from {
		return 0
	}
	peak, _ := peakIn(val, from, to)
	return max(opt.StandOutFactor*medianIn(val, from, to), opt.StandOutPeakShare*peak)
}

// countAbove counts the windows of [lo, hi) at or above level.
func countAbove(val func(int) float64, lo, hi int, level float64) int {
	n := 0
	for i := lo; i < hi; i++ {
		if val(i) >= level {
			n++
		}
	}
	return n
}

// peakIn returns the highest value of [lo, hi) and its window.
func peakIn(val func(int) float64, lo, hi int) (float64, int) {
	best, at := 0.0, lo
	for i := lo; i < hi; i++ {
		if v := val(i); v > best {
			best, at = v, i
		}
	}
	return best, at
}

// medianIn is the median of val over windows [lo, hi), which is not empty.
func medianIn(val func(int) float64, lo, hi int) float64 {
	return medianOver(val, lo, hi, math.Inf(-1))
}

// medianOver is the median of the values of [lo, hi) over floor, 0 where
// none is.
func medianOver(val func(int) float64, lo, hi int, floor float64) float64 {
	v := make([]float64, 0, max(hi-lo, 0))
	for i := lo; i < hi; i++ {
		if x := val(i); x > floor {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// sumIn adds the values of [lo, hi).
func sumIn(val func(int) float64, lo, hi int) float64 {
	s := 0.0
	for i := lo; i < hi; i++ {
		s += val(i)
	}
	return s
}

// level is a threshold per fine window, with its per-second value and what
// it is, for the evidence.
type level struct {
	name      string
	perWindow float64
	perSecond float64
}

// Names of the levels a span stood out from.
const (
	levelIntervalOwn = "interval_level" // the sample interval's own level, no allowance known or exceeded
	levelNone        = "none"           // no traffic at all in the interval
	levelSYNs        = "syns"           // the SYNs of the interval, first to last
)

// locate finds within fine windows [lo, hi) the span that carried the most
// above the first given level that some window exceeded; with none
// exceeded (or none given) it uses the interval's own level (standOutLevel),
// and for traffic too flat for anything to stand out, half its peak, which
// yields the busy part of the interval.
func (a *analysis) locate(val func(int) float64, lo, hi int, levels ...level) span {
	s := span{lo: lo, hi: hi, fromNs: a.g.startNs(lo), toNs: a.g.startNs(hi)}
	peak, _ := peakIn(val, lo, hi)
	s.peak = peak
	if peak == 0 {
		s.levelName = levelNone
		return s
	}
	secondsPerWindow := float64(a.g.widthNs) / 1e9
	for _, l := range levels {
		if l.perWindow > 0 && peak > l.perWindow {
			if x, y, ok := excessSpan(val, lo, hi, l.perWindow); ok {
				x, y = splitAtGaps(val, x, y, l.perWindow, a.mergeGapWindows())
				s.lo, s.hi, s.level, s.levelName, s.levelPerSecond = x, y, l.perWindow, l.name, l.perSecond
				return s
			}
		}
	}
	own := standOutLevel(val, lo, hi, a.opt)
	if own >= peak {
		own = a.opt.StandOutPeakShare * peak
	}
	if x, y, ok := excessSpan(val, lo, hi, own); ok {
		s.lo, s.hi = x, y
	}
	s.level, s.levelName, s.levelPerSecond = own, levelIntervalOwn, own/secondsPerWindow
	return s
}

// locateShaped is locate for traffic the host sees after the device shaped
// it (inbound): a burst over the allowance reaches it as a head (what the
// device's bucket and queue let through at once) and then a stretch at the
// allowance, far under the head; a TCP flow's bunch that passed whole
// reaches it as one window. With no allowance known, where several runs
// stand out of the look-back, the one whose stretch (the run of windows
// over StandOutFactor times the look-back's median it lies in) carries
// the most above that level is the cause, the stretch its span: the
// lab's impact-inbound, whose 2 MB burst came through as 71 kB in 2 ms,
// then 5 kB a millisecond for 18 ms, had a download's 51 kB bunch 44 ms
// before it named instead (3 bundles of 18).
func (a *analysis) locateShaped(val func(int) float64, lo, hi int, levels ...level) span {
	s := a.locate(val, lo, hi, levels...)
	if s.levelName == levelNone {
		return s
	}
	if s.levelName != levelIntervalOwn {
		return a.queuedPart(val, lo, hi, s)
	}
	median := medianIn(val, lo, hi)
	located := s
	s = a.shapedStretch(val, lo, hi, located, median)
	if median == 0 && a.lastsLong(s.lo, s.hi, a.rec.Meta.SampleNs) {
		// Half the look-back or more silent, its median no level: a
		// download that began half way into it is one stretch over a
		// floor of 0, long as no device's queue sends, and was taken
		// whole for the cause, the lag stated 735 ms where it was 252
		// (d3/quiet/impact-inbound-r0-l250ms-1). The floor is then the
		// traffic's, over the windows that carried some. Only where
		// the stretch found is long: a download's bunches leave most
		// windows empty too, and taken over the traffic's floor
		// wherever the median is 0, six lab recordings' bursts were
		// placed wrong (impact-inbound-small-head, -queue-under-floor,
		// -refill-small, -after-own, -download-drip-two, -paused-parts).
		if m := medianOver(val, lo, hi, 0); m > 0 {
			s = a.shapedStretch(val, lo, hi, located, m)
		}
	}
	return s
}

// shapedStretch is, of the maximal stretches of [lo, hi) over
// StandOutFactor times median with a window over s's level, or carrying
// more over that floor than such a window, the one that shows the
// device's queue sending, the one carrying the most over the floor among
// those that do or where none does (locateShaped); s where none stands
// out.
func (a *analysis) shapedStretch(val func(int) float64, lo, hi int, s span, median float64) span {
	// One pass over the maximal stretches over the floor, each a
	// candidate where a window of it stands out.
	floor := a.opt.StandOutFactor * median
	best, bestQueued := 0.0, false
	for x := lo; x < hi; {
		if val(x) <= floor {
			x++
			continue
		}
		y, sum, out := x, 0.0, false
		for ; y < hi && val(y) > floor; y++ {
			sum += val(y) - floor
			out = out || val(y) > s.level
		}
		// A stretch carrying more over the floor than a window over the
		// level does stands out as a whole: the device's queue spreads a
		// burst to the allowance, and its head, split between two
		// windows, may top neither (the lab's 34 kB head beside a
		// download's 51 kB bunches, their half the level). One that
		// shows the device's queue sending (queuedStretch) is the
		// cause before any that shows none, however much they carry:
		// a bunch that passed whole filled no queue (a download's
		// 62 kB bunch 2 ms before a burst whose head, 16 kB, the bunch
		// had left the bucket, was named, 3.9 ms early). Where the
		// queue sent under the floor (queueEnd), what it sent over the
		// look-back's median is the stretch's too: not what a download
		// went on sending after it, at a quarter of its rate or more
		// (behind 250 ms, the host saw nothing for 4 ms twice while a
		// burst's queue sent, which ended that queue at the first, and
		// the 24 kB that came after the second took 47 ms of the
		// download at 3 kB a millisecond for its queue and was named,
		// 24 ms late: c17/inb/l1 and l2).
		end := queueEnd(val, y, hi)
		rate, queued := queueRate(val, x, end)
		if queued {
			// The host, starved of CPU, may see nothing for a few
			// windows while the device's queue sends, then at once
			// what the queue sent meanwhile, no more: the queue goes
			// on past that silence (beside load, a burst's queue,
			// silent 2 ms 13 ms in, then 15 kB, three windows' worth,
			// had that catch-up taken for the head of a queue of its
			// own, which went on longer, and named, 14.6 ms late:
			// d2/load/impact-inbound-r0-l1s-1). Not a download's
			// bunch after the queue emptied, which carries more.
			next := end
			for next < hi && next-end < shapedRun && val(next) == 0 {
				next++
			}
			if next > end && next < hi && val(next) > 0 && val(next) <= 1.5*rate*float64(next-end+1) {
				end = queueEnd(val, next, hi)
			}
		}
		if queued {
			sum += sumIn(func(i int) float64 { return max(val(i)-median, 0) }, y, end)
		}
		if (out || sum > s.level) && (queued && !bestQueued || queued == bestQueued && sum > best) {
			best, bestQueued, s.lo, s.hi = sum, queued, x, y
		}
		x = y

	}
	return s
}

// queuedPart is, for traffic the host saw after the device shaped it to
// an allowance given (s, located over its level in [lo, hi)), the part
// over the level (parts further apart than MergeGap are two) that shows
// the device's queue sending after its highest window, shapedRun windows
// in a row at about the allowance (shapedHead), the one carrying the most
// over the level where several do; s where none does. Traffic that passed
// whole filled no queue, however much it carried: behind a 1 s refresh
// the look-back held a burst (a 64 KiB head, then 20 ms at the allowance)
// and, 12 ms after it, a download's catch-up at 425 Mbit/s a window for
// 34 ms, which carried more over the level and was named, 34 ms late.
func (a *analysis) queuedPart(val func(int) float64, lo, hi int, s span) span {
	if a.showsQueue(val, s.lo, s.hi, hi, s.level) {
		return s
	}
	above := func(i int) float64 { return val(i) - s.level }
	best, found := 0.0, false
	out := s
	eachPart(val, lo, hi, s.level, a.mergeGapWindows(), func(x, y int) {
		if !a.showsQueue(val, x, y, hi, s.level) {
			return
		}
		if sum := sumIn(above, x, y); sum > 0 && (!found || sum > best) {
			best, found, out.lo, out.hi = sum, true, x, y
		}
	})
	return out
}

// showsQueue tells whether the windows [x, y), seen after the device
// shaped them to an allowance of about level a window, show its queue
// sending after their highest: shapedRun windows in a row at about level,
// up to where what it sent ends (queueEnd, no further than hi).
func (a *analysis) showsQueue(val func(int) float64, x, y, hi int, level float64) bool {
	_, peak := peakIn(val, x, y)
	_, ok := shapedHead(val, peak+1, queueEnd(val, y, hi), level)
	return ok
}

// queueEnd is where what the device's queue sent after a stretch that
// ends at y stops: the windows from y on at a quarter or more of the
// median of the shapedRun windows after y (a queue sends without a
// pause). A burst's queue sending at the allowance for most of the
// look-back makes its level the look-back's median, and leaves it
// under a floor twice that: the head alone stood out, beside a
// download's bunch 11 ms after it (s44/iu1, the bunch named, 40 ms
// late).
func queueEnd(val func(int) float64, y, hi int) int {
	if hi-y < shapedRun {
		return y
	}
	m := medianIn(val, y, y+shapedRun)
	end := y
	for m > 0 && end < hi && val(end) >= m/4 {
		end++
	}
	return end
}

// queuedStretch tells whether the windows [x, y), seen after the device
// shaped them, show its queue sending: after their highest, shapedRun
// windows in a row at about their median (shapedHead).
func queuedStretch(val func(int) float64, x, y int) bool {
	_, ok := queueRate(val, x, y)
	return ok
}

// queueRate is the rate per window at which the device's queue sent what
// windows [x, y) show it sending (queuedStretch): the median after their
// highest, about the allowance.
func queueRate(val func(int) float64, x, y int) (float64, bool) {
	_, peak := peakIn(val, x, y)
	if y-peak-1 < shapedRun {
		return 0, false
	}
	m := medianIn(val, peak+1, y)
	_, ok := shapedHead(val, peak+1, y, m)
	return m, ok
}

// queueBegan is, for traffic the host saw after the device shaped it,
// starting at window lo, the end of the window by which the device's
// queue had begun to fill: its head is what its first headWindows
// windows carry over the rate the windows after it run at (what the
// bucket let through at once, split by the host's batching, an empty
// window between), and the queue is shapedRun windows at about that rate
// after it (shapedHead); the first of those is where it sent. Only the
// traffic's start is looked at: a download's bunch later on may top the
// head. ok is false where no queue follows the head.
func queueBegan(val func(int) float64, lo, hi int) (int, bool) {
	if lo+1+shapedRun > hi {
		return 0, false
	}
	m := medianIn(val, lo+1, min(lo+1+headWindows+2*shapedRun, hi))
	i := lo + 1
	for k := lo; k < min(lo+headWindows, hi); k++ {
		if val(k) > 1.6*m {
			i = k + 1
		}
	}
	for i < hi && val(i) > 1.6*m {
		i++ // the head's tail
	}
	if i+shapedRun > hi {
		return 0, false
	}
	if _, ok := shapedHead(val, i, i+shapedRun, m); !ok {
		return 0, false
	}
	return i + 1, true
}

// headWindows is how many fine windows a burst's head, as the host sees
// it inbound, may take: split between two, its tail in a third.
const headWindows = 3

// shapedRun is how many fine windows in a row at about the allowance show
// a device's queue sending what it held (shapedHead): the lab's 64-packet
// queue behind a 2 MB burst sent 15 ms of it.
const shapedRun = 4

// shapedHead is, for traffic the host sees after the device shaped it
// (inbound), where the burst that filled the device's queue reached the
// host: the first shapedRun windows in [lo, hi) that run at about level
// (the allowance per window, none under a quarter of it) are that queue
// sending, and the burst's head is the run of windows straight before
// them. A queue sends what it holds without a pause, so a window under a
// quarter of the level before the head ends it: what came before passed
// the device's bucket whole and left it at once (a download's 41 kB bunch
// 2 to 9 ms before a burst, the windows between empty, started the
// burst's finding with it). ok is false where no such stretch is.
func shapedHead(val func(int) float64, lo, hi int, level float64) (int, bool) {
	if level <= 0 {
		return lo, false
	}
	for k := lo; k+shapedRun <= hi; k++ {
		sum, gap := 0.0, false
		for i := k; i < k+shapedRun; i++ {
			sum += val(i)
			gap = gap || val(i) < level/4
		}
		if mean := sum / shapedRun; gap || mean < 0.7*level || mean > 1.6*level {
			continue
		}
		for k > lo && val(k-1) >= level/4 {
			k--
		}
		return k, true
	}
	return lo, false
}

// pausedStart is where the traffic of span s began, counting the runs over
// its level (val per window) that came at most gap windows before it, one
// after another, back to floor: a sender's pause does not end a burst.
// A window is over the level where it is, or where with a window beside
// it, each over half the level, it carries more: what stood out in 1 ms
// may have been split between two windows (the lab's micro-burst, its
// sender paused 3.3 ms: the first part came as 61.5 and 64.1 kB, the
// level 64.9, and the finding started at the second part, 4.5 ms late).
func pausedStart(val func(int) float64, s span, floor, gap int) int {
	half := s.level / 2
	over := func(i int) bool {
		v := val(i)
		if v > s.level || v <= half {
			return v > s.level
		}
		left := i > floor && val(i-1) > half && v+val(i-1) > s.level
		right := val(i+1) > half && v+val(i+1) > s.level
		return left || right
	}
	lo := s.lo
	for {
		run := -1
		for i := lo - 1; i >= max(floor, lo-gap); i-- {
			if over(i) {
				run = i
				break
			}
		}
		if run < 0 {
			return lo
		}
		for run > floor && over(run-1) {
			run--
		}
		lo = run
	}
}
