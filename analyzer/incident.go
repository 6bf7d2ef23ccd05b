package analyzer

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/report/units"
)

// Where an incident's counter lag came from (Incident.CounterLagSource).
const (
	lagFromOption   = "option"
	lagEstimated    = "estimated"
	lagReadDuration = "read_duration"
)

// counterLag is how far before a read the cause of a jump it saw is looked
// for (lookNs), with the best single guess of the lag (pointNs, the middle
// of the range the jumps agree with) for placing an instant, such as when
// the connection table filled.
type counterLag struct {
	lookNs, pointNs int64
	source          string
}

// counterLagFor picks the look-back of one counter of one interface. Given
// in the options, it is used as is. Otherwise it is estimated from the
// jumps: offending marks the fine windows whose traffic was over the
// allowance, and the shortest shift d (up to MaxCounterLag) that puts such
// traffic in the most jump intervals moved back by d is the smallest lag
// the jumps agree with. The true lag then lies between d and d plus one
// read interval (the last jump of an incident was seen by the first read
// after its last drop plus the lag), so the look-back is d plus the read
// interval the trace measured, at most MaxCounterLag. With nothing to
// estimate from (offending nil: no allowance known), it is the slowest read
// the trace measured: a read may have counted, while it ran, traffic from
// before it began.
func (a *analysis) counterLagFor(iface string, jumps []counters.Jump, offending func(int) bool) counterLag {
	switch {
	case a.opt.CounterLag < 0:
		return counterLag{source: lagFromOption}
	case a.opt.CounterLag > 0:
		ns := int64(a.opt.CounterLag)
		return counterLag{ns, ns, lagFromOption}
	}
	maxNs := int64(MaxCounterLag)
	if offending != nil && len(jumps) > 0 {
		prefix := make([]int, a.g.n+1)
		for i := range a.g.n {
			prefix[i+1] = prefix[i]
			if offending(i) {
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
		if best > 0 {
			interval := a.readInterval(iface)
			return counterLag{min(bestD+interval, maxNs), min(bestD+interval/2, maxNs), lagEstimated}
		}
	}
	slow := min(a.slowestRead(iface), maxNs)
	return counterLag{slow, 0, lagReadDuration}
}

// readInterval is the median time between the starts of two successive
// reads of an interface's counters.
func (a *analysis) readInterval(iface string) int64 {
	var last int64 = -1
	var gaps []int64
	for _, s := range a.rec.Counters {
		if s.Interface != iface {
			continue
		}
		if last >= 0 && s.BeforeNs > last {
			gaps = append(gaps, s.BeforeNs-last)
		}
		last = s.BeforeNs
	}
	if len(gaps) == 0 {
		return a.rec.Meta.SampleNs
	}
	slices.Sort(gaps)
	return gaps[len(gaps)/2]
}

// slowestRead is the longest a read of an interface's counters took.
func (a *analysis) slowestRead(iface string) int64 {
	var slow int64
	for _, s := range a.rec.Counters {
		if s.Interface == iface && s.Err == "" {
			slow = max(slow, s.AfterNs-s.BeforeNs)
		}
	}
	return slow
}

// incidentSpec is how one counter's jumps on one interface become
// incidents.
type incidentSpec struct {
	counter string
	lag     counterLag
	// locate finds the offending traffic in fine windows [lo, hi): the read
	// interval of one jump and the look-back before it.
	locate func(lo, hi int) span
	// over tells whether the offending traffic stayed over the allowance
	// through fine windows [lo, hi), the stretch between the incident so
	// far (last) and the next jump's traffic: then both are one incident.
	over func(lo, hi int, last span) bool
	// skip leaves out a jump whose read interval (fine windows) another
	// finding explains.
	skip func(lo, hi int) bool
	// explained tells a located span of traffic over the allowance from
	// one of the interval's own level (nil: every span explains its jump,
	// as when no allowance is known).
	explained func(s span) bool
}

// incident is the jumps of one counter that one cause explains.
type incident struct {
	span
	jumps []counters.Jump
}

// incidents groups the jumps of one counter (in time order) into
// incidents: a jump joins the incident before it when their traffic is at
// most MergeGap apart, or when the offending traffic stayed over the
// allowance in between (a mild, steady overshoot moves the counter at only
// some reads, but is one incident). A jump with no traffic over the
// allowance within the lag before its read is looked for up to
// MaxCounterLag before it, and with none there either, it counts the drops
// of the incident just before it (within twice MaxCounterLag), late.
func (a *analysis) incidents(spec incidentSpec, jumps []counters.Jump) []incident {
	var out []incident
	gap := a.mergeGapWindows()
	for _, j := range jumps {
		from, to := a.certain(j)
		if spec.skip != nil {
			if lo, hi := a.g.span(from, to); spec.skip(lo, hi) {
				continue
			}
		}
		lo, hi := a.g.span(from-spec.lag.lookNs, to)
		s := spec.locate(lo, hi)
		unexplained := spec.explained != nil && !spec.explained(s)
		if unexplained && spec.lag.lookNs < int64(MaxCounterLag) {
			// A read later than the lag (a slow one, a busy device):
			// the traffic may lie further back, up to the bound.
			wlo, whi := a.g.span(from-int64(MaxCounterLag), to)
			if w := spec.locate(wlo, whi); spec.explained(w) {
				s, unexplained = w, false
			}
		}
		s.fromNs, s.toNs, s.readFromNs, s.delta = j.FromNs, j.ToNs, from, j.Delta
		if n := len(out); n > 0 {
			p := &out[n-1]
			if unexplained && to-a.g.startNs(p.hi) <= 2*int64(MaxCounterLag) {
				// Nothing over the allowance before this read: it counted
				// the incident before it, late. Its drops are that
				// incident's, and its traffic says nothing of when.
				p.toNs = max(p.toNs, s.toNs)
				p.delta += s.delta
				p.jumps = append(p.jumps, j)
				continue
			}
			if s.lo-p.hi <= gap || spec.over != nil && spec.over(p.hi, s.lo, p.span) {
				p.lo, p.hi = min(p.lo, s.lo), max(p.hi, s.hi)
				p.toNs = max(p.toNs, s.toNs)
				p.delta += s.delta
				if s.level > p.level {
					p.level, p.levelName, p.levelPerSecond = s.level, s.levelName, s.levelPerSecond
				}
				p.jumps = append(p.jumps, j)
				continue
			}
		}
		out = append(out, incident{span: s, jumps: []counters.Jump{j}})
	}
	return out
}

// incidentInfo describes an incident for its finding. val is the offending
// traffic per fine window, scale turns it into unit per second.
func (a *analysis) incidentInfo(inc incident, counter string, lag counterLag, val func(int) float64, scale float64, unit string) *Incident {
	sec := float64(a.g.widthNs) / 1e9
	dur := float64(inc.hi-inc.lo) * sec
	info := &Incident{Counter: counter, Delta: inc.delta, Jumps: len(inc.jumps), DurationS: dur,
		DropRate: share(float64(inc.delta), dur), Timeline: []CounterJump{},
		CounterLagS: float64(lag.lookNs) / 1e9, CounterLagSource: lag.source}
	for _, j := range inc.jumps {
		info.Timeline = append(info.Timeline, CounterJump{Time: a.wall(j.ToNs), OffsetS: a.offsetS(j.ToNs), Delta: j.Delta})
	}
	k := max(int(int64(a.opt.PeakWindow)/a.g.widthNs), 1)
	k = min(k, max(inc.hi-inc.lo, 1))
	best, at, sum := -1.0, inc.lo, 0.0
	for i := inc.lo; i < inc.hi; i++ {
		sum += val(i)
		if i-inc.lo >= k {
			sum -= val(i - k)
		}
		if i-inc.lo >= k-1 && sum > best {
			best, at = sum, i-k+1
		}
	}
	best = max(best, 0)
	info.Peak = IncidentPeak{Start: a.wall(a.g.startNs(at)), OffsetS: a.offsetS(a.g.startNs(at)),
		WindowS: float64(k) * sec, Rate: best * scale / (float64(k) * sec), Unit: unit}
	return info
}

// incidentSeverity ranks an incident by what it cost: critical when it
// dropped CriticalDrops packets or more, or lasted CriticalDuration or
// longer; a warning otherwise.
func (a *analysis) incidentSeverity(inc incident) string {
	if float64(inc.delta) >= a.opt.CriticalDrops || int64(inc.hi-inc.lo)*a.g.widthNs >= int64(a.opt.CriticalDuration) {
		return SeverityCritical
	}
	return SeverityWarning
}

// incidentEvidence are the numbers every incident finding opens with.
func incidentEvidence(info *Incident) []Evidence {
	return []Evidence{
		ev(info.Counter, float64(info.Delta), "packets"),
		ev("counter_jumps", float64(info.Jumps), "count"),
		ev("drop_rate", info.DropRate, "per_s"),
		ev("counter_lag_s", info.CounterLagS, "s"),
	}
}

// jumpsText says how the counter moved over an incident, in one line:
// "41 jumps over 3.4 s" and the lag its causes were looked for over.
func jumpsText(info *Incident) string {
	n := "1 jump"
	if info.Jumps != 1 {
		n = units.Count(info.Jumps) + " jumps"
	}
	return fmt.Sprintf("%s rose by %s in %s over %s (%s)", info.Counter, units.Count(info.Delta), n, units.Seconds(info.DurationS), units.EventRate(info.DropRate, "/s"))
}

// lagText says which counter lag the culprits were looked for with.
func lagText(info *Incident) string {
	what := map[string]string{lagFromOption: "given", lagEstimated: "estimated from the jumps", lagReadDuration: "the slowest read"}[info.CounterLagSource]
	return fmt.Sprintf("traffic looked for up to %s before each read (counter lag, %s)", units.Seconds(info.CounterLagS), what)
}

// findingCost orders findings of one severity: the most packets dropped
// first, then the longest.
func findingCost(x, y Finding) int {
	var dx, dy uint64
	if x.Incident != nil {
		dx = x.Incident.Delta
	}
	if y.Incident != nil {
		dy = y.Incident.Delta
	}
	return cmp.Or(cmp.Compare(dy, dx), cmp.Compare(y.EndOffsetS-y.StartOffsetS, x.EndOffsetS-x.StartOffsetS))
}

// severityRank orders severities, info lowest.
func severityRank(s string) int {
	switch s {
	case SeverityCritical:
		return 2
	case SeverityWarning:
		return 1
	}
	return 0
}
