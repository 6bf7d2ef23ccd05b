package analyzer

import (
	"cmp"
	"slices"
	"time"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/record"
)

// Peak windows and CloudWatch periods of the rate profile.
var (
	peakWindows     = []time.Duration{time.Millisecond, 100 * time.Millisecond, time.Second}
	cloudWatchPerds = []time.Duration{time.Minute, 5 * time.Minute}
)

func (a *analysis) profile() Profile {
	p := Profile{Rates: []RateProfile{}, LinkLocal: []LinkLocalProfile{}, SizeMix: a.sizeMix(),
		TopFlows: a.topFlows(), CounterReadLatency: []ReadLatency{}}
	series := slices.Clone(a.rec.Series)
	slices.SortStableFunc(series, func(x, y record.Series) int {
		return cmp.Or(cmp.Compare(x.Interface, y.Interface), cmp.Compare(x.Direction, y.Direction))
	})
	for _, s := range series {
		p.Rates = append(p.Rates, a.rateProfile(s))
	}
	for _, name := range a.ifaces {
		for _, dir := range []record.Direction{record.Ingress, record.Egress} {
			if fs := a.series(name, dir); fs != nil {
				p.LinkLocal = append(p.LinkLocal, a.linkLocalProfile(fs)...)
			}
		}
	}
	byIface := counters.ByInterface(a.rec.Counters)
	for _, name := range a.ifaces {
		if len(byIface[name]) == 0 {
			continue
		}
		l := counters.Latency(byIface[name])
		p.CounterReadLatency = append(p.CounterReadLatency, ReadLatency{Interface: name, Reads: l.Reads,
			MinUs: us(l.Min), MedianUs: us(l.Median), MaxUs: us(l.Max), HeldMs: float64(counters.ReadTime(byIface[name])) / 1e6})
	}
	return p
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

func (a *analysis) rateProfile(s record.Series) RateProfile {
	rp := RateProfile{Interface: s.Interface, Direction: s.Direction.String()}
	dur := a.durationNs()
	var bytes, packets uint64
	for _, b := range s.Buckets {
		bytes += b.Bytes
		packets += b.Packets
	}
	if dur > 0 {
		rp.MeanBps = float64(bytes) * 8e9 / float64(dur)
		rp.MeanPPS = float64(packets) * 1e9 / float64(dur)
	}
	for _, w := range peakWindows {
		rp.Peaks = append(rp.Peaks, a.peak(s.Buckets, int64(w), rp.MeanBps, rp.MeanPPS))
	}
	for _, per := range cloudWatchPerds {
		rp.Averages = append(rp.Averages, a.average(s.Buckets, int64(per), rp.MeanBps, rp.MeanPPS))
	}
	return rp
}

// peak slides a window of widthNs over the buckets, one bucket at a time
// (two pointers: linear). The best window always starts at a non-empty
// bucket, so only those starts are tried.
func (a *analysis) peak(buckets []record.Bucket, widthNs int64, meanBps, meanPPS float64) Peak {
	p := Peak{WindowS: float64(widthNs) / 1e9}
	if dur := a.durationNs(); dur > 0 && dur < widthNs {
		start := a.rec.Meta.Start.MonoNs
		p.Bps, p.PPS, p.Partial = meanBps, meanPPS, true
		p.BpsAt, p.PPSAt = a.wall(start), a.wall(start)
		return p
	}
	var bestBytes, bestPackets, sumBytes, sumPackets uint64
	bestB, bestP := int64(-1), int64(-1)
	j := 0
	for i := range buckets {
		end := buckets[i].StartNs + widthNs
		for ; j < len(buckets) && buckets[j].StartNs < end; j++ {
			sumBytes += buckets[j].Bytes
			sumPackets += buckets[j].Packets
		}
		if sumBytes > bestBytes || bestB < 0 {
			bestBytes, bestB = sumBytes, buckets[i].StartNs
		}
		if sumPackets > bestPackets || bestP < 0 {
			bestPackets, bestP = sumPackets, buckets[i].StartNs
		}
		sumBytes -= buckets[i].Bytes
		sumPackets -= buckets[i].Packets
	}
	if bestB < 0 {
		bestB, bestP = a.rec.Meta.Start.MonoNs, a.rec.Meta.Start.MonoNs
	}
	sec := float64(widthNs) / 1e9
	p.Bps, p.PPS = float64(bestBytes)*8/sec, float64(bestPackets)/sec
	p.BpsAt, p.BpsAtOffset = a.wall(bestB), a.offsetS(bestB)
	p.PPSAt, p.PPSAtOffset = a.wall(bestP), a.offsetS(bestP)
	return p
}

// average is the highest CloudWatch-style point: bytes of one whole period,
// aligned to the trace start, / period seconds x 8.
func (a *analysis) average(buckets []record.Bucket, periodNs int64, meanBps, meanPPS float64) Average {
	av := Average{PeriodS: float64(periodNs) / 1e9}
	start, dur := a.rec.Meta.Start.MonoNs, a.durationNs()
	av.Periods = int(dur / periodNs)
	if av.Periods == 0 {
		av.Bps, av.PPS, av.Partial, av.CoveredS = meanBps, meanPPS, true, float64(dur)/1e9
		return av
	}
	bytes := make([]uint64, av.Periods)
	packets := make([]uint64, av.Periods)
	for _, b := range buckets {
		if b.StartNs < start {
			continue
		}
		k := int((b.StartNs - start) / periodNs)
		if k >= av.Periods {
			break
		}
		bytes[k] += b.Bytes
		packets[k] += b.Packets
	}
	sec := av.PeriodS
	for k := range bytes {
		av.Bps = max(av.Bps, float64(bytes[k])*8/sec)
		av.PPS = max(av.PPS, float64(packets[k])/sec)
	}
	av.CoveredS = float64(av.Periods) * sec
	return av
}

// topFlows lists the flows that moved the most bytes.
func (a *analysis) topFlows() []FlowProfile {
	ids := make([]int, len(a.flows.flows))
	for i := range ids {
		ids[i] = i
	}
	slices.SortStableFunc(ids, func(x, y int) int {
		return cmp.Compare(a.flows.flows[y].bytes, a.flows.flows[x].bytes)
	})
	// A flow heavy enough for window events has its fine windows' bytes:
	// its peak is the fullest of them, one rule for every burst. A delta
	// of the flow tables divides by the drain interval, or by less for a
	// flow's first (from its first packet): two identical bursts showed
	// 2.3 Gbit/s and 24.7 Mbit/s (issue 26).
	windowPeak := map[flowRef]float64{}
	for _, evs := range a.events {
		for _, e := range evs {
			if e.WidthNs > 0 {
				r := flowRef{e.Interface, e.Key}
				windowPeak[r] = max(windowPeak[r], float64(e.Bytes)*8e9/float64(e.WidthNs))
			}
		}
	}
	out := []FlowProfile{}
	for _, id := range ids[:min(len(ids), a.opt.ProfileFlows)] {
		f := &a.flows.flows[id]
		peak := f.peakBps
		if w, ok := windowPeak[f.flowRef]; ok {
			peak = w
		}
		fp := FlowProfile{Interface: f.iface, Proto: record.ProtoName(f.key.Proto), Src: f.key.Src.String(),
			Dst: f.key.Dst.String(), Service: serviceName(f.last.Service), Directions: directions(f.last.Directions),
			Bytes: f.bytes, Packets: f.packets, SYNs: f.syns, MeanSize: meanSize(f.bytes, f.packets),
			MinSize: f.last.MinSize, MaxSize: f.last.MaxSize, PeakBps: peak,
			FirstSeen: a.wall(f.firstSeenNs), LastSeen: a.wall(f.last.LastSeenNs), Owner: a.owners.of(f.flowRef)}
		if span := f.last.LastSeenNs - f.firstSeenNs; span > 0 {
			fp.MeanBps = float64(f.bytes) * 8e9 / float64(span)
		}
		out = append(out, fp)
	}
	return out
}

func serviceName(s record.Service) string {
	if s == record.ServiceNone {
		return ""
	}
	return s.String()
}

func directions(bits uint8) string {
	switch bits & 3 {
	case 1:
		return "ingress"
	case 2:
		return "egress"
	case 3:
		return "both"
	}
	return ""
}

func meanSize(bytes, packets uint64) float64 {
	if packets == 0 {
		return 0
	}
	return float64(bytes) / float64(packets)
}

// linkLocalProfile gives the rate of each link-local service and of all of
// them together (what the per-interface limit counts), for one direction.
func (a *analysis) linkLocalProfile(fs *fineSeries) []LinkLocalProfile {
	var out []LinkLocalProfile
	limit := a.opt.LinkLocalPPS
	row := func(service string, val func(int) float64) {
		total := sumIn(val, 0, a.g.n)
		if total == 0 {
			return
		}
		peak1s := a.peakRate(val, time.Second)
		out = append(out, LinkLocalProfile{Interface: fs.iface, Direction: fs.dir.String(), Service: service,
			Packets: uint64(total), PeakPPS1s: peak1s, PeakPPSShort: a.peakRate(val, a.opt.LinkLocalShortWindow),
			ShortWindowS: a.opt.LinkLocalShortWindow.Seconds(), LimitPPS: limit, PeakShare1s: peak1s / limit})
	}
	for _, svc := range record.Services {
		col := fs.linkLocal[svc.Index()]
		row(svc.String(), func(i int) float64 { return float64(col[i]) })
	}
	row("all", func(i int) float64 { return float64(fs.linkLocalAt(i)) })
	return out
}

// peakRate is the highest per-second rate of val over any window of width
// w sliding one fine window at a time. For a trace shorter than w it is the
// rate over the trace.
func (a *analysis) peakRate(val func(int) float64, w time.Duration) float64 {
	k := max(int(int64(w)/a.g.widthNs), 1)
	sec := float64(k) * float64(a.g.widthNs) / 1e9
	if k > a.g.n {
		if d := a.durationNs(); d > 0 {
			return sumIn(val, 0, a.g.n) * 1e9 / float64(d)
		}
		return 0
	}
	best, sum := 0.0, 0.0
	for i := 0; i < a.g.n; i++ {
		sum += val(i)
		if i >= k {
			sum -= val(i - k)
		}
		best = max(best, sum)
	}
	return best / sec
}

// sizeMix sums the size slices of each interface and direction.
func (a *analysis) sizeMix() []SizeMix {
	type acc struct {
		counts [record.NumSizeClasses]uint64
		super  uint64
	}
	byKey := make(map[seriesKey]*acc)
	for _, s := range a.rec.Sizes {
		k := seriesKey{s.Interface, s.Direction}
		c := byKey[k]
		if c == nil {
			c = &acc{}
			byKey[k] = c
		}
		for i, v := range s.Counts {
			c.counts[i] += v
		}
		c.super += s.SuperPackets
	}
	totals := make(map[seriesKey]record.Totals)
	for _, t := range a.rec.Totals {
		k := seriesKey{t.Interface, t.Direction}
		prev := totals[k]
		for c := range record.NumClasses {
			prev.Packets[c] += t.Packets[c]
			prev.Bytes[c] += t.Bytes[c]
		}
		totals[k] = prev
	}
	keys := make([]seriesKey, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y seriesKey) int {
		return cmp.Or(cmp.Compare(x.iface, y.iface), cmp.Compare(x.dir, y.dir))
	})
	out := []SizeMix{}
	for _, k := range keys {
		c := byKey[k]
		var n uint64
		for _, v := range c.counts {
			n += v
		}
		m := SizeMix{Interface: k.iface, Direction: k.dir.String(), SuperPackets: c.super}
		for i, v := range c.counts {
			m.Classes = append(m.Classes, SizeClassCount{Class: record.SizeClassNames[i], Packets: v, Share: share(float64(v), float64(n))})
		}
		t := totals[k]
		m.MeanSize = meanSize(t.SumBytes(), t.SumPackets())
		out = append(out, m)
	}
	return out
}

func share(part, whole float64) float64 {
	if whole <= 0 {
		return 0
	}
	return part / whole
}
