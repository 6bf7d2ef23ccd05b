//go:build linux

package agent

import (
	"errors"
	"net/http"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/enaprobe/enaprobe/internal/capture"
	"github.com/enaprobe/enaprobe/internal/ena"
	"github.com/enaprobe/enaprobe/internal/monoclock"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/serve/flightrec"
	"github.com/enaprobe/enaprobe/internal/serve/metrics"
)

func newTestAgent() *Agent {
	a := &Agent{
		cfg:     Config{After: time.Second, MinGap: time.Minute, History: time.Minute},
		m:       metrics.New([]string{"eth0"}),
		ring:    flightrec.NewRing(time.Minute, 1<<20),
		log:     zerolog.Nop(),
		trigger: flightrec.Trigger{After: time.Second, MinGap: time.Minute},
		ifaces:  map[string]*ifaceState{"eth0": {}},
		origins: newOrigins(originBound(1 << 20)),
	}
	a.initSnapshots()
	return a
}

func sample(atNs int64, pps, gauge uint64) record.CounterSample {
	return record.CounterSample{Interface: "eth0", BeforeNs: atNs, AfterNs: atNs + 1000,
		Values: map[string]uint64{"pps_allowance_exceeded": pps, "bw_in_allowance_exceeded": 1, "conntrack_allowance_available": gauge}}
}

// TestAllowanceCounterResets: the exported counter adds the jumps, never
// goes down on a driver reset, skips an all-zero (failed) read, and the
// first jump opens an incident.
func TestAllowanceCounterResets(t *testing.T) {
	a := newTestAgent()
	s := int64(time.Second)
	a.onSample(sample(1*s, 10, 500)) // the first read: a baseline, no increase
	a.onSample(sample(2*s, 20, 400)) // +10
	a.onSample(sample(3*s, 5, 300))  // reset: nothing
	a.onSample(sample(4*s, 8, 200))  // +3
	a.onSample(record.CounterSample{Interface: "eth0", BeforeNs: 5 * s, AfterNs: 5*s + 1000,
		Values: map[string]uint64{"pps_allowance_exceeded": 0, "bw_in_allowance_exceeded": 0, "conntrack_allowance_available": 0}}) // failed read
	a.onSample(sample(6*s, 9, 100)) // +1 from the last good read
	pps := testutil.ToFloat64(a.m.AllowanceExceeded.WithLabelValues("eth0", metrics.AllowancePPS))
	if pps != 14 {
		t.Errorf("pps_allowance_exceeded exported %v, want 14 (10 + 3 + 1)", pps)
	}
	if v := testutil.ToFloat64(a.m.ConntrackAllowanceAvailable.WithLabelValues("eth0")); v != 100 {
		t.Errorf("conntrack_allowance_available %v, want 100", v)
	}
	if v := testutil.ToFloat64(a.m.CounterReadErrors.WithLabelValues("eth0")); v != 1 {
		t.Errorf("read errors %v, want 1", v)
	}
	due := a.trigger.Due(0, true)
	if len(due) != 1 || due[0].FirstNs != 2*s {
		t.Errorf("incidents %+v, want one from the first jump at 2 s", due)
	}
	if v := testutil.ToFloat64(a.m.BundlesSkipped.WithLabelValues(metrics.SkippedMinGap)); v != 0 {
		t.Errorf("skipped %v within one incident", v)
	}
}

// TestHealthz: unhealthy until attached, and while an interface with
// counters has not read them lately.
func TestHealthz(t *testing.T) {
	a := newTestAgent()
	s := int64(time.Second)
	if ok, _ := a.healthy(10 * s); ok {
		t.Error("healthy before attach")
	}
	a.onMeta(record.Meta{Start: record.ClockPair{MonoNs: s}, Interfaces: []record.InterfaceInfo{{Name: "eth0", ENA: true}}})
	if ok, why := a.healthy(10 * s); ok {
		t.Error("healthy before any counter read")
	} else {
		t.Log(why)
	}
	a.onSample(sample(10*s, 1, 1))
	if ok, why := a.healthy(11 * s); !ok {
		t.Errorf("unhealthy after a read: %s", why)
	}
	if ok, _ := a.healthy(30 * s); ok {
		t.Error("healthy 20 s after the last read at a 0 s interval")
	}
}

// TestSnapshotRedactedWithinBudget: a snapshot is a bundle that reads back,
// with --redact its addresses pseudonymised, and the directory keeps at
// most --max-bundles.
func TestSnapshotRedactedWithinBudget(t *testing.T) {
	a := newTestAgent()
	a.cfg.BundleDir = t.TempDir()
	a.cfg.Redact = true
	a.cfg.MaxBundles = 2
	now := monoclock.Now()
	a.onMeta(record.Meta{Start: record.ClockPair{MonoNs: now - int64(time.Second), Wall: time.Now().Add(-time.Second)},
		WindowNs: 1_000_000, SliceNs: 10_000_000,
		Interfaces: []record.InterfaceInfo{{Name: "eth0"}}})
	secret := netip.MustParseAddrPort("10.1.2.3:4444")
	key := record.FlowKey{Proto: 17, Src: secret, Dst: netip.MustParseAddrPort("10.9.9.9:53")}
	a.ring.Add(now, flightrec.Chunk{Interface: "eth0",
		Series: []record.Series{{Interface: "eth0", Direction: record.Egress, WidthNs: 100_000,
			Buckets: []record.Bucket{{StartNs: now - int64(time.Millisecond), Packets: 1, Bytes: 100}}}},
		Flows: []record.FlowSnapshot{{TimeNs: now - int64(time.Millisecond), Interface: "eth0", Key: key,
			FlowStats: record.FlowStats{Packets: 1, Bytes: 100, FirstSeenNs: now - int64(time.Millisecond), LastSeenNs: now - int64(time.Millisecond)}}}})
	var paths []string
	for range 3 {
		p, err := a.writeSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	left, _ := filepath.Glob(filepath.Join(a.cfg.BundleDir, "*.tar.gz"))
	if len(left) != 2 || !slices.Contains(left, paths[2]) {
		t.Errorf("bundles left %v, want the 2 newest of %v", left, paths)
	}
	rec, _, err := record.ReadBundle(paths[2])
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Flows) != 1 {
		t.Fatalf("%d flows in the bundle, want 1", len(rec.Flows))
	}
	if rec.Flows[0].Key.Src.Addr() == secret.Addr() {
		t.Errorf("--redact left %v in the bundle", secret)
	}
	if v := testutil.ToFloat64(a.m.BundlesWritten); v != 3 {
		t.Errorf("bundles_written_total %v, want 3", v)
	}
	if v := testutil.ToFloat64(a.m.BundlesRemoved); v != 1 {
		t.Errorf("bundles_removed_total %v, want 1", v)
	}
}

// TestSnapshotNamedAndMarked: a snapshot's bundle is named
// enaprobe-<time>-snapshot-<ifaces>.tar.gz, never after finding kinds, and
// its recording says it was a snapshot.
func TestSnapshotNamedAndMarked(t *testing.T) {
	a := newTestAgent()
	a.cfg.BundleDir = t.TempDir()
	now := monoclock.Now()
	a.onMeta(record.Meta{Start: record.ClockPair{MonoNs: now - int64(time.Second), Wall: time.Now().Add(-time.Second)},
		WindowNs: 1_000_000, SliceNs: 10_000_000,
		Interfaces: []record.InterfaceInfo{{Name: "eth0"}, {Name: "eth1"}}})
	p, err := a.writeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^enaprobe-\d{8}T\d{6}\.\d{3}Z-snapshot-eth0\+eth1\.tar\.gz$`).MatchString(filepath.Base(p)) {
		t.Errorf("snapshot bundle %s, want enaprobe-<time>-snapshot-eth0+eth1.tar.gz", filepath.Base(p))
	}
	rec, _, err := record.ReadBundle(p)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Meta.Trigger != record.TriggerSnapshot {
		t.Errorf("recording's trigger %q, want %q", rec.Meta.Trigger, record.TriggerSnapshot)
	}
	at := time.Date(2026, 12, 1, 13, 54, 16, 310e6, time.UTC)
	if got, want := bundleName(at, []string{"eth0"}, record.TriggerIncident, []string{"pps_exceeded", "microburst_out"}),
		"enaprobe-20261201T135416.310Z-eth0-pps_exceeded+microburst_out.tar.gz"; got != want {
		t.Errorf("incident bundle %s, want %s", got, want)
	}
}

// TestSnapshotsNeverEvictIncidents: with --max-bundles 3, an incident
// bundle and then 8 snapshots: the incident bundle stays, with the 2 newest
// snapshots; with 3 incident bundles a snapshot is not kept (errBudgetFull,
// 507 on POST /snapshot) and they all stay.
func TestSnapshotsNeverEvictIncidents(t *testing.T) {
	a := newTestAgent()
	a.cfg.BundleDir = t.TempDir()
	a.cfg.MaxBundles = 3
	now := monoclock.Now()
	a.onMeta(record.Meta{Start: record.ClockPair{MonoNs: now - int64(time.Second), Wall: time.Now().Add(-time.Second)},
		WindowNs: 1_000_000, SliceNs: 10_000_000, Interfaces: []record.InterfaceInfo{{Name: "eth0"}}})
	incident := func() string {
		t.Helper()
		at := monoclock.Now()
		p, err := a.writeIncident(flightrec.Incident{Interface: "eth0", FirstNs: at, UntilNs: at, Counters: []string{"pps_allowance_exceeded"}}, at)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	left := func() []string {
		l, _ := filepath.Glob(filepath.Join(a.cfg.BundleDir, "*.tar.gz"))
		return l
	}
	first := incident()
	var snaps []string
	for range 8 {
		p, err := a.writeSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, p)
	}
	if l := left(); len(l) != 3 || !slices.Contains(l, first) || !slices.Contains(l, snaps[6]) || !slices.Contains(l, snaps[7]) {
		t.Fatalf("bundles left %v, want the incident %s and the 2 newest snapshots", l, first)
	}
	second, third := incident(), incident()
	if l := left(); len(l) != 3 || !slices.Contains(l, first) || !slices.Contains(l, second) || !slices.Contains(l, third) {
		t.Fatalf("bundles left %v, want the 3 incident bundles", l)
	}
	if _, err := a.writeSnapshot(); !errors.Is(err, errBudgetFull) {
		t.Fatalf("a snapshot over a budget of incident bundles: %v, want errBudgetFull", err)
	}
	if l := left(); len(l) != 3 || !slices.Contains(l, first) {
		t.Fatalf("bundles left %v, want the 3 incident bundles", l)
	}
}

// TestSnapshotRequestChecks: loopback is 127.0.0.0/8 and ::1 (mapped too),
// nothing else; a turn per --snapshot-gap, for every interface at once;
// snapshots of an earlier run are known by name.
func TestSnapshotRequestChecks(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:5000": true, "127.9.9.9:1": true, "[::1]:80": true,
		"[::ffff:127.0.0.1]:80": true, "10.0.0.5:80": false, "[2001:db8::1]:80": false, "garbage": false} {
		if got := fromLoopback(&http.Request{RemoteAddr: addr}); got != want {
			t.Errorf("fromLoopback(%s) = %v, want %v", addr, got, want)
		}
	}
	a := newTestAgent()
	a.cfg.SnapshotGap = time.Minute
	ifaces := []string{"eth0", "eth1"}
	if w := a.claimSnapshot(ifaces, 0); w != 0 {
		t.Fatalf("first claim: wait %v", w)
	}
	if w := a.claimSnapshot(ifaces, int64(20*time.Second)); w != 40*time.Second {
		t.Errorf("claim 20 s later: wait %v, want 40s", w)
	}
	if w := a.claimSnapshot(ifaces, int64(time.Minute)); w != 0 {
		t.Errorf("claim a minute later: wait %v, want none", w)
	}
	for name, want := range map[string]bool{"enaprobe-20261201T010000.000Z-snapshot.tar.gz": true,
		"enaprobe-20261201T010000.000Z-snapshot-eth0.tar.gz": true, "enaprobe-20261201T010000.000Z-eth0-microburst_out.tar.gz": false} {
		if got := a.isSnapshot(name); got != want {
			t.Errorf("isSnapshot(%s) = %v, want %v", name, got, want)
		}
	}
}

// TestReadGuardMetrics: what the counter reads' guard did reaches /metrics:
// the state gauge follows it, and each sign is counted once, however often
// the health report repeats it.
func TestReadGuardMetrics(t *testing.T) {
	a := newTestAgent()
	state := func() float64 { return testutil.ToFloat64(a.m.CounterReadGuard.WithLabelValues("eth0")) }
	signs := func() float64 { return testutil.ToFloat64(a.m.CounterReadSigns.WithLabelValues("eth0")) }
	h := capture.Health{SampleInterval: time.Second, Guarded: ena.GuardStatus{State: "reading"}}
	a.onHealth("eth0", h)
	if state() != metrics.ReadGuardReading || signs() != 0 {
		t.Fatalf("state %v signs %v before any sign", state(), signs())
	}
	ev := record.CounterGuardEvent{Interface: "eth0", Reason: "wd_expired +1", Action: record.CounterGuardBackedOff, IntervalNs: int64(10 * time.Second)}
	h.Guarded = ena.GuardStatus{State: record.CounterGuardBackedOff, Events: []record.CounterGuardEvent{ev}}
	a.onHealth("eth0", h)
	a.onHealth("eth0", h)
	if state() != metrics.ReadGuardBackedOff || signs() != 1 {
		t.Errorf("backed off: state %v signs %v, want %d and 1", state(), signs(), metrics.ReadGuardBackedOff)
	}
	stop := ev
	stop.Action, stop.IntervalNs = record.CounterGuardStopped, 0
	h.Guarded = ena.GuardStatus{State: record.CounterGuardStopped, Events: []record.CounterGuardEvent{ev, ev, stop}}
	a.onHealth("eth0", h)
	if state() != metrics.ReadGuardStopped || signs() != 3 {
		t.Errorf("stopped: state %v signs %v, want %d and 3", state(), signs(), metrics.ReadGuardStopped)
	}
}
