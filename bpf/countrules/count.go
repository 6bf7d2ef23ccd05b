// Package countrules states the datapath's counting rules in plain Go: how a frame
// is classified, which flow it belongs to, and how many wire packets and
// bytes it stands for. The eBPF program implements the same rules; the
// differential tests and the fuzz target hold the two together.
//
// The rules:
//   - Parse Ethernet, up to two 802.1Q/802.1ad tags, IPv4 (options skipped by
//     IHL), IPv6 with up to six extension headers (hop-by-hop, routing,
//     destination options, fragment, AH), then TCP, UDP, ICMP or ICMPv6.
//   - A frame whose IP header is complete has a flow key, whatever follows.
//     Its class is TCP, UDP or ICMP only if that header is complete too (or
//     the frame is a later fragment, which carries no L4 header and counts to
//     the flow of its addresses and protocol with ports 0). Everything else
//     (ARP, unknown protocols, truncated or malformed frames) is "other".
//   - ICMP and ICMPv6 flows carry the type as source port, the code as
//     destination port.
//   - Wire bytes are Ethernet frame bytes without preamble and FCS (what
//     tcpdump shows). A GSO/GRO super-packet (gso_size set, payload larger
//     than one segment) stands for gso_segs wire packets (or
//     ceil(payload/gso_size) when gso_segs is 0), each repeating the
//     Ethernet, IP and L4 headers; all but the last carry gso_size bytes.
//   - A packet's size is its layer-3 length (frame minus Ethernet/VLAN
//     headers): the quantity an MTU limits.
//   - A new connection attempt is a TCP segment with SYN and without ACK.
//   - A link-local service packet has the service's address as destination,
//     or else as source.
//   - A TCP segment with ACK echoes a timestamp (Echo, TSEcr) when its
//     options open with NOP, NOP, timestamps, where Linux puts them; its
//     flow keeps the least and greatest age, MsOf(the time) less TSEcr,
//     since the flow tables' last read.
//
// Arithmetic is uint32 where the program's is, so the two wrap alike.
package countrules

import (
	"encoding/binary"
	"net/netip"

	"github.com/enaprobe/enaprobe/internal/limits"
	"github.com/enaprobe/enaprobe/internal/record"
)

const (
	ethHeaderLen = 14
	maxVLANTags  = 2
	maxIPv6Ext   = 6
	tcpFlagSYN   = 0x02
	tcpFlagACK   = 0x10
)

// Packet is what the datapath makes of one skb.
type Packet struct {
	Class    record.Class
	IsIP     bool // a flow key exists
	Key      record.FlowKey
	L2Len    uint32 // Ethernet and VLAN headers
	HdrLen   uint32 // L2+L3+L4 headers: what segmentation repeats
	TCPFlags uint8
	Wire     Wire
	SYN      bool
	Service  record.Service
	Echo     bool   // a TCP ACK echoing the timestamp TSEcr
	TSEcr    uint32 // host order
	TCPSeq   uint32 // a TCP segment's sequence number, host order
}

// MsOf is the datapath's ns to ms, without a division (ms_of in
// bpf/include/impact.h).
func MsOf(ns uint64) uint32 { return uint32(((ns >> 20) * 17592186) >> 24) }

// Wire is what one skb stands for on the wire.
type Wire struct {
	Packets  uint32
	Bytes    uint32
	SegSize  uint32 // layer-3 size of the full segments
	LastSize uint32 // layer-3 size of the last segment
}

// rawKey mirrors the program's key while parsing: v4-mapped addresses.
type rawKey struct {
	src, dst     [16]byte
	sport, dport uint16
	proto        uint8
}

// Count applies the rules to a frame of skb length len(frame) with the given
// GSO metadata. vpcResolver is the VPC DNS address (base + 2), if known.
func Count(frame []byte, gsoSegs, gsoSize uint32, vpcResolver netip.Addr) Packet {
	var p Packet
	var k rawKey
	parse(frame, &p, &k)
	if p.IsIP {
		p.Key = record.FlowKey{
			Proto: k.proto,
			Src:   netip.AddrPortFrom(netip.AddrFrom16(k.src).Unmap(), k.sport),
			Dst:   netip.AddrPortFrom(netip.AddrFrom16(k.dst).Unmap(), k.dport),
		}
		p.Service = FlowService(p.Key, vpcResolver)
	}
	p.Wire = wireOf(uint32(len(frame)), p.L2Len, p.HdrLen, gsoSegs, gsoSize)
	p.SYN = p.Class == record.ClassTCP && p.TCPFlags&(tcpFlagSYN|tcpFlagACK) == tcpFlagSYN
	return p
}

func parse(b []byte, p *Packet, k *rawKey) {
	n := uint32(len(b))
	p.Class = record.ClassOther
	p.L2Len, p.HdrLen = ethHeaderLen, ethHeaderLen
	if n < ethHeaderLen {
		p.L2Len, p.HdrLen = n, n
		return
	}
	proto := binary.BigEndian.Uint16(b[12:])
	off := uint32(ethHeaderLen)
	for range maxVLANTags {
		if proto != 0x8100 && proto != 0x88a8 {
			break
		}
		if off+4 > n {
			return
		}
		proto = binary.BigEndian.Uint16(b[off+2:])
		off += 4
	}
	p.L2Len, p.HdrLen = off, off
	switch proto {
	case 0x0800:
		parseIPv4(b, off, p, k)
	case 0x86dd:
		parseIPv6(b, off, p, k)
	}
}

func parseIPv4(b []byte, off uint32, p *Packet, k *rawKey) {
	n := uint32(len(b))
	if off+20 > n {
		return
	}
	ihl := uint32(b[off]&0x0f) << 2
	if b[off]>>4 != 4 || ihl < 20 {
		return
	}
	p.IsIP = true
	k.src[10], k.src[11], k.dst[10], k.dst[11] = 0xff, 0xff, 0xff, 0xff
	copy(k.src[12:], b[off+12:off+16])
	copy(k.dst[12:], b[off+16:off+20])
	proto := b[off+9]
	k.proto = proto
	p.HdrLen = off + 20
	frag := binary.BigEndian.Uint16(b[off+6:])
	off += ihl
	if frag&0x1fff != 0 {
		laterFragment(proto, off, p, k)
		return
	}
	parseL4(b, off, proto, p, k)
}

func parseIPv6(b []byte, off uint32, p *Packet, k *rawKey) {
	n := uint32(len(b))
	if off+40 > n || b[off]>>4 != 6 {
		return
	}
	p.IsIP = true
	copy(k.src[:], b[off+8:off+24])
	copy(k.dst[:], b[off+24:off+40])
	next := b[off+6]
	k.proto = next
	off += 40
	p.HdrLen = off
	later := false
walk:
	for range maxIPv6Ext {
		switch next {
		case 0, 43, 60: // hop-by-hop, routing, destination options
			if off+8 > n {
				return
			}
			next, off = b[off], off+(uint32(b[off+1])+1)<<3
		case 44: // fragment
			if off+8 > n {
				return
			}
			if binary.BigEndian.Uint16(b[off+2:])&0xfff8 != 0 {
				later = true
			}
			next, off = b[off], off+8
		case 51: // authentication header
			if off+8 > n {
				return
			}
			next, off = b[off], off+(uint32(b[off+1])+2)<<2
		default:
			break walk
		}
		k.proto = next
		p.HdrLen = off
	}
	if later {
		laterFragment(next, off, p, k)
		return
	}
	parseL4(b, off, next, p, k)
}

func laterFragment(proto uint8, off uint32, p *Packet, k *rawKey) {
	k.proto = proto
	p.HdrLen = off
	if c, ok := l4Class(proto); ok {
		p.Class = c
	}
}

func l4Class(proto uint8) (record.Class, bool) {
	switch proto {
	case 6:
		return record.ClassTCP, true
	case 17:
		return record.ClassUDP, true
	case 1, 58:
		return record.ClassICMP, true
	}
	return record.ClassOther, false
}

func parseL4(b []byte, off uint32, proto uint8, p *Packet, k *rawKey) {
	n := uint32(len(b))
	k.proto = proto
	p.HdrLen = off
	switch proto {
	case 6:
		if off+20 > n {
			return
		}
		k.sport, k.dport = binary.BigEndian.Uint16(b[off:]), binary.BigEndian.Uint16(b[off+2:])
		p.TCPFlags = b[off+13]
		p.TCPSeq = binary.BigEndian.Uint32(b[off+4:])
		p.HdrLen = off + uint32(b[off+12]>>4)<<2
		p.Class = record.ClassTCP
		if b[off+12] >= 0x80 && off+32 <= n && binary.BigEndian.Uint32(b[off+20:]) == 0x0101080a && p.TCPFlags&tcpFlagACK != 0 {
			p.Echo, p.TSEcr = true, binary.BigEndian.Uint32(b[off+28:])
		}
	case 17:
		if off+8 > n {
			return
		}
		k.sport, k.dport = binary.BigEndian.Uint16(b[off:]), binary.BigEndian.Uint16(b[off+2:])
		p.HdrLen = off + 8
		p.Class = record.ClassUDP
	case 1, 58:
		if off+4 > n {
			return
		}
		k.sport, k.dport = uint16(b[off]), uint16(b[off+1])
		p.HdrLen = off + 8
		p.Class = record.ClassICMP
	}
}

func wireOf(n, l2, hdr, gsoSegs, gsoSize uint32) Wire {
	size := n - l2
	w := Wire{Packets: 1, Bytes: n, SegSize: size, LastSize: size}
	if gsoSize == 0 || n <= hdr {
		return w
	}
	payload := n - hdr
	segs := gsoSegs
	if segs == 0 {
		segs = (payload + gsoSize - 1) / gsoSize
	}
	if segs <= 1 {
		return w
	}
	hdr3 := hdr - l2
	full := (segs - 1) * gsoSize
	w.Packets = segs
	w.Bytes = n + (segs-1)*hdr
	w.SegSize = gsoSize + hdr3
	last := gsoSize
	if payload > full {
		last = payload - full
	}
	w.LastSize = last + hdr3
	return w
}

// SizeCounts are the packet-size histogram increments of the skb.
func (w Wire) SizeCounts() (counts [record.NumSizeClasses]uint64, superPackets uint64) {
	counts[record.SizeClassOf(int(w.LastSize))]++
	if w.Packets > 1 {
		counts[record.SizeClassOf(int(w.SegSize))] += uint64(w.Packets - 1)
		superPackets = 1
	}
	return counts, superPackets
}

// MinMaxSize are the smallest and largest packet sizes a flow entry keeps
// for the skb (16-bit, as the program stores them).
func (w Wire) MinMaxSize() (uint16, uint16) {
	lo, hi := uint16(w.LastSize), uint16(w.SegSize)
	if lo > hi {
		lo, hi = hi, lo
	}
	return lo, hi
}

// ServiceOf names the link-local service of an address.
func ServiceOf(a, vpcResolver netip.Addr) record.Service {
	switch {
	case a == limits.IMDSv4 || a == limits.IMDSv6:
		return record.ServiceIMDS
	case a == limits.DNSv4 || a == limits.DNSv6 || (vpcResolver.Is4() && a == vpcResolver):
		return record.ServiceDNS
	case a == limits.NTPv4 || a == limits.NTPv6:
		return record.ServiceNTP
	}
	return record.ServiceNone
}

// FlowService names the link-local service of a flow: its destination's,
// else its source's, so a service's answers count to it as its requests do.
func FlowService(k record.FlowKey, vpcResolver netip.Addr) record.Service {
	if svc := ServiceOf(k.Dst.Addr(), vpcResolver); svc != record.ServiceNone {
		return svc
	}
	return ServiceOf(k.Src.Addr(), vpcResolver)
}
