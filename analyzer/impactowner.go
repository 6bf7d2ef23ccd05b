package analyzer

// impactWindow is the stretch a finding's impact is measured over on
// iface: its span [fromNs, toNs) and its retransmission tail to endNs;
// drops is what its counter rose by, 0 for a finding without an incident.
type impactWindow struct {
	iface               string
	fromNs, toNs, endNs int64
	drops               uint64
}

// impactOwner is the finding whose impact counts an observation of iface
// over (p, t] (a flow's snapshot interval, a bucket), one for each where
// several findings' windows hold it: of those with an incident, the ones
// whose span holds it, and of them the one that counted the most drops
// (the earliest to start of equals); -1 where no incident's window holds it (then
// any finding's that does counts it). A snapshot says what a flow lost
// and waited over its 100 ms, not when: a victim's catch-up 17 ms after
// a burst's queue emptied, one drop of its own, had counted the 36
// segments the burst cost, and so had the victim's own overflows before
// the burst (the snapshot straddled the burst's start): "dropped: 36"
// three times, two of them warnings (the lab's impact-inbound beside CPU
// load, its allowance given).
func impactOwner(ws []impactWindow, iface string, p, t int64) int {
	best, bestSpan := -1, false
	for j, w := range ws {
		if w.drops == 0 || w.iface != iface || p >= w.endNs || t <= w.fromNs {
			continue
		}
		span := p < w.toNs && t > w.fromNs
		if best < 0 || span && !bestSpan ||
			span == bestSpan && (w.drops > ws[best].drops || w.drops == ws[best].drops && w.fromNs < ws[best].fromNs) {
			best, bestSpan = j, span
		}
	}
	return best
}
