// Package frames builds Ethernet frames with gopacket for the tests of the
// datapath and of its Go reference, so that the bytes are what a real stack
// would put on the wire and both are held to the same frames.
package frames

import (
	"net"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// The two ends of the test frames.
var (
	MACA = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0a}
	MACB = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0b}
	V4A  = net.IP{10, 1, 0, 1}
	V4B  = net.IP{10, 1, 0, 2}
	V6A  = net.ParseIP("fd12::1")
	V6B  = net.ParseIP("fd12::2")
)

// Serialize lays the layers out with lengths and checksums fixed; gopacket
// pads a frame to Ethernet's 60-byte minimum.
func Serialize(tb testing.TB, ls ...gopacket.SerializableLayer) []byte {
	tb.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		tb.Fatalf("serialize frame: %v", err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// Eth is an Ethernet header from MACA to MACB.
func Eth(t layers.EthernetType) *layers.Ethernet {
	return &layers.Ethernet{SrcMAC: MACA, DstMAC: MACB, EthernetType: t}
}

// IPv4 is an IPv4 header without options.
func IPv4(src, dst net.IP, proto layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: proto, SrcIP: src, DstIP: dst, Id: 7}
}

// IPv6 is an IPv6 header.
func IPv6(src, dst net.IP, next layers.IPProtocol) *layers.IPv6 {
	return &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: next, SrcIP: src, DstIP: dst}
}

// l4 is a transport layer whose checksum covers the IP pseudo-header.
type l4 interface {
	gopacket.SerializableLayer
	SetNetworkLayerForChecksum(gopacket.NetworkLayer) error
}

// overIP frames a transport layer and payload zero bytes in IPv4 or IPv6,
// by the family of src.
func overIP(tb testing.TB, src, dst net.IP, proto layers.IPProtocol, l l4, payload int) []byte {
	tb.Helper()
	if src.To4() != nil {
		ip := IPv4(src, dst, proto)
		_ = l.SetNetworkLayerForChecksum(ip)
		return Serialize(tb, Eth(layers.EthernetTypeIPv4), ip, l, gopacket.Payload(make([]byte, payload)))
	}
	ip := IPv6(src, dst, proto)
	_ = l.SetNetworkLayerForChecksum(ip)
	return Serialize(tb, Eth(layers.EthernetTypeIPv6), ip, l, gopacket.Payload(make([]byte, payload)))
}

// UDP is a UDP datagram of payload zero bytes over IPv4 or IPv6 (by src).
func UDP(tb testing.TB, src, dst net.IP, sport, dport uint16, payload int) []byte {
	tb.Helper()
	u := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
	return overIP(tb, src, dst, layers.IPProtocolUDP, u, payload)
}

// TCP is a TCP segment of payload zero bytes over IPv4 or IPv6 (by src); a
// SYN carries an MSS option, as a real one does.
func TCP(tb testing.TB, src, dst net.IP, sport, dport uint16, syn, ack bool, payload int) []byte {
	tb.Helper()
	tc := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dport), SYN: syn, ACK: ack, Seq: 1, Window: 65535}
	if syn {
		tc.Options = []layers.TCPOption{{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{0x05, 0xb4}}}
	}
	return overIP(tb, src, dst, layers.IPProtocolTCP, tc, payload)
}

// TCPPayload is a TCP segment (ACK, PSH) carrying payload over IPv4 or IPv6
// (by src), with the given IP TTL / hop limit.
func TCPPayload(tb testing.TB, src, dst net.IP, sport, dport uint16, ttl uint8, payload []byte) []byte {
	tb.Helper()
	tc := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dport), ACK: true, PSH: true, Seq: 1, Ack: 1, Window: 502}
	if src.To4() != nil {
		ip := IPv4(src, dst, layers.IPProtocolTCP)
		ip.TTL = ttl
		_ = tc.SetNetworkLayerForChecksum(ip)
		return Serialize(tb, Eth(layers.EthernetTypeIPv4), ip, tc, gopacket.Payload(payload))
	}
	ip := IPv6(src, dst, layers.IPProtocolTCP)
	ip.HopLimit = ttl
	_ = tc.SetNetworkLayerForChecksum(ip)
	return Serialize(tb, Eth(layers.EthernetTypeIPv6), ip, tc, gopacket.Payload(payload))
}

// TimeExceeded is the ICMP (IPv4) or ICMPv6 time exceeded a router at src
// sends to dst about the packet quoted: an IP packet, of which it quotes
// what fits (IPv4: its header and 8 bytes, as Linux sends at least).
func TimeExceeded(tb testing.TB, src, dst net.IP, quoted []byte) []byte {
	tb.Helper()
	if src.To4() != nil {
		ip := IPv4(src, dst, layers.IPProtocolICMPv4)
		ic := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeTimeExceeded, 0)}
		return Serialize(tb, Eth(layers.EthernetTypeIPv4), ip, ic, gopacket.Payload(quoted))
	}
	ip := IPv6(src, dst, layers.IPProtocolICMPv6)
	ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeTimeExceeded, 0)}
	_ = ic.SetNetworkLayerForChecksum(ip)
	return Serialize(tb, Eth(layers.EthernetTypeIPv6), ip, ic, gopacket.Payload(append(make([]byte, 4), quoted...)))
}
