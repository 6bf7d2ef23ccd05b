package countrules

import (
	"bytes"
	"encoding/binary"
	"net/netip"

	"github.com/enaprobe/enaprobe/internal/limits"
	"github.com/enaprobe/enaprobe/internal/record"
)

// The IMDS rules: only packets whose address is IMDS's (169.254.169.254 or
// fd00:ec2::254) are looked at, so every other packet pays one comparison.
//   - Egress TCP to IMDS port 80 whose payload starts "PUT /latest/api/token"
//     is a token request; one starting "GET " is a GET with a token when
//     "X-aws-ec2-metadata-token" (any case) lies within its first
//     record.IMDSPeekBytes payload bytes, and without one otherwise. The
//     look is bounded: a token header further in is not seen. Only the
//     skb's first segment is looked at, and a request split over segments
//     is judged by its first.
//   - Ingress TCP from IMDS port 80 whose payload starts "HTTP/" is a reply.
//   - Egress ICMP time exceeded (type 11) or ICMPv6 time exceeded (type 3)
//     toward IMDS whose quoted packet is TCP (IPv6: with no extension
//     header) is a time exceeded; its key is the quoted packet's flow.
//   - The TTL is the IP TTL / IPv6 hop limit of the packet, or of the quoted
//     packet for a time exceeded.

// IMDSEvent is what the datapath reports of an IMDS packet.
type IMDSEvent struct {
	Kind record.IMDSKind
	Key  record.FlowKey
	TTL  uint8
}

var (
	tokenRequest = []byte("PUT /latest/api/token")
	tokenHeader  = []byte("x-aws-ec2-metadata-token")
)

func isIMDS(a netip.Addr) bool { return a == limits.IMDSv4 || a == limits.IMDSv6 }

// IMDS applies the IMDS rules to a frame the datapath saw in direction dir;
// ok is false when the datapath reports nothing.
// vpcResolver is as for Count: a flow to it is DNS, whatever its source.
func IMDS(frame []byte, dir record.Direction, vpcResolver netip.Addr) (ev IMDSEvent, ok bool) {
	p := Count(frame, 0, 0, vpcResolver)
	if !p.IsIP || p.Service != record.ServiceIMDS {
		return ev, false
	}
	n := uint32(len(frame))
	v6 := frame[p.L2Len]>>4 == 6 // the key's addresses may be v4-mapped IPv6
	ttlOff := p.L2Len + 8
	if v6 {
		ttlOff = p.L2Len + 7
	}
	switch {
	case p.Class == record.ClassTCP && p.Key.Proto == 6:
		off := p.HdrLen
		switch {
		case dir == record.Egress && isIMDS(p.Key.Dst.Addr()) && p.Key.Dst.Port() == 80:
			if off >= n {
				return ev, false
			}
			pl := frame[off:min(n, off+record.IMDSPeekBytes)]
			switch {
			case len(pl) < 8:
				return ev, false
			case bytes.HasPrefix(pl, tokenRequest):
				ev.Kind = record.IMDSTokenRequest
			case bytes.HasPrefix(pl, []byte("PUT /lat")):
				return ev, false
			case bytes.HasPrefix(pl, []byte("GET ")):
				ev.Kind = record.IMDSGetNoToken
				if bytes.Contains(fold(pl), tokenHeader) {
					ev.Kind = record.IMDSGetToken
				}
			default:
				return ev, false
			}
		case dir == record.Ingress && isIMDS(p.Key.Src.Addr()) && p.Key.Src.Port() == 80:
			if off+5 > n || !bytes.HasPrefix(frame[off:], []byte("HTTP/")) {
				return ev, false
			}
			ev.Kind = record.IMDSReply
		default:
			return ev, false
		}
		if ttlOff >= n {
			return ev, false
		}
		return IMDSEvent{Kind: ev.Kind, Key: p.Key, TTL: frame[ttlOff]}, true
	case p.Class == record.ClassICMP && dir == record.Egress && isIMDS(p.Key.Dst.Addr()):
		if (!v6 && (p.Key.Proto != 1 || p.Key.Src.Port() != 11)) || (v6 && (p.Key.Proto != 58 || p.Key.Src.Port() != 3)) {
			return ev, false
		}
		return quoted(frame, p.HdrLen, v6)
	}
	return ev, false
}

// fold ORs 0x20 into every byte, as the datapath compares header names: it
// lowers ASCII letters and leaves '-' and digits alone (and turns a few
// control bytes into '-' or digits, which the datapath does too).
func fold(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		out[i] = c | 0x20
	}
	return out
}

// quoted is the time exceeded event of the TCP packet quoted at off.
func quoted(b []byte, off uint32, v6 bool) (IMDSEvent, bool) {
	n := uint32(len(b))
	ev := IMDSEvent{Kind: record.IMDSTimeExceeded}
	var src, dst netip.Addr
	var l4 uint32
	if !v6 {
		if off+20 > n || b[off]>>4 != 4 || b[off+9] != 6 {
			return IMDSEvent{}, false
		}
		l4 = off + uint32(b[off]&0x0f)<<2
		src, _ = netip.AddrFromSlice(b[off+12 : off+16])
		dst, _ = netip.AddrFromSlice(b[off+16 : off+20])
		ev.TTL = b[off+8]
	} else {
		if off+40 > n || b[off]>>4 != 6 || b[off+6] != 6 {
			return IMDSEvent{}, false
		}
		l4 = off + 40
		src, _ = netip.AddrFromSlice(b[off+8 : off+24])
		dst, _ = netip.AddrFromSlice(b[off+24 : off+40])
		ev.TTL = b[off+7]
	}
	if l4+4 > n {
		return IMDSEvent{}, false
	}
	ev.Key = record.FlowKey{Proto: 6,
		Src: netip.AddrPortFrom(src.Unmap(), binary.BigEndian.Uint16(b[l4:])),
		Dst: netip.AddrPortFrom(dst.Unmap(), binary.BigEndian.Uint16(b[l4+2:]))}
	return ev, true
}
