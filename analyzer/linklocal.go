package analyzer

import (
	"fmt"
	"strings"
	"time"

	"github.com/enaprobe/enaprobe/bpf/countrules"
	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/units"
)

// linkLocalDirection is the direction an interface sees the packets sent to
// link-local services in: the limit is on traffic to the services
// (AWS-LIMITS.md), and counting their answers too would count each request
// twice. On an ENA interface that is egress; on the host side of a
// container's veth, requests arrive on ingress. The flows tell: the
// direction of those whose destination is a service, by packets.
func (a *analysis) linkLocalDirection(iface string) record.Direction {
	var packets [record.NumDirections]uint64
	for i := range a.flows.flows {
		f := &a.flows.flows[i]
		if f.iface != iface || countrules.ServiceOf(f.key.Dst.Addr(), a.rec.Meta.VPCResolver) == record.ServiceNone {
			continue
		}
		for _, d := range bothDirections {
			if hasDirection(f.last, d) {
				packets[d] += f.packets
			}
		}
	}
	if packets[record.Ingress] > packets[record.Egress] {
		return record.Ingress
	}
	return record.Egress
}

// linkLocalFindings reports jumps of linklocal_allowance_exceeded, located
// where the link-local packet rate went over the per-interface limit, and
// stretches where the 1 s rate stood above LinkLocalHotShare of it with no
// jump.
func (a *analysis) linkLocalFindings() []Finding {
	var out []Finding
	for _, iface := range a.ifaces {
		fs := a.seriesOrEmpty(iface, a.linkLocalDirection(iface))
		var exceeded []Finding
		if a.hasCounter(iface, counters.LinklocalAllowanceExceeded) {
			exceeded = a.linkLocalExceeded(iface, fs)
		}
		out = append(out, exceeded...)
		out = append(out, a.linkLocalHot(iface, fs, exceeded)...)
	}
	return out
}

func (a *analysis) linkLocalExceeded(iface string, fs *fineSeries) []Finding {
	sec := float64(a.g.widthNs) / 1e9
	limit := level{"link_local_limit", a.opt.LinkLocalPPS * sec, a.opt.LinkLocalPPS}
	packetsAt := func(i int) float64 { return float64(fs.linkLocalAt(i)) }
	rolling := make([]float64, a.g.n+1) // prefix sums
	for i := range a.g.n {
		rolling[i+1] = rolling[i] + packetsAt(i)
	}
	// A mild overshoot (1,100 pps against 1,024) is over the limit as a
	// rate, not in every 1 ms window: a window with link-local packets is
	// over it when the rate over the lagWindow up to it is. Trailing, so
	// that the last windows of the overshoot count; short, so that the
	// windows after it do not (at 1,500 pps, 7 ms of them would).
	lagWindow := max(int(int64(20*time.Millisecond)/a.g.widthNs), 1)
	// overIn: the link-local packets of [lo, hi) are over the limit, for
	// a stretch of n windows.
	overIn := func(lo, hi, n int) bool {
		return rolling[hi]-rolling[lo] >= a.opt.LinkLocalPPS*float64(n)*sec
	}
	over := func(i int) bool {
		lo := max(i+1-lagWindow, 0)
		return packetsAt(i) > 0 && overIn(lo, i+1, i+1-lo)
	}
	// leads: the window starts a lagWindow over the limit, as a flood's
	// first packet does.
	leads := func(i int) bool {
		return packetsAt(i) > 0 && overIn(i, min(i+lagWindow, a.g.n), lagWindow)
	}
	refill := a.opt.LinkLocalPPS * a.opt.IncidentRefill.Seconds()
	jumps := a.jumps(iface, counters.LinklocalAllowanceExceeded)
	spec := incidentSpec{counter: counters.LinklocalAllowanceExceeded,
		locate:    func(lo, hi int) span { return a.locate(packetsAt, lo, hi, limit) },
		explained: func(s span) bool { return s.levelName == limit.name },
		// The traffic between the two stayed at the limit, give or take
		// the pauses of a client paced by a busy host: the most it fell
		// short of the limit over any stretch between them is at most
		// IncidentRefill of the limit, the most a burst bucket could have
		// refilled. Two bursts a second apart leave it a second to refill.
		over: func(lo, hi int, _ span) bool {
			return shortOfAtMost(packetsAt, lo, hi, limit.perWindow, a.opt.LinkLocalPPS*a.opt.IncidentRefill.Seconds())
		}}
	// The flood's end, for learning the lag, is its last packet with the
	// rate over the limit.
	lastOver := func(lo, hi int) span {
		s := span{lo: lo, hi: hi, levelName: levelNone}
		for i := hi - 1; i >= lo; i-- {
			if over(i) {
				s.hi, s.levelName, s.level = i+1, limit.name, limit.perWindow
				break
			}
		}
		return s
	}
	lag := a.counterLagFor(iface, jumps, lagTraffic{locate: lastOver, val: packetsAt, perDrop: func(int, int) float64 { return 1 }})
	spec.lag = lag
	if lag.bucketDepth > 0 {
		// The incident starts at the flood's first drop, where the
		// bucket the jumps' timing showed ran dry: not where the flood
		// began (125 ms before at 1,500 pps, 800 ms at 1,100), nor where
		// a look-back from a jump a refresh later cut it.
		spec.start = func(at, hi, lo, floor int) int {
			began := at // the flood began within the look-back
			if b := floorOver(packetsAt, lo, floor, limit.perWindow, refill); lo-b >= lagWindow {
				for began = b; began < lo && !leads(began); began++ {
				}
			}
			if i := firstDrop(packetsAt, began, hi, limit.perWindow, lag.bucketDepth); i >= 0 {
				return i
			}
			return at
		}
	}
	var out []Finding
	for _, inc := range a.incidents(spec, jumps) {
		f := a.newFinding(KindLinkLocalExceeded, a.incidentSeverity(inc), iface, []record.Direction{fs.dir}, inc.lo, inc.hi)
		f.Incident = a.incidentInfo(inc, counters.LinklocalAllowanceExceeded, lag, packetsAt, 1, "pps")
		f.Evidence = append(f.Evidence, incidentEvidence(f.Incident)...)
		f.Evidence = append(f.Evidence, a.linkLocalEvidence(fs, inc.lo, inc.hi)...)
		f.FlowsRankedBy = rankPackets
		f.Flows = a.linkLocalFlows(iface, fs.dir, inc.lo, inc.hi)
		f.Summary = fmt.Sprintf("%s: link-local packets were dropped; %s against %s per interface, peak %s over %s; %s; %s",
			jumpsText(f.Incident), a.linkLocalRates(fs, inc.lo, inc.hi), units.PacketRate(a.opt.LinkLocalPPS), units.PacketRate(f.Incident.Peak.Rate),
			units.Seconds(f.Incident.Peak.WindowS), topFlowText(f.Flows), lagText(f.Incident))
		f.Recommendation = recommendLinkLocal
		a.attachLinkLocalDetail(&f, a.g.startNs(inc.lo), a.g.startNs(inc.hi))
		out = append(out, f)
	}
	return out
}

// linkLocalHot finds the stretches where some 1 s window of link-local
// packets held at least LinkLocalHotShare of the limit, outside exceeded
// findings. The stretch is trimmed to its first and last link-local packet.
func (a *analysis) linkLocalHot(iface string, fs *fineSeries, exceeded []Finding) []Finding {
	k := max(int(int64(time.Second)/a.g.widthNs), 1)
	thr := a.opt.LinkLocalHotShare * a.opt.LinkLocalPPS * float64(k) * float64(a.g.widthNs) / 1e9
	packetsAt := func(i int) float64 { return float64(fs.linkLocalAt(i)) }
	// Window starts i whose [i, i+k) is hot, as runs, with a running sum.
	var runs [][2]int
	var sum float64
	for i := 0; i < k && i < a.g.n; i++ {
		sum += packetsAt(i)
	}
	for i := 0; i < a.g.n; i++ {
		if sum >= thr && thr > 0 {
			if n := len(runs); n > 0 && runs[n-1][1] == i {
				runs[n-1][1] = i + 1
			} else {
				runs = append(runs, [2]int{i, i + 1})
			}
		}
		sum -= packetsAt(i)
		if i+k < a.g.n {
			sum += packetsAt(i + k)
		}
	}
	var out []Finding
	half := thr / float64(k) / 2
	for _, r := range runs {
		lo, hi := r[0], min(r[1]-1+k, a.g.n)
		if x, y, ok := excessSpan(packetsAt, lo, hi, half); ok {
			lo, hi = x, y
		}
		if overlapsFinding(exceeded, a.offsetS(a.g.startNs(lo)), a.offsetS(a.g.startNs(hi))) {
			continue
		}
		f := a.newFinding(KindLinkLocalHot, SeverityWarning, iface, []record.Direction{fs.dir}, lo, hi)
		f.Evidence = append(f.Evidence, a.linkLocalEvidence(fs, lo, hi)...)
		if !a.hasCounter(iface, counters.LinklocalAllowanceExceeded) {
			f.Evidence = append(f.Evidence, ev("counter_available", 0, "bool"))
		}
		f.FlowsRankedBy = rankPackets
		f.Flows = a.linkLocalFlows(iface, fs.dir, lo, hi)
		peak1s := a.peakRateIn(packetsAt, lo, hi, time.Second)
		absorbed := ""
		if peak1s > a.opt.LinkLocalPPS && a.hasCounter(iface, counters.LinklocalAllowanceExceeded) {
			absorbed = fmt.Sprintf(", over it while %s did not move: a burst bucket absorbed it", counters.LinklocalAllowanceExceeded)
		}
		f.Summary = fmt.Sprintf("link-local traffic reached %s over 1 s (%.0f%% of the %s limit%s) for %s; %s; %s",
			units.PacketRate(peak1s), 100*peak1s/a.opt.LinkLocalPPS, units.PacketRate(a.opt.LinkLocalPPS), absorbed, units.Seconds(float64(hi-lo)*float64(a.g.widthNs)/1e9),
			a.linkLocalRates(fs, lo, hi), topFlowText(f.Flows))
		f.Recommendation = recommendLinkLocalHot
		a.attachLinkLocalDetail(&f, a.g.startNs(lo), a.g.startNs(hi))
		out = append(out, f)
	}
	return foldHot(out)
}

// foldHot makes the hot stretches of one interface one finding: the
// hottest, spanning them all, counting them.
func foldHot(fs []Finding) []Finding {
	if len(fs) < 2 {
		return fs
	}
	peak := func(f Finding) float64 {
		for _, e := range f.Evidence {
			if e.Name == "peak_pps_1s" {
				return e.Value
			}
		}
		return 0
	}
	hot := fs[0]
	for _, f := range fs[1:] {
		if peak(f) > peak(hot) {
			hot = f
		}
	}
	first, last := fs[0], fs[len(fs)-1]
	hot.Summary = fmt.Sprintf("%d stretches of hot link-local traffic from %s to %s, the hottest at %s: %s", len(fs),
		fmtOffsetS(first.StartOffsetS), fmtOffsetS(last.EndOffsetS), fmtOffsetS(hot.StartOffsetS), hot.Summary)
	hot.Start, hot.StartOffsetS, hot.End, hot.EndOffsetS = first.Start, first.StartOffsetS, last.End, last.EndOffsetS
	hot.Evidence = append(hot.Evidence, ev("hot_stretches", float64(len(fs)), "count"))
	return []Finding{hot}
}

// linkLocalEvidence is the per-service and total rate over [lo, hi), the
// peak 1 s and short-window rates and the limit.
func (a *analysis) linkLocalEvidence(fs *fineSeries, lo, hi int) []Evidence {
	dur := float64(hi-lo) * float64(a.g.widthNs) / 1e9
	packetsAt := func(i int) float64 { return float64(fs.linkLocalAt(i)) }
	var out []Evidence
	for _, svc := range record.Services {
		col := fs.linkLocal[svc.Index()]
		n := float64(sumUint(col, lo, hi))
		if n > 0 {
			out = append(out, ev(svc.String()+"_pps", n/dur, "pps"))
		}
	}
	return append(out,
		ev("link_local_pps", sumIn(packetsAt, lo, hi)/dur, "pps"),
		ev("peak_pps_1s", a.peakRateIn(packetsAt, lo, hi, time.Second), "pps"),
		ev("peak_pps_short", a.peakRateIn(packetsAt, lo, hi, a.opt.LinkLocalShortWindow), "pps"),
		ev("short_window_s", a.opt.LinkLocalShortWindow.Seconds(), "s"),
		ev("limit_pps", a.opt.LinkLocalPPS, "pps"))
}

// peakRateIn is the highest rate over a window of width w that overlaps
// [lo, hi), sliding one fine window at a time.
func (a *analysis) peakRateIn(val func(int) float64, lo, hi int, w time.Duration) float64 {
	k := max(int(int64(w)/a.g.widthNs), 1)
	from, to := max(lo-k+1, 0), min(hi+k-1, a.g.n)
	best, sum := 0.0, 0.0
	for i := from; i < to; i++ {
		sum += val(i)
		if i-from >= k {
			sum -= val(i - k)
		}
		best = max(best, sum)
	}
	return best / (float64(k) * float64(a.g.widthNs) / 1e9)
}

func (a *analysis) linkLocalRates(fs *fineSeries, lo, hi int) string {
	dur := float64(hi-lo) * float64(a.g.widthNs) / 1e9
	var parts []string
	for _, svc := range record.Services {
		if n := float64(sumUint(fs.linkLocal[svc.Index()], lo, hi)); n > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", svc, units.PacketRate(n/dur)))
		}
	}
	if len(parts) == 0 {
		return "no link-local packet recorded"
	}
	return strings.Join(parts, ", ")
}

// linkLocalFlows ranks the flows to link-local services in [lo, hi) by
// packets.
func (a *analysis) linkLocalFlows(iface string, dir record.Direction, lo, hi int) []FlowShare {
	toService := func(f *flowInfo) bool {
		return countrules.ServiceOf(f.key.Dst.Addr(), a.rec.Meta.VPCResolver) != record.ServiceNone
	}
	return a.culprits(iface, []record.Direction{dir}, lo, hi, nil, rankPackets, toService)
}

// floorOver is the earliest fine window, not before floor, from which
// the traffic up to window lo stayed at perWindow give or take most (as
// shortOfAtMost): scanned back from lo, no stretch fell short by more.
func floorOver(val func(int) float64, lo, floor int, perWindow, most float64) int {
	var sum, least float64 // the deficit of [i, lo), the least of [j, lo) for j > i
	for i := lo - 1; i >= floor; i-- {
		sum += perWindow - val(i)
		if sum-least > most {
			return i + 1
		}
		least = min(least, sum)
	}
	return floor
}

// firstDrop is the first fine window of [lo, hi) where a bucket refilled
// at perWindow and holding depth beyond it, full at lo, drops
// (bucketDrops), -1 where none does.
func firstDrop(val func(int) float64, lo, hi int, perWindow, depth float64) int {
	for i, d := range bucketDrops(val, span{lo: lo, hi: hi, level: perWindow}, depth) {
		if d > 0 {
			return lo + i
		}
	}
	return -1
}

// shortOfAtMost tells whether the traffic of fine windows [lo, hi) fell
// short of perWindow, over any stretch, by at most most: the deficit a
// burst bucket could refill, so an overshoot went on.
func shortOfAtMost(val func(int) float64, lo, hi int, perWindow, most float64) bool {
	short := func(i int) float64 { return perWindow - val(i) }
	x, y, ok := excessSpan(short, lo, hi, 0)
	return !ok || sumIn(short, x, y) <= most
}
