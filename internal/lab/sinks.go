package lab

import (
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"time"
)

// Bulk protocol on BulkPort: the client sends one op byte.
//   - bulkUpload: the client then streams until it half-closes; the server
//     answers with the bytes it received and the nanoseconds between the
//     first and last of them (both uint64 big endian).
//   - bulkDownload: followed by a uint64 big endian duration in ns; the
//     server streams for that long (at most maxTrafficDuration), then closes.
const (
	bulkUpload   = 'U'
	bulkDownload = 'D'
	sinkRcvBuf   = 8 << 20
)

var peerAddrs = []netip.Addr{PeerAddr, PeerAddr6}

// sinks are the traffic endpoints on the VPC peer host.
type sinks struct {
	udpPackets, udpBytes atomic.Uint64
	conns                connSet
}

// SinkStats are the sinks' cumulative receive counters.
type SinkStats struct {
	UDPPackets, UDPBytes uint64
}

// SinkStats returns what the UDP sink received so far.
func (l *Lab) SinkStats() SinkStats {
	return SinkStats{UDPPackets: l.sinks.udpPackets.Load(), UDPBytes: l.sinks.udpBytes.Load()}
}

func (l *Lab) startSinks() error {
	l.sinks = &sinks{}
	pcs, err := l.listenPacketVPC(peerAddrs, UDPSinkPort)
	if err != nil {
		return err
	}
	for _, pc := range pcs {
		// Big enough that the sink never drops what the shaper let through.
		pc.SetReadBuffer(sinkRcvBuf)
		l.services.goServe(func() { l.sinks.serveUDP(pc) })
	}
	l.services.onClose(l.sinks.conns.closeAll)
	bulk, err := l.listenVPC(peerAddrs, BulkPort)
	if err != nil {
		return err
	}
	hold, err := l.listenVPC(peerAddrs, HoldPort)
	if err != nil {
		return err
	}
	for _, ln := range bulk {
		l.services.goServe(func() { l.acceptLoop(ln, serveBulk) })
	}
	for _, ln := range hold {
		l.services.goServe(func() { l.acceptLoop(ln, serveHold) })
	}
	return nil
}

func (s *sinks) serveUDP(pc *net.UDPConn) {
	buf := make([]byte, 65536)
	for {
		n, err := pc.Read(buf)
		if err != nil {
			return // closed by Close
		}
		s.udpPackets.Add(1)
		s.udpBytes.Add(uint64(n))
	}
}

// acceptLoop serves each connection on its own goroutine until the
// listener closes; the connections close with the lab.
func (l *Lab) acceptLoop(ln net.Listener, serve func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if !l.sinks.conns.add(c) {
			return
		}
		l.services.goServe(func() {
			defer l.sinks.conns.remove(c)
			serve(c)
		})
	}
}

// serveHold keeps a connection open, discarding what arrives, until the
// client closes it or the lab closes.
func serveHold(c net.Conn) { io.Copy(io.Discard, c) }

func serveBulk(c net.Conn) {
	var op [1]byte
	if _, err := io.ReadFull(c, op[:]); err != nil {
		return
	}
	switch op[0] {
	case bulkUpload:
		var first, last time.Time
		var total uint64
		buf := make([]byte, 256<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				if total == 0 {
					first = time.Now()
				}
				total += uint64(n)
				last = time.Now()
			}
			if err != nil {
				break
			}
		}
		var reply [16]byte
		binary.BigEndian.PutUint64(reply[0:], total)
		binary.BigEndian.PutUint64(reply[8:], uint64(last.Sub(first)))
		c.Write(reply[:])
	case bulkDownload:
		var d [8]byte
		if _, err := io.ReadFull(c, d[:]); err != nil {
			return
		}
		dur := min(time.Duration(binary.BigEndian.Uint64(d[:])), maxTrafficDuration)
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetWriteBuffer(bulkSndBuf)
		}
		c.SetWriteDeadline(time.Now().Add(dur))
		buf := make([]byte, 64<<10)
		for {
			if _, err := c.Write(buf); err != nil {
				return // the deadline ends the stream
			}
		}
	}
}
