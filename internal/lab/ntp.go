package lab

import (
	"encoding/binary"
	"net"
	"net/netip"
	"time"

	"github.com/enaprobe/enaprobe/internal/limits"
)

const (
	ntpPort       = 123
	ntpPacketLen  = 48
	ntpModeClient = 3
	ntpModeServer = 4
	// ntpEpochOffset is 1900-01-01 to 1970-01-01 in seconds.
	ntpEpochOffset = 2208988800
)

var ntpAddrs = []netip.Addr{limits.NTPv4, limits.NTPv6}

// ntpTimestamp is t in NTP's 32.32 fixed-point seconds since 1900.
func ntpTimestamp(t time.Time) uint64 {
	secs := uint64(t.Unix() + ntpEpochOffset)
	frac := uint64(t.Nanosecond()) << 32 / uint64(time.Second)
	return secs<<32 | frac
}

// ntpReply builds a minimal valid NTPv4 server reply (RFC 5905) to a
// client request received at rx, or returns false for anything that is not
// a client request.
func ntpReply(req []byte, rx time.Time) ([]byte, bool) {
	if len(req) < ntpPacketLen || req[0]&0x7 != ntpModeClient {
		return nil, false
	}
	version := req[0] >> 3 & 0x7
	if version < 1 || version > 4 {
		return nil, false
	}
	resp := make([]byte, ntpPacketLen)
	resp[0] = version<<3 | ntpModeServer // leap indicator 0: no warning
	resp[1] = 1                          // stratum 1: a reference clock
	resp[2] = req[2]                     // poll: echo the client's
	resp[3] = 0xec                       // precision 2^-20 s
	// Root delay 0; root dispersion about 1 ms (16.16 seconds).
	binary.BigEndian.PutUint32(resp[8:], 0x41)
	copy(resp[12:16], "LAB\x00")                                                  // reference id
	binary.BigEndian.PutUint64(resp[16:], ntpTimestamp(rx.Truncate(time.Second))) // reference time
	copy(resp[24:32], req[40:48])                                                 // origin = client's transmit
	binary.BigEndian.PutUint64(resp[32:], ntpTimestamp(rx))                       // receive
	binary.BigEndian.PutUint64(resp[40:], ntpTimestamp(time.Now()))               // transmit
	return resp, true
}

func (l *Lab) startNTP() error {
	pcs, err := l.listenPacketVPC(ntpAddrs, ntpPort)
	if err != nil {
		return err
	}
	for _, pc := range pcs {
		l.services.goServe(func() { serveNTP(pc) })
	}
	return nil
}

func serveNTP(pc *net.UDPConn) {
	buf := make([]byte, 512)
	for {
		n, from, err := pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			// Closed by Close; nothing else fails a bound UDP read.
			return
		}
		if resp, ok := ntpReply(buf[:n], time.Now()); ok {
			pc.WriteToUDPAddrPort(resp, from)
		}
	}
}
