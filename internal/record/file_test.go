package record

import (
	"bytes"
	"net/netip"
	"reflect"
	"testing"
	"time"
)

func TestRecordingRoundTrip(t *testing.T) {
	start := time.Date(2026, 11, 30, 4, 0, 0, 123456789, time.UTC)
	rec := &Recording{
		Meta: Meta{Version: "test", Impact: true, BucketNs: 100_000, WindowNs: 1_000_000, AttachMode: "tcx",
			Interfaces: []InterfaceInfo{{Name: "eth0", Index: 2, Driver: "ena", ENA: true}},
			Start:      ClockPair{MonoNs: 5_000_000_000, Wall: start},
			End:        ClockPair{MonoNs: 35_000_000_000, Wall: start.Add(30 * time.Second)}},
		Series: []Series{{Interface: "eth0", Direction: Egress, WidthNs: 100_000, Buckets: []Bucket{
			{StartNs: 5_000_100_000, Packets: 3, Bytes: 4500, SYNs: 1, LinkLocal: [NumServices]uint64{0, 2, 0}},
			{StartNs: 5_000_500_000, Packets: 1, Bytes: 60, Retrans: 1},
		}}},
		Flows: []FlowSnapshot{{TimeNs: 6e9, Interface: "eth0", Key: FlowKey{Proto: 17,
			Src: netip.MustParseAddrPort("10.0.0.1:5000"), Dst: netip.MustParseAddrPort("[fd00:ec2::253]:53")},
			FlowStats: FlowStats{Packets: 2, Bytes: 200, Service: ServiceDNS, MinSize: 80, MaxSize: 120}},
			{TimeNs: 6e9, Interface: "eth0", Key: FlowKey{Proto: 6, Src: netip.MustParseAddrPort("10.0.0.1:40000"),
				Dst: netip.MustParseAddrPort("10.0.0.2:443")}, FlowStats: FlowStats{Packets: 9, Bytes: 9000,
				RetransWire: 2, RetransLocal: 3, SRTTMinUs: 180, SRTTMaxUs: 5200}}},
		Owners: []FlowOwner{{Interface: "eth0", Key: FlowKey{Proto: 17, Src: netip.MustParseAddrPort("10.0.0.1:5000"),
			Dst: netip.MustParseAddrPort("[fd00:ec2::253]:53")}, Owner: Owner{PID: 4121, Comm: "java",
			Cgroup: "/system.slice/payments.service", Unit: "payments.service", How: "socket"}}},
		Counters: []CounterSample{{Interface: "eth0", BeforeNs: 1, AfterNs: 2, Values: map[string]uint64{"bw_out_allowance_exceeded": 7}}},
		IMDS: []IMDSEvent{{Interface: "eth0", Direction: Egress, TimeNs: 6e9, Kind: IMDSTimeExceeded, TTL: 1,
			Key: FlowKey{Proto: 6, Src: netip.MustParseAddrPort("169.254.169.254:80"), Dst: netip.MustParseAddrPort("10.0.0.1:41000")}}},
	}
	var buf bytes.Buffer
	if err := Write(&buf, rec); err != nil {
		t.Fatal(err)
	}
	got, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Series, rec.Series) || !reflect.DeepEqual(got.Flows, rec.Flows) ||
		!reflect.DeepEqual(got.Owners, rec.Owners) || !reflect.DeepEqual(got.IMDS, rec.IMDS) ||
		!reflect.DeepEqual(got.Counters, rec.Counters) || !got.Meta.Start.Wall.Equal(start) || got.Meta.Impact != rec.Meta.Impact {
		t.Fatalf("round trip changed the recording:\n got %+v\nwant %+v", got, rec)
	}
}

func TestWallInterpolates(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := Meta{Start: ClockPair{MonoNs: 1000, Wall: start}, End: ClockPair{MonoNs: 1000 + 2e9, Wall: start.Add(2 * time.Second)}}
	if got := m.Wall(1000 + 1e9); !got.Equal(start.Add(time.Second)) {
		t.Fatalf("Wall = %v", got)
	}
}

func TestSizeClassOf(t *testing.T) {
	for _, c := range []struct{ n, want int }{{1, 0}, {64, 0}, {65, 1}, {1500, 5}, {1501, 6}, {9001, 6}, {9002, 7}} {
		if got := SizeClassOf(c.n); got != c.want {
			t.Errorf("SizeClassOf(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

// TestRecordingWithoutImpact reads a series written before impact was
// measured (no retrans column): its buckets read back with none, and a
// series without retransmissions writes no column.
func TestRecordingWithoutImpact(t *testing.T) {
	s := Series{Interface: "eth0", Direction: Ingress, WidthNs: 100_000, Buckets: []Bucket{{StartNs: 100_000, Packets: 1, Bytes: 60}}}
	fs := toFileSeries(s)
	if fs.Retrans != nil {
		t.Fatalf("series without retransmissions wrote a retrans column %v", fs.Retrans)
	}
	got, err := fs.series()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("got %+v, want %+v", got, s)
	}
	fs.Retrans = []uint64{1, 2}
	if _, err := fs.series(); err == nil {
		t.Fatal("a retrans column of the wrong length was accepted")
	}
}
