package analyzer

import (
	"encoding/binary"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/enaprobe/enaprobe/internal/record"
)

// dnsMessage is what the link-local detail keeps of one DNS message the
// datapath copied.
type dnsMessage struct {
	id        uint16
	response  bool
	name      string // the first question's, lower case, without a trailing dot
	qtype     layers.DNSType
	rcode     layers.DNSResponseCode
	answers   []string // the answer records' addresses (A, AAAA) or names (CNAME)
	truncated bool     // cut by the copy: decoded without its records
}

// DecodeDNS decodes a copied DNS message with gopacket's layers.DNS: over
// TCP the message follows a 2-byte length. A message the copy cut short
// (record.LinkLocalPayloadBytes) fails to decode whole; its header and
// question still say what it asked and how it was answered, so it is
// decoded again with its record counts set to zero (truncated).
func DecodeDNS(p record.LinkLocalPayload) (d *layers.DNS, truncated bool, ok bool) {
	b := p.Data
	if p.Key.Proto == 6 {
		if len(b) < 2 {
			return nil, false, false
		}
		b = b[2:]
	}
	d = &layers.DNS{}
	if d.DecodeFromBytes(b, gopacket.NilDecodeFeedback) == nil {
		return d, false, true
	}
	if len(b) < 12 || int(p.Len) <= len(p.Data) {
		return nil, false, false
	}
	cut := append([]byte(nil), b...)
	binary.BigEndian.PutUint16(cut[6:], 0)  // ANCOUNT
	binary.BigEndian.PutUint16(cut[8:], 0)  // NSCOUNT
	binary.BigEndian.PutUint16(cut[10:], 0) // ARCOUNT
	d = &layers.DNS{}
	if d.DecodeFromBytes(cut, gopacket.NilDecodeFeedback) != nil {
		return nil, false, false
	}
	return d, true, true
}

// decodeDNS is what the detail keeps of a DNS payload.
func decodeDNS(p record.LinkLocalPayload) (dnsMessage, bool) {
	d, truncated, ok := DecodeDNS(p)
	if !ok {
		return dnsMessage{}, false
	}
	if len(d.Questions) == 0 {
		return dnsMessage{}, false
	}
	m := dnsMessage{id: d.ID, response: d.QR, name: canonicalName(string(d.Questions[0].Name)),
		qtype: d.Questions[0].Type, rcode: d.ResponseCode, truncated: truncated}
	for _, rr := range d.Answers {
		switch {
		case rr.IP != nil:
			m.answers = append(m.answers, rr.IP.String())
		case len(rr.CNAME) > 0:
			m.answers = append(m.answers, canonicalName(string(rr.CNAME)))
		}
	}
	return m, true
}

// canonicalName lowers a name and drops its trailing dot; the root is ".".
func canonicalName(s string) string {
	if s == "" || s == "." {
		return "."
	}
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	if n := len(b); n > 1 && b[n-1] == '.' {
		b = b[:n-1]
	}
	return string(b)
}
