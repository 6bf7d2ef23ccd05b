package lab

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
)

// serviceGroup owns the VPC-side servers: what to close and the goroutines
// to wait for.
type serviceGroup struct {
	mu      sync.Mutex
	closers []func() error
	wg      sync.WaitGroup
}

func (g *serviceGroup) onClose(fn func() error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closers = append(g.closers, fn)
}

func (g *serviceGroup) goServe(fn func()) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		fn()
	}()
}

// close runs the closers in reverse order, then waits for every server
// goroutine, so no socket outlives Close.
func (g *serviceGroup) close() error {
	g.mu.Lock()
	closers := g.closers
	g.closers = nil
	g.mu.Unlock()
	var errs []error
	for i := len(closers) - 1; i >= 0; i-- {
		if err := closers[i](); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	g.wg.Wait()
	return errors.Join(errs...)
}

// connSet tracks accepted connections so that closing the service also
// closes them, not only the listener.
type connSet struct {
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// add registers c, or closes it and reports false once the set is closed.
func (s *connSet) add(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	if s.conns == nil {
		s.conns = map[net.Conn]struct{}{}
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *connSet) remove(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	c.Close()
}

func (s *connSet) closeAll() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.conns = nil
	return nil
}

// listenVPC opens TCP listeners in the VPC namespace, one per address.
func (l *Lab) listenVPC(addrs []netip.Addr, port uint16) ([]net.Listener, error) {
	var lns []net.Listener
	err := l.InVPC(func() error {
		for _, a := range addrs {
			ln, err := net.Listen("tcp", netip.AddrPortFrom(a, port).String())
			if err != nil {
				return err
			}
			l.services.onClose(ln.Close)
			lns = append(lns, ln)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listen tcp port %d in vpc: %w", port, err)
	}
	return lns, nil
}

// listenPacketVPC opens UDP sockets in the VPC namespace, one per address.
func (l *Lab) listenPacketVPC(addrs []netip.Addr, port uint16) ([]*net.UDPConn, error) {
	var pcs []*net.UDPConn
	err := l.InVPC(func() error {
		for _, a := range addrs {
			pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, port)))
			if err != nil {
				return err
			}
			l.services.onClose(pc.Close)
			pcs = append(pcs, pc)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listen udp port %d in vpc: %w", port, err)
	}
	return pcs, nil
}

// startServices starts IMDS, DNS, NTP and the traffic sinks in the VPC
// namespace. Every socket is created there on a locked thread; the serving
// goroutines then run anywhere, as a socket keeps its namespace.
func (l *Lab) startServices() error {
	if err := l.startDNS(); err != nil {
		return fmt.Errorf("dns: %w", err)
	}
	if err := l.startNTP(); err != nil {
		return fmt.Errorf("ntp: %w", err)
	}
	if err := l.startIMDS(); err != nil {
		return fmt.Errorf("imds: %w", err)
	}
	if err := l.startSinks(); err != nil {
		return fmt.Errorf("sinks: %w", err)
	}
	return nil
}
