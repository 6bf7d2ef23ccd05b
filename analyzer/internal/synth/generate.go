package synth

import (
	"cmp"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/enaprobe/enaprobe/bpf/countrules"
	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/limits"
	"github.com/enaprobe/enaprobe/internal/record"
)

// isRequest tells a packet to a link-local service from its answer.
func isRequest(k record.FlowKey) bool {
	return countrules.ServiceOf(k.Dst.Addr(), netip.Addr{}) != record.ServiceNone
}

// tokenBucket is an allowance: rate per second, depth in the same unit.
type tokenBucket struct{ tokens float64 }

// take spends demand against an allowance refilled for dt seconds and
// returns the excess it could not pass.
func (tb *tokenBucket) take(demand, rate, depth, dt float64) float64 {
	tb.tokens = math.Min(depth, tb.tokens+rate*dt)
	if demand <= tb.tokens {
		tb.tokens -= demand
		return 0
	}
	excess := demand - tb.tokens
	tb.tokens = 0
	return excess
}

// takePackets is take for whole packets: one passes where the bucket holds
// one, and the rest of the bucket stays (a limiter of packets, such as the
// link-local one, drops no fraction of one).
func (tb *tokenBucket) takePackets(demand, rate, depth, dt float64) float64 {
	tb.tokens = math.Min(depth, tb.tokens+rate*dt)
	pass := math.Min(demand, math.Floor(tb.tokens))
	tb.tokens -= pass
	return demand - pass
}

type flowState struct {
	iface   string
	dir     record.Direction
	key     record.FlowKey
	size    int
	jitter  float64
	phases  []Phase
	acc     float64
	stats   record.FlowStats
	active  bool // moved since the last drain
	winIdx  int64
	winB    uint64
	winP    uint64
	pending uint64 // packets this bucket, before shaping
	syn     bool
	// retryAfter are the delays after a SYN flow's first SYN at which it
	// retries when unanswered; tries counts the SYNs it sent.
	retryAfter []time.Duration
	tries      int
	firstNs    int64
}

type dirState struct {
	buckets []record.Bucket
	totals  record.Totals
	slice   record.SizeSlice
	slices  []record.SizeSlice
}

type deviceState struct {
	spec      Interface
	bw        [record.NumDirections]tokenBucket
	queue     [record.NumDirections]float64 // bytes waiting, with QueueBytes
	queued    [record.NumDirections]float64 // packets waiting, with CountDequeued
	pps, ll   tokenBucket
	drops     map[string]float64 // since the last reset
	start     map[string]uint64  // values before the trace, until a reset
	resets    uint64
	tracked   int
	dropTimes map[string][]int64
	nextReset int
	nextFail  int
	// seen are the counter values as the device will show them, captured
	// CounterLag before the reads that return them, oldest first.
	seen []map[string]uint64
	// published are the values of the last refresh, with CounterRefresh.
	published map[string]uint64
}

// Generate runs the scenario and returns its recording and truth.
func Generate(s Spec) (*record.Recording, Facts) {
	g := newGenerator(s)
	g.run()
	return g.recording(), g.truth()
}

type generator struct {
	s       Spec
	rng     *rand.Rand
	startNs int64
	endNs   int64
	flows   []*flowState // every flow, SYN flows included
	data    []*flowState // the described flows
	dirs    map[string]*[record.NumDirections]dirState
	devs    map[string]*deviceState
	snaps   []record.FlowSnapshot
	events  []record.WindowEvent
	samples []record.CounterSample
	synPort map[int]uint16
	synAcc  []float64
	retries []retry // SYNs to send again, in time order
}

// retry is a SYN a client sends again because its last one got no answer.
type retry struct {
	at int64
	f  *flowState
}

func newGenerator(s Spec) *generator {
	d := Defaults
	def := func(v *int64, dv int64) {
		if *v == 0 {
			*v = dv
		}
	}
	def(&s.BucketNs, d.BucketNs)
	def(&s.WindowNs, d.WindowNs)
	def(&s.SliceNs, d.SliceNs)
	def(&s.SampleNs, d.SampleNs)
	def(&s.DrainNs, d.DrainNs)
	if s.HeavyBytes == 0 {
		s.HeavyBytes = d.HeavyBytes
	}
	g := &generator{s: s, rng: rand.New(rand.NewPCG(s.Seed, 0x5ca1ab1e)), startNs: StartMonoNs,
		endNs: StartMonoNs + int64(s.Duration), dirs: map[string]*[record.NumDirections]dirState{},
		devs: map[string]*deviceState{}, synPort: map[int]uint16{}, synAcc: make([]float64, len(s.SYNFloods))}
	for _, ifc := range s.Interfaces {
		ds := &[record.NumDirections]dirState{}
		for dir := range ds {
			ds[dir].totals = record.Totals{Interface: ifc.Name, Direction: record.Direction(dir)}
			ds[dir].slice = record.SizeSlice{Interface: ifc.Name, Direction: record.Direction(dir), StartNs: -1, WidthNs: s.SliceNs}
		}
		g.dirs[ifc.Name] = ds
		if ifc.ENA {
			dev := &deviceState{spec: ifc, drops: map[string]float64{}, start: map[string]uint64{},
				tracked: ifc.ConntrackEstablished, dropTimes: map[string][]int64{}}
			for k, v := range ifc.StartCounters {
				dev.start[k] = v
			}
			dev.resets = dev.start[counters.TotalResets]
			slices.Sort(dev.spec.Resets)
			slices.SortFunc(dev.spec.FailedReads, func(a, b FailedRead) int { return int(a.At - b.At) })
			dev.ll.tokens = linkLocalBurst(ifc, g.linkLocalPPS(ifc))
			g.devs[ifc.Name] = dev
		}
	}
	for _, f := range s.Flows {
		fs := &flowState{iface: f.Interface, dir: f.Dir, key: f.Key(), size: f.Size,
			jitter: f.Jitter, phases: f.Phases, winIdx: -1,
			stats: record.FlowStats{Service: countrules.FlowService(f.Key(), netip.Addr{}), Directions: 1 << f.Dir,
				TCPFlags: tcpFlags(f.Proto, 0x18), FirstSeenNs: -1}}
		g.flows = append(g.flows, fs)
		g.data = append(g.data, fs)
	}
	return g
}

func tcpFlags(proto uint8, flags uint8) uint8 {
	if proto == 6 {
		return flags
	}
	return 0
}

// linkLocalBurst is the depth of an interface's link-local bucket.
func linkLocalBurst(ifc Interface, rate float64) float64 {
	if ifc.LinkLocalBurst > 0 {
		return ifc.LinkLocalBurst
	}
	return rate * 0.01
}

func (g *generator) linkLocalPPS(ifc Interface) float64 {
	if ifc.LinkLocalPPS > 0 {
		return ifc.LinkLocalPPS
	}
	return limits.LinkLocalPPSPerInterface
}

func (g *generator) run() {
	B := g.s.BucketNs
	dt := float64(B) / 1e9
	nextSample, nextDrain := g.startNs, g.startNs+g.s.DrainNs
	nextCapture := g.startNs - int64(g.s.CounterLag)
	nextPublish := g.startNs + int64(g.s.RefreshPhase)
	var shaped []*flowState
	for t := g.startNs; t < g.endNs; t += B {
		off := time.Duration(t - g.startNs)
		for g.s.CounterRefresh > 0 && nextPublish <= t {
			g.publish()
			nextPublish += int64(g.s.CounterRefresh)
		}
		for nextCapture <= t {
			g.capture()
			nextCapture += g.s.SampleNs
		}
		for nextSample <= t {
			g.sample(nextSample)
			nextSample += g.s.SampleNs
		}
		for nextDrain <= t {
			g.drain(nextDrain)
			nextDrain += g.s.DrainNs
		}
		g.applyResets(off)
		// Offered packets of every flow this bucket.
		shaped = shaped[:0]
		for _, f := range g.data {
			bps := rateAt(f.phases, off)
			if bps <= 0 {
				continue
			}
			if f.jitter > 0 {
				bps *= 1 + f.jitter*(2*g.rng.Float64()-1)
			}
			f.acc += bps * dt / 8 / float64(f.size)
			n := math.Floor(f.acc)
			f.acc -= n
			if n > 0 {
				f.pending = uint64(n)
				shaped = append(shaped, f)
			}
		}
		newSYNs := g.synFlows(t, off, dt)
		g.shape(t, dt, shaped, newSYNs)
		for _, f := range shaped {
			g.record(f, t, f.pending)
		}
		for _, f := range newSYNs {
			if f.pending > 0 {
				g.record(f, t, 1)
			}
		}
	}
	for nextCapture <= g.endNs {
		g.capture()
		nextCapture += g.s.SampleNs
	}
	for nextSample <= g.endNs {
		g.sample(nextSample)
		nextSample += g.s.SampleNs
	}
	g.drain(g.endNs)
	for _, f := range g.data {
		g.flushWindow(f)
	}
	for _, ds := range g.dirs {
		for dir := range ds {
			g.flushSlice(&ds[dir])
		}
	}
}

func rateAt(phases []Phase, off time.Duration) float64 {
	for _, p := range phases {
		if off >= p.From && off < p.To {
			return p.Bps
		}
	}
	return 0
}

// synFlows creates the SYNs of every flood for this bucket, one new flow
// each; pending is 1 for a SYN the device lets through or that is seen
// anyway (egress).
func (g *generator) synFlows(t int64, off time.Duration, dt float64) []*flowState {
	var out []*flowState
	for len(g.retries) > 0 && g.retries[0].at <= t {
		f := g.retries[0].f
		g.retries = g.retries[1:]
		f.pending, f.tries = 1, f.tries+1
		out = append(out, f)
	}
	for i, fl := range g.s.SYNFloods {
		if off < fl.From || off >= fl.To {
			continue
		}
		g.synAcc[i] += fl.PerSecond * dt
		n := math.Floor(g.synAcc[i])
		g.synAcc[i] -= n
		for range int(n) {
			g.synPort[i]++
			port := 10000 + g.synPort[i]%50000
			key := record.FlowKey{Proto: 6, Src: netip.AddrPortFrom(fl.Src, port), Dst: fl.Dst}
			f := &flowState{iface: fl.Interface, dir: fl.Dir, key: key, size: 60, syn: true, winIdx: -1, pending: 1,
				stats:      record.FlowStats{Directions: 1 << fl.Dir, TCPFlags: 0x02, FirstSeenNs: -1},
				retryAfter: fl.RetryAfter, tries: 1, firstNs: t}
			g.flows = append(g.flows, f)
			out = append(out, f)
		}
	}
	return out
}

// shape runs the emulated devices over one bucket: it counts what goes over
// each allowance and removes from the ingress flows what the device dropped
// before the host could see it (egress packets are seen by tc before the
// device, dropped or not).
func (g *generator) shape(t int64, dt float64, flows, syns []*flowState) {
	for name, dev := range g.devs {
		var bytes, packets [record.NumDirections]float64
		var linkLocal float64
		for _, f := range flows {
			if f.iface != name {
				continue
			}
			bytes[f.dir] += float64(f.pending) * float64(f.size)
			packets[f.dir] += float64(f.pending)
			if f.dir == record.Egress && isRequest(f.key) {
				linkLocal += float64(f.pending)
			}
		}
		var synsIn, synsOut float64
		for _, f := range syns {
			if f.iface == name {
				bytes[f.dir] += 60
				packets[f.dir]++
				if f.dir == record.Ingress {
					synsIn++
				} else {
					synsOut++
				}
			}
		}
		pass := [record.NumDirections]float64{1, 1}
		window := float64(g.s.WindowNs) / 1e9
		if rate := g.bandwidth(dev.spec, time.Duration(t-g.startNs)); rate > 0 {
			depth := max(rate/8*window, dev.spec.BucketBytes)
			for dir, counter := range []string{counters.BwInAllowanceExceeded, counters.BwOutAllowanceExceeded} {
				if q := dev.spec.QueueBytes; q > 0 {
					// The queue is served first; arrivals that do not
					// pass at once wait or are dropped, and count.
					waiting, waitingPackets := dev.queue[dir], dev.queued[dir]
					ex := dev.bw[dir].take(bytes[dir]+waiting, rate/8, depth, dt)
					dev.queue[dir] = min(ex, q)
					switch late := min(ex, bytes[dir]); {
					case dev.spec.CountDequeued:
						// What left of the queue counts now; what is
						// dropped on arrival, at once.
						left := min(waiting, bytes[dir]+waiting-ex)
						still := waiting - left
						if left > 0 {
							dev.drop(counter, left/waiting*waitingPackets, t)
						}
						joined := max(dev.queue[dir]-still, 0)
						dev.queued[dir] = 0
						if waiting > 0 {
							dev.queued[dir] = still / waiting * waitingPackets
						}
						if bytes[dir] > 0 {
							dev.queued[dir] += joined / bytes[dir] * packets[dir]
							if dropped := ex - dev.queue[dir]; dropped > 0 {
								dev.drop(counter, dropped/bytes[dir]*packets[dir], t)
							}
						}
					case late > 0:
						dev.drop(counter, late/bytes[dir]*packets[dir], t)
					}
					if dropped := ex - dev.queue[dir]; dropped > 0 && bytes[dir] > 0 {
						pass[dir] *= 1 - min(dropped/bytes[dir], 1)
					}
					continue
				}
				ex := dev.bw[dir].take(bytes[dir], rate/8, depth, dt)
				if ex > 0 && bytes[dir] > 0 {
					dev.drop(counter, ex/bytes[dir]*packets[dir], t)
					pass[dir] *= 1 - ex/bytes[dir]
				}
			}
		}
		if dev.spec.PPS > 0 {
			total := packets[0] + packets[1]
			depth := dev.spec.PPS * window
			if dev.spec.PPSBurst > 0 {
				depth = dev.spec.PPSBurst
			}
			if ex := dev.pps.take(total, dev.spec.PPS, depth, dt); ex > 0 && total > 0 {
				dev.drop(counters.PPSAllowanceExceeded, ex, t)
				pass[record.Ingress] *= 1 - ex/total
			}
		}
		llRate := g.linkLocalPPS(dev.spec)
		if ex := dev.ll.takePackets(linkLocal, llRate, linkLocalBurst(dev.spec, llRate), dt); ex > 0 {
			dev.drop(counters.LinklocalAllowanceExceeded, ex, t)
		}
		for _, f := range syns {
			if f.iface != name || dev.spec.ConntrackCapacity == 0 {
				continue
			}
			if dev.tracked < dev.spec.ConntrackCapacity {
				dev.tracked++
				continue
			}
			dev.drop(counters.ConntrackAllowanceExceeded, 1, t)
			if f.dir == record.Ingress {
				f.pending = 0
			}
			if f.tries <= len(f.retryAfter) {
				g.retries = append(g.retries, retry{at: f.firstNs + int64(f.retryAfter[f.tries-1]), f: f})
				slices.SortStableFunc(g.retries, func(a, b retry) int { return cmp.Compare(a.at, b.at) })
			}
		}
		if pass[record.Ingress] < 1 {
			for _, f := range flows {
				if f.iface == name && f.dir == record.Ingress {
					f.pending = uint64(math.Floor(float64(f.pending) * pass[record.Ingress]))
				}
			}
		}
	}
}

// bandwidth is the aggregate allowance per direction at an offset.
func (g *generator) bandwidth(ifc Interface, off time.Duration) float64 {
	if ifc.BurstBps > 0 && (ifc.CreditsEnd == 0 || off < ifc.CreditsEnd) {
		return ifc.BurstBps
	}
	return ifc.BaselineBps
}

func (dev *deviceState) drop(name string, n float64, t int64) {
	dev.drops[name] += n
	dev.dropTimes[name] = append(dev.dropTimes[name], t)
}

func (g *generator) applyResets(off time.Duration) {
	for _, dev := range g.devs {
		for dev.nextReset < len(dev.spec.Resets) && dev.spec.Resets[dev.nextReset] <= off {
			dev.nextReset++
			dev.resets++
			clear(dev.drops)
			clear(dev.start)
		}
	}
}

// record adds n packets of a flow in the bucket starting at t.
func (g *generator) record(f *flowState, t int64, n uint64) {
	if n == 0 {
		return
	}
	bytes := n * uint64(f.size)
	ds := &g.dirs[f.iface][f.dir]
	if len(ds.buckets) == 0 || ds.buckets[len(ds.buckets)-1].StartNs != t {
		ds.buckets = append(ds.buckets, record.Bucket{StartNs: t})
	}
	b := &ds.buckets[len(ds.buckets)-1]
	b.Packets += n
	b.Bytes += bytes
	if f.syn {
		b.SYNs += n
	}
	if i := f.stats.Service.Index(); i >= 0 {
		b.LinkLocal[i] += n
	}
	class := classOf(f.key.Proto)
	ds.totals.Packets[class] += n
	ds.totals.Bytes[class] += bytes
	if f.syn {
		ds.totals.SYNs += n
	}
	sliceStart := t / g.s.SliceNs * g.s.SliceNs
	if ds.slice.StartNs != sliceStart {
		g.flushSlice(ds)
		ds.slice.StartNs = sliceStart
	}
	ds.slice.Counts[record.SizeClassOf(f.size)] += n
	win := t / g.s.WindowNs
	if f.winIdx != win {
		g.flushWindow(f)
		f.winIdx = win
	}
	f.winB += bytes
	f.winP += n
	st := &f.stats
	if st.FirstSeenNs < 0 {
		st.FirstSeenNs = t
		st.MinSize, st.MaxSize = uint32(f.size), uint32(f.size)
	}
	st.Packets += n
	st.Bytes += bytes
	if f.syn {
		st.SYNs += n
	}
	st.LastSeenNs = t
	f.active = true
}

func classOf(proto uint8) record.Class {
	switch proto {
	case 6:
		return record.ClassTCP
	case 17:
		return record.ClassUDP
	case 1, 58:
		return record.ClassICMP
	}
	return record.ClassOther
}

func (g *generator) flushSlice(ds *dirState) {
	var n uint64
	for _, c := range ds.slice.Counts {
		n += c
	}
	if n > 0 {
		ds.slices = append(ds.slices, ds.slice)
	}
	ds.slice.Counts = [record.NumSizeClasses]uint64{}
}

func (g *generator) flushWindow(f *flowState) {
	if f.winIdx >= 0 && f.winB >= g.s.HeavyBytes {
		g.events = append(g.events, record.WindowEvent{Interface: f.iface, Direction: f.dir, Key: f.key,
			StartNs: f.winIdx * g.s.WindowNs, WidthNs: g.s.WindowNs, Packets: f.winP, Bytes: f.winB})
	}
	f.winB, f.winP = 0, 0
}

// drain snapshots every flow that moved since the last drain.
func (g *generator) drain(t int64) {
	for _, f := range g.flows {
		if !f.active {
			continue
		}
		f.active = false
		g.snaps = append(g.snaps, record.FlowSnapshot{TimeNs: t, Interface: f.iface, Key: f.key, FlowStats: f.stats})
	}
}

// capture takes every device's counter values as its reads will show them
// CounterLag later: the live ones, or with CounterRefresh the last
// published.
func (g *generator) capture() {
	for _, dev := range g.devs {
		if g.s.CounterRefresh > 0 {
			if dev.published == nil {
				dev.published = dev.values()
			}
			dev.seen = append(dev.seen, dev.published)
			continue
		}
		dev.seen = append(dev.seen, dev.values())
	}
}

// publish is a refresh of every device's counters.
func (g *generator) publish() {
	for _, dev := range g.devs {
		dev.published = dev.values()
	}
}

// values are a device's counters now.
func (dev *deviceState) values() map[string]uint64 {
	v := map[string]uint64{counters.TotalResets: dev.resets}
	for _, c := range counters.AllowanceExceeded {
		v[c] = dev.start[c] + uint64(dev.drops[c])
	}
	if dev.spec.ConntrackCapacity > 0 {
		v[counters.ConntrackAllowanceAvailable] = uint64(max(dev.spec.ConntrackCapacity-dev.tracked, 0))
	}
	return v
}

// sample reads every ENA device at t: the values captured CounterLag
// before.
func (g *generator) sample(t int64) {
	names := make([]string, 0, len(g.devs))
	for n := range g.devs {
		names = append(names, n)
	}
	slices.Sort(names)
	k := (t - g.startNs) / g.s.SampleNs
	for _, name := range names {
		dev := g.devs[name]
		s := record.CounterSample{Interface: name, BeforeNs: t, AfterNs: t + 35_000 + (k*7919%30)*1000}
		off := time.Duration(t - g.startNs)
		failed, zero := false, false
		for dev.nextFail < len(dev.spec.FailedReads) && dev.spec.FailedReads[dev.nextFail].At <= off {
			failed, zero = true, dev.spec.FailedReads[dev.nextFail].ZeroRead
			dev.nextFail++
		}
		seen := dev.seen[0]
		dev.seen = dev.seen[1:]
		switch {
		case failed && !zero:
			s.Err = "ETHTOOL_GSTATS: admin queue command timed out"
		case zero:
			s.Values = map[string]uint64{counters.TotalResets: seen[counters.TotalResets]}
			for name := range seen {
				if name != counters.TotalResets {
					s.Values[name] = 0
				}
			}
		default:
			s.Values = seen
		}
		g.samples = append(g.samples, s)
	}
}

func (g *generator) recording() *record.Recording {
	s := g.s
	rec := &record.Recording{Meta: record.Meta{
		Version: "scenario", Kernel: "6.1.0-scenario", Hostname: "scenario-" + s.Name, InstanceType: s.InstanceType,
		AttachMode: "tcx", WindowNs: s.WindowNs, SliceNs: s.SliceNs, HeavyBytes: s.HeavyBytes,
		SampleNs: s.SampleNs, FlowLimitBps: s.FlowLimitBps,
		Start:         record.ClockPair{MonoNs: g.startNs, Wall: StartWall},
		End:           record.ClockPair{MonoNs: g.endNs, Wall: StartWall.Add(s.Duration)},
		CounterSource: "lab",
	}}
	for i, ifc := range s.Interfaces {
		info := record.InterfaceInfo{Name: ifc.Name, Index: i + 2, Driver: "veth", MTU: 9001}
		if ifc.ENA {
			info.Driver, info.DriverVersion, info.ENA = "ena", "2.13.0g", true
		}
		rec.Meta.Interfaces = append(rec.Meta.Interfaces, info)
		ds := g.dirs[ifc.Name]
		for dir := range ds {
			rec.Series = append(rec.Series, record.Series{Interface: ifc.Name, Direction: record.Direction(dir),
				WidthNs: s.BucketNs, Buckets: ds[dir].buckets})
			rec.Totals = append(rec.Totals, ds[dir].totals)
			rec.Sizes = append(rec.Sizes, ds[dir].slices...)
		}
		rec.Loss = append(rec.Loss, record.Loss{Interface: ifc.Name})
	}
	rec.Flows = g.snaps
	slices.SortStableFunc(g.events, func(a, b record.WindowEvent) int { return int(a.StartNs - b.StartNs) })
	rec.Windows = g.events
	rec.Counters = g.samples
	return rec
}

func (g *generator) truth() Facts {
	tr := Facts{Drops: map[string]map[string][]Episode{}}
	for name, dev := range g.devs {
		m := map[string][]Episode{}
		for c, times := range dev.dropTimes {
			var eps []Episode
			for _, t := range times {
				from := time.Duration(t - g.startNs)
				to := from + time.Duration(g.s.BucketNs)
				if n := len(eps); n > 0 && from-eps[n-1].To < time.Duration(g.s.WindowNs) {
					eps[n-1].To = to
					continue
				}
				eps = append(eps, Episode{from, to})
			}
			m[c] = eps
		}
		tr.Drops[name] = m
	}
	return tr
}
