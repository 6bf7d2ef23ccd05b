package synth

import (
	"net/netip"
	"time"

	"github.com/enaprobe/enaprobe/internal/record"
)

// BurstRun is a run of bursts from one sender, beside light steady traffic
// each way, on one ENA interface: bursts of 1,500-byte packets over a
// bandwidth allowance (Bytes), or of 64-byte packets over a packet-rate
// one. analyzer/internal/twinscore draws them at random; a test replays a
// run it printed from the burst starts, rates and seed its -run shows.
type BurstRun struct {
	Bytes bool
	// Starts and Bps are each burst's start and rate: BurstRunLength long,
	// at about BurstRunBps.
	Starts []time.Duration
	Bps    []float64
	// The emulated device's counter timing (Spec's), and the seed of the
	// rate jitter.
	Refresh, Phase, Lag time.Duration
	Seed                uint64
}

// A BurstRun's allowances (bandwidth per direction, packets per second)
// and its trace's length.
const (
	BurstRunAllowanceBps = 40e6
	BurstRunAllowancePPS = 8000
	BurstRunDuration     = 6 * time.Second
)

// BurstRunBps is a burst's usual rate, in bits per second: 2 MB in 7 ms,
// or 3,000 packets in 14 ms.
func BurstRunBps(bytes bool) float64 {
	if bytes {
		return 2e6 * 8 / 0.007
	}
	return 3000 * 64 * 8 / 0.014
}

// BurstRunLength is how long a burst of a BurstRun lasts.
func BurstRunLength(bytes bool) time.Duration {
	if bytes {
		return 7 * time.Millisecond
	}
	return 14 * time.Millisecond
}

// BurstRunSender is the address and port a BurstRun's bursts come from.
var BurstRunSender = netip.MustParseAddrPort("10.0.0.10:41000")

// Spec is the run's trace: the host 10.0.0.10 on eth0, its bursts to a
// peer, and a steady 640 kbit/s flow of 1,000-byte packets each way with
// another, read every 10 ms.
func (r BurstRun) Spec() Spec {
	ifc := Interface{Name: "eth0", ENA: true}
	burst := Flow{Interface: "eth0", Dir: record.Egress, Src: BurstRunSender, Dst: netip.MustParseAddrPort("10.0.1.22:9000")}
	if r.Bytes {
		ifc.BaselineBps, ifc.BurstBps = BurstRunAllowanceBps, BurstRunAllowanceBps
		burst.Proto, burst.Size = 6, 1500
	} else {
		ifc.PPS = BurstRunAllowancePPS
		burst.Proto, burst.Size = 17, 64
	}
	for k, at := range r.Starts {
		burst.Phases = append(burst.Phases, Phase{From: at, To: at + BurstRunLength(r.Bytes), Bps: r.Bps[k]})
	}
	host, peer := netip.MustParseAddrPort("10.0.0.10:40100"), netip.MustParseAddrPort("10.0.1.30:443")
	steady := func(dir record.Direction, src, dst netip.AddrPort) Flow {
		return Flow{Interface: "eth0", Dir: dir, Proto: 17, Src: src, Dst: dst, Size: 1000,
			Phases: []Phase{{From: 0, To: BurstRunDuration, Bps: 640e3}}}
	}
	return Spec{Name: "bursts", Duration: BurstRunDuration, Seed: r.Seed, SampleNs: int64(10 * time.Millisecond),
		Interfaces:     []Interface{ifc},
		Flows:          []Flow{burst, steady(record.Egress, host, peer), steady(record.Ingress, peer, host)},
		CounterRefresh: r.Refresh, RefreshPhase: r.Phase, CounterLag: r.Lag}
}
