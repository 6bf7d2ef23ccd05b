//go:build linux

package catalog

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/enaprobe/enaprobe/internal/lab"
)

// The impact scenarios: a paced TCP flow (the victim) beside a UDP burst
// over the bandwidth allowance. Every flow shares one queue of the shaper
// (one flow class, no per-flow cap), so the burst's backlog is what the
// victim and the lab's delay probe wait behind, or are dropped from.

const (
	victimRate  = 25_000_000 // bit/s, under the 40 Mbit/s allowance alone
	impactBurst = 1700       // 1200-byte datagrams: 2 MB
	// The upload's drop scenario paces its burst at dropBurstRate, over
	// 80 ms: its victim once sent in bunches about 20 ms apart (each one
	// skb of tens of segments, let into the shaper's queue or dropped
	// whole, before the lab's hosts sent one segment per skb), and a
	// burst back to back (a few ms) fell between them in about half the
	// runs, dropping nothing of it. The download's burst stays back to
	// back: its drops lie before the trace's ingress hook, which sees a
	// retransmission only below a later segment that arrived, and a burst
	// of 27 ms or more often took the remote sender's whole flight,
	// recovered by a timeout as data new to the wire. Its victim's
	// segments, one per skb, come every half a millisecond, so even a
	// burst of a few ms (a fast host's) drops some of them.
	dropBurstRate = 200_000_000
	impactDrive   = 4 * time.Second
)

// impactLab is the default lab with one shared queue of queue packets
// and a credit bucket of 64 kB, which the victim's own bursts fit in and
// the 2 MB burst does not.
func impactLab(queue int) func() lab.Config {
	return func() lab.Config {
		c := lab.DefaultConfig()
		c.FlowBuckets = 1
		c.FlowRate = 1_000_000_000
		c.FlowBurst = 256 << 10
		c.QueuePackets = queue
		c.OutBurst, c.InBurst = 64<<10, 64<<10
		return c
	}
}

// impactShallow's victim runs in a container behind the instance: the
// lab's shaper sits on the instance's own interface, and a socket of the
// instance learns of a drop there at once (the qdisc refuses the segment,
// TCP backs off and sends it as new, not as a retransmission), where on
// EC2 the drop is beyond the NIC and TCP must retransmit. To the
// container's TCP the instance is the way, as the ENA is to the
// instance's: its drops are losses, retransmitted.
func impactShallow() Scenario {
	return Scenario{
		Name:    "impact-dropped",
		Summary: "a TCP flow paced at 25 Mbit/s from a container, under a 40 Mbit/s allowance, and a 2 MB UDP burst at 200 Mbit/s through a shallow queue (64 packets)",
		Expect:  "microburst_out naming the burst, impact dropped, the TCP flow a victim with its retransmissions",
		Lab:     impactLab(64),
		Drive: func(ctx context.Context, l *lab.Lab) (Truth, error) {
			return victimBesideBurst(ctx, l, victimForwarded, dropBurstRate)
		},
	}
}

func impactDeep() Scenario {
	return Scenario{
		Name:    "impact-queued",
		Summary: "the same TCP flow and UDP burst through a deep queue (3000 packets): the burst waits, nothing drops",
		Expect:  "microburst_out naming the burst, impact queued, the TCP flow's srtt risen by about the queueing delay",
		Lab:     impactLab(3000),
		Drive:   func(ctx context.Context, l *lab.Lab) (Truth, error) { return victimBesideBurst(ctx, l, victimLocal, 0) },
	}
}

// impactInbound's sender is a host beyond the VPC namespace, for the
// reason impactShallow's is in a container: the inbound shaper is on the
// VPC namespace's own interface.
func impactInbound() Scenario {
	return Scenario{
		Name:    "impact-inbound",
		Summary: "a TCP download paced at 25 Mbit/s by a remote host, and a 2 MB UDP burst toward the instance through a shallow queue (64 packets)",
		Expect:  "microburst_in naming the burst, impact dropped, the download's remote sender a victim with its retransmissions, seen on ingress",
		Lab:     impactLab(64),
		Drive: func(ctx context.Context, l *lab.Lab) (Truth, error) {
			return victimBesideBurst(ctx, l, victimRemote, 0)
		},
	}
}

// Where an impact scenario's victim runs.
type victimKind int

const (
	victimLocal     victimKind = iota // a socket of the instance, uploading
	victimForwarded                   // a container's socket, uploading through the instance
	victimRemote                      // a remote host's socket, sending to the instance
)

// victimBesideBurst runs the victim, the burst 1.5 s into it (at
// burstRate, 0 back to back), and the
// delay probe, and takes the kernel's own retransmission counts around it
// (the victim's namespace's in Truth.RetransSegs).
func victimBesideBurst(ctx context.Context, l *lab.Lab, kind victimKind, burstRate uint64) (Truth, error) {
	var t Truth
	retrans := func() (lab.TCPCounts, error) { return l.TCPCounts(false) }
	var from *lab.Container
	peerRetrans := func() (lab.TCPCounts, error) { return l.TCPCounts(true) }
	switch kind {
	case victimForwarded:
		var err error
		if from, err = l.AddContainer(); err != nil {
			return t, err
		}
		retrans = from.TCPCounts
	case victimRemote:
		var err error
		if from, err = l.AddRemoteHost(); err != nil {
			return t, err
		}
		peerRetrans = from.TCPCounts
	}
	before, err := retrans()
	if err != nil {
		return t, err
	}
	peerBefore, err := peerRetrans()
	if err != nil {
		return t, err
	}
	probeCtx, stopProbe := context.WithCancel(ctx)
	defer stopProbe()
	var victim lab.PacedTCPResult
	var samples []lab.DelaySample
	var burst lab.BurstResult
	err = together(func() error {
		defer stopProbe()
		var err error
		if kind == victimRemote {
			victim, err = l.PacedDownload(ctx, from, victimRate, impactDrive)
		} else {
			spec := lab.PacedTCPSpec{Rate: victimRate, Duration: impactDrive, From: from}
			if kind == victimLocal {
				// Sending on time through the burst and past it, so
				// that a segment meets the queue at its longest, as
				// the probe does: paced by the application, not the
				// kernel, whose pacing keeps a socket's bytes in this
				// host's queue to a millisecond's worth, and a window
				// of 46 ms of its sending.
				spec.AppPaced, spec.InitCwnd = true, 100
			}
			victim, err = l.PacedTCP(ctx, spec)
		}
		return err
	}, func() error {
		var err error
		samples, err = l.Probe(probeCtx, lab.DelayProbe{Interval: 5 * time.Millisecond})
		return err
	}, func() error {
		select {
		case <-time.After(1500 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		var err error
		spec := lab.BurstSpec{Packets: impactBurst, PacketSize: 1200, Rate: burstRate}
		if kind == victimRemote {
			burst, err = l.InboundBurst(ctx, from, spec)
		} else {
			burst, err = l.Burst(ctx, spec)
		}
		return err
	})
	if err != nil {
		return t, err
	}
	after, err := retrans()
	if err != nil {
		return t, err
	}
	peerAfter, err := peerRetrans()
	if err != nil {
		return t, err
	}
	t.Culprit = burst.Src
	t.Bursts = []Burst{{StartNs: burst.StartNs, EndNs: burst.EndNs, Src: burst.Src, PauseNs: burst.PauseNs}}
	if kind != victimRemote {
		t.Bursts[0].FirstSentNs = burst.FirstSentNs
	}
	t.Victim, t.VictimPeer = victim.Instance, victim.Peer
	own, peer := after.Sub(before), peerAfter.Sub(peerBefore)
	t.RetransSegs, t.PeerRetransSegs = own.RetransSegs, peer.RetransSegs
	t.LossProbes, t.PeerLossProbes = own.LossProbes, peer.LossProbes
	t.PeerSackRecoveries, t.PeerReorders = peer.SackRecoveries, peer.Reorders
	var peakNs int64
	t.QueueDelay, peakNs = queueDelay(samples, burst.StartNs)
	t.VictimPeakGap = nearestGap(victim.WritesNs, peakNs)
	t.Notes = append(t.Notes, fmt.Sprintf("victim got %.1f Mbit/s; kernel TcpRetransSegs +%d in the instance (or its container, %d tail loss probes), +%d at the peer (%d, %d SACK recoveries, %d reorderings seen); probe queueing delay %v",
		victim.Bps()/1e6, t.RetransSegs, t.LossProbes, t.PeerRetransSegs, t.PeerLossProbes, t.PeerSackRecoveries, t.PeerReorders, t.QueueDelay.Round(time.Millisecond)))
	if t.VictimPeakGap >= 0 {
		t.Notes = append(t.Notes, fmt.Sprintf("the victim's write nearest the queue's peak came %v from it", t.VictimPeakGap.Round(time.Microsecond)))
	}
	return t, nil
}

// queueDelay is the most the probe's round trips rose after the burst
// began over the median of those before it, and when that probe was sent
// (the queue at its longest, within the probe's interval).
func queueDelay(samples []lab.DelaySample, burstNs int64) (time.Duration, int64) {
	var before []time.Duration
	var most time.Duration
	var peakNs int64
	for _, s := range samples {
		if s.Lost {
			continue
		}
		if s.SentNs < burstNs {
			before = append(before, s.RTT)
		} else if s.RTT > most {
			most, peakNs = s.RTT, s.SentNs
		}
	}
	if len(before) == 0 {
		return 0, 0
	}
	slices.Sort(before)
	return max(most-before[len(before)/2], 0), peakNs
}

// nearestGap is how far the nearest of times (sorted) is from ns; -1
// without times or ns.
func nearestGap(times []int64, ns int64) time.Duration {
	if len(times) == 0 || ns == 0 {
		return -1
	}
	i, _ := slices.BinarySearch(times, ns)
	gap := int64(math.MaxInt64)
	if i < len(times) {
		gap = times[i] - ns
	}
	if i > 0 {
		gap = min(gap, ns-times[i-1])
	}
	return time.Duration(gap)
}
