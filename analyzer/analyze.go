package analyzer

import (
	"cmp"
	"slices"
	"time"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/record"
)

// analysis is the state shared by every detection rule.
type analysis struct {
	rec     *record.Recording
	opt     Options
	g       grid
	fine    map[seriesKey]*fineSeries
	flows   *flowIndex
	events  eventIndex
	owners  ownerIndex
	changes counters.Changes
	limits  Limits
	// present[iface][name]: the counter was read successfully at least once.
	present map[string]map[string]bool
	ifaces  []string
	// readStart and readEnd map a read's end to its start and back, for
	// certain; built on first use.
	readStart, readEnd map[readKey]int64
	// phases are the phase-narrowed windows of each interface's changes
	// per refresh period (phaseWindows), built on first use.
	phases map[phaseKey]map[int64]lagRange
	// impactFlows are the TCP flows' snapshots (impact.go), built on
	// first use.
	impactFlows *[]tcpFlow
}

// Analyze reads a recording and returns the report.
func Analyze(rec *record.Recording, opt Options) *Result {
	a := newAnalysis(rec, opt)
	res := &Result{SchemaVersion: SchemaVersion}
	res.Trace = a.traceInfo()
	res.Totals = a.totals()
	res.Counters = a.counterDeltas()
	res.Loss = a.loss()
	res.Profile = a.profile()
	res.Findings = a.findings()
	a.attachOwners(res.Findings)
	return res
}

func newAnalysis(rec *record.Recording, opt Options) *analysis {
	opt = withDefaults(opt)
	a := &analysis{rec: rec, opt: opt}
	a.g = newGrid(rec, int64(opt.FineWindow))
	a.fine = buildFineSeries(rec, a.g)
	a.flows = buildFlowIndex(rec.Flows)
	a.events = buildEventIndex(rec.Windows)
	a.owners = buildOwnerIndex(rec.Owners)
	a.changes = counters.Diff(rec.Counters)
	a.limits = resolveLimits(opt, a.instanceType(), rec.Meta.FlowLimitBps)
	a.present = make(map[string]map[string]bool)
	for _, s := range rec.Counters {
		if s.Err != "" {
			continue
		}
		m := a.present[s.Interface]
		if m == nil {
			m = make(map[string]bool)
			a.present[s.Interface] = m
		}
		for name := range s.Values {
			m[name] = true
		}
	}
	a.ifaces = interfaceNames(rec)
	return a
}

// withDefaults fills the thresholds left at zero with their defaults, so a
// caller may set only the limits. Limits themselves keep 0 as "unknown",
// except the two documented ones.
func withDefaults(opt Options) Options {
	def := DefaultOptions()
	fill := func(v *float64, d float64) {
		if *v <= 0 {
			*v = d
		}
	}
	fillD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	fill(&opt.LinkLocalPPS, def.LinkLocalPPS)
	fillD(&opt.FineWindow, def.FineWindow)
	fill(&opt.StandOutFactor, def.StandOutFactor)
	fill(&opt.StandOutPeakShare, def.StandOutPeakShare)
	fill(&opt.SaturationShare, def.SaturationShare)
	fillD(&opt.MergeGap, def.MergeGap)
	fill(&opt.NearMissShare, def.NearMissShare)
	if opt.MaxNearMisses <= 0 {
		opt.MaxNearMisses = def.MaxNearMisses
	}
	fill(&opt.LinkLocalHotShare, def.LinkLocalHotShare)
	fillD(&opt.LinkLocalShortWindow, def.LinkLocalShortWindow)
	fill(&opt.ConntrackLowShare, def.ConntrackLowShare)
	fill(&opt.ConntrackFallShare, def.ConntrackFallShare)
	fillD(&opt.ConntrackFallWindow, def.ConntrackFallWindow)
	fillD(&opt.PlateauMin, def.PlateauMin)
	fillD(&opt.PlateauBin, def.PlateauBin)
	fill(&opt.PlateauCV, def.PlateauCV)
	fill(&opt.FlowCapBand, def.FlowCapBand)
	fill(&opt.FlowPlateauMinBps, def.FlowPlateauMinBps)
	fill(&opt.BaselineBand, def.BaselineBand)
	fill(&opt.BaselineAboveFactor, def.BaselineAboveFactor)
	fillD(&opt.BaselineBin, def.BaselineBin)
	if opt.TopFlows <= 0 {
		opt.TopFlows = def.TopFlows
	}
	if opt.ProfileFlows <= 0 {
		opt.ProfileFlows = def.ProfileFlows
	}
	fill(&opt.EventCoverage, def.EventCoverage)
	fillD(&opt.NearMissMin, def.NearMissMin)
	fill(&opt.CriticalDrops, def.CriticalDrops)
	fillD(&opt.CriticalDuration, def.CriticalDuration)
	fillD(&opt.PeakWindow, def.PeakWindow)
	fillD(&opt.IncidentRefill, def.IncidentRefill)
	fillD(&opt.ImpactBefore, def.ImpactBefore)
	fillD(&opt.ImpactTail, def.ImpactTail)
	fill(&opt.ImpactMinRise, def.ImpactMinRise)
	return opt
}

func (a *analysis) instanceType() string {
	if a.opt.InstanceType != "" {
		return a.opt.InstanceType
	}
	return a.rec.Meta.InstanceType
}

// interfaceNames lists the traced interfaces: the recorded ones in order,
// then any that only the data names.
func interfaceNames(rec *record.Recording) []string {
	var names []string
	seen := make(map[string]bool)
	add := func(n string) {
		if n != "" && !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	for _, i := range rec.Meta.Interfaces {
		add(i.Name)
	}
	var extra []string
	for _, s := range rec.Series {
		if !seen[s.Interface] {
			extra = append(extra, s.Interface)
		}
	}
	for _, s := range rec.Counters {
		if !seen[s.Interface] {
			extra = append(extra, s.Interface)
		}
	}
	slices.Sort(extra)
	for _, n := range extra {
		add(n)
	}
	return names
}

// hasCounter tells whether an interface's reads held a counter.
func (a *analysis) hasCounter(iface, name string) bool { return a.present[iface][name] }

// series returns the fine series of an interface and direction, or nil.
func (a *analysis) series(iface string, dir record.Direction) *fineSeries {
	return a.fine[seriesKey{iface, dir}]
}

// jumps returns the jumps of one counter on one interface, in time order.
func (a *analysis) jumps(iface, name string) []counters.Jump {
	var out []counters.Jump
	for _, j := range a.changes.Jumps {
		if j.Interface == iface && j.Name == name {
			out = append(out, j)
		}
	}
	return out
}

// moved tells whether a counter of an interface jumped in a time range.
func (a *analysis) moved(iface, name string, fromNs, toNs int64) bool {
	for _, j := range a.changes.Jumps {
		if j.Interface == iface && j.Name == name && j.FromNs < toNs && j.ToNs > fromNs {
			return true
		}
	}
	return false
}

func (a *analysis) wall(ns int64) time.Time  { return a.rec.Meta.Wall(ns) }
func (a *analysis) offsetS(ns int64) float64 { return a.rec.Meta.Offset(ns).Seconds() }
func (a *analysis) durationNs() int64        { return max(a.rec.Meta.End.MonoNs-a.rec.Meta.Start.MonoNs, 0) }

// findings runs every rule and orders the findings as a report opens: the
// most severe first, within a severity the incidents that cost the most
// (packets dropped, then duration), then by time.
func (a *analysis) findings() []Finding {
	baseline, explained := a.baselineFindings()
	out := append([]Finding{}, baseline...)
	out = append(out, a.microbursts(explained)...)
	out = foldInboundPPS(append(out, a.ppsFindings()...))
	out = append(out, a.conntrackFindings()...)
	out = append(out, a.linkLocalFindings()...)
	out = append(out, a.flowCapFindings()...)
	out = append(out, a.jumboLeavingFindings()...)
	out = append(out, a.imdsFindings()...)
	a.attachImpacts(out)
	slices.SortStableFunc(out, func(x, y Finding) int {
		return cmp.Or(cmp.Compare(severityRank(y.Severity), severityRank(x.Severity)), findingCost(x, y),
			cmp.Compare(x.StartOffsetS, y.StartOffsetS), cmp.Compare(x.Kind, y.Kind))
	})
	return out
}

// certain widens a jump's interval to the one certain to hold the change:
// from the start of the earlier read to the end of the later one. A read
// samples its counters somewhere inside its own [BeforeNs, AfterNs], and a
// read that takes milliseconds (a busy ENA admin queue, an emulator's
// conntrack dump) may have seen part of what came during it.
func (a *analysis) certain(j counters.Jump) (fromNs, toNs int64) {
	if a.readStart == nil {
		a.readStart, a.readEnd = map[readKey]int64{}, map[readKey]int64{}
		for _, s := range a.rec.Counters {
			if s.Err == "" {
				a.readStart[readKey{s.Interface, s.AfterNs}] = s.BeforeNs
				a.readEnd[readKey{s.Interface, s.BeforeNs}] = s.AfterNs
			}
		}
	}
	fromNs, toNs = j.FromNs, j.ToNs
	if v, ok := a.readStart[readKey{j.Interface, j.FromNs}]; ok {
		fromNs = v
	}
	if v, ok := a.readEnd[readKey{j.Interface, j.ToNs}]; ok {
		toNs = v
	}
	return fromNs, toNs
}

// readKey finds a counter read by its interface and one of its ends.
type readKey struct {
	iface string
	ns    int64
}
