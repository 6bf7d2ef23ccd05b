package lab

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/internal/monoclock"
)

// PacedTCPSpec is one TCP upload whose sender the kernel paces to Rate
// (SO_MAX_PACING_RATE): a victim that asks for less than the allowance,
// like a video stream or a replication link.
type PacedTCPSpec struct {
	Rate     uint64 // bit/s
	Duration time.Duration
	// From runs the flow from a container behind the instance: its
	// packets are forwarded (and masqueraded), and a drop in the
	// instance's shaper is, to the container's TCP, a loss on the way, as
	// a drop beyond an ENA is to the instance's.
	From *Container
	// InitCwnd, when set (an upload from the instance only), is the
	// connection's first congestion window, in segments, through a route
	// to the peer of its own for the run (initcwnd): a flow the pacing
	// limits never grows its window, and one of ten segments (3 ms at
	// 25 Mbit/s) stops sending a few ms into a burst, waiting for ACKs
	// the queue holds, so its slowest segment need not have met the
	// queue at its longest. With a window past what the pacing sends in
	// a queue's wait, it sends on time throughout.
	InitCwnd uint32
	// AppPaced: the application paces its writes to Rate instead of
	// the kernel. The kernel's pacing holds the socket's bytes in a
	// qdisc of its host to about a millisecond of its rate (TCP small
	// queues): behind a queue on this host, such as the lab's shaper,
	// the socket sends its next segment only when one leaves, where on
	// EC2 the shaper is beyond the NIC and the socket sends on.
	AppPaced bool
}

// PacedTCPResult is what the receiver got, and the connection's two ends.
type PacedTCPResult struct {
	TCPBulkResult
	Instance, Peer netip.AddrPort
}

// PacedTCP runs one paced TCP upload to the VPC peer.
func (l *Lab) PacedTCP(ctx context.Context, spec PacedTCPSpec) (PacedTCPResult, error) {
	if err := checkDuration(spec.Duration); err != nil {
		return PacedTCPResult{}, fmt.Errorf("paced tcp: %w", err)
	}
	if spec.Rate == 0 {
		return PacedTCPResult{}, fmt.Errorf("paced tcp: no rate")
	}
	dial := l.DialInstance
	if spec.From != nil {
		dial = spec.From.Dial
		if spec.InitCwnd != 0 {
			return PacedTCPResult{}, fmt.Errorf("paced tcp: an initial window for a container's upload")
		}
	}
	if spec.InitCwnd != 0 {
		r := &netlink.Route{LinkIndex: l.instLink.Attrs().Index, Dst: &net.IPNet{IP: net.IP(PeerAddr.AsSlice()), Mask: net.CIDRMask(32, 32)},
			Gw: net.IP(GatewayAddr.AsSlice()), InitCwnd: int(spec.InitCwnd)}
		if err := l.instNl.RouteAdd(r); err != nil {
			return PacedTCPResult{}, fmt.Errorf("paced tcp: route to %s with initcwnd %d: %w", PeerAddr, spec.InitCwnd, err)
		}
		defer l.instNl.RouteDel(r)
	}
	c, err := dial(ctx, "tcp", netip.AddrPortFrom(PeerAddr, BulkPort).String())
	if err != nil {
		return PacedTCPResult{}, fmt.Errorf("paced tcp: %w", err)
	}
	defer c.Close()
	tc := c.(*net.TCPConn)
	res := PacedTCPResult{Instance: tc.LocalAddr().(*net.TCPAddr).AddrPort(), Peer: tc.RemoteAddr().(*net.TCPAddr).AddrPort()}
	res.Instance = netip.AddrPortFrom(res.Instance.Addr().Unmap(), res.Instance.Port())
	res.Peer = netip.AddrPortFrom(res.Peer.Addr().Unmap(), res.Peer.Port())
	end := time.Now().Add(spec.Duration)
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if spec.AppPaced {
		res.TCPBulkResult, err = uploadAt(tc, end, spec.Rate)
	} else if err = setPacing(tc, spec.Rate); err == nil {
		res.TCPBulkResult, err = upload(tc, end)
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("paced tcp: %w", ctx.Err())
	}
	if err != nil {
		return res, fmt.Errorf("paced tcp: %w", err)
	}
	return res, nil
}

// setPacing caps the socket's sending rate, bit/s: the kernel's TCP
// pacing (no fq qdisc needed since Linux 4.13).
func setPacing(c *net.TCPConn, bps uint64) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_MAX_PACING_RATE, bps/8)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("set pacing rate: %w", serr)
	}
	return nil
}

// TCPCounts are the kernel's TCP counters of one namespace that the
// impact scenarios read around their traffic.
type TCPCounts struct {
	// RetransSegs is every segment sent again (Tcp RetransSegs), tail
	// loss probes among them.
	RetransSegs uint64
	// LossProbes are the tail loss probes sent (TcpExt TCPLossProbes): a
	// segment sent again, or a new one, after two srtt without an ACK,
	// as when a queue holds the ACKs back, loss or not. RetransSegs over
	// LossProbes is a segment sent again for something else: a loss.
	LossProbes uint64
	// SackRecoveries are the times the sender went into recovery on the
	// receiver's SACKs (TcpExt TCPSackRecovery): the receiver had data
	// past a hole. A loss of a flight's tail alone is sent again after a
	// timeout instead, and the receiver's wire cannot tell its copies
	// from new data.
	SackRecoveries uint64
	// Reorders are the times the sender saw a segment it had not sent
	// again acknowledged after ones past it (TcpExt TCPSACKReorder,
	// TCPTSReorder, TCPRenoReorder): it arrived late, reordered on the
	// way. A veth hands each packet to the backlog of the CPU that sent
	// it, so a flow sent from two CPUs (the writer, and the softirq its
	// ACKs arrive on) can reach the receiver out of order; the wire then
	// sees a segment end below the highest, as a copy does.
	Reorders uint64
}

// Sub is what the counters rose by since before.
func (c TCPCounts) Sub(before TCPCounts) TCPCounts {
	return TCPCounts{RetransSegs: c.RetransSegs - before.RetransSegs, LossProbes: c.LossProbes - before.LossProbes,
		SackRecoveries: c.SackRecoveries - before.SackRecoveries, Reorders: c.Reorders - before.Reorders}
}

// TCPCounts reads the kernel's TCP counters of the instance namespace
// (vpc false) or the VPC namespace, from /proc/net as a thread inside it
// sees it.
func (l *Lab) TCPCounts(vpc bool) (TCPCounts, error) {
	var c TCPCounts
	read := func() error {
		var err error
		c, err = readTCPCounts()
		return err
	}
	var err error
	if vpc {
		err = l.InVPC(read)
	} else {
		err = l.InInstance(read)
	}
	return c, err
}

// TCPCounts reads the kernel's TCP counters of the container's namespace.
func (c *Container) TCPCounts() (TCPCounts, error) {
	var out TCPCounts
	err := c.Do(func() error {
		var err error
		out, err = readTCPCounts()
		return err
	})
	return out, err
}

// readTCPCounts reads the calling thread's namespace's TCP counters.
func readTCPCounts() (TCPCounts, error) {
	var c TCPCounts
	var err error
	if c.RetransSegs, err = mibCounter("/proc/thread-self/net/snmp", "Tcp:", "RetransSegs"); err != nil {
		return c, err
	}
	if c.LossProbes, err = mibCounter("/proc/thread-self/net/netstat", "TcpExt:", "TCPLossProbes"); err != nil {
		return c, err
	}
	if c.SackRecoveries, err = mibCounter("/proc/thread-self/net/netstat", "TcpExt:", "TCPSackRecovery"); err != nil {
		return c, err
	}
	for _, name := range []string{"TCPSACKReorder", "TCPTSReorder", "TCPRenoReorder"} {
		n, err := mibCounter("/proc/thread-self/net/netstat", "TcpExt:", name)
		if err != nil {
			return c, err
		}
		c.Reorders += n
	}
	return c, nil
}

// mibCounter reads one counter of a /proc/net MIB file, whose lines come
// in pairs: the group's names, then its values.
func mibCounter(path, group, name string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20) // TcpExt's lines are long
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != group {
			continue
		}
		if names == nil {
			names = fields
			continue
		}
		for i, n := range names {
			if n == name && i < len(fields) {
				return strconv.ParseUint(fields[i], 10, 64)
			}
		}
		names = nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return 0, fmt.Errorf("no %s %s in %s", strings.TrimSuffix(group, ":"), name, path)
}

// DelayProbe measures the round trip from the instance to the VPC peer
// with ICMP echo every Interval until ctx ends: through the same
// shaper queue as every other packet of the instance.
type DelayProbe struct {
	Interval time.Duration
}

// DelaySample is one echo: sent at SentNs (CLOCK_MONOTONIC), answered
// after RTT; Lost when no answer came within a second.
type DelaySample struct {
	SentNs int64
	RTT    time.Duration
	Lost   bool
}

// Probe runs p until ctx ends, at most maxTrafficDuration.
func (l *Lab) Probe(ctx context.Context, p DelayProbe) ([]DelaySample, error) {
	if p.Interval <= 0 {
		p.Interval = 10 * time.Millisecond
	}
	var conn *icmp.PacketConn
	if err := l.InInstance(func() error {
		var err error
		conn, err = icmp.ListenPacket("ip4:icmp", InstanceAddr.String())
		return err
	}); err != nil {
		return nil, fmt.Errorf("delay probe: %w", err)
	}
	defer conn.Close()
	type sent struct{ ns int64 }
	sends := map[int]sent{}
	var out []DelaySample
	answered := map[int]time.Duration{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			conn.SetReadDeadline(time.Now().Add(time.Second))
			n, _, err := conn.ReadFrom(buf)
			now := time.Now()
			if err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() && ctx.Err() == nil {
					continue
				}
				return
			}
			m, err := icmp.ParseMessage(1, buf[:n])
			if err != nil || m.Type != ipv4.ICMPTypeEchoReply {
				continue
			}
			e, ok := m.Body.(*icmp.Echo)
			if !ok || e.ID != probeID {
				continue
			}
			if len(e.Data) >= 8 {
				at := time.Unix(0, int64(binary.BigEndian.Uint64(e.Data)))
				answered[e.Seq] = now.Sub(at)
			}
		}
	}()
	deadline := time.Now().Add(maxTrafficDuration)
	tick := time.NewTicker(p.Interval)
	defer tick.Stop()
	for seq := 0; ctx.Err() == nil && time.Now().Before(deadline); seq++ {
		now := time.Now()
		var data [8]byte
		binary.BigEndian.PutUint64(data[:], uint64(now.UnixNano()))
		msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: probeID, Seq: seq & 0xffff, Data: data[:]}}
		b, _ := msg.Marshal(nil)
		if _, err := conn.WriteTo(b, &net.IPAddr{IP: PeerAddr.AsSlice()}); err != nil && !isNoBufs(err) {
			return out, fmt.Errorf("delay probe: %w", err)
		}
		sends[seq&0xffff] = sent{monoclock.Now()}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	// Let the last answers come in, then stop the reader.
	time.Sleep(time.Second)
	conn.Close()
	<-done
	for seq, s := range sends {
		rtt, ok := answered[seq]
		out = append(out, DelaySample{SentNs: s.ns, RTT: rtt, Lost: !ok})
	}
	slices.SortFunc(out, func(a, b DelaySample) int { return cmp.Compare(a.SentNs, b.SentNs) })
	return out, nil
}

// probeID marks the delay probe's echoes.
const probeID = 0xe1a

// isNoBufs tells a send the full queue refused: the probe goes on.
func isNoBufs(err error) bool { return errors.Is(err, syscall.ENOBUFS) }
