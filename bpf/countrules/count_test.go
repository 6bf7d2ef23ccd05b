package countrules

import (
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/enaprobe/enaprobe/internal/limits"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/testutil/frames"
)

// The reference's own table: frames built with gopacket, what Count must
// make of them. The datapath is held to the same answers by the loader's
// differential tests and the fuzz target; these run without root.

func ap(ip net.IP, port uint16) netip.AddrPort {
	a, _ := netip.AddrFromSlice(ip)
	return netip.AddrPortFrom(a.Unmap(), port)
}

func TestCount(t *testing.T) {
	imds, dns := net.IP(limits.IMDSv4.AsSlice()), net.IP(limits.DNSv4.AsSlice())
	resolver := netip.MustParseAddr("10.1.0.2")
	vip := frames.IPv4(frames.V4A, dns, layers.IPProtocolUDP)
	vu := &layers.UDP{SrcPort: 5000, DstPort: 53}
	vu.SetNetworkLayerForChecksum(vip)
	vlan := frames.Serialize(t, frames.Eth(layers.EthernetTypeDot1Q), &layers.Dot1Q{VLANIdentifier: 7, Type: layers.EthernetTypeDot1Q},
		&layers.Dot1Q{VLANIdentifier: 8, Type: layers.EthernetTypeIPv4}, vip, vu, gopacket.Payload(make([]byte, 10)))
	icmp6 := frames.IPv6(frames.V6A, net.IP(limits.NTPv6.AsSlice()), layers.IPProtocolICMPv6)
	ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(128, 0)}
	ic.SetNetworkLayerForChecksum(icmp6)
	later := frames.IPv4(frames.V4A, imds, layers.IPProtocolUDP)
	later.FragOffset = 5
	for _, c := range []struct {
		name    string
		frame   []byte
		class   record.Class
		key     record.FlowKey // zero: no flow key
		service record.Service
		syn     bool
		l2      uint32 // Ethernet and VLAN headers: the size is the rest, padding included
	}{
		{"tcp syn", frames.TCP(t, frames.V4A, imds, 40000, 80, true, false, 0), record.ClassTCP,
			record.FlowKey{Proto: 6, Src: ap(frames.V4A, 40000), Dst: ap(imds, 80)}, record.ServiceIMDS, true, 14},
		{"syn-ack is no new connection; the answer counts to its service by source", frames.TCP(t, imds, frames.V4A, 80, 40000, true, true, 0), record.ClassTCP,
			record.FlowKey{Proto: 6, Src: ap(imds, 80), Dst: ap(frames.V4A, 40000)}, record.ServiceIMDS, false, 14},
		{"udp to the VPC resolver", frames.UDP(t, frames.V4A, net.IP(resolver.AsSlice()), 5000, 53, 30), record.ClassUDP,
			record.FlowKey{Proto: 17, Src: ap(frames.V4A, 5000), Dst: netip.AddrPortFrom(resolver, 53)}, record.ServiceDNS, false, 14},
		{"two VLAN tags", vlan, record.ClassUDP,
			record.FlowKey{Proto: 17, Src: ap(frames.V4A, 5000), Dst: ap(dns, 53)}, record.ServiceDNS, false, 22},
		{"icmpv6 type and code as ports", frames.Serialize(t, frames.Eth(layers.EthernetTypeIPv6), icmp6, ic, gopacket.Payload(make([]byte, 8))), record.ClassICMP,
			record.FlowKey{Proto: 58, Src: ap(frames.V6A, 128), Dst: netip.AddrPortFrom(limits.NTPv6, 0)}, record.ServiceNTP, false, 14},
		{"later fragment: its addresses and protocol, ports 0", frames.Serialize(t, frames.Eth(layers.EthernetTypeIPv4), later, gopacket.Payload(make([]byte, 24))), record.ClassUDP,
			record.FlowKey{Proto: 17, Src: ap(frames.V4A, 0), Dst: ap(imds, 0)}, record.ServiceIMDS, false, 14},
		{"arp", frames.Serialize(t, frames.Eth(layers.EthernetTypeARP), &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4,
			HwAddressSize: 6, ProtAddressSize: 4, Operation: 1, SourceHwAddress: frames.MACA, SourceProtAddress: frames.V4A,
			DstHwAddress: make([]byte, 6), DstProtAddress: dns}), record.ClassOther, record.FlowKey{}, record.ServiceNone, false, 14},
		{"truncated tcp header: a flow, class other", frames.TCP(t, frames.V4A, frames.V4A, 1, 2, true, false, 0)[:14+20+10], record.ClassOther,
			record.FlowKey{Proto: 6, Src: ap(frames.V4A, 0), Dst: ap(frames.V4A, 0)}, record.ServiceNone, false, 14},
	} {
		p := Count(c.frame, 0, 0, resolver)
		if p.Class != c.class || p.IsIP != (c.key != record.FlowKey{}) || p.Key != c.key || p.Service != c.service || p.SYN != c.syn {
			t.Errorf("%s: class %v, ip %v, key %+v, service %v, syn %v; want %v, %+v, %v, %v",
				c.name, p.Class, p.IsIP, p.Key, p.Service, p.SYN, c.class, c.key, c.service, c.syn)
		}
		size := uint32(len(c.frame)) - c.l2
		if want := (Wire{Packets: 1, Bytes: uint32(len(c.frame)), SegSize: size, LastSize: size}); p.Wire != want || p.L2Len != c.l2 {
			t.Errorf("%s: wire %+v, want %+v", c.name, p.Wire, want)
		}
	}
}

// TestCountGSO: a super-packet stands for its segments, each with the
// headers again; the last carries what is left.
func TestCountGSO(t *testing.T) {
	f := frames.TCP(t, frames.V4A, frames.V4B, 40000, 5001, false, true, 4000) // 54 header bytes + 4000
	for _, c := range []struct {
		name       string
		segs, size uint32
		want       Wire
		sizeCounts [record.NumSizeClasses]uint64
		super      uint64
	}{
		{"no gso", 0, 0, Wire{1, 4054, 4040, 4040}, [record.NumSizeClasses]uint64{6: 1}, 0},
		{"gso_segs from the stack", 3, 1448, Wire{3, 4054 + 2*54, 1488, 1104 + 40}, [record.NumSizeClasses]uint64{5: 3}, 1},
		{"gso_segs 0: ceil(payload/gso_size)", 0, 1448, Wire{3, 4054 + 2*54, 1488, 1144}, [record.NumSizeClasses]uint64{5: 3}, 1},
		{"one segment is no super-packet", 1, 8000, Wire{1, 4054, 4040, 4040}, [record.NumSizeClasses]uint64{6: 1}, 0},
	} {
		p := Count(f, c.segs, c.size, netip.Addr{})
		counts, super := p.Wire.SizeCounts()
		if p.Wire != c.want || counts != c.sizeCounts || super != c.super {
			t.Errorf("%s: %+v, sizes %v, super %d; want %+v, %v, %d", c.name, p.Wire, counts, super, c.want, c.sizeCounts, c.super)
		}
	}
}

func TestFlowService(t *testing.T) {
	host := netip.MustParseAddrPort("10.1.0.1:5000")
	resolver := netip.MustParseAddr("10.1.0.2")
	for _, c := range []struct {
		src, dst netip.AddrPort
		want     record.Service
	}{
		{host, netip.AddrPortFrom(limits.DNSv4, 53), record.ServiceDNS},
		{netip.AddrPortFrom(limits.DNSv6, 53), host, record.ServiceDNS},                                    // an answer: by source
		{netip.AddrPortFrom(limits.NTPv4, 123), netip.AddrPortFrom(limits.IMDSv6, 80), record.ServiceIMDS}, // destination first
		{host, netip.AddrPortFrom(resolver, 53), record.ServiceDNS},
		{host, netip.MustParseAddrPort("169.254.169.1:53"), record.ServiceNone},
		{host, netip.MustParseAddrPort("10.1.0.3:53"), record.ServiceNone},
	} {
		if got := FlowService(record.FlowKey{Src: c.src, Dst: c.dst}, resolver); got != c.want {
			t.Errorf("FlowService(%v -> %v) = %v, want %v", c.src, c.dst, got, c.want)
		}
	}
	if got := ServiceOf(resolver, netip.Addr{}); got != record.ServiceNone {
		t.Errorf("the resolver without a known VPC: %v", got)
	}
}
