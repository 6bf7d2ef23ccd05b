package analyzer

// absorbedDepth is the most that traffic over level (val per fine window)
// built up where the counter was watched and moved nothing (watchedQuiet):
// the largest excess over level of a quiet stretch, as a queue fed by it
// and served at level would have held. The device let it all through
// uncounted, so its bucket is at least that deep.
func absorbedDepth(val func(int) float64, watched []uint8, level float64) float64 {
	best, built := 0.0, 0.0
	for i, w := range watched {
		if w != watchedQuiet {
			built = 0
			continue
		}
		built = max(built+val(i)-level, 0)
		best = max(best, built)
	}
	return best
}

// shownDepth is the bucket a counter of iface shows over level (val per
// fine window): absorbedDepth over the windows no jump came within lookNs
// of, so that no lag up to it could have hidden a drop there.
func (a *analysis) shownDepth(iface, counter string, val func(int) float64, level float64, lookNs int64) float64 {
	return absorbedDepth(val, a.watchedWindows(iface, counter, counterLag{lookNs: lookNs}), level)
}

// shownDepths is shownDepth at each level asked for, each worked out once.
func (a *analysis) shownDepths(iface, counter string, val func(int) float64, lookNs int64) func(level float64) float64 {
	at := map[float64]float64{}
	return func(level float64) float64 {
		d, ok := at[level]
		if !ok {
			d = a.shownDepth(iface, counter, val, level, lookNs)
			at[level] = d
		}
		return d
	}
}

// bucketStart is where the traffic of span s that emptied a bucket of
// depth at its level began. The run of traffic holding the first drop
// (firstDrop, the bucket full at s.lo) is the incident's, from its first
// window over the level, where it would have emptied a full bucket alone:
// to its end (gaps of up to bridge windows under the level do not end it:
// a sender's pause), or with what followed it, at most within windows
// after the first drop (within < 0: alone). What the bucket absorbed before then is not the
// incident's, though it left the bucket short (a TCP flow's 57 kB bunch
// 8 ms before a burst, over a 40 Mbit/s allowance in its 1 ms window,
// started the burst's finding with it, where the lab's 64 KiB bucket had
// passed it; a 33 kB bunch 7 ms before a burst whose first part, 2 ms
// before the rest, did not empty the bucket alone, did too). Otherwise
// what came before emptied it too (a sustained overshoot sent in ticks,
// each absorbed alone, the drop as many ticks later without those
// before): s.lo, as where the bucket never ran dry, or depth is 0.
func bucketStart(val func(int) float64, s span, depth float64, bridge, within int) int {
	if depth <= 0 || s.level <= 0 {
		return s.lo
	}
	e := firstDrop(val, s.lo, s.hi, s.level, depth)
	if e < 0 {
		return s.lo
	}
	over := func(i int) bool { return val(i) > s.level }
	end := e + 1
	for gap := 0; end < s.hi && gap <= bridge; end++ {
		if over(end) {
			gap = 0
		} else {
			gap++
		}
	}
	for end > e+1 && !over(end-1) {
		end--
	}
	at := e
	for at > s.lo && over(at-1) {
		at--
	}
	if sumIn(func(i int) float64 { return val(i) - s.level }, at, end) >= depth {
		return at
	}
	if alone := firstDrop(val, at, s.hi, s.level, depth); alone >= 0 && alone-e <= within {
		return at
	}
	return s.lo
}

// incidentStart is where the traffic of span s over an allowance, whose
// bucket the run shows is depth deep at least, began (bucketStart).
// Outbound, where the host saw the traffic before the device's bucket,
// the bucket is taken one window's refill deeper, a bunch's build being
// known to a window's refill only (s36/dg1: a TCP flow's 28.7 kB bunches,
// all let through, built 22.8 kB where one fell across two windows and
// 24.3 kB in one, and the one 6 ms before a burst was taken to have
// emptied the bucket, starting the burst's finding 5.5 ms early); and
// the traffic from the run holding the first drop on starts the incident
// where it would have emptied the bucket within MergeGap of that drop.
// Inbound, the host sees what the bucket let through, not what filled
// it: the head of the stretch the device's queue sent at the allowance
// (shapedHead), else the run alone, the depth as shown.
func (a *analysis) incidentStart(val func(int) float64, s span, depth float64, sentFirst bool) int {
	if !sentFirst {
		if head, ok := shapedHead(val, s.lo, s.hi, s.level); ok {
			return head
		}
		return bucketStart(val, s, depth, a.pauseWindows(), -1)
	}
	return bucketStart(val, s, depth+s.level, a.pauseWindows(), a.mergeGapWindows())
}

// queuedBehind tells whether traffic from fine window x on came while what
// span s left over its level (val per window; no bucket counted, so at
// most as long as a queue's) was still draining: the traffic between
// stayed under the level, by too little to serve it all. Such traffic
// over the level waited behind s: s's victim, not a cause of its own.
func queuedBehind(val func(int) float64, s span, x int) bool {
	if s.level <= 0 || x <= s.hi {
		return false
	}
	backlog := overLevel(val, s, s.level)
	offered := 0.0
	for i := s.hi; i < x; i++ {
		offered += val(i)
		if backlog = backlog + val(i) - s.level; backlog <= 0 {
			return false
		}
	}
	return offered < s.level*float64(x-s.hi)
}

// queuedTail is s without the traffic at its end that waited behind what
// came before it (queuedBehind): the run of traffic over the level that
// comes more than gap windows after the one before it, while that one's
// excess still drains.
func queuedTail(val func(int) float64, s span, gap int) span {
	end := -1 // the end of the last run over the level so far
	for i := s.lo; i < s.hi; i++ {
		if val(i) <= s.level {
			continue
		}
		if end >= 0 && i-end > gap {
			head := s
			head.hi = end
			if queuedBehind(val, head, i) {
				return head
			}
		}
		end = i + 1
	}
	return s
}

// builtOver is what span s's traffic (val per window) built over its
// level: as absorbedDepth measures a bucket, so what one that deep
// passes.
func builtOver(val func(int) float64, s span) float64 {
	return sumIn(func(i int) float64 { return val(i) - s.level }, s.lo, s.hi)
}

// heldLikeQuiet tells whether traffic in windows [x, y) (val per window)
// held no more than traffic that moved nothing did (shown: the bucket the
// run shows at a level), at level and at each half of it down to
// quietLevels of them, with what traffic from window from on left: where
// no allowance is known, whether it could have made a drop of its own.
// The allowance lies under the level a cause stood out from, as far as
// ten times under (the lab's 40 Mbit/s, 5 kB a millisecond, under half a
// 60 kB bunch's peak): a TCP flow's bunches every 20 ms each held no
// more than those that moved nothing at that level, but two 10 ms apart
// held more at 4 kB a window, and overflowed the lab's 64 KiB bucket
// (taken for nothing, the look-back's first bunch, 100 ms before the
// read, was the cause: the lag stated 96.7 ms, 0 to 423, where it was 0).
// The caller bounds from: at a level under a sender's mean rate, a queue
// fed for a second holds more than any quiet stretch did, those being cut
// by the sender's own drops.
func heldLikeQuiet(val func(int) float64, shown func(level float64) float64, level float64, from, x, y int) bool {
	for k := 0; k < quietLevels; k, level = k+1, level/2 {
		if heldIn(val, level, from, x, y) > shown(level) {
			return false
		}
	}
	return true
}

// quietLevels is how many levels heldLikeQuiet tries, each half the one
// before: down to a 32nd of the first.
const quietLevels = 6

// heldIn is the most a queue fed by traffic (val per window) from window
// from on, served at level, held in windows [x, y): what [x, y) built over
// level with what earlier traffic left in it.
func heldIn(val func(int) float64, level float64, from, x, y int) float64 {
	built, most := 0.0, 0.0
	for i := from; i < y; i++ {
		built = max(built+val(i)-level, 0)
		if i >= x {
			most = max(most, built)
		}
	}
	return most
}

// bucketDrops is what a token bucket would drop of the traffic in s's
// windows (val each), refilled by s.level a window and holding up to depth
// beyond it, full at the start: with depth 0, each window's excess over
// the level. A queue in front of the allowance drops where such a bucket
// would, its depth the queue's and the bucket's together.
func bucketDrops(val func(int) float64, s span, depth float64) []float64 {
	drops := make([]float64, s.hi-s.lo)
	carry := depth
	for i := range drops {
		avail := s.level + carry
		v := val(s.lo + i)
		used := min(v, avail)
		drops[i] = v - used
		carry = min(avail-used, depth)
	}
	return drops
}
