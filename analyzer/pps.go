package analyzer

import (
	"fmt"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/units"
)

var bothDirections = []record.Direction{record.Ingress, record.Egress}

// ppsFindings locates every jump of pps_allowance_exceeded in the packet rate
// of both directions together (the allowance is bidirectional), and says how
// small the packets were and who sent them.
func (a *analysis) ppsFindings() []Finding {
	var out []Finding
	sec := float64(a.g.widthNs) / 1e9
	for _, iface := range a.ifaces {
		if !a.hasCounter(iface, counters.PPSAllowanceExceeded) {
			continue
		}
		in, eg := a.seriesOrEmpty(iface, record.Ingress), a.seriesOrEmpty(iface, record.Egress)
		packetsAt := func(i int) float64 { return float64(in.packets[i] + eg.packets[i]) }
		bytesAt := func(i int) float64 { return float64(in.bytes[i] + eg.bytes[i]) }
		var levels []level
		if a.opt.PPSAllowance > 0 {
			levels = append(levels, level{"pps_allowance", a.opt.PPSAllowance * sec, a.opt.PPSAllowance})
		}
		jumps := a.jumps(iface, counters.PPSAllowanceExceeded)
		spec := incidentSpec{counter: counters.PPSAllowanceExceeded, val: packetsAt, apart: true,
			excess: func(s span) float64 {
				return sumIn(func(i int) float64 { return max(packetsAt(i)-s.level, 0) }, s.lo, s.hi)
			},
			locate: func(lo, hi int) span { return a.locate(packetsAt, lo, hi, levels...) },
			over: func(lo, hi int, last span) bool {
				if len(levels) == 0 {
					return stayedAt(packetsAt, lo, hi, last)
				}
				// Sent in batches, an overshoot is over the allowance as a
				// rate, not in every window: one incident while the traffic
				// between two jumps fell short of it by at most what a
				// bucket refills in IncidentRefill.
				return shortOfAtMost(packetsAt, lo, hi, levels[0].perWindow, levels[0].perSecond*a.opt.IncidentRefill.Seconds())
			}}
		lag := a.counterLagFor(iface, jumps, lagTraffic{locate: spec.locate, val: packetsAt, perDrop: func(int, int) float64 { return 1 }})
		spec.lag = lag
		given := len(levels) > 0
		if !given && lag.overshootLevel > 0 {
			// A long overshoot the lag was learned from: located over
			// what passed through it, as over an allowance given.
			levels = append(levels, level{"learned_pps", lag.overshootLevel, lag.overshootLevel / sec})
		}
		if len(levels) > 0 {
			spec.explained = overAllowance
		}
		incs := a.incidents(spec, jumps)
		if !given {
			if rate := a.passedWhileMoving(incs, packetsAt); rate > 0 {
				// No allowance known: what passed while the counter kept
				// moving stands for it, so an overshoot sent in batches
				// stays one incident while the traffic stays over it.
				spec.over = func(lo, hi int, _ span) bool {
					return shortOfAtMost(packetsAt, lo, hi, rate*sec, rate*a.opt.IncidentRefill.Seconds())
				}
				incs = a.incidents(spec, jumps)
			}
		}
		for _, inc := range incs {
			s := inc.span
			f := a.newFinding(KindPPSExceeded, a.incidentSeverity(inc), iface, nil, s.lo, s.hi)
			f.Incident = a.incidentInfo(inc, counters.PPSAllowanceExceeded, lag, packetsAt, 1, "pps")
			dur := float64(s.hi-s.lo) * sec
			packets, bytes := sumIn(packetsAt, s.lo, s.hi), sumIn(bytesAt, s.lo, s.hi)
			peak, _ := peakIn(packetsAt, s.lo, s.hi)
			f.Evidence = append(f.Evidence, incidentEvidence(f.Incident)...)
			f.Evidence = append(f.Evidence,
				ev("peak_fine_window_pps", peak/sec, "pps"),
				ev("span_mean_pps", share(packets, dur), "pps"),
				ev("span_mean_packet_size", share(bytes, packets), "bytes"),
				ev("span_syns", float64(sumUint(in.syns, s.lo, s.hi)+sumUint(eg.syns, s.lo, s.hi)), "count"),
				ev("level_pps", s.levelPerSecond, "pps"))
			f.Evidence = append(f.Evidence, a.sizeEvidence(iface, a.g.startNs(s.lo), a.g.startNs(s.hi))...)
			f.FlowsRankedBy = rankPackets
			f.Flows, f.Victims = a.incidentFlows(iface, bothDirections, inc, nil, rankPackets, nil)
			learned := ""
			if !given {
				f.Incident.LearnedAllowance = a.learnAllowance(inc, packetsAt, func(d uint64) float64 { return float64(d) }, 1, "pps")
				if l := f.Incident.LearnedAllowance; l != nil {
					learned = learnedText(l, "--pps-allowance", fmt.Sprintf("%.0f", l.Value))
				}
			}
			f.Summary = fmt.Sprintf("%s; over %s the packet rate (both directions) reached %s per %s window, mean packet size %.0f bytes; %s; %s%s",
				jumpsText(f.Incident), units.Seconds(dur), units.PacketRate(peak/sec), fmtWindow(a.g.widthNs), share(bytes, packets),
				topFlowText(f.Flows), lagText(f.Incident), learned)
			f.Summary += victimsText(f.Victims, f.Incident)
			f.Recommendation = recommendPPS
			f.ppsUnseen = !explainsDrops(spec.excess(s), inc.delta)
			out = append(out, f)
		}
	}
	return out
}

func sumUint(v []uint64, lo, hi int) uint64 {
	var s uint64
	for _, x := range v[lo:hi] {
		s += x
	}
	return s
}

// sizeEvidence is the packet-size mix of the size slices overlapping
// [fromNs, toNs), both directions: the share of each non-empty class.
func (a *analysis) sizeEvidence(iface string, fromNs, toNs int64) []Evidence {
	var counts [record.NumSizeClasses]uint64
	var total uint64
	for _, s := range a.rec.Sizes {
		if s.Interface != iface || s.StartNs >= toNs || s.StartNs+max(s.WidthNs, 1) <= fromNs {
			continue
		}
		for i, v := range s.Counts {
			counts[i] += v
			total += v
		}
	}
	var out []Evidence
	for i, v := range counts {
		if v > 0 {
			out = append(out, ev("size_share_"+record.SizeClassNames[i], float64(v)/float64(total), "ratio"))
		}
	}
	return out
}
