package lab

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/enaprobe/enaprobe/internal/monoclock"
)

// UDPFlowsSpec describes steady UDP flows from the instance.
type UDPFlowsSpec struct {
	// Flows is the number of flows (distinct source ports); default 1.
	Flows int
	// Rate is each flow's rate, bit/s of IP packets.
	Rate uint64
	// PacketSize is the IP packet size, bytes; default 1200.
	PacketSize int
	Duration   time.Duration
	// Dst defaults to the UDP sink on the VPC peer.
	Dst netip.AddrPort
	// CatchUp sends what a late wake missed at once (pace): the rate
	// matters more than steadiness.
	CatchUp bool
}

// UDPFlowsResult is what the sender did.
type UDPFlowsResult struct {
	SendCounts
	Elapsed time.Duration
	// Skipped are the packets a late wake did not send (paceSteady).
	Skipped int
}

// UDPFlows sends the flows, round robin, paced to the total rate, and
// returns when done. Sends never block (see SendCounts.Blocked), and a
// late wake skips what it missed rather than send it at once
// (paceSteady): the flows stay steady on a busy host.
func (l *Lab) UDPFlows(ctx context.Context, spec UDPFlowsSpec) (UDPFlowsResult, error) {
	if spec.Flows == 0 {
		spec.Flows = 1
	}
	if spec.PacketSize == 0 {
		spec.PacketSize = 1200
	}
	if !spec.Dst.IsValid() {
		spec.Dst = netip.AddrPortFrom(PeerAddr, UDPSinkPort)
	}
	hdr := udpHeaderBytes(spec.Dst.Addr())
	if err := checkDuration(spec.Duration); err != nil {
		return UDPFlowsResult{}, fmt.Errorf("udp flows: %w", err)
	}
	if spec.Flows < 1 || spec.Flows > maxFlows {
		return UDPFlowsResult{}, fmt.Errorf("udp flows: %d flows outside 1..%d", spec.Flows, maxFlows)
	}
	if spec.PacketSize < hdr || spec.PacketSize > linkMTU {
		return UDPFlowsResult{}, fmt.Errorf("udp flows: packet size %d outside %d..%d", spec.PacketSize, hdr, linkMTU)
	}
	pps := float64(spec.Flows) * float64(spec.Rate) / float64(spec.PacketSize*8)
	total := int(pps * spec.Duration.Seconds())
	if total < 1 || total > maxPacketsPerRun {
		return UDPFlowsResult{}, fmt.Errorf("udp flows: %d packets outside 1..%d", total, maxPacketsPerRun)
	}
	fds, err := l.udpSockets(spec.Flows, spec.Dst)
	if err != nil {
		return UDPFlowsResult{}, fmt.Errorf("udp flows: %w", err)
	}
	defer closeFds(fds)

	var res UDPFlowsResult
	payload := make([]byte, spec.PacketSize-hdr)
	start := time.Now()
	send := func(k int) error { return res.send(fds[k%len(fds)], payload, spec.PacketSize) }
	interval := time.Duration(float64(time.Second) / pps)
	if spec.CatchUp {
		err = pace(ctx, total, interval, send)
	} else {
		res.Skipped, err = paceSteady(ctx, total, interval, send)
	}
	res.Elapsed = time.Since(start)
	if err != nil {
		return res, fmt.Errorf("udp flows: %w", err)
	}
	return res, nil
}

// BurstSpec is a back-to-back burst from one flow.
type BurstSpec struct {
	Packets int
	// PacketSize is the IP packet size, bytes; default 1200.
	PacketSize int
	// Rate paces the burst, bit/s of IP packets; 0 sends back to back,
	// as fast as the sender can (a few ms for thousands of packets).
	Rate uint64
	// Dst defaults to the UDP sink on the VPC peer.
	Dst netip.AddrPort
}

// BurstResult holds the sender's CLOCK_MONOTONIC times around the burst:
// StartNs just before the first send, EndNs just after the last.
type BurstResult struct {
	SendCounts
	StartNs, EndNs int64
	// FirstSentNs is when the first send returned. The packet had left
	// the sender by then, and one sent from the instance had passed tc
	// egress (the hook runs within the send): the burst reached its wire
	// between StartNs and FirstSentNs. A sender descheduled before its
	// first send (a busy host) starts the burst that much late.
	FirstSentNs int64
	// PauseNs is the longest one send of a burst back to back took, from
	// the return of the one before (the first's from StartNs): a few
	// microseconds, unless the sender was descheduled (a busy host) and
	// the burst came in parts. 0 for a paced burst.
	PauseNs int64
	// Src is the burst socket's address: its flow in a trace.
	Src netip.AddrPort
}

// Burst sends Packets datagrams from one socket as fast as the sender
// can, to be found again in a trace by its timestamps.
func (l *Lab) Burst(ctx context.Context, spec BurstSpec) (BurstResult, error) {
	if spec.PacketSize == 0 {
		spec.PacketSize = 1200
	}
	if !spec.Dst.IsValid() {
		spec.Dst = netip.AddrPortFrom(PeerAddr, UDPSinkPort)
	}
	hdr := udpHeaderBytes(spec.Dst.Addr())
	if spec.Packets < 1 || spec.Packets > maxPacketsPerRun {
		return BurstResult{}, fmt.Errorf("burst: %d packets outside 1..%d", spec.Packets, maxPacketsPerRun)
	}
	if spec.PacketSize < hdr || spec.PacketSize > linkMTU {
		return BurstResult{}, fmt.Errorf("burst: packet size %d outside %d..%d", spec.PacketSize, hdr, linkMTU)
	}
	if err := ctx.Err(); err != nil {
		return BurstResult{}, fmt.Errorf("burst: %w", err)
	}
	fds, err := l.udpSockets(1, spec.Dst)
	if err != nil {
		return BurstResult{}, fmt.Errorf("burst: %w", err)
	}
	defer closeFds(fds)
	var res BurstResult
	if res.Src, err = localAddr(fds[0]); err != nil {
		return res, fmt.Errorf("burst: %w", err)
	}
	if err := res.sendBurst(ctx, fds[0], spec); err != nil {
		return res, fmt.Errorf("burst: %w", err)
	}
	return res, nil
}

// sendBurst sends spec's datagrams from fd, back to back or paced at
// spec.Rate, and times them.
func (res *BurstResult) sendBurst(ctx context.Context, fd int, spec BurstSpec) error {
	payload := make([]byte, spec.PacketSize-udpHeaderBytes(spec.Dst.Addr()))
	res.StartNs = monoclock.Now()
	if spec.Rate > 0 {
		interval := time.Duration(uint64(spec.PacketSize) * 8 * uint64(time.Second) / spec.Rate)
		err := pace(ctx, spec.Packets, interval, func(int) error {
			err := res.send(fd, payload, spec.PacketSize)
			if res.FirstSentNs == 0 {
				res.FirstSentNs = monoclock.Now()
			}
			return err
		})
		res.EndNs = monoclock.Now()
		return err
	}
	last := res.StartNs
	for range spec.Packets {
		if err := res.send(fd, payload, spec.PacketSize); err != nil {
			res.EndNs = monoclock.Now()
			return err
		}
		now := monoclock.Now()
		if res.FirstSentNs == 0 {
			res.FirstSentNs = now
		}
		res.PauseNs = max(res.PauseNs, now-last)
		last = now
	}
	res.EndNs = last
	return nil
}
