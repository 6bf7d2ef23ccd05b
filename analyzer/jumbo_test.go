package analyzer

import (
	"net/netip"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/record"
)

// TestJumboLeavingVPC: only the egress flow that sent packets over 1500
// bytes toward an address outside the private ranges is reported.
func TestJumboLeavingVPC(t *testing.T) {
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	const s = int64(time.Second)
	rec := &record.Recording{Meta: record.Meta{
		WindowNs:   1_000_000,
		Interfaces: []record.InterfaceInfo{{Name: "eth0", Driver: "ena"}},
		Start:      record.ClockPair{MonoNs: s, Wall: start},
		End:        record.ClockPair{MonoNs: 5 * s, Wall: start.Add(4 * time.Second)},
	}}
	flow := func(src, dst string, maxSize uint32, dirs uint8) {
		for i, at := range []int64{2 * s, 3 * s} {
			rec.Flows = append(rec.Flows, record.FlowSnapshot{TimeNs: at, Interface: "eth0",
				Key: record.FlowKey{Proto: 6, Src: netip.MustParseAddrPort(src), Dst: netip.MustParseAddrPort(dst)},
				FlowStats: record.FlowStats{Packets: uint64(10 * (i + 1)), Bytes: uint64(10*(i+1)) * uint64(maxSize),
					FirstSeenNs: s + s/2, LastSeenNs: at, Directions: dirs, MinSize: 52, MaxSize: maxSize}})
		}
	}
	flow("10.0.0.10:40000", "52.94.1.10:443", 8949, 2)          // jumbo to a public address: reported
	flow("10.0.0.10:40001", "10.0.7.7:443", 8949, 2)            // jumbo inside the VPC: fine
	flow("10.0.0.10:40002", "52.94.1.11:443", 1500, 2)          // full frames to the internet: fine
	flow("52.94.1.12:443", "10.0.0.10:40003", 8949, 1)          // received: not ours to send smaller
	flow("[2600:1f18::1]:40004", "[2600:1f18::2]:443", 8949, 2) // IPv6: the VPC cannot be told
	res := Analyze(rec, DefaultOptions())
	var got []Finding
	for _, f := range res.Findings {
		if f.Kind == KindJumboLeavingVPC {
			got = append(got, f)
		}
	}
	if len(got) != 1 {
		t.Fatalf("%d jumbo_leaving_vpc findings, want 1: %+v", len(got), got)
	}
	f := got[0]
	if f.Severity != SeverityInfo || len(f.Flows) != 1 || f.Flows[0].Dst != "52.94.1.10:443" || f.Flows[0].MaxSize != 8949 {
		t.Errorf("finding %+v", f)
	}
	if f.StartOffsetS != 0.5 {
		t.Errorf("starts at %+.3f s, want the flow's first packet at +0.5 s", f.StartOffsetS)
	}
}
