package analyzer

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/enaprobe/enaprobe/internal/record"
)

// TestFlowIndexRestart: a flow whose counters go down was evicted and
// created anew; its new values are new traffic, never a negative delta.
func TestFlowIndexRestart(t *testing.T) {
	key := record.FlowKey{Proto: 6, Src: netip.MustParseAddrPort("10.0.0.1:1000"), Dst: netip.MustParseAddrPort("10.0.0.2:80")}
	snap := func(at, first int64, packets, bytes uint64) record.FlowSnapshot {
		return record.FlowSnapshot{TimeNs: at, Interface: "eth0", Key: key,
			FlowStats: record.FlowStats{Packets: packets, Bytes: bytes, FirstSeenNs: first, LastSeenNs: at, Directions: 2}}
	}
	fi := buildFlowIndex([]record.FlowSnapshot{
		snap(100, 50, 10, 1000),
		snap(200, 50, 30, 3000),
		snap(400, 350, 5, 500), // evicted after 200, back at 350
		snap(500, 350, 5, 500), // idle: no delta
	})
	if len(fi.flows) != 1 {
		t.Fatalf("%d flows, want 1", len(fi.flows))
	}
	f := fi.flows[0]
	if f.bytes != 3500 || f.packets != 35 {
		t.Errorf("flow totals %d bytes %d packets, want 3500 and 35", f.bytes, f.packets)
	}
	want := []flowDelta{{fromNs: 50, toNs: 100, activeFrom: 50, activeTo: 100, bytes: 1000, packets: 10},
		{fromNs: 100, toNs: 200, activeFrom: 100, activeTo: 200, bytes: 2000, packets: 20},
		{fromNs: 350, toNs: 400, activeFrom: 350, activeTo: 400, bytes: 500, packets: 5}}
	if len(fi.deltas) != len(want) {
		t.Fatalf("deltas %+v, want %+v", fi.deltas, want)
	}
	for i, d := range fi.deltas {
		if d != want[i] {
			t.Errorf("delta %d = %+v, want %+v", i, d, want[i])
		}
	}
	var got []int64
	fi.overlapping("eth0", 150, 360, func(d *flowDelta, _ *flowInfo) { got = append(got, d.toNs) })
	if len(got) != 2 || got[0] != 200 || got[1] != 400 {
		t.Errorf("deltas overlapping [150, 360) end at %v, want [200 400]", got)
	}
}

// TestExcessSpan: the span carrying the most above the level, and none when
// nothing is above it.
func TestExcessSpan(t *testing.T) {
	v := []float64{1, 1, 5, 0.5, 6, 1, 1, 4, 1}
	val := func(i int) float64 { return v[i] }
	if lo, hi, ok := excessSpan(val, 0, len(v), 2); !ok || lo != 2 || hi != 5 {
		t.Errorf("span [%d, %d) ok %v, want [2, 5)", lo, hi, ok)
	}
	if _, _, ok := excessSpan(val, 0, len(v), 6); ok {
		t.Error("a span above the highest value")
	}
}

// TestAnalyzeEmpty: a recording with nothing in it is analysed without
// findings, and zero options take the defaults.
func TestAnalyzeEmpty(t *testing.T) {
	res := Analyze(&record.Recording{}, Options{})
	if len(res.Findings) != 0 || res.SchemaVersion != SchemaVersion {
		t.Errorf("empty recording: %+v", res)
	}
	if b, err := json.Marshal(res); err != nil || bytes.Contains(b, []byte("null")) {
		t.Errorf("empty recording as JSON (%v): %s", err, b)
	}
	def := DefaultOptions()
	if res.Trace.Limits.LinkLocalPPS.Value != def.LinkLocalPPS || res.Trace.FineWindowUs != def.FineWindow.Microseconds() {
		t.Errorf("defaults not applied: %+v", res.Trace)
	}
}

// TestFlowIndexSinglePacket: a one-packet flow (a SYN) is placed at its
// packet, not over the whole drain interval.
func TestFlowIndexSinglePacket(t *testing.T) {
	key := record.FlowKey{Proto: 6, Src: netip.MustParseAddrPort("10.0.0.1:1001"), Dst: netip.MustParseAddrPort("10.0.0.2:80")}
	const synAt, drainAt = 150, 200
	fi := buildFlowIndex([]record.FlowSnapshot{{TimeNs: drainAt, Interface: "eth0", Key: key,
		FlowStats: record.FlowStats{Packets: 1, Bytes: 60, SYNs: 1, FirstSeenNs: synAt, LastSeenNs: synAt, Directions: 2}}})
	count := func(from, to int64) int {
		n := 0
		fi.overlapping("eth0", from, to, func(*flowDelta, *flowInfo) { n++ })
		return n
	}
	if count(synAt+1, drainAt) != 0 || count(0, synAt) != 0 || count(synAt, synAt+1) != 1 {
		t.Errorf("SYN at %d found in [%d, %d): %d, [0, %d): %d, [%d, %d): %d; want 0, 0, 1", synAt,
			synAt+1, drainAt, count(synAt+1, drainAt), synAt, count(0, synAt), synAt, synAt+1, count(synAt, synAt+1))
	}
}
