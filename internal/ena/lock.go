package ena

import (
	"slices"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/record"
)

// A device may publish its counters on a period of its own (the lab's
// 1 s refresh; how an ENA device does is documented nowhere). A change is
// then known only to lie between the read before it and the read that
// showed it: 5 to 15 ms with dithered 10 ms reads. Behind a 1 s refresh an
// overshoot of 2 s changes its counter three times, and three such read
// intervals place the refresh's phase, and so the counter's lag, only to 5
// to 10 ms (docs/findings.md, Timing). Reads between two refreshes learn
// nothing, so once the changes show a period, refreshLock asks for a few
// reads more where the next change is due: the window the changes so far
// put it in, split evenly. A change read there is known to a millisecond
// or two, and the next window is that much narrower.
//
// The cost is bounded: at most lockBudget of the base reads in extra
// reads over a period, none while the sampler backs off, none for a
// period under lockMinReads reads (the reads already split it finely),
// and none more than lockHorizon periods after the last change (a window
// that wide says little, and a quiet device needs no watching). Nothing
// the device does not promise is counted on: a change outside the window,
// or changes that fit no period, end the lock until the changes show one
// again.
//
// A refresh the user gives (--counter-refresh: learned by an earlier run
// on the same instance type) puts the window from the first change on,
// where learning it takes two: behind a 1 s refresh an incident often
// changes its counter only twice, and the second is then read finely too.
// It is a start only: a second change, in its window or not, hands over
// to the period the changes show.

const (
	// lockArcs is how many of the latest changes the period is learned
	// from.
	lockArcs = 16
	// lockMinReads: a period must span this many base reads to be locked
	// onto: six extra reads a window are then within the budget. The
	// first windows are as wide as two or three read intervals (where two
	// changes read every 10 ms put the next: 20 to 30 ms); fewer reads
	// split them no finer than the dithered reads do. A shorter refresh
	// changes its counter often enough over an incident for its phase to
	// be learned from the dithered reads (the lab's 100 ms: 27 runs of 28
	// within 5 ms).
	lockMinReads = 6 * lockBudget
	// lockBudget is the share of the base reads spent on extra reads.
	lockBudget = 8 // one eighth
	// lockHorizon is how many periods after the last change windows are
	// still read.
	lockHorizon = 8
	// lockGivenSlack is how far a given refresh may be off the device's,
	// per period, as a share of it: "1s" for a device's 1.004 s.
	lockGivenSlack = 200 // 0.5%
)

// arc is a span of CLOCK_MONOTONIC ns, (lo, hi]: where a change became
// visible (the read before it began at lo, the read that showed it ended
// at hi).
type arc struct{ lo, hi int64 }

func (a arc) mid() int64   { return a.lo + (a.hi-a.lo)/2 }
func (a arc) width() int64 { return a.hi - a.lo }

// refreshLock learns a device's refresh from the reads that showed its
// counters change, and says when to read more. Not safe for concurrent
// use: the sampler's goroutine owns it.
type refreshLock struct {
	baseNs  int64 // the sampler's interval
	givenNs int64 // the refresh the user gave, 0 none
	// last is the latest good read's device counters, lastBefore when it
	// began.
	last       map[string]uint64
	lastBefore int64
	arcs       []arc // the latest changes, oldest first
	periodNs   int64 // 0: no period (yet)
	slackNs    int64 // how far the period may be off, per period
	// window is where the next change is due, reads the extra reads left
	// in it; a change seen, or the window passed, closes it.
	window arc
	reads  int
}

// newRefreshLock makes a lock for reads every base ns, given the device's
// refresh (0: learn it; one too short to lock onto is not used).
func newRefreshLock(base, given int64) *refreshLock {
	l := &refreshLock{baseNs: base}
	if given >= lockMinReads*base {
		l.givenNs = given
	}
	return l
}

// observe takes a read: a change since the last good read adds its arc and
// learns the period again.
func (l *refreshLock) observe(cs record.CounterSample) {
	if cs.Err != "" || cs.Values == nil {
		return
	}
	if l.last == nil {
		l.last = make(map[string]uint64, len(counters.DeviceCounters))
	}
	changed := false
	for _, name := range counters.DeviceCounters {
		if v, ok := cs.Values[name]; ok {
			if w, seen := l.last[name]; seen && w != v {
				changed = true
			}
			l.last[name] = v
		}
	}
	before := l.lastBefore
	l.lastBefore = cs.BeforeNs
	if !changed {
		return // a change needs a read before it: before is set
	}
	a := arc{before, cs.AfterNs}
	if l.periodNs > 0 && l.window.hi > 0 && (a.hi <= l.window.lo || a.lo >= l.window.hi) && !l.anyWindowHolds(a) {
		// A change where no window of the period put it: the device is
		// not (or no longer) refreshing on it. A given period's miss
		// keeps the change it was put from: with this one, the changes
		// show the device's own.
		if len(l.arcs) > 1 || l.givenNs == 0 {
			l.arcs = l.arcs[:0]
		}
	}
	l.arcs = append(l.arcs, a)
	if len(l.arcs) > lockArcs {
		l.arcs = slices.Delete(l.arcs, 0, len(l.arcs)-lockArcs)
	}
	l.periodNs, l.slackNs = l.learn()
	l.window, l.reads = arc{}, 0
}

// anyWindowHolds: some boundary the period puts after the last arc's
// (within the horizon) could lie in a.
func (l *refreshLock) anyWindowHolds(a arc) bool {
	if len(l.arcs) == 0 {
		return false
	}
	last := l.arcs[len(l.arcs)-1]
	for m := int64(1); m <= lockHorizon; m++ {
		w := l.due(last, m)
		if a.lo < w.hi && a.hi > w.lo {
			return true
		}
	}
	return false
}

// learn is the period the arcs fit, and how far it may be off per period:
// the shortest gap between two changes (of at least lockMinReads reads)
// that every gap is a whole number of, within the arcs' widths, then
// refined over the span from the first arc to each later one. 0 where
// they fit none.
func (l *refreshLock) learn() (period, slack int64) {
	if len(l.arcs) == 1 && l.givenNs > 0 {
		return l.givenNs, l.givenNs/lockGivenSlack + l.baseNs/20
	}
	if len(l.arcs) < 2 {
		return 0, 0
	}
	// shortest, and how far off it may be (its two arcs' half widths).
	shortest, off := int64(-1), int64(0)
	for k := 1; k < len(l.arcs); k++ {
		a, b := l.arcs[k-1], l.arcs[k]
		g := b.mid() - a.mid()
		if g < lockMinReads*l.baseNs {
			return 0, 0 // changes a few reads apart: nothing to lock onto
		}
		if shortest < 0 || g < shortest {
			shortest, off = g, (a.width()+b.width())/2
		}
	}
	for k := 1; k < len(l.arcs); k++ {
		a, b := l.arcs[k-1], l.arcs[k]
		g := b.mid() - a.mid()
		n := (g + shortest/2) / shortest
		if d := g - n*shortest; max(d, -d) > (a.width()+b.width())/2+n*off+l.baseNs/2 {
			return 0, 0
		}
	}
	// Each arc in turn, as many periods from the first as the period so
	// far says, refines it: counted on the whole span at once, a shortest
	// gap 10% short (a 100 ms refresh read every 10 ms) miscounts it.
	first := l.arcs[0]
	period, n := shortest, int64(1)
	for _, a := range l.arcs[1:] {
		g := a.mid() - first.mid()
		n = max((g+period/2)/period, 1)
		period = g / n
	}
	last := l.arcs[len(l.arcs)-1]
	return period, (first.width()+last.width())/(2*n) + l.baseNs/20
}

// due is where boundary m periods after a's falls: a moved on m periods,
// widened by m times the period's slack.
func (l *refreshLock) due(a arc, m int64) arc {
	w := m * l.slackNs
	return arc{a.lo + m*l.periodNs - w, a.hi + m*l.periodNs + w}
}

// next is when to read next for the lock, or 0: within the window of the
// next boundary due after now (every arc's prediction of it, intersected),
// its extra reads spread evenly over what is left of it. Off while the
// sampler reads slower than it was made to (cur > base).
func (l *refreshLock) next(now, cur int64) int64 {
	if l.periodNs == 0 || cur > l.baseNs || len(l.arcs) == 0 {
		return 0
	}
	if l.window.hi <= now {
		if !l.open(now) {
			return 0
		}
	}
	if l.reads <= 0 {
		return 0
	}
	if now < l.window.lo {
		return l.window.lo // the first at the window's start
	}
	// The rest evenly up to its end: the last read at the end brackets
	// a change due in it.
	return now + (l.window.hi-now)/int64(l.reads)
}

// open sets the window of the next boundary after now, false past the
// horizon.
func (l *refreshLock) open(now int64) bool {
	last := l.arcs[len(l.arcs)-1]
	// From the boundary before now: its window, widened, may still be
	// open.
	for m := max((now-last.hi)/l.periodNs, 1); m <= lockHorizon; m++ {
		w := l.due(last, m)
		if w.hi <= now {
			continue
		}
		// Every arc's prediction of the same boundary narrows it.
		for _, a := range l.arcs[:len(l.arcs)-1] {
			k := (last.mid() - a.mid() + l.periodNs/2) / l.periodNs
			p := l.due(a, k+m)
			if lo, hi := max(w.lo, p.lo), min(w.hi, p.hi); lo < hi {
				w = arc{lo, hi}
			}
		}
		l.window = w
		l.reads = max(int(l.periodNs/(lockBudget*l.baseNs)), 2)
		return true
	}
	l.window = arc{}
	return false
}

// read tells the lock a read for it is under way: one fewer left in the
// window.
func (l *refreshLock) read() { l.reads-- }
