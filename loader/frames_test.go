//go:build linux

package loader

import (
	"net"
	"testing"

	"github.com/enaprobe/enaprobe/internal/testutil/frames"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Frames for the datapath tests: the builders are internal/frames, shared
// with the Go reference's tests.

var (
	macA     = frames.MACA
	v4A, v4B = frames.V4A, frames.V4B
	v6A, v6B = frames.V6A, frames.V6B

	serialize = frames.Serialize
	eth       = frames.Eth
	ipv4      = frames.IPv4
	ipv6      = frames.IPv6
	udpFrame  = frames.UDP
	tcpFrame  = frames.TCP
)

// vlanFrame puts tags (outermost first) in front of an IPv4 UDP packet.
func vlanFrame(tb testing.TB, tags ...layers.EthernetType) []byte {
	tb.Helper()
	ip := ipv4(v4A, v4B, layers.IPProtocolUDP)
	u := &layers.UDP{SrcPort: 4000, DstPort: 4001}
	u.SetNetworkLayerForChecksum(ip)
	ls := []gopacket.SerializableLayer{eth(tags[0])}
	for i := range tags {
		next := layers.EthernetTypeIPv4
		if i+1 < len(tags) {
			next = tags[i+1]
		}
		ls = append(ls, &layers.Dot1Q{VLANIdentifier: uint16(100 + i), Type: next})
	}
	ls = append(ls, ip, u, gopacket.Payload(make([]byte, 32)))
	return serialize(tb, ls...)
}

func ipv4OptionsFrame(tb testing.TB) []byte {
	tb.Helper()
	ip := ipv4(v4A, v4B, layers.IPProtocolUDP)
	ip.Options = []layers.IPv4Option{{OptionType: 7, OptionLength: 7, OptionData: []byte{4, 0, 0, 0, 0}}} // record route
	u := &layers.UDP{SrcPort: 5353, DstPort: 5354}
	u.SetNetworkLayerForChecksum(ip)
	return serialize(tb, eth(layers.EthernetTypeIPv4), ip, u, gopacket.Payload(make([]byte, 20)))
}

// ipv4Fragments splits a UDP datagram into a first and a later fragment.
func ipv4Fragments(tb testing.TB) (first, later []byte) {
	tb.Helper()
	u := &layers.UDP{SrcPort: 6000, DstPort: 6001}
	ipf := ipv4(v4A, v4B, layers.IPProtocolUDP)
	u.SetNetworkLayerForChecksum(ipf)
	whole := serialize(tb, u, gopacket.Payload(make([]byte, 64)))
	ipf.Flags = layers.IPv4MoreFragments
	first = serialize(tb, eth(layers.EthernetTypeIPv4), ipf, gopacket.Payload(whole[:40]))
	ipl := ipv4(v4A, v4B, layers.IPProtocolUDP)
	ipl.FragOffset = 5 // 40 bytes
	later = serialize(tb, eth(layers.EthernetTypeIPv4), ipl, gopacket.Payload(whole[40:]))
	return first, later
}

// ipv6ExtFrame is TCP behind hop-by-hop and destination options headers.
func ipv6ExtFrame(tb testing.TB) []byte {
	tb.Helper()
	ip := ipv6(v6A, v6B, layers.IPProtocolIPv6HopByHop)
	hop := &layers.IPv6HopByHop{}
	hop.NextHeader = layers.IPProtocolIPv6Destination
	hop.Options = []*layers.IPv6HopByHopOption{{OptionType: 1, OptionLength: 4, OptionData: make([]byte, 4)}}
	dst := &layers.IPv6Destination{}
	dst.NextHeader = layers.IPProtocolTCP
	dst.Options = []*layers.IPv6DestinationOption{{OptionType: 1, OptionLength: 4, OptionData: make([]byte, 4)}}
	tc := &layers.TCP{SrcPort: 7000, DstPort: 443, ACK: true, Window: 1000}
	tc.SetNetworkLayerForChecksum(ip)
	return serialize(tb, eth(layers.EthernetTypeIPv6), ip, hop, dst, tc, gopacket.Payload(make([]byte, 100)))
}

// ipv6Fragments is a UDP datagram behind a fragment header: the first
// fragment (offset 0, ports present) and a later one.
func ipv6Fragments(tb testing.TB) (first, later []byte) {
	tb.Helper()
	u := &layers.UDP{SrcPort: 8000, DstPort: 8001}
	ipu := ipv6(v6A, v6B, layers.IPProtocolUDP)
	u.SetNetworkLayerForChecksum(ipu)
	whole := serialize(tb, u, gopacket.Payload(make([]byte, 64)))
	frag := func(offset uint16, more bool, data []byte) []byte {
		ip := ipv6(v6A, v6B, layers.IPProtocolIPv6Fragment)
		fh := &layers.IPv6Fragment{NextHeader: layers.IPProtocolUDP, FragmentOffset: offset, MoreFragments: more, Identification: 9}
		return serialize(tb, eth(layers.EthernetTypeIPv6), ip, fh, gopacket.Payload(data))
	}
	return frag(0, true, whole[:40]), frag(5, false, whole[40:])
}

func icmpFrame(tb testing.TB) []byte {
	tb.Helper()
	ic := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeTimeExceeded, 0)}
	return serialize(tb, eth(layers.EthernetTypeIPv4), ipv4(v4A, net.IPv4(169, 254, 169, 254), layers.IPProtocolICMPv4), ic, gopacket.Payload(make([]byte, 28)))
}

func icmpv6Frame(tb testing.TB) []byte {
	tb.Helper()
	ip := ipv6(v6A, v6B, layers.IPProtocolICMPv6)
	ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeEchoRequest, 0)}
	ic.SetNetworkLayerForChecksum(ip)
	return serialize(tb, eth(layers.EthernetTypeIPv6), ip, ic, gopacket.Payload(make([]byte, 16)))
}

func arpFrame(tb testing.TB) []byte {
	tb.Helper()
	a := &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
		Operation: layers.ARPRequest, SourceHwAddress: macA, SourceProtAddress: v4A, DstHwAddress: make([]byte, 6), DstProtAddress: v4B}
	return serialize(tb, eth(layers.EthernetTypeARP), a)
}

// greFrame carries an IP protocol the datapath does not parse.
func greFrame(tb testing.TB) []byte {
	tb.Helper()
	return serialize(tb, eth(layers.EthernetTypeIPv4), ipv4(v4A, v4B, layers.IPProtocolGRE), gopacket.Payload(make([]byte, 24)))
}
