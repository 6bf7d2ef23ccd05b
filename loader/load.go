//go:build linux

// Package loader is the only package that talks to the kernel's BPF API: it
// loads the datapath, attaches it to interfaces, and drains its maps into
// the plain data of package record.
package loader

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"

	"github.com/enaprobe/enaprobe/bpf"
)

// Options are the datapath's runtime knobs and map sizes.
type Options struct {
	Bucket     time.Duration // time bucket width, MinBucket to MaxBucket
	Window     time.Duration // fine window of the heavy-flow events, as CheckKnobs gives it
	Slice      time.Duration // packet-size slice width
	HeavyBytes uint64        // bytes per fine window that make a window event
	// FlowEntries is the IPv4 flow table's capacity in flows (the table has
	// a third more slots, see newFlowLayout).
	FlowEntries uint32
	// FlowEntries6 is the IPv6 flow table's; 0 takes a quarter of
	// FlowEntries (at least 1024).
	FlowEntries6 uint32
	// FlowIdle is how long a flow must go without packets before a new
	// flow whose bucket is full may take its slot; its final counters reach
	// userspace through the eviction ring.
	FlowIdle time.Duration
	// BucketRing is how far back, per direction, the bucket ring holds
	// unread buckets: the collector must drain more often than this.
	BucketRing time.Duration
	// Buckets says how packets reach the time series; FlushDelay is, in the
	// per-CPU mode, how long a CPU's timer waits before flushing a bucket
	// that has ended (0: the larger of 10 ms and the bucket width). A busy
	// CPU hands its buckets over itself; the timer is for the last one
	// before it goes idle, and each expiry is an interrupt (two VM exits on
	// some hypervisors): at 1 ms the timers cost 1% of a small-packet
	// stream's throughput, at 10 ms 0.1% (docs/cost.md).
	Buckets     BucketMode
	FlushDelay  time.Duration
	SliceSlots  uint32 // size-slice ring slots per direction (power of two)
	RingBytes   uint32 // window-event ring buffer size (power of two, page multiple)
	VPCResolver netip.Addr
	// NoOrigins turns off noting each flow's origin (socket cookie and
	// cgroup, or the interface a forwarded packet came in on) at its first
	// egress packet, which owner attribution needs.
	NoOrigins bool
	// NoImpact turns off counting TCP retransmissions and reading the
	// local sockets' srtt (bpf/include/impact.h): what the benchmarks
	// measure the impact counting against.
	NoImpact bool
	// LinkLocalPayloadRate caps the link-local payload events (DNS, IMDS
	// requests, NTP) per second on the interface; those over it are counted
	// as loss. 0 turns the capture off.
	LinkLocalPayloadRate uint32
}

// BucketMode is how packets reach the time-bucket ring.
type BucketMode int

const (
	// BucketsAuto is per-CPU where the kernel pins BPF timers to a CPU
	// (Linux 6.7+), shared otherwise.
	BucketsAuto BucketMode = iota
	// BucketsPerCPU adds each packet to its CPU's open bucket with plain
	// adds; the open bucket goes to the shared ring when the CPU moves on to
	// a later bucket, or when its pinned timer finds it ended. No cache line
	// is written by every CPU's packets.
	BucketsPerCPU
	// BucketsShared adds each packet to the shared ring with atomics: every
	// CPU's packets write the same bucket.
	BucketsShared
)

func (m BucketMode) String() string {
	switch m {
	case BucketsPerCPU:
		return "per-cpu"
	case BucketsShared:
		return "shared"
	}
	return "auto"
}

// resolved fills in what the options leave to the kernel or to defaults.
func (o Options) resolved() Options {
	if o.Buckets == BucketsAuto {
		o.Buckets = BucketsShared
		if timerPinSupported() {
			o.Buckets = BucketsPerCPU
		}
	}
	if o.FlushDelay == 0 {
		o.FlushDelay = max(10*time.Millisecond, o.Bucket)
	}
	return o
}

// timerPinSupported runs the per-CPU object's feature probe once: whether
// this kernel starts a BPF timer pinned to the current CPU. A kernel before
// 5.15 refuses the probe program itself (BPF timers), one before 6.7 the
// pin flag when it runs.
var timerPinSupported = sync.OnceValue(func() bool {
	spec, err := bpf.LoadProbePerCPU()
	if err != nil {
		return false
	}
	spec.Maps[bpf.ProbePerCPUMapCpuTimers].MaxEntries = uint32(possibleCPUs())
	var objs struct {
		Prog   *ebpf.Program `ebpf:"enaprobe_probe_timer_pin"`
		Timers *ebpf.Map     `ebpf:"cpu_timers"`
	}
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return false
	}
	defer objs.Prog.Close()
	defer objs.Timers.Close()
	ret, err := objs.Prog.Run(&ebpf.RunOptions{Data: make([]byte, 14)})
	return err == nil && ret == 0
})

// DefaultOptions are modest enough for a 192-CPU host: only the size-slice
// ring and the per-CPU state are per CPU (about 11 KiB per CPU).
func DefaultOptions() Options {
	return Options{
		Bucket:      DefaultBucket,
		Window:      DefaultWindow,
		Slice:       100 * time.Millisecond,
		HeavyBytes:  62_500, // 10% of what a 5 Gbit/s flow moves in 1 ms
		FlowEntries: 65536,
		FlowIdle:    10 * time.Second,
		BucketRing:  1600 * time.Millisecond,
		SliceSlots:  32,
		RingBytes:   256 << 10,
		// The link-local allowance is 1,024 packets/s per interface: a
		// cap of four times it records every link-local packet up to well
		// past the limit, and at most 4,096 * 312 bytes a second after.
		LinkLocalPayloadRate: 4096,
	}
}

func (o Options) validate() error {
	window, err := CheckKnobs(o.Bucket, o.Window)
	if err != nil {
		return err
	}
	if window != o.Window {
		// The caller applies the rule and says so; the loader only checks.
		return &WindowError{Window: o.Window, Bucket: o.Bucket}
	}
	if o.Slice < o.Window {
		return fmt.Errorf("size slice %v shorter than the window %v", o.Slice, o.Window)
	}
	if o.FlowEntries == 0 || o.SliceSlots == 0 || o.RingBytes == 0 {
		return errors.New("flow entries, slice slots and ring bytes must be positive")
	}
	if o.FlowIdle <= 0 {
		return errors.New("flow idle time must be positive")
	}
	if o.FlushDelay < 0 || o.Buckets < BucketsAuto || o.Buckets > BucketsShared {
		return errors.New("bad bucket mode or flush delay")
	}
	if bits.OnesCount32(o.SliceSlots) != 1 || bits.OnesCount32(o.RingBytes) != 1 {
		return errors.New("slice slots and ring bytes must be powers of two")
	}
	if o.BucketRing < 4*o.Bucket {
		return fmt.Errorf("bucket ring %v too short for bucket %v", o.BucketRing, o.Bucket)
	}
	return nil
}

func (o Options) flowEntries6() uint32 {
	if o.FlowEntries6 != 0 {
		return o.FlowEntries6
	}
	return max(o.FlowEntries/4, 1024)
}

// flowLayout is how a flow table is cut: regions of 1<<regionBits buckets
// of flowWays slots. It has 4/3 of the requested capacity in slots: three
// quarters full, the two-choice placement still finds a free way for all
// but about one new flow in ten thousand (TestFlowTableLoad).
type flowLayout struct {
	regions, regionBits uint32
}

// flowWays is FLOW_WAYS of bpf/include/types.h: the slots of one bucket.
const flowWays = uint64(len(bpf.ProbeFlowBucket4{}.Ways))

// maxRegionBits makes regions of 64 buckets: wide enough for two choices
// to even out the buckets, and one lock per 512 slots.
const maxRegionBits = 6

func newFlowLayout(entries uint32) flowLayout {
	slots := (uint64(entries)*4 + 2) / 3
	buckets := max((slots+flowWays-1)/flowWays, 1)
	bits := min(uint32(bits.Len64(buckets-1)), maxRegionBits)
	per := uint64(1) << bits
	return flowLayout{regions: uint32((buckets + per - 1) / per), regionBits: bits}
}

func (l flowLayout) buckets() uint32 { return l.regions << l.regionBits }

// bucketSlots is the ring length per direction: a power of two covering
// BucketRing.
func (o Options) bucketSlots() uint32 {
	n := uint64(o.BucketRing / o.Bucket)
	return uint32(1) << bits.Len64(n-1)
}

// Probe is the datapath loaded once for one interface: its own maps, so
// interfaces never share a flow table or a bucket ring.
type Probe struct {
	opts        Options
	objs        probeObjects
	timers      *ebpf.Map // per-CPU buckets only
	bucketSlots uint32
	mapBytes    uint64
}

// probeObjects is what a trace needs of the generated objects: the maps
// and variables both variants have, and the two tc programs (the
// shared-ring object's programs; not the benchmark-only ones). The maps and
// variables of the shared-ring object are those of the per-CPU one but its
// timers.
type probeObjects struct {
	bpf.ProbeMaps
	bpf.ProbeVariables
	bpf.ProbePrograms
}

// perCPUObjects is probeObjects with the per-CPU object's timer array,
// held open while the programs run: the kernel cancels a map's timers when
// userspace lets go of it.
type perCPUObjects struct {
	*probeObjects
	Timers *ebpf.Map `ebpf:"cpu_timers"`
}

func (o *probeObjects) close() error {
	errs := []error{o.ProbeMaps.Close()}
	for _, p := range []*ebpf.Program{o.EnaprobeIngress, o.EnaprobeEgress} {
		if p != nil {
			errs = append(errs, p.Close())
		}
	}
	return errors.Join(errs...)
}

// Spec returns the datapath's collection spec with the options applied:
// runtime constants set and every map sized, for tests that load it
// themselves.
func Spec(opts Options) (*ebpf.CollectionSpec, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	opts = opts.resolved()
	load := bpf.LoadProbe
	if opts.Buckets == BucketsPerCPU {
		load = bpf.LoadProbePerCPU
	}
	return specOf(load, opts)
}

// Programs of the benchmark object (BenchSpec) that the product lacks: the
// floors the datapath's cost is measured against.
const (
	BenchEmpty   = "enaprobe_empty"   // returns at once: the hook's own cost
	BenchClock   = "enaprobe_clock"   // reads the clock only
	BenchMinimal = "enaprobe_minimal" // clock, parse, per-CPU totals by class
)

// BenchSpec is Spec for the benchmark object: the shared-ring datapath
// (opts.Buckets is ignored) with the BenchEmpty, BenchClock and
// BenchMinimal programs and the atomic_adds knob (1: atomic adds, as the
// product; 0: plain adds that lose counts when CPUs race). A trace never
// loads it.
func BenchSpec(opts Options, atomicAdds bool) (*ebpf.CollectionSpec, error) {
	opts.Buckets = BucketsShared
	if err := opts.validate(); err != nil {
		return nil, err
	}
	spec, err := specOf(bpf.LoadProbeBench, opts.resolved())
	if err != nil {
		return nil, err
	}
	var v uint8
	if atomicAdds {
		v = 1
	}
	if err := spec.Variables[bpf.ProbeBenchVarAtomicAdds].Set(v); err != nil {
		return nil, fmt.Errorf("set atomic_adds: %w", err)
	}
	return spec, nil
}

// specOf parses the object load returns and applies opts (resolved).
func specOf(load func() (*ebpf.CollectionSpec, error), opts Options) (*ebpf.CollectionSpec, error) {
	spec, err := load()
	if err != nil {
		return nil, fmt.Errorf("parse embedded bpf object: %w", err)
	}
	slots := opts.bucketSlots()
	t4, t6 := newFlowLayout(opts.FlowEntries), newFlowLayout(opts.flowEntries6())
	var seed [8]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("draw flow hash seed: %w", err)
	}
	// The names are bpf2go's, so that a knob or map renamed in C fails the
	// build here; the three objects share them.
	consts := map[string]any{
		bpf.ProbeVarFlowRegions4:    t4.regions,
		bpf.ProbeVarFlowRegionBits4: t4.regionBits,
		bpf.ProbeVarFlowRegions6:    t6.regions,
		bpf.ProbeVarFlowRegionBits6: t6.regionBits,
		bpf.ProbeVarFlowSeed:        binary.NativeEndian.Uint64(seed[:]),
		bpf.ProbeVarFlowIdleNs:      uint64(opts.FlowIdle),
		bpf.ProbeVarBucketNs:        uint64(opts.Bucket),
		bpf.ProbeVarBucketMask:      slots - 1,
		bpf.ProbeVarWindowNs:        uint64(opts.Window),
		bpf.ProbeVarHeavyBytes:      opts.HeavyBytes,
		bpf.ProbeVarSliceNs:         uint64(opts.Slice),
		bpf.ProbeVarSliceMask:       opts.SliceSlots - 1,
		bpf.ProbeVarNoteOrigins:     boolByte(!opts.NoOrigins),
		bpf.ProbeVarMeasureImpact:   boolByte(!opts.NoImpact),
		bpf.ProbeVarLlPayloadRate:   opts.LinkLocalPayloadRate,
	}
	if opts.Buckets == BucketsPerCPU {
		consts[bpf.ProbePerCPUVarFlushDelayNs] = uint64(opts.FlushDelay)
	}
	if opts.VPCResolver.Is4() {
		b := opts.VPCResolver.As4()
		consts[bpf.ProbeVarVpcResolver] = uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24 // network order in memory
	}
	for name, v := range consts {
		vs, ok := spec.Variables[name]
		if !ok {
			return nil, fmt.Errorf("bpf object has no variable %s", name)
		}
		if err := vs.Set(v); err != nil {
			return nil, fmt.Errorf("set %s: %w", name, err)
		}
	}
	sizes := map[string]uint32{
		bpf.ProbeMapFlows4:       t4.buckets(),
		bpf.ProbeMapFlowLocks4:   t4.regions,
		bpf.ProbeMapFlowUsed4:    t4.regions,
		bpf.ProbeMapFlows6:       t6.buckets(),
		bpf.ProbeMapFlowLocks6:   t6.regions,
		bpf.ProbeMapFlowUsed6:    t6.regions,
		bpf.ProbeMapBuckets:      2 * slots,
		bpf.ProbeMapSizeSlices:   2 * opts.SliceSlots,
		bpf.ProbeMapWindowEvents: opts.RingBytes,
	}
	if _, ok := spec.Maps[bpf.ProbePerCPUMapCpuTimers]; ok {
		sizes[bpf.ProbePerCPUMapCpuTimers] = uint32(possibleCPUs())
	}
	for name, n := range sizes {
		m, ok := spec.Maps[name]
		if !ok {
			return nil, fmt.Errorf("bpf object has no map %s", name)
		}
		m.MaxEntries = n
	}
	return spec, nil
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// Load loads the datapath with opts. The caller must Close it. The
// verifier writes no log while loading succeeds (its instruction-level log
// of these programs takes seconds to write); when it rejects a program,
// cilium/ebpf loads it again with the log, and the error is a
// *VerifierRejection that holds it whole.
func Load(opts Options) (*Probe, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("remove memlock limit: %w", err)
	}
	spec, err := Spec(opts) // validates
	if err != nil {
		return nil, err
	}
	return load(spec, opts.resolved())
}

// load loads spec, the datapath of opts (resolved).
func load(spec *ebpf.CollectionSpec, opts Options) (*Probe, error) {
	p := &Probe{opts: opts, bucketSlots: opts.bucketSlots(), mapBytes: MapBytes(spec, possibleCPUs())}
	copts := &ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{LogSizeStart: verifierLogStart}}
	var to any = &p.objs
	if opts.Buckets == BucketsPerCPU {
		to = &perCPUObjects{probeObjects: &p.objs}
	}
	if err := spec.LoadAndAssign(to, copts); err != nil {
		return nil, explainLoadError(err)
	}
	if po, ok := to.(*perCPUObjects); ok {
		p.timers = po.Timers
	}
	return p, nil
}

// Close releases the programs and maps. Links and filters must be closed
// first (see Attachment).
func (p *Probe) Close() error {
	err := p.objs.close()
	if p.timers != nil {
		err = errors.Join(err, p.timers.Close())
	}
	return err
}

// MapBytes is the kernel memory the loaded maps take, roughly: values and
// keys times entries, per-CPU maps times the CPU count.
func (p *Probe) MapBytes() uint64 { return p.mapBytes }

// Options returns what the probe was loaded with.
func (p *Probe) Options() Options { return p.opts }

// MapBytes estimates the memory of the maps of spec on a host with cpus
// CPUs: values times entries, per-CPU maps times the CPU count.
func MapBytes(spec *ebpf.CollectionSpec, cpus int) uint64 {
	var total uint64
	for _, m := range spec.Maps {
		switch m.Type {
		case ebpf.Array:
			total += uint64(m.MaxEntries) * uint64(m.ValueSize)
		case ebpf.PerCPUArray:
			total += uint64(m.MaxEntries) * uint64(roundUp8(m.ValueSize)) * uint64(cpus)
		case ebpf.RingBuf:
			total += uint64(m.MaxEntries)
		default:
			total += uint64(m.MaxEntries) * uint64(m.KeySize+m.ValueSize)
		}
	}
	return total
}

func roundUp8(n uint32) uint32 { return (n + 7) &^ 7 }

func possibleCPUs() int {
	n, err := ebpf.PossibleCPU()
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// verifierLogStart is the verifier log buffer of a load that failed and is
// repeated with the log: large enough for most rejections at once, where
// each doubling from the default would run the verifier again.
const verifierLogStart = 8 << 20

// A VerifierRejection is a program of the datapath that the kernel's
// verifier refused, with the verifier's whole log of it.
type VerifierRejection struct {
	Program string   // the program refused
	Log     []string // the verifier's log, every line
	Err     *ebpf.VerifierError
}

// Error is one line: the program, the verifier's reason (its last line)
// and how long the log is.
func (e *VerifierRejection) Error() string {
	return fmt.Sprintf("the kernel's verifier rejected the datapath's program %s: %v (its log has %d lines)",
		e.Program, reason(e.Err), len(e.Log))
}

func (e *VerifierRejection) Unwrap() error { return e.Err }

// reason is the verifier error without the log's line count.
func reason(ve *ebpf.VerifierError) string {
	if ve == nil {
		return "no reason given"
	}
	msg := ve.Error()
	if i := strings.LastIndex(msg, " ("); i > 0 && strings.HasSuffix(msg, "omitted)") {
		msg = msg[:i]
	}
	return strings.TrimPrefix(msg, "load program: ")
}

// programOfError is the program a collection load error names.
var programOfError = regexp.MustCompile(`program (\w+):`)

// explainLoadError turns a load failure into an error that names the cause
// and the fix.
func explainLoadError(err error) error {
	var ve *ebpf.VerifierError
	switch {
	case errors.As(err, &ve) && len(ve.Log) > 0:
		r := &VerifierRejection{Program: "?", Log: ve.Log, Err: ve}
		if m := programOfError.FindStringSubmatch(err.Error()); m != nil {
			r.Program = m[1]
		}
		return r
	case errors.Is(err, os.ErrPermission):
		return fmt.Errorf("load bpf programs: not permitted: run as root or grant CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON: %w", err)
	case errors.Is(err, ebpf.ErrNotSupported):
		return fmt.Errorf("load bpf programs: this kernel lacks a needed BPF feature (enaprobe needs Linux 5.10 or later with BTF): %w", err)
	}
	return fmt.Errorf("load bpf programs: %w", err)
}
