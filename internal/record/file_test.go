package record

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestRecordingRoundTrip(t *testing.T) {
	start := time.Date(2026, 11, 30, 4, 0, 0, 123456789, time.UTC)
	rec := &Recording{
		Meta: Meta{Version: "test", Impact: true, WindowNs: 1_000_000, AttachMode: "tcx",
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

// metaBucketNs is the bucket width a recording file's meta says, which
// builds before Recording.BucketNs read.
func metaBucketNs(t *testing.T, file []byte) int64 {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Meta struct{ BucketNs int64 } }
	if err := json.NewDecoder(zr).Decode(&f); err != nil {
		t.Fatal(err)
	}
	return f.Meta.BucketNs
}

// TestBucketFromSeries: the bucket width is the series'. An old recording,
// whose meta also held it, reads the same width; a new file still writes it
// in its meta for the builds that read it from there.
func TestBucketFromSeries(t *testing.T) {
	old, err := os.ReadFile("../../testdata/recordings/microburst_in.rec.gz")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := Read(bytes.NewReader(old))
	if err != nil {
		t.Fatal(err)
	}
	if want := metaBucketNs(t, old); want <= 0 || rec.BucketNs() != want {
		t.Errorf("the old recording's series give %d ns buckets, its meta %d ns", rec.BucketNs(), want)
	}
	var buf bytes.Buffer
	if err := Write(&buf, rec); err != nil {
		t.Fatal(err)
	}
	if got := metaBucketNs(t, buf.Bytes()); got != rec.BucketNs() {
		t.Errorf("the written meta says %d ns buckets, the series %d ns", got, rec.BucketNs())
	}
	if (&Recording{}).BucketNs() != 0 {
		t.Errorf("a recording without series has a bucket width")
	}
}

// TestArchiveMtimesNotInTheFuture: a bundle's entries carry the second
// the bundle was written in, never the next one (GNU tar warns "time stamp
// in the future" when extracting it at once).
func TestArchiveMtimesNotInTheFuture(t *testing.T) {
	at := time.Date(2026, 12, 1, 13, 54, 16, 700e6, time.UTC) // late in its second
	archiveClock = func() time.Time { return at }
	defer func() { archiveClock = time.Now }()
	p := filepath.Join(t.TempDir(), "b.tar.gz")
	if err := writeArchive(p, []BundleFile{{Name: "report.txt", Data: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(at.Truncate(time.Second)) {
			t.Errorf("%s: mtime %v, want %v (the second it was written in)", h.Name, h.ModTime.UTC(), at.Truncate(time.Second))
		}
	}
}

// TestRecordingWithoutImpact reads a recording made before impact was
// measured (no retrans column): its buckets read back with none, written
// again it has no column, and a retrans column of the wrong length is
// refused.
func TestRecordingWithoutImpact(t *testing.T) {
	old, err := os.ReadFile("../../testdata/recordings/steady.rec.gz")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := Read(bytes.NewReader(old))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rec.Series {
		for _, b := range s.Buckets {
			if b.Retrans != 0 {
				t.Fatalf("an old recording read back with retransmissions: %+v", b)
			}
		}
	}
	var buf bytes.Buffer
	if err := Write(&buf, rec); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.NewDecoder(zr).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	series := doc["series"].([]any)
	if _, ok := series[0].(map[string]any)["retrans"]; ok {
		t.Fatal("a series without retransmissions wrote a retrans column")
	}
	series[0].(map[string]any)["retrans"] = []int{1, 2}
	var bad bytes.Buffer
	zw := gzip.NewWriter(&bad)
	if err := json.NewEncoder(zw).Encode(doc); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	if _, err := Read(&bad); err == nil {
		t.Fatal("a retrans column of the wrong length was accepted")
	}
}
