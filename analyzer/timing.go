package analyzer

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/record"
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
// gap between its changes is a multiple of, within what the reads around
// them leave open (a change is seen at the first read after the device
// published it, and reads come late on a busy host, and dithered): see
// refreshOf. One gap alone is no rhythm: two bursts a second apart, each
// shown at one read, change a counter a second apart whatever the device's
// refresh. Gaps of 1.0 and 1.1 s are a 100 ms refresh, not a 1 s one. When
// the counter's own changes cannot tell, the changes of every counter of
// the interface (one device publishes them together) stand in, and with
// none, known is false and the refresh is taken as 0. A period found so
// may still be the traffic's rhythm: estimateLag tests it against 0.
func (a *analysis) counterRefresh(iface string, jumps []counters.Jump) (ns int64, known bool) {
	changes := make([]change, 0, len(jumps))
	for _, j := range jumps {
		changes = append(changes, change{j.ToNs, j.ToNs - j.FromNs})
	}
	if ns, known := a.refreshOf(iface, changes); known {
		return ns, true
	}
	return a.refreshOf(iface, a.interfaceChanges(iface))
}

// LearnRefresh is the refresh an interface's counter reads show
// (counterRefresh over the changes of all its counters, from samples in
// time order), and how many changes it was learned from: 0 and known
// where they changed at successive reads (the device shows every change
// at the next read, or refreshes at least as often as the reads come),
// known false where the changes cannot tell. For `enaprobe counters`,
// whose reads a user can then give a trace as --counter-refresh.
//
// A period is then refined over the span of the changes, each in turn
// counting the periods from the first (the longest that fits the gaps
// within their reads is a read's share off: 101 ms for 100, read every 10
// ms, to be given to every later trace).
func LearnRefresh(samples []record.CounterSample, iface string) (refresh time.Duration, changes int, known bool) {
	a := &analysis{rec: &record.Recording{Counters: samples}}
	ch := a.interfaceChanges(iface)
	ns, known := a.refreshOf(iface, ch)
	if known && ns > 0 {
		mid := func(c change) int64 { return c.atNs - c.openNs/2 }
		for _, c := range ch[1:] {
			if n := (mid(c) - mid(ch[0]) + ns/2) / ns; n > 0 {
				ns = (mid(c) - mid(ch[0])) / n
			}
		}
		// No longer than the longest refresh, as learned: a 1 s refresh
		// read on a clock 0.1% fast is 1,001 ms, which --counter-refresh
		// refuses.
		ns = min(ns, int64(MaxCounterRefresh))
	}
	return time.Duration(ns), len(ch), known
}

// change is a read at which a counter changed (its start, atNs) and how
// long before it the change may have come (since the read before: the
// device published it in between).
type change struct{ atNs, openNs int64 }

// refreshOf is counterRefresh of one list of changes.
func (a *analysis) refreshOf(iface string, changes []change) (ns int64, known bool) {
	if len(changes) < 2 {
		return 0, false
	}
	ri := max(a.readInterval(iface), 1)
	gaps := make([]periodGap, 0, len(changes)-1)
	for k := 1; k < len(changes); k++ {
		// Each change may have come as early as its read before: the
		// gap between two is off by at most the longer of the two, and
		// half a read more for the reads' own stamps.
		gaps = append(gaps, periodGap{changes[k].atNs - changes[k-1].atNs, max(changes[k].openNs, changes[k-1].openNs) + ri/2})
	}
	slices.SortFunc(gaps, func(x, y periodGap) int { return cmp.Compare(x.ns, y.ns) })
	if gaps[0].ns <= ri+ri/2 {
		return 0, true
	}
	if len(gaps) < 2 {
		return 0, false
	}
	// The period is a few gaps' worth over k: of the periods every gap is
	// a multiple of, the one they fit best, the longest where another
	// fits better by less than a quarter read (so half or a third of the
	// period, which fits as well, is not taken). The guesses come from
	// the shortest gaps and the median one: a busy host's reads put the
	// shortest a read or more short. A period under three reads, or
	// within twice the gaps' tolerance, is no longer told from the reads'
	// own jitter (a 32 ms period fit gaps of a second read 15 ms apart).
	maxNs := int64(MaxCounterRefresh)
	type fit struct{ period, dev int64 }
	var fits []fit
	guesses := []int64{gaps[len(gaps)/2].ns}
	for _, g := range gaps[:min(len(gaps), 4)] {
		guesses = append(guesses, g.ns)
	}
	// A period within twice a gap's tolerance fits any gap by chance,
	// and one that gaps no multiples of it would fit as well with odds
	// over maxChanceFit fits them by chance too (fitByChance: two gaps of
	// a 1 s refresh, read 10 ms apart, fit 50.7 ms within 6.5, with odds
	// of one in five, and were stated so).
	shortest := 3 * ri
	for _, g := range gaps {
		shortest = max(shortest, 2*g.tolNs+ri)
	}
	for _, g := range guesses {
		// Up to 5% over the longest refresh: a gap of a 1 s refresh read
		// late is 1,000.2 ms (stated as 1 s).
		longest := maxNs + maxNs/20
		// Each period tried, g/k for every k down to the shortest, is one
		// more chance for gaps that are no multiples of it to fit one: the
		// odds that some fits are those of one times how many were tried.
		// Three changes 1.5 and 2.5 s apart (a scenario's rhythm, its
		// drops at round half seconds) fit 500.8, 372.6 or 373.4 ms, each
		// with odds under one in twenty, where the refresh was 100 ms,
		// and 89.3 ms was stated for two gaps of 1,508 and 2,501 ms
		// (its lag then 36.6 to 140.3 ms where it was 31.5).
		tries := float64(max(g/shortest, 1))
		for k := max((g+longest-1)/longest, 1); g/k >= shortest; k++ {
			if period, ok := fitPeriod(gaps, g/k); ok && tries*fitByChance(gaps, period, ri) <= maxChanceFit {
				fits = append(fits, fit{period, periodDeviation(gaps, period)})
			}
		}
	}
	if len(changes) <= maxPhasedChanges {
		// Few changes: the longest period at one phase of which every
		// change's own read interval holds a refresh (phaseFits), where
		// one does and is no fit by chance. The guesses above come from
		// the shortest gaps, a read off each, and the period a long gap
		// pins lies between their quotients: behind a 100 ms refresh,
		// five changes over 4.1 s (gaps of 107, 1,393, 97 and 2,511 ms),
		// none of whose quotients fit the 2.5 s gap within its
		// tolerance, were stated as 53.6 ms (d1, 5 of 56 runs behind
		// 100 ms: 48.1 to 372.6 ms).
		if period, ok := a.longestPhased(changes, shortest, min(maxNs+maxNs/20, changes[len(changes)-1].atNs-changes[0].atNs)); ok && fitByChance(gaps, period, ri) <= maxChanceFit {
			return min(period, maxNs), true
		}
	}
	if len(fits) == 0 {
		return 0, false
	}
	least := slices.MinFunc(fits, func(x, y fit) int { return cmp.Compare(x.dev, y.dev) }).dev
	var best int64
	for _, f := range fits {
		if f.dev <= least+ri/4 {
			best = max(best, f.period)
		}
	}
	return min(best, maxNs), true
}

// minPhasedChanges and maxPhasedChanges bound the changes longestPhased
// scans periods for. With fewer, a multiple of the period fits them too
// often: every period that fits two gaps of a 100 ms refresh fits their
// multiples of it with odds of one in k squared (three changes 1.5 and
// 2.5 s apart fit 500.8 ms; three others, 137 ms). With more, the gaps'
// guesses fit well, and the scan's cost grows with their square.
const (
	minPhasedChanges = 4
	maxPhasedChanges = 24
)

// longestPhased is the longest period from shortest to longest at one
// phase of which every change's read interval, (atNs - openNs, atNs],
// holds a refresh. Periods are scanned from the longest down, each step
// moving the last change's refresh by a quarter of the shortest interval
// at most, so no period that fits is stepped over.
func (a *analysis) longestPhased(changes []change, shortest, longest int64) (int64, bool) {
	if len(changes) < minPhasedChanges || longest < shortest {
		return 0, false
	}
	span := changes[len(changes)-1].atNs - changes[0].atNs
	open := changes[0].openNs
	for _, c := range changes {
		open = min(open, c.openNs)
	}
	open = max(open, 1)
	for period := longest; period >= shortest; period -= max(open*period/(4*span), 1) {
		if !phaseFits(changes, period) {
			continue
		}
		// A step of the scan moves the last change a quarter of the
		// shortest interval, but the intervals may meet over less: the
		// lab's 23 changes behind 100 ms, read 7.6 to 14 ms apart, met
		// over 0.3 ms at one phase of it, the scan stepped over it, and
		// 50 ms was stated. The period found is the refresh or a
		// fraction of it: each multiple is searched closely, within
		// the scan's step of it times the multiple.
		step := max(open*period/(4*span), 1)
		for k := longest / period; k >= 2; k-- {
			for d := -k * step; d <= k*step; d += max(step/8, 1) {
				if phaseFits(changes, k*period+d) {
					return k*period + d, true
				}
			}
		}
		return period, true
	}
	return 0, false
}

// phaseFits tells whether some phase of period puts a refresh in every
// change's read interval. Where the intervals' arcs, modulo the period,
// meet, they meet at the end of one of them.
func phaseFits(changes []change, period int64) bool {
	for _, c := range changes {
		if c.openNs >= period {
			continue
		}
		phase := c.atNs % period
		all := true
		for _, d := range changes {
			if d.openNs < period && (phase-(d.atNs-d.openNs)%period+2*period)%period > d.openNs {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// periodGap is the time between two changes, and how far it may be from
// the time between the two refreshes that made them.
type periodGap struct{ ns, tolNs int64 }

// fitPeriod refines a guess of the period that every gap is a multiple
// of (the median of each gap over its multiple; the guess itself where
// that median fits not every gap: of two gaps, the median is the longer's
// quotient, and 1,007.5 ms is no period of 2,992.1 where 997.4 is), or
// says a gap is further than its tolerance from any multiple of both.
func fitPeriod(gaps []periodGap, guess int64) (int64, bool) {
	per := make([]int64, 0, len(gaps))
	for _, g := range gaps {
		m, d := nearestMultiple(g.ns, guess)
		if m == 0 || d > g.tolNs || d < -g.tolNs {
			return 0, false
		}
		per = append(per, g.ns/m)
	}
	slices.Sort(per)
	for _, period := range []int64{per[len(per)/2], guess} {
		if fitsAll(gaps, period) {
			return period, true
		}
	}
	return 0, false
}

// fitByChance is how likely gaps that are no multiples of period would
// fit it as well: each lands as near a multiple as it does (a read at
// least: the reads' own jitter) with odds of twice that over the period.
// As near as it does, not within its tolerance: three gaps of a 100 ms
// refresh read slowly fit it within 2.4 ms, but a random gap meets their
// 19 ms tolerances with odds of two in five, and 114.2 ms was stated.
func fitByChance(gaps []periodGap, period, readNs int64) float64 {
	p := 1.0
	for _, g := range gaps {
		_, d := nearestMultiple(g.ns, period)
		p *= min(1, float64(2*max(d, -d, readNs))/float64(period))
	}
	return p
}

// maxChanceFit is the most fitByChance a period the changes' spacing
// suggests may have.
const maxChanceFit = 0.05

// fitsAll tells whether every gap lies within its tolerance of a multiple
// of period.
func fitsAll(gaps []periodGap, period int64) bool {
	for _, g := range gaps {
		if m, d := nearestMultiple(g.ns, period); m == 0 || d > g.tolNs || d < -g.tolNs {
			return false
		}
	}
	return true
}

// periodDeviation is how far the gap furthest from a multiple of period
// lies from it.
func periodDeviation(gaps []periodGap, period int64) int64 {
	var dev int64
	for _, g := range gaps {
		_, d := nearestMultiple(g.ns, period)
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
func (a *analysis) interfaceChanges(iface string) []change {
	var out []change
	var last map[string]uint64
	var lastNs int64
	for _, s := range a.rec.Counters {
		if s.Interface != iface || s.Err != "" {
			continue
		}
		if last != nil {
			for k, v := range s.Values {
				if w, ok := last[k]; ok && w != v {
					out = append(out, change{s.BeforeNs, s.BeforeNs - lastNs})
					break
				}
			}
		}
		last, lastNs = s.Values, s.AfterNs
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
func (a *analysis) estimateLag(jumps []counters.Jump, refreshNs int64, known, given bool, readNs int64, src lagTraffic) (lag counterLag, ok bool) {
	if known && (refreshNs == 0 || given) {
		// A refresh given is the device's: no contest with 0.
		lag, ok, _ = a.estimateLagWith(jumps, refreshNs, refreshNs > 0, readNs, src)
		lag.refreshKnown = true
		return lag, ok
	}
	zero, zeroOK, fits := a.estimateLagWith(jumps, 0, false, readNs, src)
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
		lag, ok, _ = a.estimateLagWith(jumps, int64(MaxCounterRefresh), false, readNs, src)
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
	lag.lowNs = 0
	// With the refresh untold, a change a read past the longest lag may
	// be the refresh's part of the delay, not the lag's: the lag is then
	// the longest (behind a 100 ms refresh, a burst's changes put it at
	// 1,010.1 ms where the lab's was 1,001.7).
	lag.pointNs = min(lag.pointNs, int64(MaxCounterLag))
	return lag, ok
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
					ranges, _ := a.shareRanges(jumps[fc:l+1], shareSpan, val, shareDepth, false, refreshNs, 0)
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
	fits = fits && latestFrom-earliestTo <= readNs
	var depth float64
	if len(depths) > 0 {
		slices.Sort(depths)
		depth = depths[len(depths)/2]
	}
	lag = counterLag{lowNs: r.from, highNs: r.to, pointNs: point, refreshNs: refreshNs,
		clusters: len(clusters), source: lagEstimated, overshootLevel: level, bucketDepth: depth, depthRough: rough,
		changesShown: shownAtOnce, pulsedAtRefresh: pulsed, delayAsCauses: sameDelay(clusters, of, readNs)}
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
	if shown == nil || !src.sentFirst || src.perDrop == nil || src.val == nil || len(of) != len(clusters) || len(clusters) < 2 {
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
	if builtOver(src.val, span{lo: x, hi: y, level: c.level}) <= shown(c.level) || !explainsDrops(mostCounts(src.val, x, y, src.perDrop), riseOf(jumps[c.part.fc:c.part.l+1])) {
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

// phaseFit is one period refreshFits tried: the phase the most jumps
// agree on (the middle of the widest arc they share), how wide that arc
// is, and how many jumps share it.
type phaseFit struct {
	period, phase, width int64
	n                    int
}

// refreshFits tries every period within 3% of refreshNs (refreshPhase)
// and returns each one's fit, and the most jumps any fit holds.
func (a *analysis) refreshFits(cluster []counters.Jump, refreshNs int64) (fits []phaseFit, best int) {
	for step := -refreshSteps; step <= refreshSteps; step++ {
		p := refreshNs + refreshNs*int64(step)/refreshStepOf
		// Each jump's reads as an arc of the circle of length p.
		type bound struct {
			at   int64
			open int
		}
		var bounds []bound
		wrapped := 0
		for _, j := range cluster {
			from, to := a.certain(j)
			if to-from >= p {
				wrapped++
				continue
			}
			x, y := floorMod(from, p), floorMod(to, p)
			bounds = append(bounds, bound{x, 1}, bound{y, -1})
			if y < x {
				wrapped++ // covers the circle's origin
			}
		}
		slices.SortFunc(bounds, func(u, v bound) int { return cmp.Or(cmp.Compare(u.at, v.at), cmp.Compare(v.open, u.open)) })
		f := phaseFit{period: p}
		n := wrapped
		for i, b := range bounds {
			n += b.open
			if b.open > 0 && i+1 < len(bounds) {
				width := bounds[i+1].at - b.at
				if n > f.n || n == f.n && width > f.width {
					f.n, f.width, f.phase = n, width, b.at+width/2
				}
			}
		}
		fits = append(fits, f)
		best = max(best, f.n)
	}
	return fits, best
}

// refreshPhase finds when a device that refreshes about every refreshNs
// made each of a cluster's jumps visible: at one phase of its period, each
// within its reads. The period is known only roughly (the device's clock
// is not the host's, and one learned from the gaps is a read or so off
// over many: the lab's 100 ms came out 100.45, and 102.3 beside two
// CPU-bound processes), and over a 2 s incident a period 0.45% off drifts
// the phase 9 ms across the jumps while every jump's reads still hold it.
// So every period within 3% of refreshNs that fits the most jumps counts:
// for each, the phases its jumps agree on, and each jump's instant at
// their middle; a jump's instant is the mean over those periods, weighted
// by how wide the agreement is (the middle of the region of periods and
// phases that fit, where the period nearest the learned one put the lab's
// jumps up to 6 ms off, its stated uncertainty 0.3 ms). visible[k] is 0
// for a jump out of that rhythm; widen is how far any jump's instant may
// be from the one given, over every period and phase that fit. ok is
// false where fewer than three quarters of the jumps agree.
func (a *analysis) refreshPhase(cluster []counters.Jump, refreshNs int64) (visible []int64, widen int64, ok bool) {
	fits, best := a.refreshFits(cluster, refreshNs)
	if 4*best < 3*len(cluster) {
		return nil, 0, false
	}
	visible = make([]int64, len(cluster))
	for k, j := range cluster {
		from, to := a.certain(j)
		var sum, weight float64
		earliest, latest := to, from
		for _, f := range fits {
			if f.n != best {
				continue
			}
			shown := to - floorMod(to-f.phase, f.period)
			if shown <= from {
				continue
			}
			w := float64(f.width + 1)
			sum, weight = sum+w*float64(shown-from), weight+w
			earliest, latest = min(earliest, shown-f.width/2), max(latest, shown+f.width/2)
		}
		if weight > 0 {
			visible[k] = from + int64(sum/weight)
			widen = max(widen, visible[k]-earliest, latest-visible[k])
		}
	}
	return visible, widen, true
}

// refreshFits tries refreshSteps periods either side of the refresh, each
// 1/refreshStepOf of it apart: 3% either way.
const (
	refreshSteps  = 120
	refreshStepOf = 4000
)

// mostFitting bounds the best refreshFits can find of cluster (ordered by
// read, the reads not overlapping): a phase lies in every jump whose reads
// span a period or more of the shortest period tried, and in at most two
// others at each instant it recurs at over the cluster's span (adjacent
// jumps share a read). It costs one pass where refreshFits sorts every
// jump's bounds at each of its periods: a device that shows every change
// at the next read, analyzed under a refresh of 1 s given, changes its
// counter at each of 500 reads within reach of each change, and a 40 s
// trace took 111 s to analyze.
func (a *analysis) mostFitting(cluster []counters.Jump, refreshNs int64) int {
	if len(cluster) == 0 {
		return 0
	}
	shortest := refreshNs - refreshNs*refreshSteps/refreshStepOf
	if shortest <= 0 {
		return len(cluster)
	}
	wide := 0
	first, _ := a.certain(cluster[0])
	_, last := a.certain(cluster[len(cluster)-1])
	for _, j := range cluster {
		if from, to := a.certain(j); to-from >= shortest {
			wide++
		}
	}
	return min(len(cluster), wide+2*int((last-first)/shortest+2))
}

// shownWindow is when jump j became visible, for a device that refreshes
// about every refreshNs: within its reads (certain), and at the phase the
// changes of every counter of its interface agree on (phaseWindows).
func (a *analysis) shownWindow(j counters.Jump, refreshNs int64) (fromNs, toNs int64) {
	fromNs, toNs = a.certain(j)
	if refreshNs <= 0 {
		return fromNs, toNs
	}
	if w, ok := a.phaseWindows(j.Interface, refreshNs)[toNs]; ok && w.to > fromNs && w.from < toNs {
		fromNs, toNs = max(fromNs, w.from), min(toNs, w.to)
	}
	return fromNs, toNs
}

// phaseWindows is, for a device that refreshes about every refreshNs,
// when each read at which any counter of iface changed shows the change
// became visible (keyed by the read's end): at the one phase of the
// period all those changes agree on (refreshPhase; one device publishes
// its counters together), where three quarters of them or more do. A
// counter's own changes may be too few to narrow it: two a period apart,
// the period known only from them, fit any phase within their reads, and
// a third, of any counter, narrows both. Behind a 1 s refresh beside load,
// the lab's first burst's one change was read 0.5 ms after its second
// burst began, and that burst's head was taken for its cause, the lag
// stated 0.6 ms (0 to 1.3) where it was 21.7 (c15/load/m2); the changes
// at three refreshes (the connection-tracking gauge's first) put it 1.1
// ms before the head at the latest.
func (a *analysis) phaseWindows(iface string, refreshNs int64) map[int64]lagRange {
	key := phaseKey{iface, refreshNs}
	if w, ok := a.phases[key]; ok {
		return w
	}
	// Each change as a jump from the read before (its end) to its read's
	// start, which certain widens to both reads.
	var changed []counters.Jump
	for _, c := range a.interfaceChanges(iface) {
		changed = append(changed, counters.Jump{Interface: iface, FromNs: c.atNs - c.openNs, ToNs: c.atNs})
	}
	out := map[int64]lagRange{}
	reads := make([]int64, len(changed)) // each change's read end, in order
	for k, j := range changed {
		_, reads[k] = a.certain(j)
	}
	for k, j := range changed {
		from, to := a.certain(j)
		// Only changes within phaseReach periods: over more, a period a
		// few percent off (learned from gaps of 15 and 27 periods, an
		// alias of the device's: 92.9 ms for 100) moves the phase by
		// more than a read.
		reach := phaseReach*refreshNs + refreshNs/2
		x, _ := slices.BinarySearch(reads, to-reach)
		y, _ := slices.BinarySearch(reads, to+reach)
		near := changed[x:max(y, k+1)]
		if 4*a.mostFitting(near, refreshNs) < 3*len(near) {
			continue // more changes than any phase could fit (below)
		}
		fits, best := a.refreshFits(near, refreshNs)
		if len(near) < 3 || 4*best < 3*len(near) {
			continue
		}
		w := lagRange{to, from}
		for _, f := range fits {
			if f.n != best {
				continue
			}
			// The arc the jumps share, placed within j's reads.
			shown := to - floorMod(to-f.phase, f.period)
			if lo, hi := max(shown-f.width/2, from), min(shown+f.width/2, to); hi > lo {
				w.from, w.to = min(w.from, lo), max(w.to, hi)
			}
		}
		if w.to > w.from {
			out[to] = w
		}
	}
	if a.phases == nil {
		a.phases = map[phaseKey]map[int64]lagRange{}
	}
	a.phases[key] = out
	return out
}

// phaseReach is how many refresh periods from a change the changes that
// place its phase lie at most (phaseWindows).
const phaseReach = 2

// phaseKey is an interface and a refresh period, for phaseWindows.
type phaseKey struct {
	iface     string
	refreshNs int64
}

// floorMod is x mod m in [0, m).
func floorMod(x, m int64) int64 {
	r := x % m
	if r < 0 {
		r += m
	}
	return r
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
