package analyzer

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/limits"
	"github.com/enaprobe/enaprobe/internal/record"
)

// allowanceCounters are the ENA counters findings rest on; a report says
// which of them an interface lacked.
var allowanceCounters = append(append([]string(nil), counters.AllowanceExceeded...), counters.ConntrackAllowanceAvailable)

func (a *analysis) traceInfo() TraceInfo {
	m := a.rec.Meta
	t := TraceInfo{
		Start:         m.Start.Wall,
		End:           a.wall(m.End.MonoNs),
		DurationS:     float64(a.durationNs()) / 1e9,
		Interfaces:    nonNil(a.ifaces),
		BucketUs:      a.rec.BucketNs() / 1000,
		FineWindowUs:  a.g.widthNs / 1000,
		SampleMs:      float64(m.SampleNs) / 1e6,
		AttachMode:    m.AttachMode,
		BucketMode:    m.BucketMode,
		Kernel:        m.Kernel,
		Hostname:      m.Hostname,
		InstanceType:  a.instanceType(),
		ProbeVersion:  m.Version,
		CounterSource: m.CounterSource,
		Limits:        a.limits,
		Notes:         []string{},
	}
	byIface := counters.ByInterface(a.rec.Counters)
	info := make(map[string]record.InterfaceInfo)
	for _, i := range m.Interfaces {
		info[i.Name] = i
	}
	anyCounter := false
	for _, name := range a.ifaces {
		samples := byIface[name]
		absent := counters.Absent(samples, allowanceCounters)
		e := InterfaceENA{Interface: name, Driver: info[name].Driver, DriverVersion: info[name].DriverVersion,
			Present: []string{}, Absent: nonNil(absent), Reads: len(samples)}
		for _, c := range allowanceCounters {
			if !slices.Contains(absent, c) {
				e.Present = append(e.Present, c)
			}
		}
		e.ENA = len(e.Present) > 0
		e.ReadGuard = []ReadGuardEvent{}
		for _, ev := range m.CounterGuard {
			if ev.Interface != name {
				continue
			}
			g := ReadGuardEvent{AtS: float64(ev.AtNs-m.Start.MonoNs) / 1e9, Reason: ev.Reason, Action: ev.Action,
				IntervalMs: float64(ev.IntervalNs) / 1e6}
			e.ReadGuard = append(e.ReadGuard, g)
			t.Notes = append(t.Notes, readGuardNote(name, g))
		}
		anyCounter = anyCounter || e.ENA
		if info[name].Down {
			t.Notes = append(t.Notes, name+": down when the trace began: it carried no traffic until it came up")
		}
		if !e.ENA {
			t.Notes = append(t.Notes, name+": no allowance counters available, only the traffic is analysed")
		}
		t.ENA = append(t.ENA, e)
	}
	t.ENA = nonNil(t.ENA)
	t.Notes = append(t.Notes, m.AttachNotes...)
	t.Notes = append(t.Notes, m.OwnerNotes...)
	if !anyCounter {
		t.Notes = append(t.Notes, "no interface had allowance counters: no counter-based finding is possible")
	}
	if it := a.instanceType(); it != "" && !a.limits.BaselineBps.Known {
		if _, ok := limits.Lookup(it); !ok {
			t.Notes = append(t.Notes, unknownInstanceType(it))
		}
	}
	if !a.limits.BaselineBps.Known {
		t.Notes = append(t.Notes, "instance bandwidth allowance unknown: bursts are located by their own level, baseline_exhausted and near-misses are not checked")
	}
	t.Notes = append(t.Notes, kernelNotes(m)...)
	if t.DurationS < 60 {
		t.Notes = append(t.Notes, "trace shorter than one CloudWatch period: the 1-minute and 5-minute averages are partial")
	}
	t.Notes = append(t.Notes, a.opt.Notes...)
	return t
}

// readGuardNote says what the counter reads did on a sign of a struggling
// device, and what it means for the counter-based findings.
func readGuardNote(iface string, g ReadGuardEvent) string {
	if g.Action == record.CounterGuardStopped {
		return fmt.Sprintf("%s: counter reads stopped at +%.1fs (%s): the device showed trouble again; no counter-based finding after that", iface, g.AtS, g.Reason)
	}
	return fmt.Sprintf("%s: counter reads backed off to every %s at +%.1fs (%s), to spare the device admin commands; counter jumps are placed less precisely after that",
		iface, time.Duration(g.IntervalMs*1e6), g.AtS, g.Reason)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// totals are the exact per-direction counts, summed when an interface and
// direction appear more than once.
func (a *analysis) totals() []Total {
	type key = seriesKey
	byKey := make(map[key]*Total)
	var order []key
	for _, t := range a.rec.Totals {
		k := key{t.Interface, t.Direction}
		tot := byKey[k]
		if tot == nil {
			tot = &Total{Interface: t.Interface, Direction: t.Direction.String()}
			for c := range record.NumClasses {
				tot.Classes = append(tot.Classes, ClassTotal{Class: record.Class(c).String()})
			}
			byKey[k] = tot
			order = append(order, k)
		}
		tot.Packets += t.SumPackets()
		tot.Bytes += t.SumBytes()
		tot.SYNs += t.SYNs
		for c := range record.NumClasses {
			tot.Classes[c].Packets += t.Packets[c]
			tot.Classes[c].Bytes += t.Bytes[c]
		}
	}
	out := make([]Total, 0, len(order))
	for _, k := range order {
		out = append(out, *byKey[k])
	}
	slices.SortStableFunc(out, func(x, y Total) int {
		return cmp.Or(cmp.Compare(x.Interface, y.Interface), cmp.Compare(x.Direction, y.Direction))
	})
	return out
}

// counterDeltas reports how far every known ENA counter moved. Gauges get
// their course instead of a delta.
func (a *analysis) counterDeltas() []CounterDelta {
	resets := make(map[counters.Key]int)
	for _, r := range a.changes.Resets {
		resets[counters.Key{Interface: r.Interface, Name: r.Name}]++
	}
	out := []CounterDelta{}
	for k, d := range a.changes.Totals {
		if !slices.Contains(counters.ENACounters, k.Name) {
			continue
		}
		out = append(out, CounterDelta{Interface: k.Interface, Name: k.Name, Kind: "counter", Delta: d, Resets: resets[k]})
	}
	gauges := make(map[counters.Key]*GaugeSummary)
	for _, g := range a.changes.Gauges {
		k := counters.Key{Interface: g.Interface, Name: g.Name}
		s := gauges[k]
		if s == nil {
			s = &GaugeSummary{First: g.Value, Min: g.Value, Max: g.Value}
			gauges[k] = s
		}
		s.Min, s.Max, s.Last = min(s.Min, g.Value), max(s.Max, g.Value), g.Value
	}
	for k, s := range gauges {
		out = append(out, CounterDelta{Interface: k.Interface, Name: k.Name, Kind: "gauge", Gauge: s})
	}
	slices.SortFunc(out, func(x, y CounterDelta) int {
		return cmp.Or(cmp.Compare(x.Interface, y.Interface), cmp.Compare(x.Name, y.Name))
	})
	return out
}

// loss sums what the datapath and the collector could not record, with the
// counter reads that failed or saw a reset.
func (a *analysis) loss() LossInfo {
	li := LossInfo{Interfaces: []InterfaceLoss{}, ReadFailures: []ReadFailure{}, Resets: []CounterReset{}}
	per := make(map[string]*InterfaceLoss)
	get := func(name string) *InterfaceLoss {
		l := per[name]
		if l == nil {
			l = &InterfaceLoss{Interface: name}
			per[name] = l
		}
		return l
	}
	for _, name := range a.ifaces {
		get(name)
	}
	for _, l := range a.rec.Loss {
		c := LossCounts{FlowMapFull: l.FlowMapFull, RingbufFull: l.RingbufFull, BucketOverwritten: l.BucketOverwritten,
			SliceOverwritten: l.SliceOverwritten, FlowsEvicted: l.FlowsEvicted, IMDSEvents: l.IMDSEvents,
			LinkLocalPayloads: l.LinkLocalPayloads}
		il := get(l.Interface)
		il.Counts = il.Counts.add(c)
		li.Total = li.Total.add(c)
	}
	for _, s := range a.rec.Counters {
		get(s.Interface).CounterReads++
	}
	// Reads that keep failing the same way are one row with a count, not a
	// row per sample.
	lastRow := map[string]int{}
	for _, f := range a.changes.Failed {
		get(f.Interface).CounterReadFailures++
		li.CounterReadFailures++
		if i, ok := lastRow[f.Interface]; ok && li.ReadFailures[i].Error == f.Reason {
			li.ReadFailures[i].Count++
			li.ReadFailures[i].LastOffsetS = a.offsetS(f.BeforeNs)
			continue
		}
		lastRow[f.Interface] = len(li.ReadFailures)
		li.ReadFailures = append(li.ReadFailures, ReadFailure{Interface: f.Interface, Time: a.wall(f.BeforeNs),
			OffsetS: a.offsetS(f.BeforeNs), Error: f.Reason, Count: 1, LastOffsetS: a.offsetS(f.BeforeNs)})
	}
	for _, r := range a.changes.Resets {
		get(r.Interface).CounterResets++
		li.CounterResets++
		li.Resets = append(li.Resets, CounterReset{Interface: r.Interface, Name: r.Name, Time: a.wall(r.ToNs),
			OffsetS: a.offsetS(r.ToNs), From: r.From, To: r.To})
	}
	names := make([]string, 0, len(per))
	for n := range per {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		li.Interfaces = append(li.Interfaces, *per[n])
	}
	return li
}

func (c LossCounts) add(d LossCounts) LossCounts {
	return LossCounts{
		FlowMapFull:       c.FlowMapFull + d.FlowMapFull,
		RingbufFull:       c.RingbufFull + d.RingbufFull,
		BucketOverwritten: c.BucketOverwritten + d.BucketOverwritten,
		SliceOverwritten:  c.SliceOverwritten + d.SliceOverwritten,
		FlowsEvicted:      c.FlowsEvicted + d.FlowsEvicted,
		IMDSEvents:        c.IMDSEvents + d.IMDSEvents,
		LinkLocalPayloads: c.LinkLocalPayloads + d.LinkLocalPayloads,
	}
}

// kernelNotes says what the kernel the trace ran on made differ from the
// newest: the attach mode and the bucket mode it fell back to. Counts are
// exact either way; nothing goes unmeasured.
func kernelNotes(m record.Meta) []string {
	var notes []string
	if m.AttachMode == "tc" {
		notes = append(notes, "attached with tc (clsact + cls_bpf), not tcx (Linux 6.6+): the same packets are counted")
	}
	if m.BucketMode == "shared" {
		notes = append(notes, "time buckets shared by all CPUs: per-CPU buckets need pinned BPF timers (Linux 6.7+); the counts are the same, each packet costs an atomic add on a shared cache line")
	}
	return notes
}

// unknownInstanceType is the note on an instance type the table lacks,
// with the types it was probably meant to be.
func unknownInstanceType(name string) string {
	note := "instance type " + name + " is not in the table"
	if near := limits.Nearest(name); len(near) > 0 {
		note += " (did you mean " + strings.Join(near, ", ") + "?)"
	}
	return note + ": give --baseline and --burst"
}
