package analyzer

import (
	"fmt"
	"slices"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
)

// foldUnseenPPS folds into a microburst_in finding each pps_exceeded one
// whose traffic, as the host saw it, explains under a quarter of its drops
// (Finding.ppsUnseen) and whose every jump was read with one of the
// microburst_in incident's. Inbound traffic reaches the host after the
// device shaped it: a 2 MB burst over both allowances arrived at 4 packets
// a millisecond, under the packet-rate allowance, and the pps finding
// named the TCP download whose bunch stood out in packets just before the
// read, a victim, 50 ms after the burst (the lab's impact-inbound: 7 of
// its 12 kept bundles, analyzed with their allowances). Both counters moved at the same reads for one cause: one
// incident, the bandwidth finding's, which says the pps counter moved
// with it.
func foldUnseenPPS(out []Finding) []Finding {
	var fold []int
	for i, p := range out {
		if p.Kind != KindPPSExceeded || !p.ppsUnseen || p.Incident == nil {
			continue
		}
		for j := range out {
			b := &out[j]
			if b.Kind != KindMicroburstIn || b.Interface != p.Interface || b.Incident == nil || !readWith(p.Incident.Timeline, b.Incident.Timeline) {
				continue
			}
			b.Evidence = append(b.Evidence, ev(counters.PPSAllowanceExceeded, float64(p.Incident.Delta), "packets"))
			b.Summary += fmt.Sprintf("; %s rose by %d at the same reads: inbound packets reach the host only after the device shaped them, so the packet rate it saw cannot show what was dropped",
				counters.PPSAllowanceExceeded, p.Incident.Delta)
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
