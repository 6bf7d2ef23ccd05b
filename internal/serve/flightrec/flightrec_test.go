package flightrec

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/record"
)

const ms = int64(time.Millisecond)

func bucketChunk(iface string, startNs int64, n int) Chunk {
	s := record.Series{Interface: iface, Direction: record.Egress, WidthNs: 100_000}
	for i := range n {
		s.Buckets = append(s.Buckets, record.Bucket{StartNs: startNs + int64(i)*100_000, Packets: 1, Bytes: 100})
	}
	return Chunk{Interface: iface, Series: []record.Series{s},
		Totals: []record.Totals{{Interface: iface, Direction: record.Egress, Packets: [record.NumClasses]uint64{uint64(startNs / ms)}}}}
}

// TestRingKeepsHistory: chunks older than the history go, the memory
// estimate follows what is held, and the bound drops the oldest, counted.
func TestRingKeepsHistory(t *testing.T) {
	r := NewRing(time.Second, 1<<30)
	for i := range int64(100) {
		r.Add(i*50*ms, bucketChunk("eth0", i*50*ms, 10))
	}
	if got := r.OldestNs(); got != 99*50*ms-1000*ms {
		t.Errorf("oldest %d ms, want %d", got/ms, (99*50*ms-1000*ms)/ms)
	}
	held := r.Bytes()
	for i := int64(100); i < 1000; i++ {
		r.Add(i*50*ms, bucketChunk("eth0", i*50*ms, 10))
	}
	if r.Bytes() != held {
		t.Errorf("held %d bytes after 1000 chunks, %d after 100: not flat", r.Bytes(), held)
	}
	if r.Dropped() != 0 {
		t.Errorf("dropped %d within the bound", r.Dropped())
	}
	small := NewRing(time.Hour, held/4)
	for i := range int64(100) {
		small.Add(i*50*ms, bucketChunk("eth0", i*50*ms, 10))
	}
	if small.Bytes() > held/4 || small.Dropped() == 0 {
		t.Errorf("bound %d: held %d, dropped %d", held/4, small.Bytes(), small.Dropped())
	}
}

// TestRingRecording: a span comes back as a recording of one interface,
// stragglers merged, totals those of the span.
func TestRingRecording(t *testing.T) {
	r := NewRing(time.Minute, 1<<30)
	for i := range int64(20) {
		r.Add(i*50*ms, bucketChunk("eth0", i*50*ms, 5))
		r.Add(i*50*ms, bucketChunk("eth1", i*50*ms, 5))
	}
	// A straggler of the bucket at 100 ms, swept again later.
	r.Add(21*50*ms, bucketChunk("eth0", 100*ms, 1))
	r.Add(22*50*ms, Chunk{Interface: "eth0", Counters: []record.CounterSample{{Interface: "eth0", BeforeNs: 500 * ms, AfterNs: 501 * ms}}})
	// IMDS events: one in the span, one before it, one of another interface.
	r.Add(22*50*ms, Chunk{Interface: "eth0", IMDS: []record.IMDSEvent{
		{Interface: "eth0", TimeNs: 300 * ms, Kind: record.IMDSReply, TTL: 1},
		{Interface: "eth0", TimeNs: 50 * ms, Kind: record.IMDSTokenRequest}}})
	r.Add(22*50*ms, Chunk{Interface: "eth1", IMDS: []record.IMDSEvent{{Interface: "eth1", TimeNs: 300 * ms, Kind: record.IMDSReply}}})
	// Link-local payloads likewise.
	r.Add(22*50*ms, Chunk{Interface: "eth0", LinkLocalPayloads: []record.LinkLocalPayload{
		{Interface: "eth0", TimeNs: 400 * ms, Service: record.ServiceDNS, Len: 1, Data: []byte{1}},
		{Interface: "eth0", TimeNs: 60 * ms, Service: record.ServiceDNS}}})
	r.Add(22*50*ms, Chunk{Interface: "eth1", LinkLocalPayloads: []record.LinkLocalPayload{{Interface: "eth1", TimeNs: 400 * ms, Service: record.ServiceNTP}}})
	meta := record.Meta{Interfaces: []record.InterfaceInfo{{Name: "eth0"}, {Name: "eth1"}}}
	end := record.ClockPair{MonoNs: 2000 * ms, Wall: time.Unix(1000, 0)}
	rec := r.Recording(meta, []string{"eth0"}, 100*ms, 600*ms, end)
	if len(rec.Meta.Interfaces) != 1 || rec.Meta.Interfaces[0].Name != "eth0" {
		t.Fatalf("interfaces %v", rec.Meta.Interfaces)
	}
	if !rec.Meta.Start.Wall.Equal(time.Unix(1000, 0).Add(-1900 * time.Millisecond)) {
		t.Errorf("start wall %v", rec.Meta.Start.Wall)
	}
	if len(rec.Series) != 1 {
		t.Fatalf("%d series", len(rec.Series))
	}
	b := rec.Series[0].Buckets
	if b[0].StartNs != 100*ms || b[0].Packets != 2 {
		t.Errorf("first bucket %+v, want the one at 100 ms with its straggler (2 packets)", b[0])
	}
	if !slices.IsSortedFunc(b, func(x, y record.Bucket) int { return int(x.StartNs - y.StartNs) }) {
		t.Error("buckets not sorted")
	}
	if b[len(b)-1].StartNs >= 600*ms {
		t.Errorf("bucket at %d ms past the span", b[len(b)-1].StartNs/ms)
	}
	if len(rec.Counters) != 1 {
		t.Errorf("%d counter samples, want 1", len(rec.Counters))
	}
	if len(rec.IMDS) != 1 || rec.IMDS[0].TimeNs != 300*ms || rec.IMDS[0].Interface != "eth0" {
		t.Errorf("IMDS events %+v, want eth0's reply at 300 ms", rec.IMDS)
	}
	if len(rec.LinkLocalPayloads) != 1 || rec.LinkLocalPayloads[0].TimeNs != 400*ms || rec.LinkLocalPayloads[0].Interface != "eth0" {
		t.Errorf("link-local payloads %+v, want eth0's at 400 ms", rec.LinkLocalPayloads)
	}
	// Totals: the last within the span (chunk at 600 ms: 600) less the last
	// before it (chunk at 50 ms: 50).
	if len(rec.Totals) != 1 || rec.Totals[0].Packets[0] != 550 {
		t.Errorf("totals %+v, want 550 packets of the span", rec.Totals)
	}
}

// TestTrigger: a jump opens an incident, a jump during After extends it,
// one within MinGap of the last incident is suppressed (counted once per
// run of jumps), and Due hands incidents out once.
func TestTrigger(t *testing.T) {
	tr := Trigger{After: 10 * time.Second, MinGap: 5 * time.Minute}
	s := int64(time.Second)
	if !tr.Jump("eth0", "pps_allowance_exceeded", 100*s) {
		t.Fatal("first jump opened nothing")
	}
	if tr.Jump("eth0", "bw_out_allowance_exceeded", 105*s) {
		t.Fatal("a jump during After opened another incident")
	}
	if !tr.Jump("eth1", "pps_allowance_exceeded", 106*s) {
		t.Fatal("another interface's jump opened nothing")
	}
	if d := tr.Due(114*s, false); len(d) != 0 {
		t.Fatalf("due before the extended end: %+v", d)
	}
	d := tr.Due(115*s, false)
	if len(d) != 1 || d[0].UntilNs != 115*s || !slices.Equal(d[0].Counters, []string{"bw_out_allowance_exceeded", "pps_allowance_exceeded"}) {
		t.Fatalf("due %+v", d)
	}
	if tr.Jump("eth0", "pps_allowance_exceeded", 200*s) || tr.Jump("eth0", "pps_allowance_exceeded", 201*s) {
		t.Fatal("a jump within MinGap opened an incident")
	}
	if tr.Suppressed != 1 {
		t.Errorf("suppressed %d, want 1 for one run of jumps", tr.Suppressed)
	}
	if !tr.Jump("eth0", "pps_allowance_exceeded", 401*s) {
		t.Error("a jump after MinGap opened nothing")
	}
	if d := tr.Due(0, true); len(d) != 2 {
		t.Errorf("flush: %d incidents, want 2", len(d))
	}

	// Jumps that never stop: the incident ends MaxSpan after the first.
	capped := Trigger{After: 2 * time.Second, MaxSpan: 10 * time.Second}
	for i := range int64(30) {
		capped.Jump("eth0", "conntrack_allowance_exceeded", 100*s+i*s)
	}
	if d := capped.Due(110*s, false); len(d) != 1 || d[0].UntilNs != 110*s {
		t.Errorf("capped incident %+v, want one ending at 110 s", d)
	}
}

// TestPrune: the oldest bundles go first, down to the count and the
// bytes; other files and the newest bundle stay.
func TestPrune(t *testing.T) {
	dir := t.TempDir()
	names := []string{"enaprobe-20261201T010000.000Z-eth0-a.tar.gz", "enaprobe-20261201T020000.000Z-eth0-b.tar.gz",
		"enaprobe-20261201T030000.000Z-eth0-c.tar.gz", "enaprobe-20261201T040000.000Z-snapshot.tar.gz"}
	for _, n := range append(names, "notes.txt") {
		if err := os.WriteFile(filepath.Join(dir, n), make([]byte, 1000), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	removed, kept, err := Prune(dir, Budget{MaxBundles: 3}, noSnapshots, false)
	if err != nil || len(removed) != 1 || filepath.Base(removed[0]) != names[0] || kept != 3000 {
		t.Fatalf("max 3: removed %v, kept %d, %v", removed, kept, err)
	}
	removed, kept, err = Prune(dir, Budget{MaxBytes: 1500}, noSnapshots, false)
	if err != nil || len(removed) != 2 || kept != 1000 {
		t.Fatalf("max 1500 bytes: removed %v, kept %d, %v", removed, kept, err)
	}
	if _, err := os.Stat(filepath.Join(dir, names[3])); err != nil {
		t.Error("the newest bundle went")
	}
	if removed, _, _ := Prune(dir, Budget{MaxBytes: 10}, noSnapshots, false); len(removed) != 0 {
		t.Errorf("removed the newest bundle %v", removed)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Error("a file not a bundle went")
	}
}

func noSnapshots(string) bool { return false }

// TestPruneSnapshotsFirst: snapshots go before incident bundles, and a
// snapshot never makes an incident bundle go, however many come: with a
// budget of 3, one incident bundle and 8 snapshots after it, the incident
// bundle stays; when incident bundles alone fill the budget, the new
// snapshot itself goes. An incident makes room by snapshots first.
func TestPruneSnapshotsFirst(t *testing.T) {
	dir := t.TempDir()
	snapshots := map[string]bool{}
	isSnapshot := func(name string) bool { return snapshots[name] }
	add := func(name string, snapshot bool) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, 1000), 0o644); err != nil {
			t.Fatal(err)
		}
		snapshots[name] = snapshot
	}
	left := func() []string {
		t.Helper()
		m, err := filepath.Glob(filepath.Join(dir, "*.tar.gz"))
		if err != nil {
			t.Fatal(err)
		}
		for i := range m {
			m[i] = filepath.Base(m[i])
		}
		return m
	}
	budget := Budget{MaxBundles: 3}
	incident := "enaprobe-20261201T010000.000Z-eth0-micro_burst.tar.gz"
	add(incident, false)
	for i := range 8 {
		add(fmt.Sprintf("enaprobe-20261201T0200%02d.000Z-snapshot.tar.gz", i), true)
		if _, _, err := Prune(dir, budget, isSnapshot, true); err != nil {
			t.Fatal(err)
		}
	}
	if l := left(); len(l) != 3 || l[0] != incident {
		t.Fatalf("after 8 snapshots: %v, want the incident bundle and the 2 newest snapshots", l)
	}
	// Two incidents more: the snapshots make room for them.
	add("enaprobe-20261201T030000.000Z-eth0-pps.tar.gz", false)
	Prune(dir, budget, isSnapshot, false)
	add("enaprobe-20261201T040000.000Z-eth0-pps.tar.gz", false)
	Prune(dir, budget, isSnapshot, false)
	if l := left(); len(l) != 3 || l[0] != incident || snapshots[l[1]] || snapshots[l[2]] {
		t.Fatalf("after 2 incidents: %v, want the 3 incident bundles", l)
	}
	// Incidents fill the budget: a snapshot does not stay.
	snap := "enaprobe-20261201T050000.000Z-snapshot.tar.gz"
	add(snap, true)
	removed, _, err := Prune(dir, budget, isSnapshot, true)
	if err != nil || len(removed) != 1 || filepath.Base(removed[0]) != snap {
		t.Fatalf("snapshot over a budget of incidents: removed %v, %v; want the snapshot", removed, err)
	}
	// An incident over a budget of incidents: the oldest goes.
	add("enaprobe-20261201T060000.000Z-eth0-pps.tar.gz", false)
	if removed, _, _ := Prune(dir, budget, isSnapshot, false); len(removed) != 1 || filepath.Base(removed[0]) != incident {
		t.Fatalf("incident over budget: removed %v, want the oldest incident", removed)
	}
}

// TestPruneKeepsPending: a bundle Budget.Pending holds (one waiting for its
// upload) stays whatever the budget, and older ones go first.
func TestPruneKeepsPending(t *testing.T) {
	dir := t.TempDir()
	var names []string
	for i := range 4 {
		n := filepath.Join(dir, BundlePrefix+strconv.Itoa(i)+BundleSuffix)
		if err := os.WriteFile(n, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	removed, _, err := Prune(dir, Budget{MaxBundles: 1, Pending: func(p string) bool { return p == names[0] }}, noSnapshots, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := names[1:3]; !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v (the pending oldest and the newest stay)", removed, want)
	}
}
