package analyzer

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/units"
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

// tableDrops is the SYNs a table that filled and stayed full refused: all
// those past what the gauge's last read at its high before the first jump
// said was available. That read showed the table up to the longest lag
// and refresh before it: the SYNs are counted from there. Where earlier
// connections' SYNs lie there, or the table freed some while full, the
// drops come out early and the jumps disagree (exactRange).
func (a *analysis) tableDrops(gauges []counters.GaugeValue, synsAt func(int) float64) func(first counters.Jump, hi int) exactDrops {
	return func(first counters.Jump, hi int) exactDrops {
		k := fillRead(gauges, first.FromNs, int64(a.opt.ConntrackFallWindow))
		if k < 0 || gauges[k].Value == 0 {
			return exactDrops{}
		}
		lo := a.g.index(gauges[k].BeforeNs - int64(MaxCounterLag) - int64(MaxCounterRefresh))
		if lo >= hi {
			return exactDrops{}
		}
		return exactDrops{lo: lo, perWin: bucketDrops(synsAt, span{lo: lo, hi: hi}, float64(gauges[k].Value)),
			sinceNs: gauges[k].AfterNs, ok: true}
	}
}

func (a *analysis) conntrackExceeded(iface string) []Finding {
	synsAt := a.synSeries(iface)
	gauges := a.gaugeValues(iface)
	jumps := a.jumps(iface, counters.ConntrackAllowanceExceeded)
	var lag counterLag
	spec := incidentSpec{counter: counters.ConntrackAllowanceExceeded, unseen: true,
		// The drops are SYNs refused: they lie between the first and
		// the last SYN of the look-back and read interval (when the host
		// saw them: inbound ones dropped by the device it never does).
		locate: func(lo, hi int) span {
			s := span{lo: lo, hi: hi, fromNs: a.g.startNs(lo), toNs: a.g.startNs(hi), levelName: levelNone}
			for s.lo < hi && synsAt(s.lo) == 0 {
				s.lo++
			}
			for s.hi > s.lo && synsAt(s.hi-1) == 0 {
				s.hi--
			}
			if s.lo == s.hi {
				s.lo, s.hi = lo, hi
			} else {
				s.levelName = levelSYNs
			}
			return s
		},
		// Between the new connections and their retries (1 s or more later)
		// no SYN may be seen, but the table stays full: one incident.
		over: func(lo, hi int, _ span) bool {
			return tableFull(gauges, a.g.startNs(lo), a.g.startNs(hi)+lag.lookNs)
		}}
	// Inbound SYNs the device refused never reach the host: the SYNs'
	// end then says nothing of the lag.
	var seen func(int) bool
	if in, eg := a.seriesOrEmpty(iface, record.Ingress), a.seriesOrEmpty(iface, record.Egress); sumUint(in.syns, 0, a.g.n) > sumUint(eg.syns, 0, a.g.n) {
		seen = func(i int) bool { return synsAt(i) > 0 }
	}
	lag = a.counterLagFor(iface, jumps, lagTraffic{locate: spec.locate, seen: seen, drops: a.tableDrops(gauges, synsAt)})
	spec.lag = lag
	sec := float64(a.g.widthNs) / 1e9
	var out []Finding
	for _, inc := range sameFill(a.incidents(spec, jumps), gauges, int64(a.opt.ConntrackFallWindow)) {
		// The connections that filled the table were opened from the last
		// read at the gauge's high before the first jump on: they, and the
		// retries of those refused, are the culprits, and the first drop is
		// the first SYN past what that read said was available. Inbound
		// SYNs dropped by the device never reach the host, so the drops
		// may then lie, unseen, in the rest of the incident.
		first, _ := a.certain(inc.jumps[0])
		alo := a.g.index(first - lag.lookNs)
		var availBefore uint64
		hasGauge := false
		if k := fillRead(gauges, inc.jumps[0].FromNs, int64(a.opt.ConntrackFallWindow)); k >= 0 {
			hasGauge = true
			availBefore = gauges[k].Value
			// The read shows the table as it was up to the lag and a
			// refresh before, at its high: no connection was opened
			// over the look-back before it that it did not count, so
			// the SYNs from there on filled the table.
			alo = a.g.index(gauges[k].BeforeNs - lag.lookNs)
			var sum float64
			for i := a.g.index(gauges[k].AfterNs - lag.lookNs); i < inc.hi; i++ {
				// The first drop is in the window that took the sum past
				// what was available, not the one after the last SYN let
				// in: the next SYN may come milliseconds later. Inbound
				// SYNs the device refused the host never sees: there the
				// table was full from that window after.
				sum += synsAt(i)
				if sum > float64(availBefore) || seen != nil && sum == float64(availBefore) {
					if sum == float64(availBefore) {
						i++
					}
					if i < inc.hi {
						inc.lo = i
					}
					break
				}
			}
		}
		alo = min(alo, inc.lo)
		ahi := inc.hi
		f := a.newFinding(KindConntrackExceeded, a.incidentSeverity(inc), iface, nil, inc.lo, inc.hi)
		f.Incident = a.incidentInfo(inc, counters.ConntrackAllowanceExceeded, lag, synsAt, 1, "per_s")
		fromNs, toNs := a.g.startNs(alo), a.g.startNs(ahi)
		attrS := float64(ahi-alo) * sec
		// Every SYN count of the evidence comes from the flows the
		// culprits are ranked from, over the same window.
		f.FlowsRankedBy = rankSYNs
		var st synTotals
		f.Flows, st = a.synSources(iface, fromNs, toNs)
		f.flowsFromNs, f.flowsToNs = fromNs, toNs
		syns := float64(st.first + st.retried)
		firstSYNs, retried := st.first, st.retried
		f.Evidence = append(f.Evidence, incidentEvidence(f.Incident)...)
		f.Evidence = append(f.Evidence,
			ev("attribution_window_s", attrS, "s"),
			ev("syns", syns, "count"),
			ev("syn_rate", share(syns, attrS), "per_s"),
			ev("syns_first", float64(firstSYNs), "count"),
			ev("syns_retried", float64(retried), "count"),
			ev("syns_ingress", float64(st.dir[record.Ingress]), "count"),
			ev("syns_egress", float64(st.dir[record.Egress]), "count"),
			ev("peak_syn_rate", f.Incident.Peak.Rate, "per_s"))
		gaugeText := ""
		if hasGauge {
			lowest := availBefore
			for _, g := range gauges {
				if g.BeforeNs >= fromNs && g.BeforeNs <= toNs+lag.lookNs {
					lowest = min(lowest, g.Value)
				}
			}
			f.Evidence = append(f.Evidence, ev("conntrack_available_before", float64(availBefore), "count"),
				ev("conntrack_available_lowest", float64(lowest), "count"))
			if v, ok := gaugeFrom(gauges, toNs+lag.lookNs); ok {
				f.Evidence = append(f.Evidence, ev("conntrack_available_after", float64(v), "count"))
			}
			f.Gauge = a.gaugeCourse(gauges, fromNs-int64(a.opt.PeakWindow)*10, toNs+lag.lookNs)
			gaugeText = fmt.Sprintf(", when %s connections were free,", units.Count(availBefore))
			gaugeText += fmt.Sprintf(" to the last drop (%s fell to %s)", counters.ConntrackAllowanceAvailable, units.Count(lowest))
		} else {
			gaugeText = " to the last drop"
		}
		f.Summary = fmt.Sprintf("%s: connection tracking was full and new connections were dropped; %s (%s first, %s retried) from %s%s, %s; %s; %s",
			jumpsText(f.Incident), units.Counted(uint64(syns), "SYN"), units.Count(firstSYNs), units.Count(retried), fmtOffsetS(a.offsetS(fromNs)), gaugeText,
			units.EventRate(share(syns, attrS), "SYN/s"), synSourceText(f.Flows), lagText(f.Incident))
		f.Recommendation = recommendConntrack
		out = append(out, f)
	}
	return out
}

// sameFill joins consecutive incidents whose first jumps look back to
// the same fill read: the table filled once from it, and every drop until
// it emptied is of that filling, however the jumps fell apart in time
// (seen beside a CPU-bound process: a gap in the retries split one flood
// in two, both placed from the same first refused SYN).
func sameFill(incs []incident, gauges []counters.GaugeValue, windowNs int64) []incident {
	var out []incident
	lastFill := -1
	for _, inc := range incs {
		k := fillRead(gauges, inc.jumps[0].FromNs, windowNs)
		if n := len(out); n > 0 && k >= 0 && k == lastFill {
			p := &out[n-1]
			p.lo, p.hi = min(p.lo, inc.lo), max(p.hi, inc.hi)
			p.toNs = max(p.toNs, inc.toNs)
			p.delta += inc.delta
			p.peak = max(p.peak, inc.peak)
			if inc.level > p.level {
				p.level, p.levelName, p.levelPerSecond = inc.level, inc.levelName, inc.levelPerSecond
			}
			p.jumps = append(p.jumps, inc.jumps...)
			continue
		}
		out = append(out, inc)
		lastFill = k
	}
	return out
}

// fillRead is the read the table filled from: the last read at the gauge's
// high in the fall that led to the read ending at ns (the one before a
// jump), looking back at most windowNs. It is -1 without a gauge read.
func fillRead(gauges []counters.GaugeValue, ns, windowNs int64) int {
	k, _ := slices.BinarySearchFunc(gauges, ns, func(g counters.GaugeValue, t int64) int { return cmp.Compare(g.AfterNs, t+1) })
	k--
	if k < 0 {
		return -1
	}
	high := k
	for i := k; i > 0 && gauges[i-1].Value >= gauges[i].Value && gauges[k].BeforeNs-gauges[i-1].BeforeNs <= windowNs; i-- {
		if gauges[i-1].Value > gauges[high].Value {
			high = i - 1
		}
	}
	return high
}

// tableFull tells whether every gauge read that began in [fromNs, toNs]
// said no connection was available, and there was one.
func tableFull(gauges []counters.GaugeValue, fromNs, toNs int64) bool {
	n := 0
	for _, g := range gauges {
		if g.BeforeNs < fromNs || g.BeforeNs > toNs {
			continue
		}
		if g.Value != 0 {
			return false
		}
		n++
	}
	return n > 0
}

// gaugeCourse is the gauge's reads in [fromNs, toNs] where its value
// moved by a tenth of its highest or more since the last one kept, with
// the first read, the first at its lowest and the last: its course in a
// dozen points or so, however often it was read.
func (a *analysis) gaugeCourse(gauges []counters.GaugeValue, fromNs, toNs int64) []GaugePoint {
	var in []counters.GaugeValue
	var top uint64
	lowest := -1
	for _, g := range gauges {
		if g.BeforeNs >= fromNs && g.BeforeNs <= toNs {
			in = append(in, g)
			top = max(top, g.Value)
			if lowest < 0 || g.Value < in[lowest].Value {
				lowest = len(in) - 1
			}
		}
	}
	step := max(top/10, 1)
	var out []GaugePoint
	var kept uint64
	for i, g := range in {
		moved := g.Value >= kept+step || g.Value+step <= kept
		if i == 0 || i == lowest || i == len(in)-1 || moved {
			out = append(out, GaugePoint{Time: a.wall(g.BeforeNs), OffsetS: a.offsetS(g.BeforeNs), Value: g.Value})
			kept = g.Value
		}
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
		// The gauge shows the table as late as the counters do: a fall
		// is an exceeded incident's when it came within that
		// incident's look-back after it.
		look := 0.0
		for _, f := range exceeded {
			look = max(look, f.Incident.LookBackS)
		}
		if overlapsFinding(exceeded, a.offsetS(fromNs)-look, a.offsetS(gauges[e.to].BeforeNs)) {
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
		f.Flows, _ = a.synSources(iface, a.g.startNs(s.lo), a.g.startNs(s.hi))
		f.Summary = fmt.Sprintf("%s fell from %s to %s (%.0f%% of its highest, %s) in %s without %s moving; %s",
			counters.ConntrackAllowanceAvailable, units.Count(startV), units.Count(minV), 100*float64(minV)/float64(top), units.Count(top), units.Seconds(fellFor),
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
// flows mean little), ranked by SYNs. A SYN of a 5-tuple that sent one
// before is a retry: the client got no answer (its SYN was dropped) and
// sent it again after 1, 3, 7 s (every second for the first four on
// Linux 6.7+). It returns the first and retried
// SYNs of every flow too.
func (a *analysis) synSources(iface string, fromNs, toNs int64) (out []FlowShare, st synTotals) {
	type peerKey struct {
		proto uint8
		src   netip.Addr
		dst   netip.AddrPort
	}
	type peer struct {
		flowTally
		ports   map[uint16]bool
		flows   int
		retried uint64
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
		retried := t.syns
		if fi := &a.flows.flows[a.flows.ids[t.ref]]; fi.hasSYN && fi.firstSYNNs >= fromNs && fi.firstSYNNs < toNs {
			retried--
		}
		p.retried += retried
		st.first += t.syns - retried
		st.retried += retried
		for _, d := range bothDirections {
			if hasDirection(t.stats, d) {
				st.dir[d] += t.syns
				break
			}
		}
		p.ports[t.ref.key.Src.Port()] = true
		p.flows++
		total += float64(t.syns)
	}
	slices.SortStableFunc(order, func(x, y peerKey) int { return cmp.Compare(byPeer[y].syns, byPeer[x].syns) })
	out = []FlowShare{}
	windowS := float64(toNs-fromNs) / 1e9
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
			SYNsRetried: p.retried, SYNRate: share(float64(p.syns), windowS), Source: sourceSnapshots}
		if p.flows > 1 {
			fs.Flows = p.flows
		}
		out = append(out, fs)
	}
	return out, st
}

// synTotals are the SYNs of every flow of synSources: first and retried,
// and by direction.
type synTotals struct {
	first, retried uint64
	dir            [record.NumDirections]uint64
}

func synSourceText(flows []FlowShare) string {
	if len(flows) == 0 {
		return "no SYN source recorded in the window"
	}
	f := flows[0]
	n := ""
	if f.Flows > 1 {
		n = " over " + units.Counted(f.Flows, "flow")
	}
	return fmt.Sprintf("mostly from %s to %s (%s%s, %s retried, %s, %.0f%%)", f.Src, f.Dst, units.Counted(f.SYNs, "SYN"), n, units.Count(f.SYNsRetried),
		units.EventRate(f.SYNRate, "SYN/s"), 100*f.Share)
}
