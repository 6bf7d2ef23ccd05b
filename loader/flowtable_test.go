//go:build linux

package loader

import (
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/enaprobe/enaprobe/internal/monoclock"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"

	"github.com/enaprobe/enaprobe/bpf"
	"github.com/enaprobe/enaprobe/internal/record"
)

// TestFlowLayout: the table has at least 4/3 of the requested capacity in
// slots, in whole regions, and not a region more than that needs.
func TestFlowLayout(t *testing.T) {
	spot := map[uint32]flowLayout{
		6:     {regions: 1, regionBits: 0},   // 8 slots: one bucket
		8:     {regions: 1, regionBits: 1},   // 11 slots: 2 buckets
		65536: {regions: 171, regionBits: 6}, // 87,382 slots: 10,923 buckets
	}
	for e, want := range spot {
		if got := newFlowLayout(e); got != want {
			t.Errorf("%d entries: %+v, want %+v", e, got, want)
		}
	}
	for _, e := range []uint32{1, 2, 5, 7, 24, 25, 100, 383, 384, 385, 1024, 4096, 12288, 12289, 65535, 65536, 100_000, 1 << 20, 3 << 22} {
		l := newFlowLayout(e)
		slots := uint64(l.buckets()) * flowWays
		need := (uint64(e)*4 + 2) / 3
		if slots < need {
			t.Errorf("%d entries: %d slots, want at least %d", e, slots, need)
		}
		perRegion := (uint64(1) << l.regionBits) * flowWays
		if slots-perRegion >= need && l.regions > 1 {
			t.Errorf("%d entries: %d regions, one fewer would do", e, l.regions)
		}
		if l.regionBits > maxRegionBits || l.regions == 0 {
			t.Errorf("%d entries: bad layout %+v", e, l)
		}
	}
}

// flowTableProbe is the datapath loaded with a collector, for tests that
// run the program on frames and read flows the way a trace does.
type flowTableProbe struct {
	p   *Probe
	col *Collector
}

func newFlowTableProbe(t *testing.T, opts Options) *flowTableProbe {
	t.Helper()
	privtest.RequireRoot(t)
	opts.FlushDelay = 0 // the default: Drain waits for the timers at the end
	p, err := Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	col, err := NewCollector(p, "test", monoclock.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { col.Close() })
	return &flowTableProbe{p: p, col: col}
}

func (f *flowTableProbe) send(t *testing.T, frame []byte, repeat int) {
	t.Helper()
	for range repeat {
		if _, err := f.p.objs.EnaprobeEgress.Run(&ebpf.RunOptions{Data: frame}); err != nil {
			t.Fatal(err)
		}
	}
}

// finish drains everything and snapshots the flows, as a trace's end does.
func (f *flowTableProbe) finish(t *testing.T) Result {
	t.Helper()
	if err := f.col.Finish(monoclock.Now()); err != nil {
		t.Fatal(err)
	}
	return f.col.Result()
}

// flowFrames are n distinct IPv4 UDP flows, one frame each.
func flowFrames(t testing.TB, n int) ([][]byte, []record.FlowKey) {
	frames := make([][]byte, n)
	keys := make([]record.FlowKey, n)
	for i := range frames {
		a := net.IPv4(10, 7, byte(i>>8), byte(i))
		frames[i] = udpFrame(t, a, v4B, uint16(2000+i), 53, 22)
		keys[i] = record.FlowKey{Proto: 17,
			Src: netip.AddrPortFrom(netip.AddrFrom4([4]byte(a.To4())), uint16(2000+i)),
			Dst: netip.AddrPortFrom(netip.AddrFrom4([4]byte(v4B.To4())), 53)}
	}
	return frames, keys
}

// lastByFlow is each flow's latest cumulative snapshot.
func lastByFlow(r Result) map[record.FlowKey]record.FlowStats {
	m := make(map[record.FlowKey]record.FlowStats)
	for _, s := range r.Flows {
		m[s.Key] = s.FlowStats
	}
	return m
}

// TestFlowTableFull: a table too small for the flows keeps what fits and
// counts every packet of the others as lost, so stored plus lost is sent.
func TestFlowTableFull(t *testing.T) {
	opts := testOptions()
	opts.FlowEntries = 6 // 8 slots: one bucket
	f := newFlowTableProbe(t, opts)
	frames, keys := flowFrames(t, 20)
	for _, fr := range frames {
		f.send(t, fr, 3)
	}
	r := f.finish(t)
	flows := lastByFlow(r)
	if len(flows) != 8 {
		t.Errorf("%d flows in a table of 8 slots", len(flows))
	}
	for i, k := range keys[:8] {
		if flows[k].Packets != 3 {
			t.Errorf("flow %d (%s): %d packets, want 3", i, k, flows[k].Packets)
		}
	}
	if want := uint64(3 * (len(frames) - 8)); r.Loss.FlowMapFull != want {
		t.Errorf("flow map full: %d packets, want %d", r.Loss.FlowMapFull, want)
	}
	if r.Loss.FlowsEvicted != 0 {
		t.Errorf("%d flows evicted while none was idle", r.Loss.FlowsEvicted)
	}
}

// flowIdleTest is the FlowIdle of the eviction tests.
const flowIdleTest = 50 * time.Millisecond

// newFilledTable makes a table of one bucket (8 slots) with FlowIdle
// flowIdleTest, and fills it with the first 8 of n flows, 2 packets each.
func newFilledTable(t *testing.T, n int) (*flowTableProbe, [][]byte, []record.FlowKey) {
	t.Helper()
	opts := testOptions()
	opts.FlowEntries = 6 // 8 slots: one bucket
	opts.FlowIdle = flowIdleTest
	f := newFlowTableProbe(t, opts)
	frames, keys := flowFrames(t, n)
	for _, fr := range frames[:8] {
		f.send(t, fr, 2)
	}
	return f, frames, keys
}

// TestFlowTableEviction: once the flows of a full table are idle for
// FlowIdle, new flows take their slots, and the evicted flows' counters
// reach userspace through the eviction ring: every flow's cumulative count
// stays exact, including a flow evicted and then back.
func TestFlowTableEviction(t *testing.T) {
	f, frames, keys := newFilledTable(t, 16)
	if err := f.col.SnapshotFlows(monoclock.Now()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * flowIdleTest)
	for _, fr := range frames[8:] {
		f.send(t, fr, 5)
	}
	// Flow 0 comes back: it finds every slot taken by a live flow.
	f.send(t, frames[0], 1)
	r := f.finish(t)
	flows := lastByFlow(r)
	for i, k := range keys {
		want := uint64(2)
		if i >= 8 {
			want = 5
		}
		if got := flows[k].Packets; got != want {
			t.Errorf("flow %d: %d packets, want %d", i, got, want)
		}
	}
	if r.Loss.FlowsEvicted != 8 {
		t.Errorf("%d flows evicted, want 8", r.Loss.FlowsEvicted)
	}
	if r.Loss.FlowMapFull != 1 {
		t.Errorf("flow map full: %d packets, want 1 (flow 0 back among live flows)", r.Loss.FlowMapFull)
	}

	// Once the new flows are idle too, flow 0 returns for good: its count
	// continues from what it had before its eviction.
	time.Sleep(2 * flowIdleTest)
	f.send(t, frames[0], 4)
	if err := f.col.SnapshotFlows(monoclock.Now()); err != nil {
		t.Fatal(err)
	}
	if got := lastByFlow(f.col.Result())[keys[0]].Packets; got != 2+4 {
		t.Errorf("flow 0 after its return: %d packets, want 6", got)
	}
}

// TestFlowTableLateEviction: the table is read after a flow was evicted and
// came back but before its eviction event: the collector takes the entry
// it read last as the evicted one, and the late event adds nothing twice.
func TestFlowTableLateEviction(t *testing.T) {
	f, frames, keys := newFilledTable(t, 9)
	f.col.scanTables(monoclock.Now())
	time.Sleep(2 * flowIdleTest)
	f.send(t, frames[8], 1) // evicts one of the first eight
	f.send(t, frames[8], 1)
	time.Sleep(2 * flowIdleTest)
	// All nine are idle now. Each of the first eight comes back in turn:
	// the evicted one takes the slot idle longest, whose flow, when its
	// turn comes, takes the next; the last takes flow 8's.
	for _, fr := range frames[:8] {
		f.send(t, fr, 3)
	}
	now := monoclock.Now()
	f.col.scanTables(now)
	if err := f.col.drainEvictions(now); err != nil {
		t.Fatal(err)
	}
	f.col.scanTables(now)
	flows := lastByFlow(f.col.Result())
	for i, k := range keys {
		want := uint64(5)
		if i == 8 {
			want = 2
		}
		if got := flows[k].Packets; got != want {
			t.Errorf("flow %d: %d packets, want %d", i, got, want)
		}
	}
	if got := f.col.Result().Loss.FlowsEvicted; got != 9 {
		t.Errorf("%d evictions, want 9", got)
	}
}

// TestFlowTableConcurrentInserts: both CPUs insert the same new flows at
// once. Each flow must be in the table once, with every packet.
func TestFlowTableConcurrentInserts(t *testing.T) {
	const n, repeat = 2000, 50
	opts := testOptions()
	opts.FlowEntries = 4 * n
	tp := newTestProbe(t, opts)
	frames, keys := flowFrames(t, n)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range frames {
				// Opposite orders meet in the middle; repeat keeps both
				// CPUs inside the same flows for a while. One run per
				// system call: a test run of many repeats that a signal
				// interrupts (Go preempts with SIGURG) is retried whole by
				// cilium/ebpf, counting its first runs twice.
				fr := frames[i]
				if g == 1 {
					fr = frames[n-1-i]
				}
				for range repeat {
					if err := tp.tryRun(record.Egress, fr, 0, 0); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := tp.countFlows(t); got != n {
		t.Errorf("%d flows in the table, want %d", got, n)
	}
	for i, k := range keys {
		v, ok := tp.flow(t, k) // fails on a flow in two slots
		if !ok || v.Packets != 2*repeat {
			t.Errorf("flow %d: %d packets (found %v), want %d", i, v.Packets, ok, 2*repeat)
		}
	}
}

// TestFlowTableLoad fills a table to its capacity (three quarters of its
// slots) with random flows: the two-choice placement must lose fewer than
// one new flow in a thousand (about one in ten thousand is expected).
func TestFlowTableLoad(t *testing.T) {
	const n = 8192
	opts := testOptions()
	opts.FlowEntries = n
	tp := newTestProbe(t, opts)
	frames, _ := flowFrames(t, n)
	for _, fr := range frames {
		if err := tp.tryRun(record.Egress, fr, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	stored := tp.countFlows(t)
	lost := tp.read(t).loss[bpf.ProbeLossKindLOSS_FLOW_MAP_FULL]
	if uint64(stored)+lost != n {
		t.Errorf("%d flows stored and %d lost, want %d in all", stored, lost, n)
	}
	slots := uint64(newFlowLayout(n).buckets()) * flowWays
	t.Logf("%d flows in %d slots (%.2f full): %d lost", n, slots, float64(n)/float64(slots), lost)
	if lost*1000 > n {
		t.Errorf("%d of %d flows lost to full buckets", lost, n)
	}
}
