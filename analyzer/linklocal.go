package analyzer

import (
	"cmp"
	"fmt"
	"slices"
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
	src := lagTraffic{locate: lastOver, val: packetsAt, perDrop: func(int, int) float64 { return 1 }}
	lag := a.counterLagFor(iface, jumps, src)
	counted, countedOK := a.countedDepth(fs, jumps, lag, packetsAt, limit.perWindow, refill)
	if countedOK {
		// With the depth counted, the drops are known packet by packet,
		// and each jump tells its snapshot to a drop's spacing
		// (exactRange): the timing of a share model, which behind a 1 s
		// refresh stated the lab's lag up to 13 ms off, only where that
		// fails. Where in its range the depth lies the count cannot
		// tell, and that shifts every drop alike: the range is widened
		// by as much (7 ms at 76 packets/s over, 1 ms at 476).
		src.drops = a.linkLocalDrops(fs, counted, lag, packetsAt, limit.perWindow, refill)
		if exact := a.counterLagFor(iface, jumps, src); exact.source == lagEstimated {
			shift := int64((counted.to - counted.from) / 2 / counted.excessPerSecond * 1e9)
			exact.lowNs, exact.highNs = max(exact.lowNs-shift, 0), min(exact.highNs+shift, int64(MaxCounterLag))
			exact.lookNs += shift
			exact.shiftNs = max(exact.shiftNs-shift, 0)
			exact.bucketDepth, exact.depthRough = lag.bucketDepth, lag.depthRough
			lag = exact
		}
	}
	spec.lag = lag
	if lag.bucketDepth > 0 || countedOK {
		// The incident starts at the flood's first drop, where the
		// bucket ran dry: not where the flood began (125 ms before at
		// 1,500 pps, 800 ms at 1,100), nor where a look-back from a jump
		// a refresh later cut it. The count bounds the bucket's depth
		// to within a packet or so; the jumps' timing, where many jumps
		// gave it, places the drop within those bounds (a mild flood's
		// first drop moves 13 ms for each packet of depth).
		spec.start = func(s span, lo, floor int) int {
			at, hi := s.lo, s.hi
			// The flood began within the look-back, or before it where
			// it stayed at the limit. A span located further back than
			// the look-back (a read later than the lag) is followed back
			// from its own start: from the look-back's, the flood's
			// start came out after the span's end (found by FuzzCounters).
			began, from := at, min(lo, at)
			if b := floorOver(packetsAt, from, floor, limit.perWindow, refill); from-b >= lagWindow {
				for began = b; began < from && !leads(began); began++ {
				}
			}
			timed := -1
			if lag.bucketDepth > 0 {
				timed = firstDrop(packetsAt, began, hi, limit.perWindow, lag.bucketDepth)
			}
			if !countedOK {
				if timed >= 0 {
					return timed
				}
				return at
			}
			times := a.linkLocalTimes(fs, a.g.startNs(began), a.g.startNs(hi))
			dropAt := func(depth float64) int {
				if drops := packetDrops(times, a.opt.LinkLocalPPS, depth); len(drops) > 0 {
					return a.g.index(drops[0])
				}
				return -1
			}
			// A deeper bucket drops later: where even the shallowest
			// dropped nothing in the look-back, the count says nothing
			// of it; where the deepest did not, its drop is past it.
			earliest, latest := dropAt(counted.from), dropAt(counted.to)
			switch {
			case earliest < 0 && timed >= 0:
				return timed
			case earliest < 0:
				return at
			case latest < 0:
				latest = hi - 1
			}
			if timed >= 0 && !lag.depthRough {
				return min(max(timed, earliest), latest)
			}
			if mid := dropAt((counted.from + counted.to) / 2); mid >= 0 {
				return mid
			}
			return earliest
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

// countedDepth is the depth of a packet bucket refilled at the published
// limit that makes the drops of each flood sum to what its jumps showed: a
// bucket that drops a packet when it holds less than one, full where the
// flood began (followed back while it stayed at the limit, give or take
// refill). Where the limit is known, the count says it far closer than the
// jumps' timing does: the lab's 64 packets came out 62.9 to 64.5 in twenty
// runs behind a 1 s refresh, where the timing of three or four jumps had
// put the first drop of a mild flood (76 packets/s over) up to 45 ms early.
// A flood after whose last jump the counter did not stay still for the
// longest lag and a refresh (the trace ended, or another jump came) may
// not have shown all its drops, and says nothing: false, as where no
// flood does. Where several floods do, the depths of the median one.
func (a *analysis) countedDepth(fs *fineSeries, jumps []counters.Jump, lag counterLag, val func(int) float64, perWindow, refill float64) (depthRange, bool) {
	var depths []depthRange
	floor := 0
	for _, c := range lagClusters(jumps, lag.refreshNs, a.readInterval(fs.iface)) {
		lastPrev, lastRead := a.certain(jumps[c[1]])
		lo := a.floodStart(jumps[c[0]], lag, floor, val, perWindow, refill)
		hi := a.g.index(lastRead)
		floor = hi
		rise := riseOf(jumps[c[0] : c[1]+1])
		// The count is the flood's whole if the counter stayed still for
		// the longest lag and a refresh after its last jump.
		_, stillTo := a.readsSpan(fs.iface)
		if c[1]+1 < len(jumps) {
			stillTo = jumps[c[1]+1].FromNs
		}
		need := lag.highNs + lag.refreshNs
		if lag.source != lagEstimated && lag.source != lagFromOption {
			need = int64(MaxCounterLag) + refreshLook(lag.refreshNs, lag.refreshKnown)
		}
		times := a.linkLocalTimes(fs, a.g.startNs(lo), a.g.startNs(hi))
		if rise == 0 || uint64(len(packetDrops(times, a.opt.LinkLocalPPS, 0))) < rise {
			continue
		}
		// The least depth that drops at most n.
		least := func(n int) float64 {
			x, y := 0.0, float64(len(times))
			for y-x > 0.01 {
				if m := (x + y) / 2; len(packetDrops(times, a.opt.LinkLocalPPS, m)) <= n {
					y = m
				} else {
					x = m
				}
			}
			return y
		}
		excess := float64(len(times))/(float64(times[len(times)-1]-times[0])/1e9) - a.opt.LinkLocalPPS
		if excess <= 0 {
			continue
		}
		depth := depthRange{least(int(rise)), least(int(rise) - 1), excess}
		// Or the last drop came before the last jump's snapshot at the
		// earliest (the read before it less the longest lag).
		if stillTo-lastRead < need {
			if drops := packetDrops(times, a.opt.LinkLocalPPS, depth.from); lag.source != lagEstimated || len(drops) == 0 || drops[len(drops)-1] > lastPrev-lag.highNs {
				continue
			}
		}
		depths = append(depths, depth)
	}
	if len(depths) == 0 {
		return depthRange{}, false
	}
	slices.SortFunc(depths, func(x, y depthRange) int { return cmp.Compare(x.from+x.to, y.from+y.to) })
	return depths[len(depths)/2], true
}

// floodStart is where the flood before a cluster of jumps (first its
// first) began, not before window floor: from the longest lag and a
// refresh before the read ahead of first, followed back while the traffic
// stayed at the limit, give or take refill (floorOver).
func (a *analysis) floodStart(first counters.Jump, lag counterLag, floor int, val func(int) float64, perWindow, refill float64) int {
	from, _ := a.certain(first)
	return floorOver(val, max(a.g.index(from-lag.highNs-lag.refreshNs), floor), floor, perWindow, refill)
}

// depthRange is the depths of a bucket, [from, to), that give one count,
// and the excess over the limit of the flood that gave it, per second.
type depthRange struct{ from, to, excessPerSecond float64 }

// linkLocalDrops is the drops of the flood before a cluster of jumps, as
// exactRange takes them: made by a bucket of the counted depth (the middle
// of its range), full where the flood began (found as countedDepth does).
func (a *analysis) linkLocalDrops(fs *fineSeries, counted depthRange, lag counterLag, val func(int) float64, perWindow, refill float64) func(first counters.Jump, hi int) exactDrops {
	return func(first counters.Jump, hi int) exactDrops {
		lo := a.floodStart(first, lag, 0, val, perWindow, refill)
		if lo >= hi {
			return exactDrops{}
		}
		perWin := make([]float64, hi-lo)
		for _, t := range packetDrops(a.linkLocalTimes(fs, a.g.startNs(lo), a.g.startNs(hi)), a.opt.LinkLocalPPS, (counted.from+counted.to)/2) {
			if i := a.g.index(t); i >= lo && i < hi {
				perWin[i-lo]++
			}
		}
		return exactDrops{lo: lo, perWin: perWin, sinceNs: a.g.startNs(lo), ok: true}
	}
}

// linkLocalTimes is when the link-local packets of fs's interface and
// direction in [fromNs, toNs) came, each bucket's spread evenly over it:
// the recording's own buckets (100 µs), not the analysis' windows, in
// which a mild flood's packets, taken as refilled between, let one packet
// too many through in a 1 ms window as often as not (the depth that gave
// the lab's count came out a packet deep, its first drop 13 ms late).
func (a *analysis) linkLocalTimes(fs *fineSeries, fromNs, toNs int64) []int64 {
	var out []int64
	for _, s := range a.rec.Series {
		if s.Interface != fs.iface || s.Direction != fs.dir {
			continue
		}
		width := max(s.WidthNs, 1)
		k, _ := slices.BinarySearchFunc(s.Buckets, fromNs, func(b record.Bucket, t int64) int { return cmp.Compare(b.StartNs, t) })
		for _, b := range s.Buckets[k:] {
			if b.StartNs >= toNs {
				break
			}
			var n uint64
			for _, v := range b.LinkLocal {
				n += v
			}
			for p := range n {
				out = append(out, b.StartNs+(2*int64(p)+1)*width/int64(2*n))
			}
		}
	}
	slices.Sort(out)
	return out
}

// packetDrops is when a bucket refilled at perSecond packets a second,
// holding depth and full at the first packet, drops packets that come at
// times: one that finds less than a packet in it.
func packetDrops(times []int64, perSecond, depth float64) []int64 {
	var out []int64
	tokens := depth
	for k, t := range times {
		if k > 0 {
			tokens = min(tokens+perSecond*float64(t-times[k-1])/1e9, depth)
		}
		if tokens >= 1 {
			tokens--
		} else {
			out = append(out, t)
		}
	}
	return out
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
