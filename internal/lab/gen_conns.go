package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/enaprobe/enaprobe/internal/monoclock"
	"golang.org/x/sys/unix"
)

// ConnFloodSpec opens many TCP connections from the instance at once.
type ConnFloodSpec struct {
	Count int
	// Timeout bounds the wait for the handshakes; default 1 s (a SYN the
	// conntrack cap dropped is then retried once at most).
	Timeout time.Duration
	// Hold is how long ConnFlood keeps them open before closing.
	Hold time.Duration
	// Over spreads the connects evenly over this long; 0 starts them all
	// at once.
	Over time.Duration
	// Dst defaults to the hold server on the VPC peer.
	Dst netip.AddrPort
}

const maxConns = 60000

// ConnSet is a set of connections opened by OpenConns.
type ConnSet struct {
	fds         []int
	Established int
	Failed      int
	// Attempts are every connect in the order made.
	Attempts []ConnAttempt
}

// ConnAttempt is one connect: when its first SYN left (CLOCK_MONOTONIC,
// just after connect(2)), and whether it was established in time. The
// kernel sends the SYN of one not answered again after 1, 2, 3, 4 s
// (tcp_syn_linear_timeouts, Linux 6.7+; 1, 3, 7 s before).
type ConnAttempt struct {
	StartNs     int64
	Established bool
}

// Close closes every connection of the set.
func (s *ConnSet) Close() {
	closeFds(s.fds)
	s.fds = nil
}

// OpenConns starts Count non-blocking connects at once from the instance
// namespace, then waits up to Timeout for them with poll(2), so a flood
// costs no goroutine or thread per connection. Connections that failed or
// did not finish in time are closed and counted as Failed.
func (l *Lab) OpenConns(ctx context.Context, spec ConnFloodSpec) (*ConnSet, error) {
	if spec.Count < 1 || spec.Count > maxConns {
		return nil, fmt.Errorf("open conns: count %d outside 1..%d", spec.Count, maxConns)
	}
	if spec.Timeout == 0 {
		spec.Timeout = time.Second
	}
	if err := checkDuration(spec.Timeout); err != nil {
		return nil, fmt.Errorf("open conns: timeout: %w", err)
	}
	if !spec.Dst.IsValid() {
		spec.Dst = netip.AddrPortFrom(PeerAddr, HoldPort)
	}
	family := unix.AF_INET6
	if spec.Dst.Addr().Is4() {
		family = unix.AF_INET
	}
	if spec.Over < 0 || spec.Over > maxTrafficDuration {
		return nil, fmt.Errorf("open conns: over %v outside [0, %v]", spec.Over, maxTrafficDuration)
	}
	var pending []int
	attempt := map[int]int{} // fd -> index in Attempts
	set := &ConnSet{}
	err := l.InInstance(func() error {
		start := time.Now()
		for k := range spec.Count {
			if spec.Over > 0 {
				time.Sleep(time.Until(start.Add(spec.Over * time.Duration(k) / time.Duration(spec.Count))))
			}
			fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("tcp socket: %w", err)
			}
			pending = append(pending, fd)
			if err := unix.Connect(fd, sockaddr(spec.Dst)); err != nil && !errors.Is(err, unix.EINPROGRESS) {
				return fmt.Errorf("connect %s: %w", spec.Dst, err)
			}
			attempt[fd] = len(set.Attempts)
			set.Attempts = append(set.Attempts, ConnAttempt{StartNs: monoclock.Now()})
		}
		return nil
	})
	if err != nil {
		closeFds(pending)
		return nil, fmt.Errorf("open conns: %w", err)
	}
	deadline := time.Now().Add(spec.Timeout)
	for len(pending) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		pfds := make([]unix.PollFd, len(pending))
		for i, fd := range pending {
			pfds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLOUT}
		}
		wait := min(time.Until(deadline), 100*time.Millisecond)
		if _, err := unix.Poll(pfds, int(wait.Milliseconds())+1); err != nil && !errors.Is(err, unix.EINTR) {
			closeFds(pending)
			set.Close()
			return nil, fmt.Errorf("open conns: poll: %w", err)
		}
		still := pending[:0]
		for i, fd := range pending {
			if pfds[i].Revents == 0 {
				still = append(still, fd)
				continue
			}
			if soErr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR); err == nil && soErr == 0 {
				set.fds = append(set.fds, fd)
				set.Established++
				set.Attempts[attempt[fd]].Established = true
			} else {
				unix.Close(fd)
				set.Failed++
			}
		}
		pending = still
	}
	set.Failed += len(pending)
	closeFds(pending)
	return set, nil
}

// ConnFloodResult counts a flood's outcome.
type ConnFloodResult struct {
	Established, Failed int
	Attempts            []ConnAttempt
}

// ConnFlood opens the connections, holds them for spec.Hold (or until ctx
// ends), then closes them.
func (l *Lab) ConnFlood(ctx context.Context, spec ConnFloodSpec) (ConnFloodResult, error) {
	if spec.Hold < 0 || spec.Hold > maxTrafficDuration {
		return ConnFloodResult{}, fmt.Errorf("conn flood: hold %v outside [0, %v]", spec.Hold, maxTrafficDuration)
	}
	set, err := l.OpenConns(ctx, spec)
	if err != nil {
		return ConnFloodResult{}, fmt.Errorf("conn flood: %w", err)
	}
	defer set.Close()
	t := time.NewTimer(spec.Hold)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return ConnFloodResult{Established: set.Established, Failed: set.Failed, Attempts: set.Attempts}, nil
}
