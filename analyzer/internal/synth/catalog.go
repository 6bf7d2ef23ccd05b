package synth

import (
	"net/netip"
	"time"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/limits"
	"github.com/enaprobe/enaprobe/internal/record"
)

// Expect is a finding a case must produce: its kind, where, its window
// (offsets from the trace start) and its top culprit as FlowShare shows it.
type Expect struct {
	Kind      string
	Interface string
	Severity  string
	From, To  time.Duration
	Src, Dst  string
	// Source, when set, is where the top culprit must come from
	// ("window_events" or "snapshots").
	Source string
}

// Case is a scenario with what the analysis must and must not say about it.
type Case struct {
	Spec Spec
	// Expect derives the expected findings from the scenario's truth.
	Expect func(Facts) []Expect
	// MaxSeverity: no finding may be more severe ("info", "warning"); ""
	// leaves it unchecked. NoFindings: no finding at all, not even info.
	MaxSeverity string
	NoFindings  bool
	// Forbid lists kinds that must not appear: "kind", or "kind:severity"
	// for that severity and above.
	Forbid []string
	// NoCounterFindingsOn lists interfaces no counter-based finding may
	// name.
	NoCounterFindingsOn []string
	// WantResets is the least number of counter resets the loss section
	// must list; WantReadFailures the least number of failed reads.
	WantResets, WantReadFailures int
}

// Addresses of the cases.
var (
	host      = netip.MustParseAddr("10.0.0.10")
	peerA     = netip.MustParseAddr("10.0.1.20")
	peerB     = netip.MustParseAddr("10.0.1.21")
	peerC     = netip.MustParseAddr("10.0.1.22")
	backend   = netip.MustParseAddrPort("10.0.3.40:5432")
	container = netip.MustParseAddr("172.17.0.2")
)

func ap(a netip.Addr, port uint16) netip.AddrPort { return netip.AddrPortFrom(a, port) }

// sec turns seconds into a Duration.
func sec(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// ena is an ENA interface of a c5.large-like instance: 0.75 Gbps baseline,
// 10 Gbps burst, counters that were already nonzero at boot.
func ena(name string) Interface {
	return Interface{Name: name, ENA: true, BaselineBps: 0.75e9, BurstBps: 10e9,
		StartCounters: map[string]uint64{counters.BwOutAllowanceExceeded: 1200, counters.BwInAllowanceExceeded: 300}}
}

// steady is background traffic well under every limit on an interface:
// a bulk egress flow, an ingress flow, and a little DNS, IMDS and NTP.
func steady(iface string, until time.Duration) []Flow {
	all := []Phase{{0, until, 0}}
	with := func(bps float64) []Phase { p := append([]Phase(nil), all...); p[0].Bps = bps; return p }
	return []Flow{
		{Interface: iface, Dir: record.Egress, Proto: 6, Src: ap(host, 40100), Dst: ap(peerA, 443), Size: 1500, Jitter: 0.05, Phases: with(250e6)},
		{Interface: iface, Dir: record.Ingress, Proto: 6, Src: ap(peerB, 443), Dst: ap(host, 40200), Size: 1500, Jitter: 0.05, Phases: with(150e6)},
		{Interface: iface, Dir: record.Egress, Proto: 17, Src: ap(host, 50053), Dst: ap(limits.DNSv4, 53), Size: 80, Phases: with(40 * 80 * 8)},
		{Interface: iface, Dir: record.Ingress, Proto: 17, Src: ap(limits.DNSv4, 53), Dst: ap(host, 50053), Size: 160, Phases: with(40 * 160 * 8)},
		{Interface: iface, Dir: record.Egress, Proto: 6, Src: ap(host, 50080), Dst: ap(limits.IMDSv4, 80), Size: 120, Phases: with(4 * 120 * 8)},
		{Interface: iface, Dir: record.Egress, Proto: 17, Src: ap(host, 50123), Dst: ap(limits.NTPv4, 123), Size: 76, Phases: with(1 * 76 * 8)},
	}
}

// Cases are the recordings of testdata/recordings, by name.
func Cases() map[string]Case {
	cs := map[string]Case{}
	add := func(c Case) { cs[c.Spec.Name] = c }

	// Steady traffic under every limit: nothing worth a reader's time.
	add(Case{Spec: Spec{Name: "steady", Duration: 10 * time.Second, InstanceType: "c5.large", Seed: 1,
		Interfaces: []Interface{ena("eth0")}, Flows: steady("eth0", 10*time.Second)},
		MaxSeverity: "info", NoFindings: true})

	// An egress burst of one flow at 20 Gbps for 8 ms, over the 10 Gbps
	// burst allowance, on top of the steady traffic.
	burstOut := Flow{Interface: "eth0", Dir: record.Egress, Proto: 6, Src: ap(host, 41000), Dst: ap(peerC, 9000), Size: 9001,
		Phases: []Phase{{sec(4.3454), sec(4.3534), 20e9}}}
	add(Case{Spec: Spec{Name: "microburst_out", Duration: 8 * time.Second, InstanceType: "c5.large", Seed: 2,
		Interfaces: []Interface{ena("eth0")}, Flows: append(steady("eth0", 8*time.Second), burstOut)},
		Expect: func(Facts) []Expect {
			p := burstOut.Phases[0]
			return []Expect{{Kind: "microburst_out", Interface: "eth0", Severity: "warning", From: p.From, To: p.To,
				Src: burstOut.Src.String(), Dst: burstOut.Dst.String(), Source: "window_events"}}
		},
		Forbid: []string{"microburst_in", "baseline_exhausted"}})

	// The same burst with window events off (HeavyBytes above anything a
	// flow moves in a window): the culprit comes from the flow snapshots.
	add(Case{Spec: Spec{Name: "microburst_out_snapshots", Duration: 8 * time.Second, InstanceType: "c5.large", Seed: 2,
		HeavyBytes: 1 << 40, Interfaces: []Interface{ena("eth0")}, Flows: append(steady("eth0", 8*time.Second), burstOut)},
		Expect: func(Facts) []Expect {
			p := burstOut.Phases[0]
			return []Expect{{Kind: "microburst_out", Interface: "eth0", Severity: "warning", From: p.From, To: p.To,
				Src: burstOut.Src.String(), Dst: burstOut.Dst.String(), Source: "snapshots"}}
		}})

	// A 17 ms burst straddling the counter read at 4 s: both reads see a
	// jump, and the finding is one burst.
	straddle := Flow{Interface: "eth0", Dir: record.Egress, Proto: 6, Src: ap(host, 41002), Dst: ap(peerC, 9002), Size: 9001,
		Phases: []Phase{{sec(3.9952), sec(4.0122), 16e9}}}
	add(Case{Spec: Spec{Name: "microburst_straddle", Duration: 6 * time.Second, InstanceType: "c5.large", Seed: 14,
		Interfaces: []Interface{ena("eth0")}, Flows: append(steady("eth0", 6*time.Second), straddle)},
		Expect: func(Facts) []Expect {
			p := straddle.Phases[0]
			return []Expect{{Kind: "microburst_out", Interface: "eth0", Severity: "warning", From: p.From, To: p.To,
				Src: straddle.Src.String(), Dst: straddle.Dst.String()}}
		}})

	// Incast: two senders answer at once for 15 ms, 9 and 6 Gbps, over the
	// 10 Gbps burst allowance. The device drops what is over before the
	// host sees it, so the host sees the allowance's rate, not the offered
	// one: the burst stands out from the interval's own level.
	incastA := Flow{Interface: "eth0", Dir: record.Ingress, Proto: 6, Src: ap(peerA, 8080), Dst: ap(host, 42000), Size: 1500,
		Phases: []Phase{{sec(2.6), sec(2.615), 9e9}}}
	incastB := Flow{Interface: "eth0", Dir: record.Ingress, Proto: 6, Src: ap(peerB, 8080), Dst: ap(host, 42001), Size: 1500,
		Phases: []Phase{{sec(2.6), sec(2.615), 6e9}}}
	add(Case{Spec: Spec{Name: "microburst_in", Duration: 5 * time.Second, InstanceType: "c5.large", Seed: 3,
		Interfaces: []Interface{ena("eth0")}, Flows: append(steady("eth0", 5*time.Second), incastA, incastB)},
		Expect: func(Facts) []Expect {
			p := incastA.Phases[0]
			return []Expect{{Kind: "microburst_in", Interface: "eth0", Severity: "warning", From: p.From, To: p.To,
				Src: incastA.Src.String(), Dst: incastA.Dst.String()}}
		},
		Forbid: []string{"microburst_out"}})

	// A burst to 95% of the burst allowance: no counter moves, an info
	// near-miss.
	nearMiss := Flow{Interface: "eth0", Dir: record.Egress, Proto: 6, Src: ap(host, 41001), Dst: ap(peerC, 9001), Size: 9001,
		Phases: []Phase{{sec(3.2), sec(3.205), 0.95*10e9 - 250e6 - 40*80*8 - 4*120*8 - 76*8}}}
	add(Case{Spec: Spec{Name: "near_miss", Duration: 6 * time.Second, InstanceType: "c5.large", Seed: 4,
		Interfaces: []Interface{ena("eth0")}, Flows: append(steady("eth0", 6*time.Second), nearMiss)},
		Expect: func(Facts) []Expect {
			p := nearMiss.Phases[0]
			return []Expect{{Kind: "microburst_out", Interface: "eth0", Severity: "info", From: p.From, To: p.To,
				Src: nearMiss.Src.String(), Dst: nearMiss.Dst.String()}}
		},
		MaxSeverity: "info"})

	// 64-byte UDP packets at 400k pps for 300 ms over a 200k pps
	// allowance, beside a bulk flow of full frames: some 60,000 packets
	// dropped, critical by its cost.
	flood := Flow{Interface: "eth0", Dir: record.Egress, Proto: 17, Src: ap(host, 45000), Dst: ap(peerC, 7000), Size: 64,
		Phases: []Phase{{sec(5.1), sec(5.4), 400e3 * 64 * 8}}}
	ppsIface := ena("eth0")
	ppsIface.PPS = 200e3
	add(Case{Spec: Spec{Name: "pps", Duration: 8 * time.Second, InstanceType: "c5.large", Seed: 5,
		Interfaces: []Interface{ppsIface}, Flows: append(steady("eth0", 8*time.Second), flood)},
		Expect: func(Facts) []Expect {
			p := flood.Phases[0]
			return []Expect{{Kind: "pps_exceeded", Interface: "eth0", Severity: "critical", From: p.From, To: p.To,
				Src: flood.Src.String(), Dst: flood.Dst.String()}}
		}})

	// A client pool opening a new connection per request: 4000 SYN/s to a
	// database for 3 s fill a table of 6000 (1000 tracked already). The
	// finding starts when the table is full (the device's first drop).
	ctIface := ena("eth0")
	ctIface.ConntrackCapacity, ctIface.ConntrackEstablished = 6000, 1000
	churn := SYNFlood{Interface: "eth0", Dir: record.Egress, Src: host, Dst: backend, PerSecond: 4000, From: sec(3), To: sec(6)}
	add(Case{Spec: Spec{Name: "conntrack_exceeded", Duration: 8 * time.Second, InstanceType: "c5.large", Seed: 6,
		Interfaces: []Interface{ctIface}, Flows: steady("eth0", 8*time.Second), SYNFloods: []SYNFlood{churn}},
		Expect: func(tr Facts) []Expect {
			d := tr.Drops["eth0"][counters.ConntrackAllowanceExceeded]
			return []Expect{{Kind: "conntrack_exceeded", Interface: "eth0", Severity: "critical", From: d[0].From, To: d[len(d)-1].To,
				Src: host.String() + ":*", Dst: backend.String()}}
		}})

	// A SYN flood from outside for 2.6 s into the same table. The device
	// drops the SYNs it cannot track before the host sees them, so the
	// analyzer can place the start of the drops (the table filling) but
	// only bound their end by the read that counted the last of them.
	attacker := netip.MustParseAddr("198.51.100.7")
	web := ap(host, 443)
	synFlood := SYNFlood{Interface: "eth0", Dir: record.Ingress, Src: attacker, Dst: web, PerSecond: 4000, From: sec(3), To: sec(5.6)}
	add(Case{Spec: Spec{Name: "conntrack_exceeded_inbound", Duration: 8 * time.Second, InstanceType: "c5.large", Seed: 15,
		Interfaces: []Interface{ctIface}, Flows: steady("eth0", 8*time.Second), SYNFloods: []SYNFlood{synFlood}},
		Expect: func(tr Facts) []Expect {
			d := tr.Drops["eth0"][counters.ConntrackAllowanceExceeded]
			read := time.Duration(Defaults.SampleNs)
			countedBy := (d[len(d)-1].To + read - 1) / read * read
			return []Expect{{Kind: "conntrack_exceeded", Interface: "eth0", Severity: "critical", From: d[0].From, To: countedBy,
				Src: attacker.String() + ":*", Dst: web.String()}}
		}})

	// The same churn for 2 s into a table of 12000: available falls from
	// 11000 to 3000 (27%, a fall of 67% of its highest) without drops.
	nearIface := ena("eth0")
	nearIface.ConntrackCapacity, nearIface.ConntrackEstablished = 12000, 1000
	churn2 := SYNFlood{Interface: "eth0", Dir: record.Egress, Src: host, Dst: backend, PerSecond: 4000, From: sec(3.25), To: sec(5.25)}
	add(Case{Spec: Spec{Name: "conntrack_near_limit", Duration: 8 * time.Second, InstanceType: "c5.large", Seed: 7,
		Interfaces: []Interface{nearIface}, Flows: steady("eth0", 8*time.Second), SYNFloods: []SYNFlood{churn2}},
		Expect: func(Facts) []Expect {
			return []Expect{{Kind: "conntrack_near_limit", Interface: "eth0", Severity: "warning", From: churn2.From, To: churn2.To,
				Src: host.String() + ":*", Dst: backend.String()}}
		},
		Forbid: []string{"conntrack_exceeded"}})

	// A DNS storm: 3000 queries/s to the resolver for 1.5 s, over the 1024
	// pps link-local limit. Its first drop comes once the device's bucket
	// (10 ms of the limit) is spent, 5 ms in: the count of drops says how
	// deep that bucket was, even where, as here, the reads are a second
	// apart and no lag is learned.
	storm := Flow{Interface: "eth0", Dir: record.Egress, Proto: 17, Src: ap(host, 53535), Dst: ap(limits.DNSv4, 53), Size: 80,
		Phases: []Phase{{sec(4.2005), sec(5.7005), 3000 * 80 * 8}}}
	add(Case{Spec: Spec{Name: "linklocal_exceeded", Duration: 8 * time.Second, InstanceType: "c5.large", Seed: 8,
		Interfaces: []Interface{ena("eth0")}, Flows: append(steady("eth0", 8*time.Second), storm)},
		Expect: func(tr Facts) []Expect {
			p := storm.Phases[0]
			return []Expect{{Kind: "linklocal_exceeded", Interface: "eth0", Severity: "critical", From: tr.Drops["eth0"][counters.LinklocalAllowanceExceeded][0].From, To: p.To,
				Src: storm.Src.String(), Dst: storm.Dst.String()}}
		},
		Forbid: []string{"linklocal_hot"}})

	// IMDS polled hard: 720 requests' packets/s for 3 s, plus the steady
	// DNS: under 1024 but over 70% of it.
	poll := Flow{Interface: "eth0", Dir: record.Egress, Proto: 6, Src: ap(host, 50081), Dst: ap(limits.IMDSv4, 80), Size: 120,
		Phases: []Phase{{sec(2.5), sec(5.5), 720 * 120 * 8}}}
	add(Case{Spec: Spec{Name: "linklocal_hot", Duration: 8 * time.Second, InstanceType: "c5.large", Seed: 9,
		Interfaces: []Interface{ena("eth0")}, Flows: append(steady("eth0", 8*time.Second), poll)},
		Expect: func(Facts) []Expect {
			p := poll.Phases[0]
			return []Expect{{Kind: "linklocal_hot", Interface: "eth0", Severity: "warning", From: p.From, To: p.To,
				Src: poll.Src.String(), Dst: poll.Dst.String()}}
		},
		Forbid: []string{"linklocal_exceeded"}})

	// One bulk flow pinned at 4.97 Gbps for 9 s on a 10 Gbps instance
	// without burst: the silent per-flow limit.
	capped := Flow{Interface: "eth0", Dir: record.Egress, Proto: 6, Src: ap(host, 43000), Dst: ap(peerC, 5201), Size: 8949, Jitter: 0.01,
		Phases: []Phase{{sec(2.0003), sec(11.0003), 4.97e9}}}
	big := Interface{Name: "eth0", ENA: true, BaselineBps: 10e9}
	add(Case{Spec: Spec{Name: "flow_at_cap", Duration: 13 * time.Second, InstanceType: "m5.8xlarge", Seed: 10,
		FlowLimitBps: 5e9, Interfaces: []Interface{big}, Flows: append(steady("eth0", 13*time.Second), capped)},
		Expect: func(Facts) []Expect {
			p := capped.Phases[0]
			return []Expect{{Kind: "flow_at_cap", Interface: "eth0", Severity: "warning", From: p.From, To: p.To,
				Src: capped.Src.String(), Dst: capped.Dst.String()}}
		},
		MaxSeverity: "warning", Forbid: []string{"microburst_out", "baseline_exhausted"}})

	// A c5.large bursting at 9.5 Gbps until its credits end at 14.2 s,
	// then held at the 0.75 Gbps baseline (TCP pushing 3% over it).
	bulk := Flow{Interface: "eth0", Dir: record.Egress, Proto: 6, Src: ap(host, 44000), Dst: ap(peerC, 443), Size: 1500, Jitter: 0.02,
		Phases: []Phase{{0, sec(14.2), 9.5e9}, {sec(14.2), sec(25), 1.03 * 0.75e9}}}
	credits := ena("eth0")
	credits.CreditsEnd = sec(14.2)
	add(Case{Spec: Spec{Name: "baseline_exhausted", Duration: 25 * time.Second, InstanceType: "c5.large", Seed: 11,
		Interfaces: []Interface{credits}, Flows: []Flow{bulk}},
		Expect: func(Facts) []Expect {
			return []Expect{{Kind: "baseline_exhausted", Interface: "eth0", Severity: "critical", From: bulk.Phases[1].From,
				To: bulk.Phases[1].To, Src: bulk.Src.String(), Dst: bulk.Dst.String()}}
		},
		// Running at 95% of the burst allowance before the credits end is
		// a near-miss (info), but no microburst.
		Forbid: []string{"microburst_out:warning"}})

	// Counters that only move by a driver reset, a failed read and an
	// all-zero read (a failed admin command): no finding, the reset and
	// failures noted.
	resetting := ena("eth0")
	resetting.Resets = []time.Duration{sec(4.5)}
	resetting.FailedReads = []FailedRead{{At: sec(2)}, {At: sec(3), ZeroRead: true}}
	add(Case{Spec: Spec{Name: "counter_reset", Duration: 8 * time.Second, InstanceType: "c5.large", Seed: 12,
		Interfaces: []Interface{resetting}, Flows: steady("eth0", 8*time.Second)},
		MaxSeverity: "info", Forbid: []string{"microburst_out", "microburst_in"}, WantResets: 1, WantReadFailures: 2})

	// A second interface without ENA counters (a container's veth) carrying
	// a 20 Gbps burst and a DNS storm: analysed, the storm reported as hot,
	// but no counter-based finding on it.
	veth := Interface{Name: "veth0"}
	vethBurst := Flow{Interface: "veth0", Dir: record.Egress, Proto: 6, Src: ap(host, 46000), Dst: ap(peerC, 9100), Size: 9001,
		Phases: []Phase{{sec(3), sec(3.01), 20e9}}}
	// A container's queries arrive on the host side of its veth: ingress.
	vethDNS := Flow{Interface: "veth0", Dir: record.Ingress, Proto: 17, Src: ap(container, 46053), Dst: ap(limits.DNSv4, 53), Size: 80,
		Phases: []Phase{{sec(4), sec(5.5), 2000 * 80 * 8}}}
	add(Case{Spec: Spec{Name: "non_ena", Duration: 8 * time.Second, InstanceType: "c5.large", Seed: 13,
		Interfaces: []Interface{ena("eth0"), veth},
		Flows:      append(steady("eth0", 8*time.Second), append(steady("veth0", 8*time.Second), vethBurst, vethDNS)...)},
		Expect: func(Facts) []Expect {
			p := vethDNS.Phases[0]
			return []Expect{{Kind: "linklocal_hot", Interface: "veth0", Severity: "warning", From: p.From, To: p.To,
				Src: vethDNS.Src.String(), Dst: vethDNS.Dst.String()}}
		},
		NoCounterFindingsOn: []string{"veth0"}})
	return cs
}

// Bench is the benchmark's recording: 30 s at 100 µs on one ENA interface,
// both directions busy, with bursts, a DNS storm and SYN churn.
func Bench() Spec {
	ifc := ena("eth0")
	ifc.PPS = 300e3
	ifc.ConntrackCapacity, ifc.ConntrackEstablished = 20000, 500
	d := 30 * time.Second
	flows := steady("eth0", d)
	for i := range 8 {
		at := sec(1.5 + 3.3*float64(i))
		f := Flow{Interface: "eth0", Dir: record.Direction(i % 2), Proto: 6,
			Src: ap(host, uint16(47000+i)), Dst: ap(peerC, uint16(9200+i)), Size: 9001, Jitter: 0.1,
			Phases: []Phase{{at, at + 20*time.Millisecond, 14e9}, {at + time.Second, at + 2*time.Second, 2e9}}}
		if f.Dir == record.Ingress {
			f.Src, f.Dst = f.Dst, f.Src
		}
		flows = append(flows, f)
	}
	flows = append(flows, Flow{Interface: "eth0", Dir: record.Egress, Proto: 17, Src: ap(host, 53536), Dst: ap(limits.DNSv4, 53),
		Size: 80, Phases: []Phase{{sec(12), sec(14), 2500 * 80 * 8}}})
	return Spec{Name: "bench", Duration: d, InstanceType: "c5.large", Seed: 99, Interfaces: []Interface{ifc}, Flows: flows,
		SYNFloods: []SYNFlood{{Interface: "eth0", Dir: record.Egress, Src: host, Dst: backend, PerSecond: 2500, From: sec(20), To: sec(26)}}}
}
