package countrules

import (
	"encoding/binary"
	"net/netip"

	"github.com/enaprobe/enaprobe/internal/record"
)

// The link-local payload rules (bpf/include/llpayload.h): only packets of a
// link-local service (Packet.Service) are looked at.
//   - DNS: UDP or TCP with port 53 on either side; the first
//     record.LinkLocalPayloadBytes payload bytes, both directions.
//   - NTP: UDP with port 123 on either side; the first
//     record.LinkLocalNTPBytes (mode, stratum, poll, precision).
//   - IMDS: a request the IMDS rules name (a token request, a GET with or
//     without the token header), with that kind; the first
//     record.LinkLocalPayloadBytes payload bytes (the request line).
//   - The payload is the bytes after the L4 header up to the end of the IP
//     packet (IPv4 total length, IPv6 40 + payload length) or of the skb,
//     whichever comes first: the Ethernet padding of a short frame is not
//     payload. Len is their count (at most 65535); none gives nothing.
//   - TCPSeq is a TCP segment's sequence number, 0 for UDP: what tells a
//     retransmitted request from a new one.
//   - Rate-capped per interface; the events over the cap are counted as
//     loss (not modelled here: the tests set a cap they stay under).

// PayloadEvent is what the datapath reports of a link-local payload.
type PayloadEvent struct {
	Service  record.Service
	Key      record.FlowKey
	Len      uint16
	IMDSKind record.IMDSKind
	TCPSeq   uint32
	Data     []byte
}

const maxHdrOff = 0x3fff

// LinkLocalPayload applies the rules to a frame seen in direction dir; ok is
// false when the datapath reports nothing.
func LinkLocalPayload(frame []byte, dir record.Direction, vpcResolver netip.Addr) (ev PayloadEvent, ok bool) {
	p := Count(frame, 0, 0, vpcResolver)
	if !p.IsIP || p.Service == record.ServiceNone {
		return ev, false
	}
	udp := p.Class == record.ClassUDP && p.Key.Proto == 17
	tcp := p.Class == record.ClassTCP && p.Key.Proto == 6
	port := func(n uint16) bool { return p.Key.Src.Port() == n || p.Key.Dst.Port() == n }
	most := uint32(record.LinkLocalPayloadBytes)
	switch p.Service {
	case record.ServiceDNS:
		if !(udp || tcp) || !port(53) {
			return ev, false
		}
	case record.ServiceNTP:
		if !udp || !port(123) {
			return ev, false
		}
		most = record.LinkLocalNTPBytes
	case record.ServiceIMDS:
		im, ok := IMDS(frame, dir, vpcResolver)
		if !ok || im.Kind < record.IMDSTokenRequest || im.Kind > record.IMDSGetToken {
			return ev, false
		}
		ev.IMDSKind = im.Kind
	}
	n := uint32(len(frame))
	if p.L2Len+6 > n {
		return PayloadEvent{}, false
	}
	var end uint32
	if frame[p.L2Len]>>4 == 6 {
		end = p.L2Len + 40 + uint32(binary.BigEndian.Uint16(frame[p.L2Len+4:]))
	} else {
		end = p.L2Len + uint32(binary.BigEndian.Uint16(frame[p.L2Len+2:]))
	}
	n = min(n, end)
	off := p.HdrLen
	if off > maxHdrOff || off >= n {
		return PayloadEvent{}, false
	}
	l := n - off
	ev.Service, ev.Key = p.Service, p.Key
	ev.Len = uint16(min(l, 0xffff))
	if tcp {
		ev.TCPSeq = p.TCPSeq
	}
	ev.Data = frame[off : off+min(l, most)]
	return ev, true
}
