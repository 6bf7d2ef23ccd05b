package analyzer

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"github.com/enaprobe/enaprobe/counters"
	"github.com/enaprobe/enaprobe/record"
)

// conntrackFindings reports jumps of conntrack_allowance_exceeded, located
// at the SYN burst that filled the table, and falls of the
// conntrack_allowance_available gauge that did not (yet) reach it.
func (a *analysis) conntrackFindings() []Finding {
	var out []Finding
	for _, iface := range a.ifaces {
		var exceeded []Finding
		if a.hasCounter(iface, counters.ConntrackAllowanceExceeded) {
			exceeded = a.conntrackExceeded(iface)
		}
		out = append(out, exceeded...)
		if a.hasCounter(iface, counters.ConntrackAllowanceAvailable) {
			out = append(out, a.conntrackNearLimit(iface, exceeded)...)
		}
	}
	return out
}

// synSeries is the SYNs of both directions per fine window.
func (a *analysis) synSeries(iface string) func(int) float64 {
	in, eg := a.seriesOrEmpty(iface, record.Ingress), a.seriesOrEmpty(iface, record.Egress)
	return func(i int) float64 { return float64(in.syns[i] + eg.syns[i]) }
}

func (a *analysis) conntrackExceeded(iface string) []Finding {
	synsAt := a.synSeries(iface)
	gauges := a.gaugeValues(iface)
	var spans []span
	for _, j := range a.jumps(iface, counters.ConntrackAllowanceExceeded) {
		readFrom, readTo := a.certain(j)
		lo, hi := a.g.span(readFrom, readTo)
		s := a.locate(synsAt, lo, hi)
		s.fromNs, s.toNs, s.delta = j.FromNs, j.ToNs, j.Delta
		s.readFromNs = readFrom
		// The table filled when the new connections since the previous
		// read used up what it said was available: the first SYN past that
		// is the first one dropped, and the finding starts with it. Inbound
		// SYNs dropped by the device never reach the host, so past the
		// fill the drops may be unseen: they then lie in the rest of the
		// interval.
		if avail, ok := gaugeAt(gauges, j.FromNs); ok && avail > 0 {
			var sum float64
			for i := lo; i < hi; i++ {
				sum += synsAt(i)
				if sum < float64(avail) {
					continue
				}
				fill := i
				if sum == float64(avail) {
					fill = i + 1
				}
				s.lo = max(s.lo, fill)
				if s.lo >= s.hi {
					s.hi = hi
				}
				break
			}
		}
		spans = append(spans, s)
	}
	var out []Finding
	sec := float64(a.g.widthNs) / 1e9
	for _, s := range mergeSpans(spans, a.mergeGapWindows()) {
		f := a.newFinding(KindConntrackExceeded, SeverityCritical, iface, nil, s.lo, s.hi)
		dur := float64(s.hi-s.lo) * sec
		peak, _ := peakIn(synsAt, s.lo, s.hi)
		syns := sumIn(synsAt, s.lo, s.hi)
		f.Evidence = append(f.Evidence,
			ev(counters.ConntrackAllowanceExceeded, float64(s.delta), "packets"),
			ev("sample_interval_s", float64(s.toNs-s.fromNs)/1e9, "s"),
			ev("span_syns", syns, "count"),
			ev("span_syn_rate", share(syns, dur), "per_s"),
			ev("peak_fine_window_syn_rate", peak/sec, "per_s"),
			ev("syns_ingress", float64(sumUint(a.seriesOrEmpty(iface, record.Ingress).syns, s.lo, s.hi)), "count"),
			ev("syns_egress", float64(sumUint(a.seriesOrEmpty(iface, record.Egress).syns, s.lo, s.hi)), "count"))
		if v, ok := gaugeAt(gauges, s.fromNs); ok {
			f.Evidence = append(f.Evidence, ev("conntrack_available_before", float64(v), "count"))
		}
		if v, ok := gaugeFrom(gauges, s.toNs); ok {
			f.Evidence = append(f.Evidence, ev("conntrack_available_after", float64(v), "count"))
		}
		// The connections that filled the table were opened before it was
		// full, and inbound SYNs dropped after are not seen: the culprits
		// are the SYN sources from the read before the jump on.
		ilo, _ := a.g.span(s.readFromNs, s.toNs)
		intervalSYNs := sumIn(synsAt, ilo, s.hi)
		f.Evidence = append(f.Evidence, ev("interval_syns", intervalSYNs, "count"))
		f.FlowsRankedBy = rankSYNs
		f.Flows = a.synSources(iface, a.g.startNs(ilo), a.g.startNs(s.hi))
		f.Summary = fmt.Sprintf("%s rose by %d: connection tracking was full and new connections were dropped; %.0f SYNs seen in the %.0f ms of drops (%s), %.0f since the read before; %s",
			counters.ConntrackAllowanceExceeded, s.delta, syns, dur*1e3, fmtRate(share(syns, dur), "SYN/s"), intervalSYNs, synSourceText(f.Flows))
		f.Recommendation = recommendConntrack
		out = append(out, f)
	}
	return out
}

// gaugeValues returns the successful reads of conntrack_allowance_available
// of an interface, in time order.
func (a *analysis) gaugeValues(iface string) []counters.GaugeValue {
	var out []counters.GaugeValue
	for _, g := range a.changes.Gauges {
		if g.Interface == iface && g.Name == counters.ConntrackAllowanceAvailable {
			out = append(out, g)
		}
	}
	return out
}

// gaugeAt is the value of the last read that ended at or before ns.
func gaugeAt(gauges []counters.GaugeValue, ns int64) (uint64, bool) {
	i, _ := slices.BinarySearchFunc(gauges, ns, func(g counters.GaugeValue, t int64) int { return cmp.Compare(g.AfterNs, t+1) })
	if i == 0 {
		return 0, false
	}
	return gauges[i-1].Value, true
}

// gaugeFrom is the value of the first read that began at or after ns.
func gaugeFrom(gauges []counters.GaugeValue, ns int64) (uint64, bool) {
	i, _ := slices.BinarySearchFunc(gauges, ns, func(g counters.GaugeValue, t int64) int { return cmp.Compare(g.BeforeNs, t) })
	if i == len(gauges) {
		return 0, false
	}
	return gauges[i].Value, true
}

// conntrackNearLimit finds falls of the available-connections gauge: to at
// most ConntrackLowShare of its highest value in the trace, or by at least
// ConntrackFallShare of it within ConntrackFallWindow. The finding spans the
// SYN activity between the read before the fall and the lowest read.
func (a *analysis) conntrackNearLimit(iface string, exceeded []Finding) []Finding {
	gauges := a.gaugeValues(iface)
	if len(gauges) < 2 {
		return nil
	}
	var top uint64
	for _, g := range gauges {
		top = max(top, g.Value)
	}
	if top == 0 {
		return nil
	}
	low := a.opt.ConntrackLowShare * float64(top)
	fall := a.opt.ConntrackFallShare * float64(top)
	windowNs := int64(a.opt.ConntrackFallWindow)
	// A monotonic deque of reads holds the highest value of the last
	// windowNs (linear over the reads).
	var deque []int
	type episode struct{ from, to, minAt int }
	var eps []episode
	for i, g := range gauges {
		for len(deque) > 0 && gauges[deque[0]].BeforeNs < g.BeforeNs-windowNs {
			deque = deque[1:]
		}
		for len(deque) > 0 && gauges[deque[len(deque)-1]].Value <= g.Value {
			deque = deque[:len(deque)-1]
		}
		deque = append(deque, i)
		head := deque[0]
		flagged := float64(g.Value) <= low || float64(gauges[head].Value)-float64(g.Value) >= fall
		if !flagged {
			continue
		}
		if n := len(eps); n > 0 && eps[n-1].to == i-1 {
			eps[n-1].to = i
			if g.Value < gauges[eps[n-1].minAt].Value {
				eps[n-1].minAt = i
			}
			continue
		}
		// The fall began after the last read at the recent high.
		start := head
		for k := i - 1; k > head; k-- {
			if gauges[k].Value >= gauges[head].Value {
				start = k
				break
			}
		}
		eps = append(eps, episode{from: start, to: i, minAt: i})
	}
	synsAt := a.synSeries(iface)
	var out []Finding
	for _, e := range eps {
		fromNs, toNs := gauges[e.from].AfterNs, gauges[e.minAt].BeforeNs
		lo, hi := a.g.span(fromNs, toNs)
		if overlapsFinding(exceeded, a.offsetS(fromNs), a.offsetS(gauges[e.to].BeforeNs)) {
			continue
		}
		s := a.locate(synsAt, lo, hi)
		if s.levelName == levelNone {
			s.lo, s.hi = lo, hi
		}
		f := a.newFinding(KindConntrackNearLimit, SeverityWarning, iface, nil, s.lo, s.hi)
		startV, minV := gauges[e.from].Value, gauges[e.minAt].Value
		fellFor := float64(toNs-fromNs) / 1e9
		syns := sumIn(synsAt, s.lo, s.hi)
		f.Evidence = append(f.Evidence,
			ev("available_highest", float64(top), "count"),
			ev("available_before_fall", float64(startV), "count"),
			ev("available_lowest", float64(minV), "count"),
			ev("lowest_share_of_highest", float64(minV)/float64(top), "ratio"),
			ev("fall_rate", share(float64(startV)-float64(minV), fellFor), "per_s"),
			ev("span_syns", syns, "count"),
			ev("span_syn_rate", share(syns, float64(s.hi-s.lo)*float64(a.g.widthNs)/1e9), "per_s"))
		f.FlowsRankedBy = rankSYNs
		f.Flows = a.synSources(iface, a.g.startNs(s.lo), a.g.startNs(s.hi))
		f.Summary = fmt.Sprintf("%s fell from %d to %d (%.0f%% of its highest, %d) in %.1f s without %s moving; %s",
			counters.ConntrackAllowanceAvailable, startV, minV, 100*float64(minV)/float64(top), top, fellFor,
			counters.ConntrackAllowanceExceeded, synSourceText(f.Flows))
		f.Recommendation = recommendConntrackNear
		out = append(out, f)
	}
	return out
}

func overlapsFinding(fs []Finding, fromS, toS float64) bool {
	for _, f := range fs {
		if f.StartOffsetS < toS && f.EndOffsetS > fromS {
			return true
		}
	}
	return false
}

// synSources groups the flows that sent SYNs in [fromNs, toNs) by source
// address and destination (a SYN flood is one new 5-tuple per SYN, so single
// flows mean little), ranked by SYNs.
func (a *analysis) synSources(iface string, fromNs, toNs int64) []FlowShare {
	type peerKey struct {
		proto uint8
		src   netip.Addr
		dst   netip.AddrPort
	}
	type peer struct {
		flowTally
		ports map[uint16]bool
		flows int
	}
	byPeer := make(map[peerKey]*peer)
	var order []peerKey
	var total float64
	for _, t := range a.flows.snapshotTallies(iface, fromNs, toNs, nil) {
		if t.syns == 0 {
			continue
		}
		k := peerKey{t.ref.key.Proto, t.ref.key.Src.Addr(), t.ref.key.Dst}
		p := byPeer[k]
		if p == nil {
			p = &peer{flowTally: flowTally{ref: t.ref, stats: t.stats, source: sourceSnapshots}, ports: map[uint16]bool{}}
			byPeer[k] = p
			order = append(order, k)
		}
		p.bytes += t.bytes
		p.packets += t.packets
		p.syns += t.syns
		p.ports[t.ref.key.Src.Port()] = true
		p.flows++
		total += float64(t.syns)
	}
	slices.SortStableFunc(order, func(x, y peerKey) int { return cmp.Compare(byPeer[y].syns, byPeer[x].syns) })
	out := []FlowShare{}
	for _, k := range order[:min(len(order), a.opt.TopFlows)] {
		p := byPeer[k]
		src := k.src.String() + ":*"
		if len(p.ports) == 1 {
			src = p.ref.key.Src.String()
		}
		if k.src.Is6() {
			src = "[" + k.src.String() + "]:*"
			if len(p.ports) == 1 {
				src = p.ref.key.Src.String()
			}
		}
		fs := FlowShare{Proto: record.ProtoName(k.proto), Src: src, Dst: k.dst.String(), Bytes: p.bytes,
			Packets: p.packets, SYNs: p.syns, MeanSize: meanSize(p.bytes, p.packets), Share: share(float64(p.syns), total),
			Source: sourceSnapshots}
		if p.flows > 1 {
			fs.Flows = p.flows
		}
		out = append(out, fs)
	}
	return out
}

func synSourceText(flows []FlowShare) string {
	if len(flows) == 0 {
		return "no SYN source recorded in the window"
	}
	f := flows[0]
	n := ""
	if f.Flows > 1 {
		n = fmt.Sprintf(" over %d flows", f.Flows)
	}
	return fmt.Sprintf("mostly from %s to %s (%d SYNs%s, %.0f%%)", f.Src, f.Dst, f.SYNs, n, 100*f.Share)
}
