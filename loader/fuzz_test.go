//go:build linux

package loader

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/enaprobe/enaprobe/internal/limits"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/testutil/frames"
)

// FuzzDatapath feeds the same arbitrary frame and GSO metadata to the eBPF
// program and to the Go reference, and fails on any difference in what they
// count. Its corpus lives in testdata/fuzz/FuzzDatapath.
//
//	go test -run '^$' -fuzz FuzzDatapath -fuzztime 60s ./loader
func FuzzDatapath(f *testing.F) {
	frag4a, frag4b := ipv4Fragments(f)
	frag6a, frag6b := ipv6Fragments(f)
	for _, frame := range [][]byte{
		udpFrame(f, v4A, v4B, 1000, 2000, 18), tcpFrame(f, v4A, v4B, 40000, 443, true, false, 0),
		tcpFrame(f, v6A, v6B, 40000, 443, false, true, 200), ipv4OptionsFrame(f), frag4a, frag4b, frag6a, frag6b,
		ipv6ExtFrame(f), vlanFrame(f, layers.EthernetTypeQinQ, layers.EthernetTypeDot1Q), icmpFrame(f), icmpv6Frame(f),
		arpFrame(f), greFrame(f), tsFrame(f, 40003, linuxTS, 7, 0xfffffff0, 0), tsFrame(f, 40003, nil, 7, 9, 20),
	} {
		f.Add(frame, false, uint16(0), uint16(0))
		f.Add(frame, true, uint16(3), uint16(100))
	}
	for _, c := range frames.IMDS(f) {
		f.Add(c.Frame, c.Dir == record.Ingress, uint16(0), uint16(0))
	}
	for _, c := range frames.LinkLocal(f, v4B) {
		f.Add(c.Frame, c.Dir == record.Ingress, uint16(0), uint16(0))
	}
	vpc := netip.MustParseAddr("10.1.0.2")
	opts := testOptions()
	opts.VPCResolver = vpc
	tp := newTestProbe(f, opts)
	maxFrame := tp.largestTestRunFrame(f)
	f.Fuzz(func(t *testing.T, frame []byte, ingress bool, gsoSegs, gsoSize uint16) {
		if len(frame) > maxFrame {
			return // the test run builds an skb of one page at most
		}
		dir := record.Egress
		if ingress {
			dir = record.Ingress
		}
		_, err := checkFrameOrRefused(t, tp, dir, frame, uint32(gsoSegs), uint32(gsoSize), vpc)
		if errors.Is(err, errKernelRefused) {
			t.Skip(err) // a property of the input, not of the environment
		}
		if err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzIMDSPayload fuzzes what the IMDS look reads: the payload of a TCP
// segment to IMDS port 80 (egress) or from it (ingress), over IPv4 or IPv6,
// against the Go reference. Random frames seldom reach IMDS's address and
// port; these always do.
//
//	go test -run '^$' -fuzz FuzzIMDSPayload -fuzztime 60s ./loader
func FuzzIMDSPayload(f *testing.F) {
	for _, p := range []string{"PUT /latest/api/token HTTP/1.1\r\n", "GET / HTTP/1.1\r\nX-aws-ec2-metadata-token: A\r\n\r\n",
		"GET / HTTP/1.1\r\nx-AWS-ec2-METADATA-token: A", "HTTP/1.1 200 OK\r\n", "GET /\r\nX-aws-ec2-metadata-toke"} {
		f.Add([]byte(p), false, false)
		f.Add([]byte(p), true, true)
	}
	tp := newTestProbe(f, testOptions())
	imds4, imds6 := net.IP(limits.IMDSv4.AsSlice()), net.IP(limits.IMDSv6.AsSlice())
	f.Fuzz(func(t *testing.T, payload []byte, ingress, v6 bool) {
		if len(payload) > 1400 {
			return
		}
		host, imds := v4A, imds4
		if v6 {
			host, imds = v6A, imds6
		}
		frame := frames.TCPPayload(t, host, imds, 41000, 80, 64, payload)
		dir := record.Egress
		if ingress {
			dir = record.Ingress
			frame = frames.TCPPayload(t, imds, host, 80, 41000, 1, payload)
		}
		checkFrame(t, tp, dir, frame, 0, 0, netip.Addr{})
	})
}

// FuzzLinkLocalPayload fuzzes the payload copy of DNS (UDP or TCP, to or
// from the resolver) and NTP packets against the Go reference: random
// frames seldom reach a link-local address and port.
//
//	go test -run '^$' -fuzz FuzzLinkLocalPayload -fuzztime 60s ./loader
func FuzzLinkLocalPayload(f *testing.F) {
	for _, c := range frames.LinkLocal(f, v4B) {
		f.Add(c.Frame[min(len(c.Frame), 42):], c.Dir == record.Ingress, false, false, false)
	}
	f.Add([]byte{}, false, true, false, true)
	tp := newTestProbe(f, testOptions())
	dns4, dns6 := net.IP(limits.DNSv4.AsSlice()), net.IP(limits.DNSv6.AsSlice())
	f.Fuzz(func(t *testing.T, payload []byte, ingress, v6, tcp, ntp bool) {
		if len(payload) > 1400 {
			return
		}
		host, svc, port := v4A, dns4, uint16(53)
		if v6 {
			host, svc = v6A, dns6
		}
		if ntp {
			svc, port = net.IP(limits.NTPv4.AsSlice()), 123
			if v6 {
				svc = net.IP(limits.NTPv6.AsSlice())
			}
		}
		src, dst, sp, dp, dir := host, svc, uint16(40000), port, record.Egress
		if ingress {
			src, dst, sp, dp, dir = svc, host, port, 40000, record.Ingress
		}
		frame := frames.UDPPayload(t, src, dst, sp, dp, payload)
		if tcp {
			frame = frames.TCPPayload(t, src, dst, sp, dp, 64, payload)
		}
		checkFrame(t, tp, dir, frame, 0, 0, netip.Addr{})
	})
}
