package analyzer

import (
	"fmt"
	"slices"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
)

// foldInboundPPS folds into a microburst_in finding each pps_exceeded one
// whose every jump was read with one of the microburst_in incident's, and
// whose traffic, as the host saw it, explains under a quarter of its
// drops (Finding.ppsUnseen), is led by the same flow or a victim, came
// after the microburst_in's, held it, or came before it and was read only
// with its first jump. Inbound traffic reaches the host after the
// device shaped it: a 2 MB burst over both allowances arrived at 4 packets
// a millisecond, under the packet-rate allowance, and the pps finding
// named the TCP download whose bunch stood out in packets just before the
// read, a victim, 50 ms after the burst (the lab's impact-inbound: 7 of
// its 12 kept bundles, analyzed with their allowances). Both counters moved at the same reads for one cause: one
// incident, the bandwidth finding's, which says the pps counter moved
// with it. The host may see the packet rate's excess too: a burst's head,
// before the device's queue, or the victims' bunches after it, over a
// bucket the burst left short. Led by the same flow or a victim, at the
// same reads, or after the burst's traffic at reads the burst's incident
// counts as its own, it is the same cause (the lab's impact-inbound: 43
// drops read with the burst's first jump, a second finding naming the
// burst at its start; 2 and 5 read with the jump that counted the
// download's bunches after it, a second finding naming the download).
func foldInboundPPS(out []Finding) []Finding {
	var fold []int
	for i, p := range out {
		if p.Kind != KindPPSExceeded || p.Incident == nil {
			continue
		}
		for j := range out {
			b := &out[j]
			if b.Kind != KindMicroburstIn || b.Interface != p.Interface || b.Incident == nil {
				continue
			}
			why := ": inbound packets reach the host only after the device shaped them, so the packet rate it saw cannot show what was dropped"
			switch {
			case !readWith(p.Incident.Timeline, b.Incident.Timeline):
				if !crossedFirst(p, *b) {
					continue
				}
				why = ", by the same traffic, from a read before: its packet rate crossed that allowance first"
			case p.ppsUnseen:
			case ledFrom(p, *b):
				why = ", by the same traffic"
			case p.StartOffsetS >= b.EndOffsetS:
				// Its traffic came after the burst's, and its jumps are
				// ones the burst's incident counts as its own: the
				// traffic behind the burst.
				why = ", by the traffic behind it"
			case p.StartOffsetS < b.EndOffsetS && p.EndOffsetS > b.StartOffsetS:
				// Its traffic held the burst's, as the host saw it:
				// whoever led it by packets (a download's bunches, the
				// burst's survivors 145 packets of 1,472 bytes), both
				// counters moved at the same reads for the burst (the
				// lab's impact-inbound, its allowances given: 807
				// drops over 113 ms from 65 ms before the burst, named
				// for the download).
				why = ", over the burst's traffic"
			case p.EndOffsetS <= b.StartOffsetS && readWith(p.Incident.Timeline, b.Incident.Timeline[:1]):
				// Before the burst as the host saw it, and shown only
				// with its first drops: the device counted them as the
				// burst arrived, before its queue let the host see it
				// (the lab's impact-inbound, no allowance known: 69
				// drops read with the burst's first 819, put on a
				// download's 40-packet bunch 20 ms before the burst was
				// sent, whose own bucket it could not have emptied).
				why = ", as the burst arrived"
			default:
				continue
			}
			b.Evidence = append(b.Evidence, ev(counters.PPSAllowanceExceeded, float64(p.Incident.Delta), "packets"))
			b.Summary += fmt.Sprintf("; %s rose by %d at the same reads%s", counters.PPSAllowanceExceeded, p.Incident.Delta, why)
			if severityRank(p.Severity) > severityRank(b.Severity) {
				b.Severity = p.Severity
			}
			fold = append(fold, i)
			break
		}
	}
	for _, i := range slices.Backward(fold) {
		out = slices.Delete(out, i, i+1)
	}
	return out
}

// crossedFirst tells whether pps_exceeded finding p is burst b's traffic
// crossing the packet-rate allowance before the bandwidth one: led by
// b's flow, within b's span as the host saw it, its first jump read
// before b's first and none after b's last. A 2 MB burst at 200 Mbit/s
// emptied the lab's packet-rate bucket within milliseconds and its 1 MiB
// byte bucket 40 ms later: the pps counter moved a read earlier, and the
// burst was named twice (2 of 8 fresh impact-inbound runs, both ways).
func crossedFirst(p, b Finding) bool {
	pt, bt := p.Incident.Timeline, b.Incident.Timeline
	if len(pt) == 0 || len(bt) == 0 || len(p.Flows) == 0 || len(b.Flows) == 0 {
		return false
	}
	return sameFlow(p.Flows[0], b.Flows[0]) &&
		p.StartOffsetS >= b.StartOffsetS && p.EndOffsetS <= b.EndOffsetS &&
		pt[0].Time.Before(bt[0].Time) && !pt[len(pt)-1].Time.After(bt[len(bt)-1].Time)
}

// readWith tells whether every jump of some was read with one of all's
// (the same read saw both counters move).
func readWith(some, all []CounterJump) bool {
	for _, s := range some {
		if !slices.ContainsFunc(all, func(a CounterJump) bool { return a.Time.Equal(s.Time) }) {
			return false
		}
	}
	return len(some) > 0
}

// ledFrom tells whether finding p's first flow is b's first or one of its
// victims: the same traffic.
func ledFrom(p, b Finding) bool {
	if len(p.Flows) == 0 {
		return false
	}
	same := func(f FlowShare) bool { return sameFlow(f, p.Flows[0]) }
	return len(b.Flows) > 0 && same(b.Flows[0]) || slices.ContainsFunc(b.Victims, same)
}

// sameFlow tells whether two rows name one flow.
func sameFlow(x, y FlowShare) bool { return x.Src == y.Src && x.Dst == y.Dst }
