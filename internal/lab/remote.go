package lab

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/internal/namedns"
)

// RemotePrefix holds the remote hosts' subnets: remote host n has
// 10.98.n.0/24, the VPC end of its veth .1 and the host .2.
var RemotePrefix = netip.MustParsePrefix("10.98.0.0/16")

// AddRemoteHost makes a host one hop beyond the VPC namespace, which
// routes between it and the instance: its packets to the instance pass the
// inbound shaper as another host's would, so a drop there is, to its TCP,
// a loss on the way (a sender in the VPC namespace itself learns of the
// shaper's drops at once and backs off without retransmitting). It is a
// Container of the VPC side; the lab removes it on Close.
func (l *Lab) AddRemoteHost() (*Container, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return nil, fmt.Errorf("add remote host: the lab is closed")
	}
	n := l.remotes
	if n > 250 {
		return nil, fmt.Errorf("add remote host: %d already", n)
	}
	base := RemotePrefix.Addr().As4()
	gw := netip.AddrFrom4([4]byte{base[0], base[1], byte(n), 1})
	addr := netip.AddrFrom4([4]byte{base[0], base[1], byte(n), 2})
	ns, err := namedns.New("enalab-" + l.id + "-far" + strconv.Itoa(n))
	if err != nil {
		return nil, fmt.Errorf("add remote host: %w", err)
	}
	c := &Container{ns: ns, Addr: addr, Veth: "far" + strconv.Itoa(n)}
	l.containers = append(l.containers, ns)
	l.remotes++
	if err := l.wireRemote(c, gw, n == 0); err != nil {
		return nil, fmt.Errorf("add remote host %s: %w", c.Veth, err)
	}
	return c, nil
}

func (l *Lab) wireRemote(c *Container, gw netip.Addr, first bool) error {
	if err := plugHost(l.vpcNl, "vpc", c, gw); err != nil {
		return err
	}
	if !first {
		return nil
	}
	return l.vpc.SetSysctls(map[string]string{"net/ipv4/ip_forward": "1"})
}

// PacedDownload runs one TCP flow from the remote host to the instance,
// its sender paced to rate (bit/s) for d.
func (l *Lab) PacedDownload(ctx context.Context, from *Container, rate uint64, d time.Duration) (PacedTCPResult, error) {
	if err := checkDuration(d); err != nil {
		return PacedTCPResult{}, fmt.Errorf("paced download: %w", err)
	}
	var ln net.Listener
	if err := from.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", netip.AddrPortFrom(from.Addr, 0).String())
		return err
	}); err != nil {
		return PacedTCPResult{}, fmt.Errorf("paced download: listen on the remote host: %w", err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		tc := c.(*net.TCPConn)
		tc.SetWriteBuffer(bulkSndBuf)
		if err := setPacing(tc, rate); err != nil {
			served <- err
			return
		}
		tc.SetWriteDeadline(time.Now().Add(d))
		buf := make([]byte, 64<<10)
		for {
			if _, err := tc.Write(buf); err != nil {
				served <- nil // the deadline ends the stream
				return
			}
		}
	}()
	c, err := l.DialInstance(ctx, "tcp", ln.Addr().String())
	if err != nil {
		return PacedTCPResult{}, fmt.Errorf("paced download: %w", err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	tc := c.(*net.TCPConn)
	res := PacedTCPResult{Instance: tc.LocalAddr().(*net.TCPAddr).AddrPort(), Peer: tc.RemoteAddr().(*net.TCPAddr).AddrPort()}
	tc.SetReadDeadline(time.Now().Add(d + drainGrace))
	start := time.Now()
	n, err := io.Copy(io.Discard, tc)
	res.Bytes, res.Elapsed = uint64(n), time.Since(start)
	if err != nil {
		return res, fmt.Errorf("paced download: %w", err)
	}
	if err := <-served; err != nil {
		return res, fmt.Errorf("paced download: remote sender: %w", err)
	}
	return res, nil
}

// InboundBurst sends Packets datagrams, back to back or at spec.Rate,
// from the remote host to the instance (port UDPSinkPort, where a socket
// takes them for the burst's time, so no port unreachable comes back),
// through the inbound shaper.
func (l *Lab) InboundBurst(ctx context.Context, from *Container, spec BurstSpec) (BurstResult, error) {
	if spec.PacketSize == 0 {
		spec.PacketSize = 1200
	}
	dst := netip.AddrPortFrom(InstanceAddr, UDPSinkPort)
	hdr := udpHeaderBytes(dst.Addr())
	if spec.Packets < 1 || spec.Packets > maxPacketsPerRun {
		return BurstResult{}, fmt.Errorf("inbound burst: %d packets outside 1..%d", spec.Packets, maxPacketsPerRun)
	}
	if spec.PacketSize < hdr || spec.PacketSize > linkMTU {
		return BurstResult{}, fmt.Errorf("inbound burst: packet size %d outside %d..%d", spec.PacketSize, hdr, linkMTU)
	}
	if err := ctx.Err(); err != nil {
		return BurstResult{}, fmt.Errorf("inbound burst: %w", err)
	}
	open := func(do func(func() error) error, bind bool) (int, error) {
		fd := -1
		err := do(func() error {
			var err error
			if fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
				return err
			}
			if bind {
				return unix.Bind(fd, sockaddr(dst))
			}
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, genSndBuf); err != nil {
				return err
			}
			return unix.Connect(fd, sockaddr(dst))
		})
		if err != nil && fd >= 0 {
			unix.Close(fd)
			fd = -1
		}
		return fd, err
	}
	sink, err := open(l.InInstance, true)
	if err != nil {
		return BurstResult{}, fmt.Errorf("inbound burst: udp socket in the instance: %w", err)
	}
	defer unix.Close(sink)
	fd, err := open(from.Do, false)
	if err != nil {
		return BurstResult{}, fmt.Errorf("inbound burst: udp socket on the remote host: %w", err)
	}
	defer unix.Close(fd)
	var res BurstResult
	if res.Src, err = localAddr(fd); err != nil {
		return res, fmt.Errorf("inbound burst: %w", err)
	}
	spec.Dst = dst
	if err := res.sendBurst(ctx, fd, spec); err != nil {
		return res, fmt.Errorf("inbound burst: %w", err)
	}
	return res, nil
}
