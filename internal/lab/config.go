package lab

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/enaprobe/enaprobe/internal/limits"
)

// Config holds every emulated allowance, scaled down from EC2 (Mbit/s instead
// of Gbit/s). A zero field takes its default (DefaultConfig), so Config{} is
// a usable lab.
type Config struct {
	// OutRate is the aggregate outbound bandwidth, bit/s (bw_out baseline).
	OutRate uint64
	// OutBurst is the outbound credit bucket, bytes: sent at up to
	// OutPeakRate (or link speed) before the baseline applies.
	OutBurst uint32
	// OutPeakRate caps the outbound burst, bit/s; 0 leaves it unlimited.
	OutPeakRate uint64
	// InRate, InBurst and InPeakRate are the same for inbound (bw_in).
	InRate     uint64
	InBurst    uint32
	InPeakRate uint64
	// FlowRate is the per-flow cap, bit/s, in each direction. It moves no
	// counter, as on EC2.
	FlowRate uint64
	// FlowBurst is the per-flow bucket, bytes.
	FlowBurst uint32
	// FlowBuckets is how many htb classes flows are hashed over. Flows
	// whose hashes collide share one cap.
	FlowBuckets int
	// QueuePackets is the queue of each flow class, packets.
	QueuePackets int
	// PPS is the packets/s allowance, both directions together.
	PPS uint32
	// PPSBurst is the packets let through above PPS at once.
	PPSBurst uint32
	// LinkLocalPPS is the per-interface packets/s allowance of traffic to
	// the link-local services (DNS, IMDS, NTP): 1024 on EC2.
	LinkLocalPPS uint32
	// LinkLocalBurst is the packets let through above LinkLocalPPS at once.
	LinkLocalBurst uint32
	// ConntrackMax is the number of tracked connections allowed.
	ConntrackMax uint32
	// IMDSHopLimit is the IP TTL of the IMDS token response
	// (HttpPutResponseHopLimit): 1 by default.
	IMDSHopLimit int
	// IMDSv2Required makes IMDS refuse metadata reads without a token.
	IMDSv2Required bool
	// InstanceType is what IMDS answers for meta-data/instance-type.
	InstanceType string
	// DNSRecords are names the VPC resolver answers besides the lab's own
	// (peer., instance., gateway.lab.internal).
	DNSRecords map[string][]netip.Addr
}

// DefaultConfig is a c5.large-like instance scaled down about 20x for
// bandwidth: 40 Mbit/s each way with a 1 MiB bucket, 10 Mbit/s per flow.
func DefaultConfig() Config {
	return Config{
		OutRate:        40_000_000,
		OutBurst:       1 << 20,
		InRate:         40_000_000,
		InBurst:        1 << 20,
		FlowRate:       10_000_000,
		FlowBurst:      32 << 10,
		FlowBuckets:    256,
		QueuePackets:   128,
		PPS:            8000,
		PPSBurst:       800,
		LinkLocalPPS:   limits.LinkLocalPPSPerInterface,
		LinkLocalBurst: 64,
		ConntrackMax:   1024,
		IMDSHopLimit:   1,
		InstanceType:   "c5.large",
	}
}

// withDefaults fills the zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	def := func(v *uint64, dv uint64) {
		if *v == 0 {
			*v = dv
		}
	}
	def32 := func(v *uint32, dv uint32) {
		if *v == 0 {
			*v = dv
		}
	}
	defInt := func(v *int, dv int) {
		if *v == 0 {
			*v = dv
		}
	}
	def(&c.OutRate, d.OutRate)
	def32(&c.OutBurst, d.OutBurst)
	def(&c.InRate, d.InRate)
	def32(&c.InBurst, d.InBurst)
	def(&c.FlowRate, d.FlowRate)
	def32(&c.FlowBurst, d.FlowBurst)
	defInt(&c.FlowBuckets, d.FlowBuckets)
	defInt(&c.QueuePackets, d.QueuePackets)
	def32(&c.PPS, d.PPS)
	def32(&c.PPSBurst, d.PPSBurst)
	def32(&c.LinkLocalPPS, d.LinkLocalPPS)
	def32(&c.LinkLocalBurst, d.LinkLocalBurst)
	def32(&c.ConntrackMax, d.ConntrackMax)
	defInt(&c.IMDSHopLimit, d.IMDSHopLimit)
	if c.InstanceType == "" {
		c.InstanceType = d.InstanceType
	}
	return c
}

// maxBucketTime bounds burst/rate: tbf keeps the bucket as a u32 of
// nanoseconds, so anything past ~4.29 s would be silently clamped.
const maxBucketTime = 4 * time.Second

func (c Config) validate() error {
	for _, d := range []struct {
		name  string
		rate  uint64
		burst uint32
		peak  uint64
	}{{"out", c.OutRate, c.OutBurst, c.OutPeakRate}, {"in", c.InRate, c.InBurst, c.InPeakRate}} {
		if t := time.Duration(float64(d.burst) * 8 / float64(d.rate) * float64(time.Second)); t > maxBucketTime {
			return fmt.Errorf("%s burst %d bytes lasts %v at %d bit/s, more than tbf's %v", d.name, d.burst, t, d.rate, maxBucketTime)
		}
		if d.burst < 2*maxPacketBytes {
			return fmt.Errorf("%s burst %d bytes is below two full packets (%d)", d.name, d.burst, 2*maxPacketBytes)
		}
		if d.peak != 0 && d.peak <= d.rate {
			return fmt.Errorf("%s peak rate %d bit/s must exceed the rate %d", d.name, d.peak, d.rate)
		}
	}
	if c.FlowBuckets < 1 || c.FlowBuckets > maxFlowBuckets {
		return fmt.Errorf("flow buckets %d outside 1..%d", c.FlowBuckets, maxFlowBuckets)
	}
	if c.FlowBurst < maxPacketBytes {
		return fmt.Errorf("flow burst %d bytes is below one full packet (%d)", c.FlowBurst, maxPacketBytes)
	}
	if c.QueuePackets < 1 {
		return fmt.Errorf("queue of %d packets", c.QueuePackets)
	}
	if c.IMDSHopLimit < 1 || c.IMDSHopLimit > 255 {
		return fmt.Errorf("imds hop limit %d outside 1..255", c.IMDSHopLimit)
	}
	return nil
}
