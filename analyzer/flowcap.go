package analyzer

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/units"
)

// flowCapFindings looks for flows whose throughput per PlateauBin stayed
// flat (coefficient of variation at most PlateauCV) for at least PlateauMin
// near the per-flow cap while no bandwidth or pps counter moved: the silent
// per-flow limit. With the cap unknown, a flat plateau at the flow's own
// maximum and at least FlowPlateauMinBps is reported as info.
func (a *analysis) flowCapFindings() []Finding {
	var out []Finding
	for id := range a.flows.flows {
		f := &a.flows.flows[id]
		for _, p := range a.plateaus(f) {
			if fd, ok := a.flowCapFinding(f, p); ok {
				out = append(out, fd)
			}
		}
	}
	slices.SortStableFunc(out, func(x, y Finding) int { return cmp.Compare(x.StartOffsetS, y.StartOffsetS) })
	return out
}

// plateau is a run of a flow's deltas [first, last] (indexes into
// flowInfo.deltas) that is flat.
type plateau struct {
	first, last int
	meanBps, cv float64
}

// rateBin is a run of consecutive deltas [first, last] spanning at least
// PlateauBin (or what is left of the flow), with the rate the flow held
// in it.
type rateBin struct {
	first, last  int
	fromNs, toNs int64
	bps          float64
}

// rateBins groups a flow's deltas into bins of PlateauBin. A gap between
// deltas (the flow idle for a drain interval) closes a bin early.
//
// A bin's rate is the one the flow held for most of it: the median of its
// drain intervals' rates, weighted by their length, not its mean. A TCP
// flow at a cap that loses a packet to the cap's queue falls under it for
// a round trip, or for a retransmission timeout, then sends its backlog
// over it: the lab's upload under a 10 Mbit/s cap ran 100 ms intervals at
// 10.0 Mbit/s with one 600 ms dip to 1.3 Mbit/s, a bin mean of 7.2 Mbit/s
// (and a CV of 0.07 over three bins) while the median stayed at the cap.
// With one drain interval per bin the two are the same.
func (a *analysis) rateBins(f *flowInfo) []rateBin {
	d := func(i int) *flowDelta { return &a.flows.deltas[f.deltas[i]] }
	binNs := int64(a.opt.PlateauBin)
	var bins []rateBin
	var cur rateBin
	var rates []weightedRate
	flush := func() {
		if dt := cur.toNs - cur.fromNs; dt > 0 {
			cur.bps = weightedMedian(rates)
			bins = append(bins, cur)
		}
	}
	for i := range f.deltas {
		if i > 0 && (d(i).fromNs > cur.toNs || cur.toNs-cur.fromNs >= binNs) {
			flush()
			cur, rates = rateBin{}, rates[:0]
		}
		if len(rates) == 0 {
			cur = rateBin{first: i, fromNs: d(i).fromNs}
		}
		cur.last, cur.toNs = i, d(i).toNs
		if dt := d(i).toNs - d(i).fromNs; dt > 0 {
			rates = append(rates, weightedRate{bps: float64(d(i).bytes) * 8e9 / float64(dt), ns: dt})
		}
	}
	if len(f.deltas) > 0 {
		flush()
	}
	return bins
}

// weightedRate is one drain interval's rate and its length.
type weightedRate struct {
	bps float64
	ns  int64
}

// weightedMedian is the rate at which half the time ran slower and half
// faster; it reorders rs.
func weightedMedian(rs []weightedRate) float64 {
	if len(rs) == 0 {
		return 0
	}
	slices.SortFunc(rs, func(x, y weightedRate) int { return cmp.Compare(x.bps, y.bps) })
	var total, run int64
	for _, r := range rs {
		total += r.ns
	}
	for _, r := range rs {
		if run += r.ns; 2*run >= total {
			return r.bps
		}
	}
	return rs[len(rs)-1].bps
}

// plateaus finds the maximal runs of rate bins covered by some stretch of at
// least PlateauMin whose rates are flat. Two pointers over the bins keep it
// linear: for a left end the shortest long-enough right end only moves
// forward.
func (a *analysis) plateaus(f *flowInfo) []plateau {
	bins := a.rateBins(f)
	n := len(bins)
	if n < 2 {
		return nil
	}
	minNs := int64(a.opt.PlateauMin)
	flat := make([]bool, n)
	var sum, sumSq float64
	r := -1
	for l := 0; l < n; l++ {
		for r+1 < n && (r < l || bins[r].toNs-bins[l].fromNs < minNs) {
			r++
			sum += bins[r].bps
			sumSq += bins[r].bps * bins[r].bps
		}
		if bins[r].toNs-bins[l].fromNs >= minNs && r > l {
			k := float64(r - l + 1)
			mean := sum / k
			if mean > 0 && math.Sqrt(max(sumSq/k-mean*mean, 0))/mean <= a.opt.PlateauCV {
				for i := l; i <= r && !flat[i]; i++ {
					flat[i] = true
				}
				for i := r; i >= l && !flat[i]; i-- {
					flat[i] = true
				}
			}
		}
		sum -= bins[l].bps
		sumSq -= bins[l].bps * bins[l].bps
	}
	var out []plateau
	for i := 0; i < n; i++ {
		if !flat[i] {
			continue
		}
		j := i
		for j+1 < n && flat[j+1] && bins[j+1].fromNs <= bins[j].toNs {
			j++
		}
		var s, ss float64
		for k := i; k <= j; k++ {
			s += bins[k].bps
			ss += bins[k].bps * bins[k].bps
		}
		k := float64(j - i + 1)
		mean := s / k
		p := plateau{first: bins[i].first, last: bins[j].last, meanBps: mean, cv: math.Sqrt(max(ss/k-mean*mean, 0)) / mean}
		out = append(out, a.trimPlateau(f, p))
		i = j
	}
	return out
}

// trimPlateau drops the deltas at either end of a plateau that ran below
// its rate: the flow starting or stopping inside them, which a bin of
// PlateauBin averages away but the plateau's time span must not include.
func (a *analysis) trimPlateau(f *flowInfo, p plateau) plateau {
	d := func(i int) *flowDelta { return &a.flows.deltas[f.deltas[i]] }
	low := func(i int) bool {
		dt := d(i).toNs - d(i).fromNs
		return dt <= 0 || float64(d(i).bytes)*8e9/float64(dt) < (1-a.opt.FlowCapBand)*p.meanBps
	}
	for p.first < p.last && low(p.first) {
		p.first++
	}
	for p.last > p.first && low(p.last) {
		p.last--
	}
	return p
}

func (a *analysis) flowCapFinding(f *flowInfo, p plateau) (Finding, bool) {
	d := func(i int) *flowDelta { return &a.flows.deltas[f.deltas[i]] }
	fromNs, toNs := d(p.first).fromNs, d(p.last).toNs
	limit := a.limits.FlowLimitBps
	severity, rec := SeverityWarning, recommendFlowCap
	if limit.Known {
		band := a.opt.FlowCapBand * limit.Value
		if p.meanBps < limit.Value-band || p.meanBps > limit.Value+band {
			return Finding{}, false
		}
	} else {
		if p.meanBps < a.opt.FlowPlateauMinBps || p.meanBps < (1-a.opt.FlowCapBand)*f.peakBps {
			return Finding{}, false
		}
		severity, rec = SeverityInfo, recommendFlowPlateau
	}
	var dirs []record.Direction
	for _, dir := range bothDirections {
		if hasDirection(f.last, dir) {
			dirs = append(dirs, dir)
		}
	}
	for _, dir := range dirs {
		if a.moved(f.iface, bandwidthCounterOf(dir), fromNs, toNs) {
			return Finding{}, false
		}
	}
	if a.moved(f.iface, counters.PPSAllowanceExceeded, fromNs, toNs) {
		return Finding{}, false
	}
	fromNs, toNs = a.refineWithEvents(f, p, dirs, fromNs, toNs)
	fd := a.newFindingNs(KindFlowAtCap, severity, f.iface, fromNs, toNs)
	if len(dirs) == 1 {
		fd.Direction = dirs[0].String()
	}
	// What the bins' medians leave out: the mean over the plateau, and how
	// much of its time the flow spent at its rate (the rest dips, as a
	// TCP flow's recovering from a loss at the cap, and the bursts after).
	var bytes, packets uint64
	var atRateNs, spanNs int64
	for i := p.first; i <= p.last; i++ {
		bytes += d(i).bytes
		packets += d(i).packets
		if dt := d(i).toNs - d(i).fromNs; dt > 0 {
			spanNs += dt
			if math.Abs(float64(d(i).bytes)*8e9/float64(dt)-p.meanBps) <= a.opt.FlowCapBand*p.meanBps {
				atRateNs += dt
			}
		}
	}
	lo, hi := a.g.span(fromNs-1, toNs)
	var ifaceBytes float64
	for _, dir := range dirs {
		if fs := a.series(f.iface, dir); fs != nil {
			ifaceBytes += float64(sumUint(fs.bytes, lo, hi))
		}
	}
	durS := float64(toNs-fromNs) / 1e9
	fd.Evidence = append(fd.Evidence,
		ev("plateau_mean_bps", p.meanBps, "bps"),
		ev("plateau_cv", p.cv, "ratio"),
		ev("plateau_throughput_bps", float64(bytes)*8e9/float64(max(spanNs, 1)), "bps"),
		ev("time_at_plateau_rate_share", float64(atRateNs)/float64(max(spanNs, 1)), "ratio"),
		ev("plateau_duration_s", durS, "s"),
		ev("drain_intervals", float64(p.last-p.first+1), "count"),
		ev("flow_peak_bps", f.peakBps, "bps"))
	if limit.Known {
		fd.Evidence = append(fd.Evidence, ev("flow_limit_bps", limit.Value, "bps"), ev("share_of_flow_limit", p.meanBps/limit.Value, "ratio"))
	}
	fd.FlowsRankedBy = rankBytes
	fd.Flows = []FlowShare{{Proto: record.ProtoName(f.key.Proto), Src: f.key.Src.String(), Dst: f.key.Dst.String(),
		Service: serviceName(f.last.Service), Bytes: bytes, Packets: packets, MeanSize: meanSize(bytes, packets),
		MinSize: f.last.MinSize, MaxSize: f.last.MaxSize, Share: min(share(float64(bytes), ifaceBytes), 1), Source: sourceSnapshots}}
	if limit.Known {
		fd.Summary = fmt.Sprintf("%s %s -> %s ran flat at %s (CV %.3f) for %s, %.0f%% of the %s per-flow limit (%s), while no allowance counter moved",
			record.ProtoName(f.key.Proto), f.key.Src, f.key.Dst, units.BitRate(p.meanBps), p.cv, units.Seconds(durS), 100*p.meanBps/limit.Value,
			units.BitRate(limit.Value), limit.Source)
	} else {
		fd.Summary = fmt.Sprintf("%s %s -> %s ran flat at its maximum, %s (CV %.3f), for %s while no allowance counter moved; per-flow limit unknown",
			record.ProtoName(f.key.Proto), f.key.Src, f.key.Dst, units.BitRate(p.meanBps), p.cv, units.Seconds(durS))
	}
	fd.Recommendation = rec
	return fd, true
}

func bandwidthCounterOf(dir record.Direction) string {
	if dir == record.Ingress {
		return counters.BwInAllowanceExceeded
	}
	return counters.BwOutAllowanceExceeded
}

// refineWithEvents moves the plateau's ends, known to a drain interval, to a
// fine window: walking from each end outward over the flow's window events
// for as long as they are contiguous and at the plateau's rate (within
// FlowCapBand of its mean).
func (a *analysis) refineWithEvents(f *flowInfo, p plateau, dirs []record.Direction, fromNs, toNs int64) (int64, int64) {
	d := func(i int) *flowDelta { return &a.flows.deltas[f.deltas[i]] }
	startLo, startHi := d(p.first).fromNs, d(p.first).toNs
	if p.first > 0 {
		startLo = d(p.first - 1).fromNs
	}
	endLo, endHi := d(p.last).fromNs, d(p.last).toNs
	if p.last+1 < len(f.deltas) {
		endHi = d(p.last + 1).toNs
	}
	atRate := func(e record.WindowEvent) bool {
		return e.WidthNs > 0 && float64(e.Bytes)*8e9/float64(e.WidthNs) >= (1-a.opt.FlowCapBand)*p.meanBps
	}
	for _, dir := range dirs {
		evs := a.flowEvents(f, dir, startLo, startHi)
		if n := len(evs); n > 0 && evs[n-1].StartNs+2*evs[n-1].WidthNs >= startHi && atRate(evs[n-1]) {
			k := n - 1
			for k > 0 && atRate(evs[k-1]) && evs[k-1].StartNs+evs[k-1].WidthNs == evs[k].StartNs {
				k--
			}
			fromNs = evs[k].StartNs
		}
		evs = a.flowEvents(f, dir, endLo, endHi)
		if len(evs) > 0 && evs[0].StartNs <= endLo+evs[0].WidthNs && atRate(evs[0]) {
			k := 0
			for k+1 < len(evs) && atRate(evs[k+1]) && evs[k].StartNs+evs[k].WidthNs == evs[k+1].StartNs {
				k++
			}
			toNs = evs[k].StartNs + evs[k].WidthNs
		}
	}
	return fromNs, toNs
}

// flowEvents returns one flow's window events starting in [fromNs, toNs).
func (a *analysis) flowEvents(f *flowInfo, dir record.Direction, fromNs, toNs int64) []record.WindowEvent {
	evs := a.events[seriesKey{f.iface, dir}]
	i, _ := slices.BinarySearchFunc(evs, fromNs, func(e record.WindowEvent, t int64) int { return cmp.Compare(e.StartNs, t) })
	var out []record.WindowEvent
	for ; i < len(evs) && evs[i].StartNs < toNs; i++ {
		if evs[i].Key == f.key {
			out = append(out, evs[i])
		}
	}
	return out
}
