package analyzer

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/record"
)

// A counter's refresh period, learned from the reads at which it changed,
// and the phase of its refreshes, which narrows each jump to the instant
// the device published it (timing.go says why neither is taken on trust).

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
	if ns, known := a.refreshOf(iface, changesOf(jumps)); known {
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

// changesOf is a counter's jumps as the changes its refresh is learned
// from.
func changesOf(jumps []counters.Jump) []change {
	changes := make([]change, 0, len(jumps))
	for _, j := range jumps {
		changes = append(changes, change{j.ToNs, j.ToNs - j.FromNs})
	}
	return changes
}

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

// longestRefresh is the longest refresh, up to MaxCounterRefresh, at one
// phase of which every one of jumps' read intervals holds a refresh: a
// device that refreshes less often could not have changed the counter at
// those reads. With too few changes to tell a refresh, this still bounds
// it: three changes 900 and 500 ms apart are no 1 s refresh's.
func (a *analysis) longestRefresh(jumps []counters.Jump) int64 {
	longest := int64(MaxCounterRefresh)
	if len(jumps) < 2 || len(jumps) > maxPhasedChanges {
		return longest
	}
	changes := changesOf(jumps)
	open := int64(math.MaxInt64)
	for _, c := range changes {
		open = min(open, c.openNs)
	}
	span := changes[len(changes)-1].atNs - changes[0].atNs
	open = max(open, 1)
	for period := longest; period > open; period -= max(open*period/(4*max(span, period)), 1) {
		if phaseFits(changes, period) {
			return period
		}
	}
	return 0
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
