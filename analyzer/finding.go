package analyzer

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/enaprobe/enaprobe/internal/record"
)

// What culprit flows are ranked by (Finding.FlowsRankedBy).
const (
	rankBytes   = "bytes"
	rankPackets = "packets"
	rankSYNs    = "syns"
	// rankAboveUsual is the bytes a flow carried above its own rate of
	// the second before (flowTally.usual): inbound, the host sees what
	// the device let through, and a new flow's survivors are fewer bytes
	// than a steady download's beside them.
	rankAboveUsual = "bytes_above_usual"
)

// usualWindow is how long before a span a flow's own rate is taken over
// (rankAboveUsual).
const usualWindow = time.Second

// newFinding fills the time fields of a finding spanning fine windows
// [lo, hi).
func (a *analysis) newFinding(kind, severity, iface string, dirs []record.Direction, lo, hi int) Finding {
	from, to := a.g.startNs(lo), a.g.startNs(hi)
	f := a.newFindingNs(kind, severity, iface, from, to)
	if len(dirs) == 1 {
		f.Direction = dirs[0].String()
	}
	return f
}

func (a *analysis) newFindingNs(kind, severity, iface string, fromNs, toNs int64) Finding {
	return Finding{Kind: kind, Severity: severity, Interface: iface,
		Start: a.wall(fromNs), End: a.wall(toNs), StartOffsetS: a.offsetS(fromNs), EndOffsetS: a.offsetS(toNs),
		Evidence: []Evidence{}, Flows: []FlowShare{}}
}

func ev(name string, value float64, unit string) Evidence { return Evidence{name, value, unit} }

// culprits finds the flows that carried fine windows [lo, hi) of an
// interface in the given directions (only the windows selected accepts, when
// not nil). Window events place a flow to the fine window, so they are used
// when they explain at least EventCoverage of the traffic; otherwise the flow
// snapshots overlapping the span are, less precisely. keep filters the
// snapshot flows (nil keeps every flow seen in one of the directions).
func (a *analysis) culprits(iface string, dirs []record.Direction, lo, hi int, selected func(int) bool,
	rankBy string, keep func(*flowInfo) bool) []FlowShare {
	if hi <= lo {
		return []FlowShare{}
	}
	var windowTotal float64
	var events []flowTally
	for _, d := range dirs {
		fs := a.series(iface, d)
		if fs == nil {
			continue
		}
		col := fs.bytes
		if rankBy == rankPackets {
			col = fs.packets
		}
		for i := lo; i < hi; i++ {
			if selected == nil || selected(i) {
				windowTotal += float64(col[i])
			}
		}
		if rankBy != rankSYNs && keep == nil {
			events = append(events, a.events.tallies(seriesKey{iface, d}, a.g, lo, hi, selected)...)
		}
	}
	// Coverage in the unit ranked by, bytes where it is the rise over
	// the usual.
	unit := rankBy
	if rankBy == rankAboveUsual {
		unit = rankBytes
	}
	var covered float64
	for _, t := range events {
		covered += rankValue(t, unit)
	}
	if len(events) > 0 && covered >= a.opt.EventCoverage*windowTotal {
		for i := range events {
			if st, ok := a.flows.stats(events[i].ref); ok {
				events[i].stats = st
			}
		}
		if rankBy == rankAboveUsual {
			return a.flowShares(a.withUsual(events, iface, a.g.startNs(lo), a.g.startNs(hi)), rankBy, -1)
		}
		return a.flowShares(events, rankBy, max(windowTotal, covered))
	}
	dirKeep := func(f *flowInfo) bool {
		inDir := false
		for _, d := range dirs {
			inDir = inDir || hasDirection(f.last, d)
		}
		return inDir && (keep == nil || keep(f))
	}
	tallies := a.flows.spreadTallies(iface, a.g.startNs(lo), a.g.startNs(hi), dirKeep)
	if rankBy == rankAboveUsual {
		tallies = a.withUsual(tallies, iface, a.g.startNs(lo), a.g.startNs(hi))
	}
	return a.flowShares(tallies, rankBy, -1)
}

// withUsual sets each tally's usual: what its flow would have moved in
// [fromNs, toNs) at its own rate of the usualWindow before fromNs (none
// for a flow that began since).
func (a *analysis) withUsual(tallies []flowTally, iface string, fromNs, toNs int64) []flowTally {
	before := make(map[flowRef]float64)
	for _, t := range a.flows.spreadTallies(iface, fromNs-int64(usualWindow), fromNs, nil) {
		before[t.ref] = rankValue(t, rankBytes)
	}
	for i := range tallies {
		tallies[i].usual = before[tallies[i].ref] * float64(toNs-fromNs) / float64(usualWindow)
	}
	return tallies
}

func rankValue(t flowTally, rankBy string) float64 {
	if rankBy == rankAboveUsual {
		return max(rankValue(t, rankBytes)-t.usual, 0)
	}
	if t.spread != nil {
		switch rankBy {
		case rankPackets:
			return t.spread[1]
		case rankSYNs:
			return t.spread[2]
		}
		return t.spread[0]
	}
	switch rankBy {
	case rankPackets:
		return float64(t.packets)
	case rankSYNs:
		return float64(t.syns)
	}
	return float64(t.bytes)
}

// flowShares ranks tallies and keeps the top ones, each with its share of
// total (of all the tallies' where it is negative).
func (a *analysis) flowShares(tallies []flowTally, rankBy string, total float64) []FlowShare {
	if total < 0 {
		total = 0
		for _, t := range tallies {
			total += rankValue(t, rankBy)
		}
	}
	slices.SortStableFunc(tallies, func(x, y flowTally) int {
		return cmp.Or(cmp.Compare(rankValue(y, rankBy), rankValue(x, rankBy)), cmp.Compare(y.bytes, x.bytes))
	})
	out := []FlowShare{}
	for _, t := range tallies[:min(len(tallies), a.opt.TopFlows)] {
		if rankValue(t, rankBy) == 0 {
			break
		}
		out = append(out, FlowShare{Proto: record.ProtoName(t.ref.key.Proto), Src: t.ref.key.Src.String(),
			Dst: t.ref.key.Dst.String(), Service: serviceName(t.stats.Service), Bytes: t.bytes, Packets: t.packets,
			SYNs: t.syns, MeanSize: meanSize(t.bytes, t.packets), MinSize: t.stats.MinSize, MaxSize: t.stats.MaxSize,
			Share: share(rankValue(t, rankBy), total), Source: t.source})
	}
	return out
}

// topFlowText names the first culprit for a summary.
func topFlowText(flows []FlowShare) string {
	if len(flows) == 0 {
		return "no flow recorded in the window"
	}
	f := flows[0]
	return fmt.Sprintf("mostly %s %s -> %s (%.0f%%)", f.Proto, f.Src, f.Dst, 100*f.Share)
}

// span is a stretch of fine windows found for one counter jump or more.
type span struct {
	lo, hi       int
	fromNs, toNs int64 // the sample intervals the jumps happened in
	// readFromNs is when the read before the first jump began: what
	// that read did not yet count may have happened while it ran.
	readFromNs     int64
	delta          uint64
	level          float64 // per-window level the windows stood out from
	peak           float64 // the highest window
	levelName      string
	levelPerSecond float64
}

func overlapsAny(lo, hi int, spans [][2]int) bool {
	for _, s := range spans {
		if lo < s[1] && hi > s[0] {
			return true
		}
	}
	return false
}
