package lab

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/enaprobe/enaprobe/internal/limits"
	"github.com/enaprobe/enaprobe/internal/monoclock"
	"github.com/enaprobe/enaprobe/internal/record"
)

// LinkLocalSpec is a client of a link-local service at a steady rate: one
// request, one packet, toward the service each 1/Rate seconds.
type LinkLocalSpec struct {
	// Service is record.ServiceDNS or record.ServiceNTP.
	Service record.Service
	// Rate is requests (packets toward the service) per second.
	Rate     float64
	Duration time.Duration
	IPv6     bool
}

// LinkLocalResult counts requests sent and answers received.
type LinkLocalResult struct {
	SendCounts
	Answered uint64
	// Src is the client socket's address: its flow in a trace.
	Src netip.AddrPort
	// SendNs is when each request left the socket (CLOCK_MONOTONIC, just
	// after the send): what a model of the allowance replays to know when
	// it dropped.
	SendNs []int64
}

// answerWait is how long answers are awaited after the last request.
const answerWait = 500 * time.Millisecond

// LinkLocal runs the client from one UDP socket in the instance namespace
// and counts the answers that came back.
func (l *Lab) LinkLocal(ctx context.Context, spec LinkLocalSpec) (LinkLocalResult, error) {
	if err := checkDuration(spec.Duration); err != nil {
		return LinkLocalResult{}, fmt.Errorf("link-local client: %w", err)
	}
	total := int(spec.Rate * spec.Duration.Seconds())
	if total < 1 || total > maxPacketsPerRun {
		return LinkLocalResult{}, fmt.Errorf("link-local client: %d requests outside 1..%d", total, maxPacketsPerRun)
	}
	var dst netip.AddrPort
	var request func(k int) []byte
	var isAnswer func([]byte) bool
	switch spec.Service {
	case record.ServiceDNS:
		dst = netip.AddrPortFrom(pick(spec.IPv6, limits.DNSv6, limits.DNSv4), dnsPort)
		request, isAnswer = dnsRequest, dnsIsAnswer
	case record.ServiceNTP:
		dst = netip.AddrPortFrom(pick(spec.IPv6, limits.NTPv6, limits.NTPv4), ntpPort)
		request, isAnswer = ntpRequest, ntpIsAnswer
	default:
		return LinkLocalResult{}, fmt.Errorf("link-local client: service %s has no UDP client", spec.Service)
	}
	var conn *net.UDPConn
	err := l.InInstance(func() error {
		var err error
		conn, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
		return err
	})
	if err != nil {
		return LinkLocalResult{}, fmt.Errorf("link-local client: dial %s from instance: %w", dst, err)
	}
	defer conn.Close()

	var res LinkLocalResult
	res.Src = conn.LocalAddr().(*net.UDPAddr).AddrPort()
	var answered atomic.Uint64
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		buf := make([]byte, 2048)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return // the read deadline or Close
			}
			if isAnswer(buf[:n]) {
				answered.Add(1)
			}
		}
	}()

	raw, err := conn.SyscallConn()
	if err != nil {
		return res, fmt.Errorf("link-local client: %w", err)
	}
	interval := time.Duration(float64(time.Second) / spec.Rate)
	hdr := udpHeaderBytes(dst.Addr())
	paceErr := pace(ctx, total, interval, func(k int) error {
		req := request(k)
		var sendErr error
		if err := raw.Write(func(fd uintptr) bool {
			sent := res.Sent
			sendErr = res.send(int(fd), req, len(req)+hdr)
			if res.Sent > sent {
				res.SendNs = append(res.SendNs, monoclock.Now())
			}
			return true
		}); err != nil {
			return err
		}
		return sendErr
	})
	conn.SetReadDeadline(time.Now().Add(answerWait))
	<-readerDone
	res.Answered = answered.Load()
	if paceErr != nil {
		return res, fmt.Errorf("link-local client: %w", paceErr)
	}
	return res, nil
}

func pick(v6 bool, a6, a4 netip.Addr) netip.Addr {
	if v6 {
		return a6
	}
	return a4
}

// dnsRequest is an A query for the VPC peer's name with ID k.
func dnsRequest(k int) []byte {
	m := new(dns.Msg)
	m.SetQuestion("peer.lab.internal.", dns.TypeA)
	m.Id = uint16(k)
	b, err := m.Pack()
	if err != nil {
		panic(fmt.Sprintf("pack constant dns query: %v", err))
	}
	return b
}

func dnsIsAnswer(b []byte) bool {
	var m dns.Msg
	return m.Unpack(b) == nil && m.Response
}

// ntpRequest is an NTPv4 client request carrying the send time.
func ntpRequest(int) []byte {
	b := make([]byte, ntpPacketLen)
	b[0] = 4<<3 | ntpModeClient
	binary.BigEndian.PutUint64(b[40:], ntpTimestamp(time.Now()))
	return b
}

func ntpIsAnswer(b []byte) bool {
	return len(b) >= ntpPacketLen && b[0]&0x7 == ntpModeServer
}
