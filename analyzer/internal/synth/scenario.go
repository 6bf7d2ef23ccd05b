// Package synth builds synthetic but physically consistent recordings from
// a description: flows with rates over time, SYN floods, and an emulated
// device whose allowance counters move only when the described traffic goes
// over the allowances it enforces (token buckets refilled every bucket). The
// truth it returns (when each counter dropped packets) is what the analyzer's
// tests compare findings with.
package synth

import (
	"net/netip"
	"time"

	"github.com/enaprobe/enaprobe/internal/record"
)

// Spec describes one trace.
type Spec struct {
	Name     string
	Duration time.Duration
	// Recording geometry; zero values take the defaults of Defaults.
	BucketNs, WindowNs, SliceNs, SampleNs, DrainNs int64
	HeavyBytes                                     uint64
	InstanceType                                   string
	FlowLimitBps                                   float64 // recorded in Meta
	Interfaces                                     []Interface
	Flows                                          []Flow
	SYNFloods                                      []SYNFlood
	Seed                                           uint64 // for the rate jitter
	// CounterLag is how long after a drop the emulated device's counters
	// show it: every read returns the values of CounterLag before.
	CounterLag time.Duration
	// CounterRefresh is how often the device publishes the counter
	// values a read returns (0: at every read), on boundaries
	// RefreshPhase after the trace start plus multiples of it.
	CounterRefresh, RefreshPhase time.Duration
}

// Interface is one traced interface and, for an ENA one, the allowances its
// emulated device enforces.
type Interface struct {
	Name string
	ENA  bool // allowance counters read; false: no counter samples at all
	// Aggregate bandwidth per direction: BurstBps until CreditsEnd (never
	// when 0), BaselineBps after. 0 disables the shaper of that kind.
	BaselineBps, BurstBps float64
	CreditsEnd            time.Duration
	// QueueBytes is a queue before the bandwidth shaper of each
	// direction: what the allowance cannot pass waits in it (up to
	// QueueBytes, the rest dropped) and drains at the allowance, and
	// every packet that does not pass at once (queued behind a burst, or
	// dropped) counts, as the ENA counters count packets "queued or
	// dropped". 0: no queue, the excess is dropped.
	QueueBytes float64
	// CountDequeued counts a queued packet as it leaves the queue, not
	// as it arrives (a dropped one as it arrives): the counter goes on
	// rising while the queue drains, as the lab's tbf counts its held-back
	// dequeues. Nothing says an ENA does not.
	CountDequeued bool
	// BucketBytes is the depth of the bandwidth shaper's bucket (0: a
	// window's worth): what passes at once over the allowance, empty at
	// the start and full after a quiet spell (the lab's tbf: 1 MiB).
	BucketBytes float64
	// PPS is the bidirectional packets/s allowance; 0 disables it.
	PPS float64
	// PPSBurst is the depth of its bucket, packets (0: a window's worth):
	// what an overshoot runs over by before the first drop.
	PPSBurst float64
	// LinkLocalPPS is the link-local limit (1024 when 0), and
	// LinkLocalBurst the depth of its bucket in packets (10 ms of the
	// limit when 0).
	LinkLocalPPS   float64
	LinkLocalBurst float64
	// Conntrack: capacity of the tracking table (0: no conntrack gauge)
	// and connections tracked before the trace.
	ConntrackCapacity    int
	ConntrackEstablished int
	// StartCounters are the counter values since boot at the first read.
	StartCounters map[string]uint64
	// Resets are driver resets: every counter restarts at 0.
	Resets []time.Duration
	// FailedReads turn the reads at these times (the first read at or after
	// each) into failures: with Err set, or all device counters zero
	// without an error when ZeroRead (how the ENA driver reports a failed
	// admin command).
	FailedReads []FailedRead
}

// FailedRead is one read that fails.
type FailedRead struct {
	At       time.Duration
	ZeroRead bool
}

// Flow is one 5-tuple sending packets of one size at a rate that changes in
// phases. The link-local service is derived from the address, as the
// datapath does.
type Flow struct {
	Interface string
	Dir       record.Direction
	Proto     uint8
	Src, Dst  netip.AddrPort
	Size      int     // layer-3 bytes per packet
	Jitter    float64 // relative rate noise per bucket (uniform ±Jitter)
	Phases    []Phase
}

// Phase is a constant rate over [From, To).
type Phase struct {
	From, To time.Duration
	Bps      float64
}

// Key is the flow's key as recorded.
func (f Flow) Key() record.FlowKey { return record.FlowKey{Proto: f.Proto, Src: f.Src, Dst: f.Dst} }

// SYNFlood is a source opening new TCP connections (one SYN each, a new
// source port each) to one destination at a constant rate over [From, To).
type SYNFlood struct {
	Interface string
	Dir       record.Direction
	Src       netip.Addr
	Dst       netip.AddrPort
	PerSecond float64
	From, To  time.Duration
	// RetryAfter are the delays after a connection's first SYN at which
	// the client sends it again while unanswered (Linux: 1 s, 3 s, 7 s).
	RetryAfter []time.Duration
}

// Defaults are the geometry of a scenario that leaves it unset: 100 µs
// buckets, 1 ms windows, 100 ms size slices and flow drains, 1 s counter
// reads, window events for flows moving 1 Gbps or more in a window.
var Defaults = Spec{
	BucketNs: 100_000, WindowNs: 1_000_000, SliceNs: 100_000_000, SampleNs: 1_000_000_000,
	DrainNs: 100_000_000, HeavyBytes: 125_000,
}

// StartMonoNs is the monotonic instant every scenario starts at (1000 s of
// uptime), and StartWall its wall-clock time.
const StartMonoNs = 1_000_000_000_000

// StartWall is the wall-clock time of StartMonoNs.
var StartWall = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

// Episode is a stretch of time, as offsets from the trace start.
type Episode struct{ From, To time.Duration }

// Facts is what the emulated device did: for each interface and counter,
// the stretches in which it dropped (or queued) packets, joined when less
// than a window apart.
type Facts struct {
	Drops map[string]map[string][]Episode
}
