package analyzer

import (
	"net/netip"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/record"
)

// TestConntrackSlowRead: a read takes 15 ms and the SYN flood happens while
// it runs; the read missed the drops, the next one has them. The finding
// must still name the flood's source: a jump is looked for over the reads'
// whole spans, and so are its culprits.
func TestConntrackSlowRead(t *testing.T) {
	const ms = int64(time.Millisecond)
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	base := int64(10_000) * ms
	rec := &record.Recording{Meta: record.Meta{
		WindowNs: ms, SampleNs: 50 * ms,
		Interfaces: []record.InterfaceInfo{{Name: "eth0", Driver: "ena", ENA: true}},
		Start:      record.ClockPair{MonoNs: base, Wall: start},
		End:        record.ClockPair{MonoNs: base + 1000*ms, Wall: start.Add(time.Second)},
	}}
	read := func(at int64, exceeded, available uint64) {
		rec.Counters = append(rec.Counters, record.CounterSample{Interface: "eth0", BeforeNs: at, AfterNs: at + 15*ms,
			Values: map[string]uint64{"conntrack_allowance_exceeded": exceeded, "conntrack_allowance_available": available,
				"bw_in_allowance_exceeded": 0, "bw_out_allowance_exceeded": 0, "pps_allowance_exceeded": 0, "linklocal_allowance_exceeded": 0}})
	}
	for at := base; at < base+1000*ms; at += 50 * ms {
		switch {
		case at < base+400*ms:
			read(at, 0, 300)
		default:
			read(at, 300, 0)
		}
	}
	// 600 SYNs from one source in 5 ms, inside the read at +350 ms (which
	// still said 0 dropped: the drops landed after it sampled).
	flood := base + 355*ms
	var buckets []record.Bucket
	for i := int64(0); i < 50; i++ {
		buckets = append(buckets, record.Bucket{StartNs: flood + i*100_000, Packets: 12, Bytes: 12 * 74, SYNs: 12})
	}
	rec.Series = []record.Series{{Interface: "eth0", Direction: record.Egress, WidthNs: 100_000, Buckets: buckets}}
	src := netip.MustParseAddr("10.0.0.7")
	for i := 0; i < 600; i++ {
		key := record.FlowKey{Proto: 6, Src: netip.AddrPortFrom(src, uint16(20000+i)), Dst: netip.MustParseAddrPort("10.0.3.4:5432")}
		at := flood + int64(i)*5*ms/600
		rec.Flows = append(rec.Flows, record.FlowSnapshot{TimeNs: base + 400*ms, Interface: "eth0", Key: key,
			FlowStats: record.FlowStats{Packets: 1, Bytes: 74, SYNs: 1, TCPFlags: 0x02, Directions: 2, FirstSeenNs: at, LastSeenNs: at, MinSize: 60, MaxSize: 60}})
	}
	res := Analyze(rec, DefaultOptions())
	var found *Finding
	for i := range res.Findings {
		if res.Findings[i].Kind == KindConntrackExceeded {
			found = &res.Findings[i]
		}
	}
	if found == nil {
		t.Fatalf("no conntrack_exceeded finding: %+v", res.Findings)
	}
	if len(found.Flows) == 0 || found.Flows[0].Src != "10.0.0.7:*" || found.Flows[0].SYNs != 600 {
		t.Errorf("culprits %+v, want 10.0.0.7:* with its 600 SYNs", found.Flows)
	}
}
