package analyzer

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/enaprobe/enaprobe/internal/record"
)

// flowRef names one flow of one interface.
type flowRef struct {
	iface string
	key   record.FlowKey
}

// flowDelta is what one flow moved between two of its snapshots, in
// (fromNs, toNs]. Its packets were seen within [activeFrom, activeTo): the
// flow's first and last sighting narrow the drain interval, down to the
// instant for a single-packet flow such as a SYN.
type flowDelta struct {
	flow                 int // index into flowIndex.flows
	fromNs, toNs         int64
	activeFrom, activeTo int64
	bytes, packets       uint64
	syns                 uint64
}

// flowInfo is one flow over the whole trace.
type flowInfo struct {
	flowRef
	last                 record.FlowStats // latest snapshot
	bytes, packets, syns uint64           // summed deltas
	firstSeenNs          int64
	peakBps              float64 // highest throughput of one delta
	// firstSYNNs is when the flow sent its first SYN (hasSYN): a later SYN
	// of the same 5-tuple is a retry.
	firstSYNNs int64
	hasSYN     bool
	deltas     []int // indexes into flowIndex.deltas, in time order
}

// flowIndex turns cumulative flow snapshots into per-drain deltas that can be
// looked up by time.
type flowIndex struct {
	flows []flowInfo
	// deltas of every flow, sorted by toNs; maxSpanNs bounds toNs-fromNs so
	// that a time range is found by binary search plus a short scan.
	deltas    []flowDelta
	maxSpanNs int64
	ids       map[flowRef]int
}

// stats returns the latest snapshot of a flow, if it has one.
func (fi *flowIndex) stats(ref flowRef) (record.FlowStats, bool) {
	id, ok := fi.ids[ref]
	if !ok {
		return record.FlowStats{}, false
	}
	return fi.flows[id].last, true
}

// buildFlowIndex reads the snapshots. A flow's counters are cumulative since
// its entry was created, so a value that goes down means the entry was
// evicted and created anew: the new value is then all new traffic, counted
// from the new FirstSeenNs.
func buildFlowIndex(snaps []record.FlowSnapshot) *flowIndex {
	order := make([]int, len(snaps))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(snaps[a].TimeNs, snaps[b].TimeNs) })

	// Names first, then the flows and deltas allocated once at their size:
	// grown by append, a trace of 195,000 flows allocated 130 MB of
	// copies here, and its peak RSS grew with them (issue 23).
	ids := make(map[flowRef]int)
	for _, i := range order {
		s := &snaps[i]
		ref := flowRef{s.Interface, s.Key}
		if _, seen := ids[ref]; !seen {
			ids[ref] = len(ids)
		}
	}
	fi := &flowIndex{ids: ids, flows: make([]flowInfo, len(ids)), deltas: make([]flowDelta, 0, len(snaps))}
	named := make([]bool, len(ids))
	for _, i := range order {
		s := &snaps[i]
		ref := flowRef{s.Interface, s.Key}
		id := ids[ref]
		seen := named[id]
		if !seen {
			named[id] = true
			fi.flows[id] = flowInfo{flowRef: ref, firstSeenNs: s.FirstSeenNs}
		}
		f := &fi.flows[id]
		d := flowDelta{flow: id, toNs: s.TimeNs}
		restarted := !seen || s.Bytes < f.last.Bytes || s.Packets < f.last.Packets
		if restarted {
			d.fromNs = min(s.FirstSeenNs, s.TimeNs)
			if seen {
				d.fromNs = max(d.fromNs, fi.lastTo(f))
			}
			d.bytes, d.packets, d.syns = s.Bytes, s.Packets, s.SYNs
		} else {
			d.fromNs = fi.lastTo(f)
			d.bytes, d.packets = s.Bytes-f.last.Bytes, s.Packets-f.last.Packets
			d.syns = s.SYNs - min(f.last.SYNs, s.SYNs)
		}
		d.activeFrom, d.activeTo = d.fromNs, d.toNs
		if s.FirstSeenNs > d.activeFrom && s.FirstSeenNs <= d.toNs {
			d.activeFrom = s.FirstSeenNs
		}
		if s.LastSeenNs >= d.activeFrom && s.LastSeenNs < d.toNs {
			d.activeTo = s.LastSeenNs + 1
		}
		f.last = s.FlowStats
		if d.packets == 0 && d.bytes == 0 && d.syns == 0 {
			continue
		}
		f.bytes += d.bytes
		f.packets += d.packets
		f.syns += d.syns
		if d.syns > 0 && !f.hasSYN {
			f.firstSYNNs, f.hasSYN = d.activeFrom, true
		}
		if dt := d.toNs - d.fromNs; dt > 0 {
			f.peakBps = max(f.peakBps, float64(d.bytes)*8e9/float64(dt))
		}
		f.deltas = append(f.deltas, len(fi.deltas))
		fi.deltas = append(fi.deltas, d)
	}
	// Sorting by toNs would break flowInfo.deltas; snapshots were taken in
	// time order, so the deltas already are, up to equal times.
	for _, d := range fi.deltas {
		fi.maxSpanNs = max(fi.maxSpanNs, d.toNs-d.fromNs)
	}
	return fi
}

// named is the flow from src to dst on iface (any protocol, the first
// indexed), nil where none is or src or dst names no one socket (a row of
// several flows, "10.0.0.7:*").
func (fi *flowIndex) named(iface, src, dst string) *flowInfo {
	from, err1 := netip.ParseAddrPort(src)
	to, err2 := netip.ParseAddrPort(dst)
	if err1 != nil || err2 != nil {
		return nil
	}
	for i := range fi.flows {
		if f := &fi.flows[i]; f.iface == iface && f.key.Src == from && f.key.Dst == to {
			return f
		}
	}
	return nil
}

// firstSeen is when the flow from src to dst on iface was last first
// seen before beforeNs: its first sighting, or, where its entry was
// made again since (evicted while idle), the latest such sighting.
func (fi *flowIndex) firstSeen(iface, src, dst string, beforeNs int64) (int64, bool) {
	f := fi.named(iface, src, dst)
	if f == nil {
		return 0, false
	}
	first, ok := f.firstSeenNs, f.firstSeenNs < beforeNs
	for _, di := range f.deltas {
		if d := &fi.deltas[di]; d.activeFrom > d.fromNs && d.activeFrom < beforeNs {
			first, ok = max(first, d.activeFrom), true
		}
	}
	return first, ok
}

// meanRateAt is the bytes per ns the flow from src to dst on iface moved
// over its delta whose sighting holds atNs: from its first packet in that
// drain interval to its last. False where no delta holds atNs.
func (fi *flowIndex) meanRateAt(iface, src, dst string, atNs int64) (float64, bool) {
	f := fi.named(iface, src, dst)
	if f == nil {
		return 0, false
	}
	for _, di := range f.deltas {
		if d := &fi.deltas[di]; d.activeFrom <= atNs && atNs < d.activeTo {
			return float64(d.bytes) / float64(d.activeTo-d.activeFrom), true
		}
	}
	return 0, false
}

// lastTo is the end of the flow's latest delta, or its first sighting.
func (fi *flowIndex) lastTo(f *flowInfo) int64 {
	if n := len(f.deltas); n > 0 {
		return fi.deltas[f.deltas[n-1]].toNs
	}
	return f.firstSeenNs
}

// overlapping calls fn for every delta of the interface whose packets were
// seen in an interval overlapping [fromNs, toNs).
func (fi *flowIndex) overlapping(iface string, fromNs, toNs int64, fn func(d *flowDelta, f *flowInfo)) {
	i, _ := slices.BinarySearchFunc(fi.deltas, fromNs, func(d flowDelta, t int64) int { return cmp.Compare(d.toNs, t+1) })
	for ; i < len(fi.deltas); i++ {
		d := &fi.deltas[i]
		if d.toNs-fi.maxSpanNs >= toNs {
			break
		}
		f := &fi.flows[d.flow]
		if f.iface != iface || d.activeFrom >= toNs || d.activeTo <= fromNs {
			continue
		}
		fn(d, f)
	}
}

// hasDirection tells whether a flow was seen in a direction.
func hasDirection(st record.FlowStats, dir record.Direction) bool {
	return st.Directions&(1<<dir) != 0
}

// flowTally is one flow's traffic inside a finding's window.
type flowTally struct {
	ref                  flowRef
	bytes, packets, syns uint64
	stats                record.FlowStats
	source               string
	// spread, where set (spreadTallies), is what the flow moved within
	// the window had it sent its drain intervals' traffic evenly over
	// when it was seen in each: what it is ranked and shared by.
	spread *[3]float64 // bytes, packets, SYNs
	// usual, where set (withUsual), is the bytes its own rate before
	// would have moved in the window (rankAboveUsual).
	usual float64
}

// spreadTallies are the snapshot tallies of [fromNs, toNs) ranked by what
// each flow likely moved inside it: a drain interval is 100 ms, a finding
// may be 1 ms, and a steady flow's 100 ms outweighed the burst it
// overlapped (the lab's impact-inbound: a 25 Mbit/s download's 288 kB
// named first over a UDP burst's 205 kB, seen in 15 ms of it, where no
// flow moved enough in a window for window events).
func (fi *flowIndex) spreadTallies(iface string, fromNs, toNs int64, keep func(f *flowInfo) bool) []flowTally {
	return fi.tallies(iface, fromNs, toNs, keep, true)
}

// snapshotTallies sums the deltas overlapping [fromNs, toNs) per flow,
// keeping the flows keep accepts (nil keeps all).
func (fi *flowIndex) snapshotTallies(iface string, fromNs, toNs int64, keep func(f *flowInfo) bool) []flowTally {
	return fi.tallies(iface, fromNs, toNs, keep, false)
}

func (fi *flowIndex) tallies(iface string, fromNs, toNs int64, keep func(f *flowInfo) bool, spread bool) []flowTally {
	byFlow := make(map[int]*flowTally)
	var order []int
	fi.overlapping(iface, fromNs, toNs, func(d *flowDelta, f *flowInfo) {
		if keep != nil && !keep(f) {
			return
		}
		t := byFlow[d.flow]
		if t == nil {
			t = &flowTally{ref: f.flowRef, stats: f.last, source: sourceSnapshots}
			if spread {
				t.spread = new([3]float64)
			}
			byFlow[d.flow] = t
			order = append(order, d.flow)
		}
		t.bytes += d.bytes
		t.packets += d.packets
		t.syns += d.syns
		if spread {
			in := float64(min(d.activeTo, toNs)-max(d.activeFrom, fromNs)) / float64(max(d.activeTo-d.activeFrom, 1))
			t.spread[0] += float64(d.bytes) * in
			t.spread[1] += float64(d.packets) * in
			t.spread[2] += float64(d.syns) * in
		}
	})
	out := make([]flowTally, 0, len(order))
	for _, id := range order {
		out = append(out, *byFlow[id])
	}
	return out
}

// Where the flows of a finding come from (FlowShare.Source).
const (
	sourceWindowEvents = "window_events"
	sourceSnapshots    = "snapshots"
)

// eventIndex holds the window events of each interface and direction sorted
// by start.
type eventIndex map[seriesKey][]record.WindowEvent

func buildEventIndex(events []record.WindowEvent) eventIndex {
	ix := make(eventIndex)
	for _, e := range events {
		k := seriesKey{e.Interface, e.Direction}
		ix[k] = append(ix[k], e)
	}
	for _, evs := range ix {
		slices.SortStableFunc(evs, func(a, b record.WindowEvent) int { return cmp.Compare(a.StartNs, b.StartNs) })
	}
	return ix
}

// tallies sums, per flow, the events of one interface and direction whose
// window overlaps a selected fine window of [lo, hi) on the grid. selected
// nil selects them all.
func (ix eventIndex) tallies(k seriesKey, g grid, lo, hi int, selected func(i int) bool) []flowTally {
	evs := ix[k]
	fromNs, toNs := g.startNs(lo), g.startNs(hi)
	i, _ := slices.BinarySearchFunc(evs, fromNs, func(e record.WindowEvent, t int64) int {
		return cmp.Compare(e.StartNs+max(e.WidthNs, 1), t+1)
	})
	byKey := make(map[record.FlowKey]*flowTally)
	var order []record.FlowKey
	for ; i < len(evs) && evs[i].StartNs < toNs; i++ {
		e := &evs[i]
		if e.StartNs+max(e.WidthNs, 1) <= fromNs {
			continue
		}
		if selected != nil && !anySelected(g, e, lo, hi, selected) {
			continue
		}
		t := byKey[e.Key]
		if t == nil {
			t = &flowTally{ref: flowRef{k.iface, e.Key}, source: sourceWindowEvents}
			byKey[e.Key] = t
			order = append(order, e.Key)
		}
		t.bytes += e.Bytes
		t.packets += e.Packets
	}
	out := make([]flowTally, 0, len(order))
	for _, key := range order {
		out = append(out, *byKey[key])
	}
	return out
}

// anySelected tells whether an event overlaps a selected fine window.
func anySelected(g grid, e *record.WindowEvent, lo, hi int, selected func(int) bool) bool {
	a := max(g.index(e.StartNs), lo)
	b := min(g.index(e.StartNs+max(e.WidthNs, 1)-1)+1, hi)
	for i := a; i < b; i++ {
		if selected(i) {
			return true
		}
	}
	return false
}
