package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// Bounds of every traffic generator, so that no loop runs unbounded.
const (
	maxTrafficDuration = 10 * time.Minute
	maxPacketsPerRun   = 50_000_000
	maxFlows           = 1024
	// genSndBuf lets a UDP socket hold more than a full flow queue, so the
	// shaper, not the socket, is where excess waits or drops (as on EC2,
	// where the instance's sockets never see the allowance).
	genSndBuf = 4 << 20
)

func checkDuration(d time.Duration) error {
	if d <= 0 || d > maxTrafficDuration {
		return fmt.Errorf("duration %v outside (0, %v]", d, maxTrafficDuration)
	}
	return nil
}

// udpHeaderBytes is the IP + UDP header size for dst's family.
func udpHeaderBytes(dst netip.Addr) int {
	if dst.Is4() {
		return 20 + 8
	}
	return 40 + 8
}

// udpSockets opens n UDP sockets in the instance namespace, each connected
// to dst from its own ephemeral port: n distinct flows.
func (l *Lab) udpSockets(n int, dst netip.AddrPort) ([]int, error) {
	family := unix.AF_INET6
	if dst.Addr().Is4() {
		family = unix.AF_INET
	}
	var fds []int
	err := l.InInstance(func() error {
		for range n {
			fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("udp socket: %w", err)
			}
			fds = append(fds, fd)
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, genSndBuf); err != nil {
				return fmt.Errorf("udp socket sndbuf: %w", err)
			}
			if err := unix.Connect(fd, sockaddr(dst)); err != nil {
				return fmt.Errorf("udp connect %s: %w", dst, err)
			}
		}
		return nil
	})
	if err != nil {
		closeFds(fds)
		return nil, fmt.Errorf("open %d udp flows from instance: %w", n, err)
	}
	return fds, nil
}

func sockaddr(ap netip.AddrPort) unix.Sockaddr {
	if ap.Addr().Is4() {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	return &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
}

// localAddr is the address a socket sends from.
func localAddr(fd int) (netip.AddrPort, error) {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("getsockname: %w", err)
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port)), nil
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port)), nil
	}
	return netip.AddrPort{}, fmt.Errorf("getsockname: unexpected %T", sa)
}

func closeFds(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// SendCounts tallies a generator's non-blocking sends.
type SendCounts struct {
	Sent, SentBytes uint64
	// Blocked counts sends refused because the socket buffer was full.
	Blocked uint64
}

// send sends one datagram without blocking. A full socket buffer is
// counted, not waited for, so pacing holds; other errors are returned.
func (c *SendCounts) send(fd int, payload []byte, ipBytes int) error {
	err := unix.Send(fd, payload, unix.MSG_DONTWAIT)
	switch {
	case err == nil:
		c.Sent++
		c.SentBytes += uint64(ipBytes)
	case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.ENOBUFS):
		c.Blocked++
	default:
		return fmt.Errorf("send: %w", err)
	}
	return nil
}

// pace calls send(k) for k in [0, total) at one call per interval from
// now, in catch-up batches after each sleep. It stops early when ctx ends,
// when send fails, or one second past the planned end.
func pace(ctx context.Context, total int, interval time.Duration, send func(k int) error) error {
	_, err := paceCatchUp(ctx, total, interval, total, send)
	return err
}

// paceSteady is pace for a flow that must stay steady: a late wake (a busy
// host descheduled the sender) sends only the packets due over the last
// 2 ms (at least two) and skips the older ones, as a steady flow's missed
// sends are missed, not sent back to back (a burst the scenario did not
// ask for, over a shaper's bucket). It returns how many it skipped.
func paceSteady(ctx context.Context, total int, interval time.Duration, send func(k int) error) (skipped int, err error) {
	return paceCatchUp(ctx, total, interval, max(2, int(2*time.Millisecond/max(interval, time.Nanosecond))), send)
}

// paceCatchUp sends at most catchUp packets per wake, skipping older ones
// due.
func paceCatchUp(ctx context.Context, total int, interval time.Duration, catchUp int, send func(k int) error) (skipped int, err error) {
	interval = max(interval, time.Nanosecond)
	start := time.Now()
	hardStop := start.Add(time.Duration(total)*interval + time.Second)
	for k := 0; k < total; {
		if err := ctx.Err(); err != nil {
			return skipped, err
		}
		now := time.Now()
		if now.After(hardStop) {
			return skipped, nil
		}
		due := min(int(now.Sub(start)/interval)+1, total)
		if due-k > catchUp {
			skipped += due - catchUp - k
			k = due - catchUp
		}
		for ; k < due; k++ {
			if err := send(k); err != nil {
				return skipped, err
			}
		}
		if wait := time.Until(start.Add(time.Duration(k) * interval)); wait > 0 {
			time.Sleep(wait)
		}
	}
	return skipped, nil
}
