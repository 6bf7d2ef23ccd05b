//go:build linux

package loader

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sort"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/bpf"
	"github.com/enaprobe/enaprobe/internal/monoclock"
	"github.com/enaprobe/enaprobe/internal/record"
)

// lateBuckets is how many already swept buckets each drain sweeps again, at
// least: for packets stamped in a bucket but counted a moment after it was
// swept, and, with per-CPU buckets, for an idle CPU's last bucket, which its
// timer flushes up to a flush delay after the bucket ends.
const lateBuckets = 32

// lateSweep is how many buckets each drain sweeps again for opts.
func lateSweep(opts Options) int64 {
	n := int64(lateBuckets)
	if opts.Buckets == BucketsPerCPU {
		n = max(n, 2*int64(opts.FlushDelay/opts.Bucket)+2)
	}
	return n
}

// sliceMargin is how long after a size slice ends the collector waits before
// reading it: per-CPU slices are read once.
const sliceMargin = 10 * time.Millisecond

// Collector drains one interface's probe into plain data. It is not safe
// for concurrent use: one goroutine calls Drain and SnapshotFlows.
type Collector struct {
	iface string
	p     *Probe

	bucketMem  []byte // the memory-mapped bucket array
	bucketSize int    // stride of one bucket in bucketMem
	slots      int64
	bucketNs   int64
	late       int64 // buckets each drain sweeps again
	settle     time.Duration
	nextBucket int64 // every epoch below it has been swept at least once
	series     [record.NumDirections]chunkedSeries

	sliceNs   int64
	sliceMask int64
	nextSlice int64
	sizes     []record.SizeSlice

	ring      *ringbuf.Reader // window events
	evictions *ringbuf.Reader // flows evicted from full buckets
	// snapshotGen is the flow snapshot generation the datapath's srtt
	// ranges belong to (flow_snapshot_gen, impact.h).
	snapshotGen uint32
	imdsRing    *ringbuf.Reader // IMDS packets recognised
	imds        []record.IMDSEvent
	llRing      *ringbuf.Reader // link-local payloads
	payloads    []record.LinkLocalPayload
	table       *flowTables
	windowNs    int64
	heavy       uint64
	flows       map[stateKey]*flowState
	snapshots   []record.FlowSnapshot
	windows     []record.WindowEvent

	totals  [record.NumDirections]record.Totals
	loss    record.Loss
	evicted uint64

	streamOrigins bool         // StreamOrigins was called
	origins       []FlowOrigin // noted since the last Take, when streamed
}

// stateKey names a flow across both flow tables: IPv4 keys are widened to
// v4-mapped ones, and v6 tells an IPv6 packet that carried v4-mapped
// addresses apart from IPv4.
type stateKey struct {
	v6  bool
	key bpf.ProbeFlowKey
}

func stateKey4(k bpf.ProbeFlowKey4) stateKey {
	var w bpf.ProbeFlowKey
	w.Saddr[10], w.Saddr[11], w.Daddr[10], w.Daddr[11] = 0xff, 0xff, 0xff, 0xff
	binary.NativeEndian.PutUint32(w.Saddr[12:], k.Saddr)
	binary.NativeEndian.PutUint32(w.Daddr[12:], k.Daddr)
	w.Sport, w.Dport, w.Proto = k.Sport, k.Dport, k.Proto
	return stateKey{key: w}
}

func stateKey6(k bpf.ProbeFlowKey) stateKey {
	k.Present, k.Pad = 0, [2]uint8{}
	return stateKey{v6: true, key: k}
}

// flowState is what the collector remembers of a flow between drains: one
// per flow seen, so it is kept small (issue 23: 195,000 flows in a trace).
// The past of evicted entries is rare and kept apart; the origin holds only
// what the key and the interface do not say.
type flowState struct {
	last        bpf.ProbeFlowStats  // as last read from the table
	base        *bpf.ProbeFlowStats // counters of entries evicted earlier; nil while none was
	lastPackets uint64              // cumulative packets at the last snapshot
	lastWindow  uint64              // start of the last window event sent
	folded      uint64              // first_seen_ns of an entry taken into base unseen by an eviction event
	origin      flowOrigin          // the first origin an entry of the flow noted
}

// flowOrigin is a FlowOrigin without its interface and key.
type flowOrigin struct {
	cookie, cgroup uint64
	inIfindex      uint32
	kind           bpf.ProbeOrigin
}

// past is the counters of the flow's evicted entries.
func (fs *flowState) past() bpf.ProbeFlowStats {
	if fs.base == nil {
		return bpf.ProbeFlowStats{}
	}
	return *fs.base
}

// addPast takes an evicted entry's counters into the flow's past.
func (fs *flowState) addPast(v bpf.ProbeFlowStats) {
	p := addStats(fs.past(), v)
	fs.base = &p
}

// originOf is the flow's origin, named by interface and key.
func (c *Collector) originOf(sk stateKey, o flowOrigin) FlowOrigin {
	return FlowOrigin{Interface: c.iface, Key: flowKey(sk.key), Kind: o.kind, Cookie: o.cookie, Cgroup: o.cgroup, InIfindex: o.inIfindex}
}

// FlowOrigin is what the datapath noted of a flow's first egress packet,
// for owner attribution: Kind is bpf.ProbeOriginORIGIN_SOCKET (Cookie, and Cgroup
// when the kernel kept the socket's cgroup v2 id), bpf.ProbeOriginORIGIN_FORWARDED
// (InIfindex: a packet with no local socket that came in on that interface)
// or bpf.ProbeOriginORIGIN_NONE.
type FlowOrigin struct {
	Interface string
	Key       record.FlowKey
	Kind      bpf.ProbeOrigin
	Cookie    uint64
	Cgroup    uint64
	InIfindex uint32
}

// NewCollector starts collecting from p, which should be loaded and not yet
// attached (so no bucket is missed), for interface iface.
func NewCollector(p *Probe, iface string, nowNs int64) (*Collector, error) {
	c := &Collector{
		iface:      iface,
		p:          p,
		bucketSize: int(unsafe.Sizeof(bpf.ProbeBucket{})),
		slots:      int64(p.bucketSlots),
		bucketNs:   int64(p.opts.Bucket),
		late:       lateSweep(p.opts),
		sliceNs:    int64(p.opts.Slice),
		sliceMask:  int64(p.opts.SliceSlots - 1),
		windowNs:   int64(p.opts.Window),
		heavy:      p.opts.HeavyBytes,
		flows:      make(map[stateKey]*flowState),
	}
	if p.opts.Buckets == BucketsPerCPU {
		// Once the programs are detached, the last open buckets reach the
		// ring when the CPUs' timers find them ended.
		c.settle = p.opts.Bucket + 2*p.opts.FlushDelay
	}
	c.nextBucket = nowNs / c.bucketNs
	c.nextSlice = nowNs / c.sliceNs
	c.loss.Interface = iface
	for d := range c.totals {
		c.totals[d] = record.Totals{Interface: iface, Direction: record.Direction(d)}
	}

	size := int(p.objs.Buckets.MaxEntries()) * c.bucketSize
	mem, err := unix.Mmap(p.objs.Buckets.FD(), 0, roundUpPage(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap bucket map of %s: %w", iface, err)
	}
	c.bucketMem = mem
	ring, err := ringbuf.NewReader(p.objs.WindowEvents)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("open window event ring of %s: %w", iface, err)
	}
	c.ring = ring
	if c.evictions, err = ringbuf.NewReader(p.objs.FlowEvictions); err != nil {
		c.Close()
		return nil, fmt.Errorf("open flow eviction ring of %s: %w", iface, err)
	}
	if c.imdsRing, err = ringbuf.NewReader(p.objs.ImdsEvents); err != nil {
		c.Close()
		return nil, fmt.Errorf("open imds event ring of %s: %w", iface, err)
	}
	if c.llRing, err = ringbuf.NewReader(p.objs.LlPayloads); err != nil {
		c.Close()
		return nil, fmt.Errorf("open link-local payload ring of %s: %w", iface, err)
	}
	if c.table, err = mapFlowTables(flowMaps{p.objs.Flows4, p.objs.Flows6, p.objs.FlowUsed4, p.objs.FlowUsed6}); err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: %w", iface, err)
	}
	return c, nil
}

func roundUpPage(n int) int {
	pg := os.Getpagesize()
	return (n + pg - 1) / pg * pg
}

// Close releases the mapping and the ring reader. The probe stays loaded.
func (c *Collector) Close() error {
	var errs []error
	if c.ring != nil {
		errs = append(errs, c.ring.Close())
		c.ring = nil
	}
	if c.evictions != nil {
		errs = append(errs, c.evictions.Close())
		c.evictions = nil
	}
	if c.imdsRing != nil {
		errs = append(errs, c.imdsRing.Close())
		c.imdsRing = nil
	}
	if c.llRing != nil {
		errs = append(errs, c.llRing.Close())
		c.llRing = nil
	}
	if c.table != nil {
		errs = append(errs, c.table.close())
		c.table = nil
	}
	if c.bucketMem != nil {
		errs = append(errs, unix.Munmap(c.bucketMem))
		c.bucketMem = nil
	}
	return errors.Join(errs...)
}

// bucketAt returns the bucket of ring slot i, laid over the mapped memory.
func (c *Collector) bucketAt(i int64) *bpf.ProbeBucket {
	return (*bpf.ProbeBucket)(unsafe.Pointer(&c.bucketMem[i*int64(c.bucketSize)]))
}

// Drain reads everything that is complete at nowNs: buckets, size slices,
// window events, totals and loss. final sweeps the open bucket and slice
// too; use it once the programs are detached.
func (c *Collector) Drain(nowNs int64, final bool) error {
	if final && c.settle > 0 {
		time.Sleep(c.settle)
		nowNs = max(nowNs, monoclock.Now())
	}
	c.drainBuckets(nowNs, final)
	if err := c.drainSlices(nowNs, final); err != nil {
		return err
	}
	if err := c.drainWindowEvents(); err != nil {
		return err
	}
	if err := c.drainIMDSEvents(); err != nil {
		return err
	}
	if err := c.drainLinkLocalPayloads(); err != nil {
		return err
	}
	return c.readCPUStates()
}

func (c *Collector) drainBuckets(nowNs int64, final bool) {
	cur := nowNs / c.bucketNs
	end := cur - 1 // the bucket before the current one may still be written to
	if final {
		end = cur + 1
	}
	from := max(c.nextBucket-c.late, end-c.slots+1)
	for e := from; e < end; e++ {
		for d := int64(0); d < record.NumDirections; d++ {
			b := c.bucketAt(d*c.slots + e&(c.slots-1))
			if int64(atomic.LoadUint64(&b.Epoch)) != e {
				continue
			}
			got := record.Bucket{
				Packets: atomic.SwapUint64(&b.Packets, 0),
				Bytes:   atomic.SwapUint64(&b.Bytes, 0),
				SYNs:    uint64(atomic.SwapUint32(&b.Syns, 0)),
				Retrans: uint64(atomic.SwapUint32(&b.Retrans, 0)),
			}
			for i := range b.LinkLocal {
				got.LinkLocal[i] = uint64(atomic.SwapUint32(&b.LinkLocal[i], 0))
			}
			if got.Packets == 0 && got.Bytes == 0 {
				continue
			}
			got.StartNs = e * c.bucketNs
			c.series[d].add(got)
		}
	}
	if end > c.nextBucket {
		c.nextBucket = end
	}
	// Everything below nextBucket-late will not be swept again: tell the
	// datapath, so a slot reused with unread counts is counted as loss.
	if v := c.nextBucket - c.late; v > 0 {
		_ = c.p.objs.BucketDrained.Set(uint64(v))
	}
}

// seriesChunk is how many buckets a piece of a time series holds. The
// series grows a piece at a time: appending to one slice copied the whole
// series each time it outgrew its room, half the tracer's CPU time on a busy
// interface.
const seriesChunk = 4096

// chunkedSeries is a time series sorted by StartNs, in pieces.
type chunkedSeries struct{ chunks [][]record.Bucket }

// add merges b into the series: into the last piece, or the piece holding
// its place when it is a straggler from before.
func (s *chunkedSeries) add(b record.Bucket) {
	i := len(s.chunks) - 1
	for i > 0 && s.chunks[i][0].StartNs > b.StartNs {
		i--
	}
	if i < 0 || i == len(s.chunks)-1 && len(s.chunks[i]) == cap(s.chunks[i]) &&
		s.chunks[i][len(s.chunks[i])-1].StartNs < b.StartNs {
		s.chunks = append(s.chunks, make([]record.Bucket, 0, seriesChunk))
		i = len(s.chunks) - 1
	}
	s.chunks[i] = mergeBucket(s.chunks[i], b)
}

func (s *chunkedSeries) all() []record.Bucket { return slices.Concat(s.chunks...) }

// mergeBucket appends b to s, sorted by StartNs, adding it to an existing
// bucket of the same start (a straggler swept on a later drain).
func mergeBucket(s []record.Bucket, b record.Bucket) []record.Bucket {
	n := len(s)
	if n == 0 || s[n-1].StartNs < b.StartNs {
		return append(s, b)
	}
	i := sort.Search(n, func(i int) bool { return s[i].StartNs >= b.StartNs })
	if i < n && s[i].StartNs == b.StartNs {
		t := &s[i]
		t.Packets += b.Packets
		t.Bytes += b.Bytes
		t.SYNs += b.SYNs
		t.Retrans += b.Retrans
		for j := range t.LinkLocal {
			t.LinkLocal[j] += b.LinkLocal[j]
		}
		return s
	}
	s = append(s, record.Bucket{})
	copy(s[i+1:], s[i:])
	s[i] = b
	return s
}

func (c *Collector) drainSlices(nowNs int64, final bool) error {
	end := (nowNs - int64(sliceMargin)) / c.sliceNs // slices below end are complete
	if final {
		end = nowNs/c.sliceNs + 1
	}
	from := max(c.nextSlice, end-c.sliceMask)
	if from >= end {
		return nil
	}
	// A CPU's current slice is in its state until its next packet of a later
	// slice retires it to the ring. Read the states first: a slice retired
	// between the two reads is then found in the ring, not lost.
	var states []bpf.ProbeCpuState
	if err := c.p.objs.CpuStates.Lookup(uint32(0), &states); err != nil {
		return fmt.Errorf("read per-cpu state of %s: %w", c.iface, err)
	}
	var ring []bpf.ProbeSizeSlice
	for e := from; e < end; e++ {
		for d := int64(0); d < record.NumDirections; d++ {
			key := uint32(d*(c.sliceMask+1) + e&c.sliceMask)
			if err := c.p.objs.SizeSlices.Lookup(key, &ring); err != nil {
				return fmt.Errorf("read size slice of %s: %w", c.iface, err)
			}
			s := record.SizeSlice{Interface: c.iface, Direction: record.Direction(d), StartNs: e * c.sliceNs, WidthNs: c.sliceNs}
			var any bool
			for cpu := range ring {
				v := ring[cpu]
				if int64(v.Epoch) != e {
					if cpu >= len(states) || int64(states[cpu].Slices[d].Epoch) != e {
						continue
					}
					v = states[cpu].Slices[d]
				}
				for i, n := range v.Counts {
					s.Counts[i] += n
					any = any || n > 0
				}
				s.SuperPackets += v.SuperPackets
			}
			if any {
				c.sizes = append(c.sizes, s)
			}
		}
	}
	c.nextSlice = end
	_ = c.p.objs.SliceDrained.Set(uint64(end - 1))
	return nil
}

func (c *Collector) drainWindowEvents() error {
	return drainRing(c.ring, func(ev bpf.ProbeWindowEvent) {
		c.addWindow(eventStateKey(ev.Key), ev.WinStartNs, ev.Bytes, uint64(ev.Packets), ev.Dir)
	})
}

func (c *Collector) drainIMDSEvents() error {
	return drainRing(c.imdsRing, func(ev bpf.ProbeImdsEvent) {
		c.imds = append(c.imds, record.IMDSEvent{Interface: c.iface, Direction: record.Direction(ev.Dir),
			TimeNs: int64(ev.TsNs), Kind: record.IMDSKind(ev.Kind), Key: flowKey(ev.Key), TTL: ev.Ttl})
	})
}

func (c *Collector) drainLinkLocalPayloads() error {
	return drainRing(c.llRing, func(ev bpf.ProbeLlPayloadEvent) {
		p := linkLocalPayload(c.iface, ev)
		if p.Service == record.ServiceIMDS {
			// The request line is what the detail reads; the headers after
			// it carry the IMDSv2 token, which no recording should hold.
			if i := bytes.Index(p.Data, []byte("\r\n")); i >= 0 {
				p.Data = p.Data[:i]
			}
		}
		c.payloads = append(c.payloads, p)
	})
}

// linkLocalPayload converts a payload event, copying its captured bytes.
func linkLocalPayload(iface string, ev bpf.ProbeLlPayloadEvent) record.LinkLocalPayload {
	n := min(int(ev.Captured), len(ev.Data))
	return record.LinkLocalPayload{Interface: iface, Direction: record.Direction(ev.Dir), TimeNs: int64(ev.TsNs),
		Service: record.Service(ev.Service), Key: flowKey(ev.Key), Len: ev.PayloadLen,
		IMDSKind: record.IMDSKind(ev.ImdsKind), TCPSeq: ev.TcpSeq, Data: slices.Clone(ev.Data[:n])}
}

// drainRing reads every record waiting in ring as a T, without blocking.
func drainRing[T any](ring *ringbuf.Reader, fn func(T)) error {
	ring.SetDeadline(time.Now())
	var rec ringbuf.Record
	for {
		err := ring.ReadInto(&rec)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %T events: %w", *new(T), err)
		}
		var ev T
		if len(rec.RawSample) < int(unsafe.Sizeof(ev)) {
			return fmt.Errorf("%T event of %d bytes, want %d", ev, len(rec.RawSample), unsafe.Sizeof(ev))
		}
		fn(*(*T)(unsafe.Pointer(&rec.RawSample[0])))
	}
}

// addWindow records a heavy window once, whether the ring buffer or a flow
// snapshot reported it first.
func (c *Collector) addWindow(sk stateKey, start, bytes, packets uint64, dir uint8) {
	fs := c.flowState(sk)
	key := sk.key
	if fs.lastWindow >= start && fs.lastWindow != 0 {
		return
	}
	fs.lastWindow = start
	c.windows = append(c.windows, record.WindowEvent{
		Interface: c.iface, Direction: record.Direction(dir), Key: flowKey(key),
		StartNs: int64(start), WidthNs: c.windowNs, Packets: packets, Bytes: bytes,
	})
}

// eventStateKey names the flow of a window or eviction event. An event does
// not say which table its flow lives in: a v4-mapped key is taken as IPv4
// (an IPv6 header carrying v4-mapped addresses is not seen in practice).
func eventStateKey(k bpf.ProbeFlowKey) stateKey {
	sk := stateKey6(k)
	sk.v6 = !netip.AddrFrom16(k.Saddr).Is4In6()
	return sk
}

func (c *Collector) flowState(sk stateKey) *flowState {
	fs, ok := c.flows[sk]
	if !ok {
		fs = &flowState{}
		c.flows[sk] = fs
	}
	return fs
}

func (c *Collector) readCPUStates() error {
	var states []bpf.ProbeCpuState
	if err := c.p.objs.CpuStates.Lookup(uint32(0), &states); err != nil {
		return fmt.Errorf("read per-cpu state of %s: %w", c.iface, err)
	}
	var totals [record.NumDirections]record.Totals
	loss := record.Loss{Interface: c.iface, FlowsEvicted: c.evicted}
	for d := range totals {
		totals[d] = record.Totals{Interface: c.iface, Direction: record.Direction(d)}
	}
	for _, s := range states {
		for d := range totals {
			t := &totals[d]
			for cl := range t.Packets {
				t.Packets[cl] += s.Totals[d].Packets[cl]
				t.Bytes[cl] += s.Totals[d].Bytes[cl]
			}
			t.SYNs += s.Totals[d].Syns
		}
		loss.FlowMapFull += s.Loss[bpf.ProbeLossKindLOSS_FLOW_MAP_FULL]
		loss.RingbufFull += s.Loss[bpf.ProbeLossKindLOSS_RINGBUF_FULL]
		loss.BucketOverwritten += s.Loss[bpf.ProbeLossKindLOSS_BUCKET_OVERWRITTEN]
		loss.SliceOverwritten += s.Loss[bpf.ProbeLossKindLOSS_SLICE_OVERWRITTEN]
		loss.IMDSEvents += s.Loss[bpf.ProbeLossKindLOSS_IMDS_EVENTS]
		loss.LinkLocalPayloads += s.Loss[bpf.ProbeLossKindLOSS_LL_PAYLOAD]
	}
	c.totals, c.loss = totals, loss
	return nil
}

// SnapshotFlows reads the flow tables: a snapshot of every flow that moved
// since the last call, and window events for heavy windows that closed
// without a later packet. Flows evicted from full buckets come first, so
// a flow evicted and back again is not read before its past.
func (c *Collector) SnapshotFlows(nowNs int64) error {
	if err := c.drainEvictions(nowNs); err != nil {
		return err
	}
	c.scanTables(nowNs)
	// Each flow's srtt range starts again at its next packet.
	c.snapshotGen++
	_ = c.p.objs.FlowSnapshotGen.Set(c.snapshotGen)
	return nil
}

func (c *Collector) drainEvictions(nowNs int64) error {
	err := drainRing(c.evictions, func(ev bpf.ProbeFlowEviction) {
		c.evict(nowNs, eventStateKey(ev.Key), ev.Stats)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", c.iface, err)
	}
	return nil
}

func (c *Collector) scanTables(nowNs int64) {
	c.table.each(func(sk stateKey, v bpf.ProbeFlowStats) {
		fs := c.flowState(sk)
		if fs.last.Packets != 0 && fs.last.FirstSeenNs != v.FirstSeenNs {
			// A new entry of a flow whose eviction event was lost (ring
			// full) or comes later: only idle flows are evicted, so the
			// entry last read holds all of its traffic.
			fs.addPast(fs.last)
			fs.folded = fs.last.FirstSeenNs
			c.evicted++
		}
		fs.last = v
		c.observe(nowNs, sk, fs, v)
	})
}

// evict takes the final counters of an evicted entry into the flow's past,
// so its snapshots stay cumulative if it comes back.
func (c *Collector) evict(nowNs int64, sk stateKey, final bpf.ProbeFlowStats) {
	fs := c.flowState(sk)
	if fs.folded == final.FirstSeenNs {
		return // taken in already, when its successor was read
	}
	fs.addPast(final)
	if fs.last.FirstSeenNs == final.FirstSeenNs {
		fs.last = bpf.ProbeFlowStats{} // the entry last read was this one
	}
	c.evicted++
	c.observe(nowNs, sk, fs, final)
}

// observe records a snapshot of the flow when its cumulative counters moved,
// and the window of entry v when it closed heavy.
func (c *Collector) observe(nowNs int64, sk stateKey, fs *flowState, v bpf.ProbeFlowStats) {
	if fs.origin.kind == bpf.ProbeOriginORIGIN_UNKNOWN && bpf.ProbeOrigin(v.Origin) != bpf.ProbeOriginORIGIN_UNKNOWN {
		fs.origin = flowOrigin{kind: bpf.ProbeOrigin(v.Origin), cookie: v.SockCookie, cgroup: v.SockCgroup, inIfindex: v.InIfindex}
		if c.streamOrigins {
			c.origins = append(c.origins, c.originOf(sk, fs.origin))
		}
	}
	cum := addStats(fs.past(), fs.last)
	if cum.Packets != fs.lastPackets {
		fs.lastPackets = cum.Packets
		c.snapshots = append(c.snapshots, record.FlowSnapshot{
			TimeNs: nowNs, Interface: c.iface, Key: flowKey(sk.key), FlowStats: flowStats(cum, c.snapshotGen),
		})
	}
	if v.WinBytes >= c.heavy && int64(v.WinStartNs)+c.windowNs <= nowNs {
		c.addWindow(sk, v.WinStartNs, v.WinBytes, uint64(v.WinPackets), v.WinDir)
	}
}

// addStats adds the counters of an entry to those of its evicted past.
func addStats(base, v bpf.ProbeFlowStats) bpf.ProbeFlowStats {
	if base.Packets == 0 {
		return v
	}
	if v.Packets == 0 {
		return base
	}
	out := v
	out.Packets += base.Packets
	out.Bytes += base.Bytes
	out.Syns += base.Syns
	out.FirstSeenNs = base.FirstSeenNs
	out.TcpFlags |= base.TcpFlags
	out.Dirs |= base.Dirs
	out.MinSize = min(base.MinSize, v.MinSize)
	out.MaxSize = max(base.MaxSize, v.MaxSize)
	// Retransmissions add up. The socket's count of an entry is what it
	// rose by since the entry's first packet of it: a sum is kept as that
	// rise over a zero SkRetrans0.
	out.SeqRetrans += base.SeqRetrans
	out.SeqTail += base.SeqTail
	out.SkRetrans = entrySockRetrans(base) + entrySockRetrans(v)
	out.SkRetrans0 = 0
	out.SkDsack = entrySockDSACK(base) + entrySockDSACK(v)
	out.SkDsack0 = 0
	// The echo ages are of the newer entry's generation alone.
	out.ImpactFlags |= base.ImpactFlags &^ uint8(bpf.ProbeImpactFlagIMPACT_ECHO_GEN)
	return out
}

// entrySockDSACK is how many D-SACKs an entry's socket received since the
// entry's first packet of it.
func entrySockDSACK(v bpf.ProbeFlowStats) uint32 {
	if v.ImpactFlags&uint8(bpf.ProbeImpactFlagIMPACT_SOCK_SEEN) == 0 {
		return 0
	}
	return v.SkDsack - v.SkDsack0
}

// entrySockRetrans is how much an entry's socket retransmitted since the
// entry's first packet of it.
func entrySockRetrans(v bpf.ProbeFlowStats) uint32 {
	if v.ImpactFlags&uint8(bpf.ProbeImpactFlagIMPACT_SOCK_SEEN) == 0 {
		return 0
	}
	return v.SkRetrans - v.SkRetrans0
}

// flowStats converts a flow's cumulative counters (addStats). gen is the
// snapshot generation now ending: the srtt range and the longest silence
// count only when the entry's were set in it, else they are from an
// earlier interval.
func flowStats(v bpf.ProbeFlowStats, gen uint32) record.FlowStats {
	st := record.FlowStats{
		Packets: v.Packets, Bytes: v.Bytes, SYNs: uint64(v.Syns), TCPFlags: v.TcpFlags,
		Directions: v.Dirs, Service: record.Service(v.Service),
		FirstSeenNs: int64(v.FirstSeenNs), LastSeenNs: int64(v.LastSeenNs),
		MinSize: uint32(v.MinSize), MaxSize: uint32(v.MaxSize),
		RetransWire: uint64(v.SeqRetrans), RetransTail: uint64(v.SeqTail),
	}
	st.RetransLocal = uint64(entrySockRetrans(v))
	st.DSACKLocal = uint64(entrySockDSACK(v))
	if v.SnapGen == gen {
		if v.SrttMaxUs != 0 {
			st.SRTTMinUs, st.SRTTMaxUs = v.SrttMinUs, v.SrttMaxUs
		}
		st.GapMaxUs = v.GapMaxNs / 1000
		if v.ImpactFlags&uint8(bpf.ProbeImpactFlagIMPACT_ECHO_GEN) != 0 {
			st.Echoed, st.EchoAgeMinMs, st.EchoAgeMaxMs = true, v.EchoAgeMinMs, v.EchoAgeMaxMs
		}
	}
	return st
}

// flowKey converts the datapath key: addresses v4-mapped, ports in network
// byte order.
func flowKey(k bpf.ProbeFlowKey) record.FlowKey {
	src, dst := netip.AddrFrom16(k.Saddr).Unmap(), netip.AddrFrom16(k.Daddr).Unmap()
	return record.FlowKey{
		Proto: k.Proto,
		Src:   netip.AddrPortFrom(src, netPort(k.Sport)),
		Dst:   netip.AddrPortFrom(dst, netPort(k.Dport)),
	}
}

// netPort turns a port stored in network byte order, as decoded in native
// order by the generated struct, into its value.
func netPort(p uint16) uint16 {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], p)
	return binary.BigEndian.Uint16(b[:])
}

// Result is what the collector gathered, as record pieces.
type Result struct {
	Series  []record.Series
	Sizes   []record.SizeSlice
	Flows   []record.FlowSnapshot
	Windows []record.WindowEvent
	IMDS    []record.IMDSEvent
	// LinkLocalPayloads are the link-local payloads copied (DNS, IMDS
	// requests, NTP).
	LinkLocalPayloads []record.LinkLocalPayload
	Totals            []record.Totals
	Loss              record.Loss
	// Origins are those noted since the last Take, after StreamOrigins
	// (a trace reads them once at the end: Origins).
	Origins []FlowOrigin
}

// Finish is the last read of a trace, once the programs are detached: a
// final drain, then the flow tables.
func (c *Collector) Finish(nowNs int64) error {
	if err := c.Drain(nowNs, true); err != nil {
		return err
	}
	return c.SnapshotFlows(nowNs)
}

// Totals are the exact totals as of the last drain.
func (c *Collector) Totals() []record.Totals { return c.totals[:] }

// Origins are the flows whose first egress packet was seen, for owner
// attribution at the end of a trace (not part of Result, which a
// streaming trace takes at every drain).
func (c *Collector) Origins() []FlowOrigin {
	var out []FlowOrigin
	for sk, fs := range c.flows {
		if fs.origin.kind != bpf.ProbeOriginORIGIN_UNKNOWN {
			out = append(out, c.originOf(sk, fs.origin))
		}
	}
	return out
}

// StreamOrigins makes Take hand on each flow's origin once, when first
// noted (again when a pruned flow comes back), for a reader that keeps
// them with the flows it keeps.
func (c *Collector) StreamOrigins() { c.streamOrigins = true }

// Result returns the data gathered so far.
func (c *Collector) Result() Result {
	r := Result{Sizes: c.sizes, Flows: c.snapshots, Windows: c.windows, IMDS: c.imds, LinkLocalPayloads: c.payloads, Loss: c.loss, Origins: c.origins}
	r.Loss.FlowsEvicted = c.evicted
	for d := range c.series {
		r.Series = append(r.Series, record.Series{Interface: c.iface, Direction: record.Direction(d), WidthNs: c.bucketNs, Buckets: c.series[d].all()})
		r.Totals = append(r.Totals, c.totals[d])
	}
	sort.SliceStable(r.Windows, func(i, j int) bool { return r.Windows[i].StartNs < r.Windows[j].StartNs })
	return r
}
