package analyzer

import (
	"slices"
	"time"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
)

// lagScanStep is how finely consistentLags tries lags: a tenth of the
// reads' usual 10 ms.
const lagScanStep = int64(time.Millisecond)

// lagScanMost bounds the jumps and the bursts like their causes that
// consistentLags weighs: more, and the counter moved at every read or
// the traffic stood out all the time, and any lag shows everything.
const lagScanMost = 32

// consistentLags is the hull of the lags, 0 to capNs, at which every jump
// of a counter is where the device shows some burst like the clusters'
// causes (of), and each such burst is where some jump shows it; ok is
// false where none is, or the test cannot say. Each cluster took the
// latest traffic that stood out before its reads for its cause, and
// behind a 1 s lag that is often the burst after the one that made it:
// two bursts 200 ms apart behind a 100 ms refresh, each shown at two
// changes, had the first burst's second change taken for the second's
// first and its last change put on the second too, the lag stated 895
// to 906 ms where it was 1 s (twinscore seed 7 run 190), though no burst
// lay where that lag puts the last change's drops; and three bursts,
// their changes read 1 s after each, had the first two changes put on
// the third and the second burst, which that lag leaves unshown while
// the reads went on, missed (run 153).
//
// A burst like the causes: traffic over the lowest level a cause stood
// out from, as big as half the smallest cause, parts more than MergeGap
// apart each a burst. A jump at lag L shows the traffic from a refresh
// before its earliest read's start, less L, to its read's end less L
// (half a read wider each way: a busy host's reads come late). The hull,
// not the lags' runs: a range states no more than its ends. Only behind a
// refresh: with none, a read's window is as short as the reads, and a
// burst paced at its allowance, or one whose head went into the bucket,
// makes drops where nothing stands out (TestStalledPacedBurst failed in
// all its timings with no refresh). Not where the host saw the traffic
// only after the device shaped it (inbound bytes: its queue spreads a
// burst over its delay), and only where the causes and the bursts are
// short: a long overshoot's drops follow its queue, not its traffic's
// edges.
func (a *analysis) consistentLags(jumps []counters.Jump, of []lagCause, refreshNs, readNs, capNs int64, window func(counters.Jump) (int64, int64), src lagTraffic) (lagRange, bool) {
	if refreshNs <= 0 || !src.sentFirst && src.shapedPackets != nil || src.val == nil || len(of) == 0 || len(jumps) > lagScanMost || readNs <= 0 || len(jumps) == 0 {
		return lagRange{}, false
	}
	level, least := 0.0, 0.0
	for k, c := range of {
		if c.level <= 0 || c.lo >= c.hi || a.lastsLong(c.lo, c.hi, readNs) {
			return lagRange{}, false
		}
		over := overLevel(src.val, span{lo: c.lo, hi: c.hi}, c.level)
		if k == 0 || c.level < level {
			level = c.level
		}
		if k == 0 || over < least {
			least = over
		}
	}
	var bursts []burstAt
	long := false
	eachPart(src.val, 0, a.g.n, level, a.mergeGapWindows(), func(x, y int) {
		if overLevel(src.val, span{lo: x, hi: y}, level) < least/2 {
			return
		}
		long = long || a.lastsLong(x, y, readNs)
		bursts = append(bursts, burstAt{a.g.startNs(x), a.g.startNs(y)})
	})
	if long || len(bursts) == 0 || len(bursts) > lagScanMost {
		return lagRange{}, false
	}
	iface := jumps[0].Interface
	firstRead, lastRead := a.readsSpan(iface)
	slack := readNs / 2
	type shownAt struct{ from, to int64 } // what a jump shows at lag 0
	shows := make([]shownAt, len(jumps))
	for k, j := range jumps {
		from, to := window(j)
		shows[k] = shownAt{from - refreshNs - slack, to + slack}
	}
	// A burst's drops are shown at a jump whose window, at lag 0 and
	// moved lag later, they reach.
	overlaps := func(b burstAt, s shownAt, lag int64) bool { return b.fromNs < s.to-lag && b.toNs > s.from-lag }
	fits := func(lag int64) bool {
		for _, s := range shows {
			if !slices.ContainsFunc(bursts, func(b burstAt) bool { return overlaps(b, s, lag) }) {
				return false
			}
		}
		for _, b := range bursts {
			// Drops before the first read are in its value, and
			// those shown after the last read in none.
			if b.fromNs+lag <= firstRead+readNs || b.toNs+lag+refreshNs+readNs+slack >= lastRead {
				continue
			}
			if !slices.ContainsFunc(shows, func(s shownAt) bool { return overlaps(b, s, lag) }) {
				return false
			}
		}
		return true
	}
	r, ok := lagRange{}, false
	for lag := int64(0); lag <= capNs; lag += lagScanStep {
		if fits(lag) {
			if !ok {
				r.from = lag
			}
			r.to, ok = lag, true
		}
	}
	return r, ok
}

// burstAt is when a burst's traffic, and so its drops, began and ended.
type burstAt struct{ fromNs, toNs int64 }
