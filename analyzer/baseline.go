package analyzer

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/units"
)

// baselineFindings looks, per direction, at the aggregate rate of the
// interfaces with bandwidth counters in BaselineBin bins: a stretch at least
// BaselineAboveFactor x baseline followed (within one bin) by at least
// PlateauMin within BaselineBand of the baseline, while the direction's bw
// counter moved, is the end of burst credits. The fall is then placed to the
// fine window by a change point. It returns the findings and, per
// direction, the fine windows they explain.
func (a *analysis) baselineFindings() ([]Finding, map[record.Direction][][2]int) {
	explained := make(map[record.Direction][][2]int)
	base := a.limits.BaselineBps
	if !base.Known {
		return nil, explained
	}
	binK := max(int(int64(a.opt.BaselineBin)/a.g.widthNs), 1)
	nb := a.g.n / binK
	need := int((int64(a.opt.PlateauMin) + int64(a.opt.BaselineBin) - 1) / int64(a.opt.BaselineBin))
	binS := float64(binK) * float64(a.g.widthNs) / 1e9
	var out []Finding
	for _, bc := range bandwidthCounters {
		var ifaces []string
		var series []*fineSeries
		for _, iface := range a.ifaces {
			if fs := a.series(iface, bc.dir); fs != nil && a.hasCounter(iface, bc.name) {
				ifaces = append(ifaces, iface)
				series = append(series, fs)
			}
		}
		if len(series) == 0 {
			continue
		}
		bytesAt := func(i int) float64 {
			var s float64
			for _, fs := range series {
				s += float64(fs.bytes[i])
			}
			return s
		}
		rates := make([]float64, nb)
		for b := range rates {
			rates[b] = sumIn(bytesAt, b*binK, (b+1)*binK) * 8 / binS
		}
		above := func(b int) bool { return rates[b] >= a.opt.BaselineAboveFactor*base.Value }
		about := func(b int) bool { return abs(rates[b]-base.Value) <= a.opt.BaselineBand*base.Value }
		lastAbove, runStart := -1, -1
		for b := 0; b < nb; b++ {
			if above(b) {
				if lastAbove < 0 || lastAbove != b-1 {
					runStart = b
				}
				lastAbove = b
				continue
			}
			if !about(b) || lastAbove < 0 || b-lastAbove > 2 {
				continue
			}
			e := b
			for e+1 < nb && about(e+1) {
				e++
			}
			lo, hi := b*binK, (e+1)*binK
			var delta uint64
			for _, iface := range ifaces {
				for _, j := range a.jumps(iface, bc.name) {
					if j.FromNs < a.g.startNs(hi) && j.ToNs > a.g.startNs(lo) {
						delta += j.Delta
					}
				}
			}
			if e-b+1 >= need && delta > 0 {
				aboveMean := sumIn(func(i int) float64 { return rates[i] }, runStart, lastAbove+1) / float64(lastAbove+1-runStart)
				fall := a.changePoint(bytesAt, lastAbove*binK, (b+1)*binK, (aboveMean+base.Value)/2)
				explained[bc.dir] = append(explained[bc.dir], [2]int{fall, hi})
				out = append(out, a.baselineFinding(bc.dir, bc.name, ifaces, bytesAt, fall, hi, aboveMean, delta))
			}
			b, lastAbove = e, -1
		}
	}
	return out, explained
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// changePoint returns the first window after the prefix of [lo, hi) that
// stands highest above mid (in bits/s): where a high rate fell to a low one.
func (a *analysis) changePoint(bytesAt func(int) float64, lo, hi int, midBps float64) int {
	mid := midBps * float64(a.g.widthNs) / 8e9
	best, sum, at := 0.0, 0.0, lo
	for i := lo; i < hi; i++ {
		sum += bytesAt(i) - mid
		if sum > best {
			best, at = sum, i+1
		}
	}
	return at
}

func (a *analysis) baselineFinding(dir record.Direction, counter string, ifaces []string, bytesAt func(int) float64,
	lo, hi int, aboveMean float64, delta uint64) Finding {
	base := a.limits.BaselineBps.Value
	f := a.newFinding(KindBaselineExhausted, SeverityCritical, strings.Join(ifaces, ","), []record.Direction{dir}, lo, hi)
	durS := float64(hi-lo) * float64(a.g.widthNs) / 1e9
	plateau := sumIn(bytesAt, lo, hi) * 8 / durS
	f.Evidence = append(f.Evidence,
		ev(counter, float64(delta), "packets"),
		ev("rate_before_bps", aboveMean, "bps"),
		ev("rate_after_bps", plateau, "bps"),
		ev("baseline_bps", base, "bps"),
		ev("after_share_of_baseline", plateau/base, "ratio"),
		ev("duration_s", durS, "s"))
	if l := a.limits.BurstBps; l.Known {
		f.Evidence = append(f.Evidence, ev("burst_bps", l.Value, "bps"))
	}
	f.FlowsRankedBy = rankBytes
	var flows []FlowShare
	for _, iface := range ifaces {
		flows = append(flows, a.culprits(iface, []record.Direction{dir}, lo, hi, nil, rankBytes, nil)...)
	}
	if len(ifaces) > 1 {
		total := sumIn(bytesAt, lo, hi)
		for i := range flows {
			flows[i].Share = share(float64(flows[i].Bytes), total)
		}
		slices.SortStableFunc(flows, func(x, y FlowShare) int { return cmp.Compare(y.Bytes, x.Bytes) })
		flows = flows[:min(len(flows), a.opt.TopFlows)]
	}
	f.Flows = nonNil(flows)
	f.Summary = fmt.Sprintf("%s throughput fell from %s to %s, the %s baseline of %s, and stayed there for %s while %s rose by %s: burst credits ran out; %s",
		dir, units.BitRate(aboveMean), units.BitRate(plateau), a.instanceType(), units.BitRate(base), units.Seconds(durS), counter, units.Count(delta), topFlowText(f.Flows))
	f.Recommendation = recommendBaseline
	return f
}
