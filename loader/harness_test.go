//go:build linux

package loader

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/testutil/privtest"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"

	"github.com/enaprobe/enaprobe/bpf"
	"github.com/enaprobe/enaprobe/internal/record"
)

// testProbe is the datapath loaded for BPF_PROG_TEST_RUN, with tiny rings so
// that a test can read every slot before and after each run.
type testProbe struct {
	coll     *ebpf.Collection
	tables   *flowTables
	imds     *ringbuf.Reader
	payloads *ringbuf.Reader
	progs    map[record.Direction]*ebpf.Program
	ctxSize  int
	gsoSegs  int // offsets in __sk_buff, from the object's BTF
	gsoSize  int
	bucketNs int64
}

func testOptions() Options {
	o := DefaultOptions()
	o.Bucket = 10 * time.Millisecond
	o.BucketRing = 40 * time.Millisecond // 4 slots per direction
	o.Window = 10 * time.Millisecond
	o.Slice = time.Hour // one slice for the whole test
	o.SliceSlots = 1
	o.FlowEntries = 4096
	o.RingBytes = 4096
	// Per-CPU open buckets reach the ring when a CPU moves to a later
	// bucket; timers that never fire keep read's sum of ring and open
	// buckets free of races. TestFlushTimer tests the timers.
	o.FlushDelay = time.Hour
	// The fuzz targets run far more link-local frames a second than the
	// default cap; TestLinkLocalPayloadCap tests the cap.
	o.LinkLocalPayloadRate = 1 << 30
	return o
}

func newTestProbe(tb testing.TB, opts Options) *testProbe {
	tb.Helper()
	return newTestProbeFrom(tb, opts, func(*ebpf.CollectionSpec) {})
}

// newTestProbeFrom is newTestProbe with edit applied to the spec first.
func newTestProbeFrom(tb testing.TB, opts Options, edit func(*ebpf.CollectionSpec)) *testProbe {
	tb.Helper()
	privtest.RequireRoot(tb)
	if err := rlimit.RemoveMemlock(); err != nil { // maps count against it before 5.11
		tb.Fatal(err)
	}
	spec, err := Spec(opts)
	if err != nil {
		tb.Fatal(err)
	}
	edit(spec)
	return newTestProbeOf(tb, spec, opts)
}

// newTestProbeOf is newTestProbe for a spec made with opts: the product's
// (Spec) or the benchmark object (BenchSpec).
func newTestProbeOf(tb testing.TB, spec *ebpf.CollectionSpec, opts Options) *testProbe {
	tb.Helper()
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		tb.Fatalf("load datapath: %+v", err)
	}
	tb.Cleanup(func() { coll.Close() })
	tables, err := mapFlowTables(flowMapsOf(coll))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { tables.close() })
	imds, err := ringbuf.NewReader(coll.Maps[bpf.ProbeMapImdsEvents])
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { imds.Close() })
	payloads, err := ringbuf.NewReader(coll.Maps["ll_payloads"])
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { payloads.Close() })
	var skb *btf.Struct
	if err := spec.Types.TypeByName("__sk_buff", &skb); err != nil {
		tb.Fatalf("find __sk_buff in the object's BTF: %v", err)
	}
	tp := &testProbe{
		coll:     coll,
		tables:   tables,
		imds:     imds,
		payloads: payloads,
		progs:    map[record.Direction]*ebpf.Program{record.Ingress: coll.Programs["enaprobe_ingress"], record.Egress: coll.Programs["enaprobe_egress"]},
		ctxSize:  int(skb.Size),
		bucketNs: int64(opts.Bucket),
	}
	for _, m := range skb.Members {
		switch m.Name {
		case "gso_segs":
			tp.gsoSegs = int(m.Offset.Bytes())
		case "gso_size":
			tp.gsoSize = int(m.Offset.Bytes())
		}
	}
	if tp.gsoSegs == 0 || tp.gsoSize == 0 {
		tb.Fatal("__sk_buff has no gso_segs or gso_size")
	}
	return tp
}

// errKernelRefused is a frame the kernel's test run will not build an skb
// from: shorter than Ethernet, or an untagged IP frame with an incomplete IP
// header. Real traffic never brings those to tc either.
var errKernelRefused = errors.New("the kernel's test run refuses this frame")

func kernelRefuses(frame []byte) bool {
	if len(frame) < 14 {
		return true
	}
	switch binary.BigEndian.Uint16(frame[12:]) {
	case 0x0800:
		return len(frame) < 14+20
	case 0x86dd:
		return len(frame) < 14+40
	}
	return false
}

// largestTestRunFrame is the longest frame the kernel's test run takes:
// it builds a linear skb in one page, less its headroom and the shared info
// at its end (about 3.7 kB on x86-64; bpf_test_init in net/bpf/test_run.c),
// so the frames of more than a page that a real link brings with headers
// in page fragments are the veth tests' (TestVethNonLinearHeaders).
// Found by bisection, as the sizes differ by kernel and architecture.
func (tp *testProbe) largestTestRunFrame(tb testing.TB) int {
	tb.Helper()
	runs := func(n int) bool {
		_, err := tp.progs[record.Egress].Run(&ebpf.RunOptions{Data: make([]byte, n)})
		return err == nil
	}
	lo, hi := 14, 1<<16 // runs(lo); !runs(hi)
	if !runs(lo) || runs(hi) {
		tb.Fatalf("the test run takes no %d-byte frame or takes a %d-byte one", lo, hi)
	}
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; runs(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// tryRun feeds one frame to the program of direction dir with the given GSO
// metadata and checks the program let it pass.
func (tp *testProbe) tryRun(dir record.Direction, frame []byte, gsoSegs, gsoSize uint32) error {
	opts := &ebpf.RunOptions{Data: frame}
	if gsoSegs != 0 || gsoSize != 0 {
		ctx := make([]byte, tp.ctxSize)
		binary.NativeEndian.PutUint32(ctx[tp.gsoSegs:], gsoSegs)
		binary.NativeEndian.PutUint32(ctx[tp.gsoSize:], gsoSize)
		opts.Context = ctx
	}
	ret, err := tp.progs[dir].Run(opts)
	if err != nil && kernelRefuses(frame) {
		return errKernelRefused
	}
	if err != nil {
		return fmt.Errorf("run %s program on %d bytes: %w", dir, len(frame), err)
	}
	if int32(ret) != -1 {
		return fmt.Errorf("%s program returned %d, want -1 (TC_ACT_UNSPEC / TCX_NEXT)", dir, int32(ret))
	}
	return nil
}

// counts is everything the datapath counted, summed over CPUs and slots.
type counts struct {
	totals [record.NumDirections]bpf.ProbeDirTotals
	loss   [bpf.ProbeLossKindNUM_LOSS]uint64
	bucket [record.NumDirections]record.Bucket
	sizes  [record.NumDirections][record.NumSizeClasses]uint64
	supers [record.NumDirections]uint64
}

func (tp *testProbe) read(tb testing.TB) counts {
	tb.Helper()
	var c counts
	var states []bpf.ProbeCpuState
	if err := tp.coll.Maps[bpf.ProbeMapCpuStates].Lookup(uint32(0), &states); err != nil {
		tb.Fatal(err)
	}
	for _, s := range states {
		for d, b := range s.Open {
			c.bucket[d].Packets += b.Packets
			c.bucket[d].Bytes += b.Bytes
			c.bucket[d].SYNs += uint64(b.Syns)
			c.bucket[d].Retrans += uint64(b.Retrans)
			for j := range b.LinkLocal {
				c.bucket[d].LinkLocal[j] += uint64(b.LinkLocal[j])
			}
		}
		for d := range s.Slices {
			for i, n := range s.Slices[d].Counts {
				c.sizes[d][i] += n
			}
			c.supers[d] += s.Slices[d].SuperPackets
		}
		for d := range c.totals {
			for i := range s.Totals[d].Packets {
				c.totals[d].Packets[i] += s.Totals[d].Packets[i]
				c.totals[d].Bytes[i] += s.Totals[d].Bytes[i]
			}
			c.totals[d].Syns += s.Totals[d].Syns
		}
		for i, v := range s.Loss {
			c.loss[i] += v
		}
	}
	buckets := tp.coll.Maps[bpf.ProbeMapBuckets]
	per := buckets.MaxEntries() / record.NumDirections
	for i := uint32(0); i < buckets.MaxEntries(); i++ {
		var b bpf.ProbeBucket
		if err := buckets.Lookup(i, &b); err != nil {
			tb.Fatal(err)
		}
		d := i / per
		c.bucket[d].Packets += b.Packets
		c.bucket[d].Bytes += b.Bytes
		c.bucket[d].SYNs += uint64(b.Syns)
		c.bucket[d].Retrans += uint64(b.Retrans)
		for j := range b.LinkLocal {
			c.bucket[d].LinkLocal[j] += uint64(b.LinkLocal[j])
		}
	}
	slices := tp.coll.Maps[bpf.ProbeMapSizeSlices]
	for d := uint32(0); d < record.NumDirections; d++ {
		var vals []bpf.ProbeSizeSlice
		if err := slices.Lookup(d, &vals); err != nil {
			tb.Fatal(err)
		}
		for _, v := range vals {
			for i, n := range v.Counts {
				c.sizes[d][i] += n
			}
			c.supers[d] += v.SuperPackets
		}
	}
	return c
}

// imdsEvents takes the IMDS events waiting in the ring.
func (tp *testProbe) imdsEvents(tb testing.TB) []bpf.ProbeImdsEvent {
	tb.Helper()
	var evs []bpf.ProbeImdsEvent
	if err := drainRing(tp.imds, func(ev bpf.ProbeImdsEvent) { evs = append(evs, ev) }); err != nil {
		tb.Fatal(err)
	}
	return evs
}

// linkLocalPayloads takes the payload events waiting in the ring.
func (tp *testProbe) linkLocalPayloads(tb testing.TB) []bpf.ProbeLlPayloadEvent {
	tb.Helper()
	var evs []bpf.ProbeLlPayloadEvent
	if err := drainRing(tp.payloads, func(ev bpf.ProbeLlPayloadEvent) { evs = append(evs, ev) }); err != nil {
		tb.Fatal(err)
	}
	return evs
}

// clearBuckets zeroes the bucket ring and the CPUs' open buckets, so a test
// can sum them without slots being recycled under it (the recycling rule is
// tested on its own).
func (tp *testProbe) clearBuckets(tb testing.TB) {
	tb.Helper()
	if err := zeroArray[bpf.ProbeBucket](tp.coll.Maps[bpf.ProbeMapBuckets]); err != nil {
		tb.Fatal(err)
	}
	var states []bpf.ProbeCpuState
	m := tp.coll.Maps[bpf.ProbeMapCpuStates]
	if err := m.Lookup(uint32(0), &states); err != nil {
		tb.Fatal(err)
	}
	for i := range states {
		states[i].Open = [record.NumDirections]bpf.ProbeBucket{}
	}
	if err := m.Put(uint32(0), states); err != nil {
		tb.Fatal(err)
	}
}

// flow reads a flow's entry from the table of its address family.
func (tp *testProbe) flow(tb testing.TB, k record.FlowKey) (bpf.ProbeFlowStats, bool) {
	tb.Helper()
	want := stateKey6(probeKey(k))
	if k.Src.Addr().Is4() {
		want = stateKey4(probeKey4(k))
	}
	var v bpf.ProbeFlowStats
	n := 0
	tp.tables.each(func(sk stateKey, s bpf.ProbeFlowStats) {
		if sk == want {
			v = s
			n++
		}
	})
	if n > 1 {
		tb.Fatalf("flow %s is in the table %d times", k, n)
	}
	return v, n == 1
}

// deleteFlows empties both flow tables. Only while no program runs.
func (tp *testProbe) deleteFlows(tb testing.TB) {
	tb.Helper()
	clearFlowTables(tb, tp.coll)
}

// flowMapsOf picks the flow tables' maps out of a loaded collection.
func flowMapsOf(coll *ebpf.Collection) flowMaps {
	return flowMaps{coll.Maps[bpf.ProbeMapFlows4], coll.Maps[bpf.ProbeMapFlows6], coll.Maps[bpf.ProbeMapFlowUsed4], coll.Maps[bpf.ProbeMapFlowUsed6]}
}

// clearFlowTables empties both flow tables and their used marks.
func clearFlowTables(tb testing.TB, coll *ebpf.Collection) {
	tb.Helper()
	errs := []error{
		zeroArray[bpf.ProbeFlowBucket4](coll.Maps[bpf.ProbeMapFlows4]),
		zeroArray[bpf.ProbeFlowBucket6](coll.Maps[bpf.ProbeMapFlows6]),
		zeroArray[uint64](coll.Maps[bpf.ProbeMapFlowUsed4]),
		zeroArray[uint64](coll.Maps[bpf.ProbeMapFlowUsed6]),
	}
	if err := errors.Join(errs...); err != nil {
		tb.Fatalf("clear flow tables: %v", err)
	}
}

// countFlows counts the flows in both tables, after checking that the
// used marks, which the walk follows, name exactly the buckets that hold
// a flow.
func (tp *testProbe) countFlows(tb testing.TB) int {
	tb.Helper()
	t := tp.tables
	checkUsedMarks(tb, "ipv4", t.used4, t.per4, len(t.b4), func(i int) bool { return t.b4[i].Ways[0].Key.Present != 0 })
	checkUsedMarks(tb, "ipv6", t.used6, t.per6, len(t.b6), func(i int) bool { return t.b6[i].Ways[0].Key.Present != 0 })
	n := 0
	tp.tables.each(func(stateKey, bpf.ProbeFlowStats) { n++ })
	return n
}

func checkUsedMarks(tb testing.TB, table string, used []uint64, per, buckets int, holds func(int) bool) {
	tb.Helper()
	for i := range buckets {
		marked := used[i/per]&(1<<(i%per)) != 0
		if marked != holds(i) {
			tb.Errorf("%s bucket %d: marked used %v, holds a flow %v", table, i, marked, holds(i))
		}
	}
}

// zeroArray sets every value (a V) of an array map to zeroes, in one
// syscall.
func zeroArray[V any](m *ebpf.Map) error {
	n := int(m.MaxEntries())
	keys := make([]uint32, n)
	for i := range keys {
		keys[i] = uint32(i)
	}
	vals := make([]V, n)
	if _, err := m.BatchUpdate(keys, vals, nil); err != nil {
		return fmt.Errorf("zero %s: %w", m, err)
	}
	return nil
}

// probeKey is the datapath key of a flow: the inverse of flowKey.
func probeKey(k record.FlowKey) bpf.ProbeFlowKey {
	return bpf.ProbeFlowKey{
		Saddr: k.Src.Addr().As16(), Daddr: k.Dst.Addr().As16(),
		Sport: netPort(k.Src.Port()), Dport: netPort(k.Dst.Port()), Proto: k.Proto,
	}
}

// probeKey4 is the IPv4 flow map's key of an IPv4 flow.
func probeKey4(k record.FlowKey) bpf.ProbeFlowKey4 {
	s, d := k.Src.Addr().As4(), k.Dst.Addr().As4()
	return bpf.ProbeFlowKey4{
		Saddr: binary.NativeEndian.Uint32(s[:]), Daddr: binary.NativeEndian.Uint32(d[:]),
		Sport: netPort(k.Src.Port()), Dport: netPort(k.Dst.Port()), Proto: k.Proto,
	}
}

// bucketModes are the bucket modes this kernel can run: both where it pins
// BPF timers to a CPU, the shared one alone elsewhere.
func bucketModes(tb testing.TB) []BucketMode {
	tb.Helper()
	privtest.RequireRoot(tb)
	if timerPinSupported() {
		return []BucketMode{BucketsPerCPU, BucketsShared}
	}
	return []BucketMode{BucketsShared}
}
