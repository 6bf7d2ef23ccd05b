package analyzer

import (
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/enaprobe/enaprobe/internal/record"
)

func dnsBytes(t testing.TB, d *layers.DNS) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := d.SerializeTo(buf, gopacket.SerializeOptions{FixLengths: true}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestDecodeDNS(t *testing.T) {
	q := layers.DNSQuestion{Name: []byte("API.heldout-shop.example."), Type: layers.DNSTypeAAAA, Class: layers.DNSClassIN}
	ans := dnsBytes(t, &layers.DNS{ID: 9, QR: true, ResponseCode: layers.DNSResponseCodeNoErr, Questions: []layers.DNSQuestion{q},
		Answers: []layers.DNSResourceRecord{{Name: q.Name, Type: layers.DNSTypeAAAA, Class: layers.DNSClassIN, TTL: 5,
			IP: netip.MustParseAddr("fd00::1").AsSlice()}}})
	m, ok := decodeDNS(record.LinkLocalPayload{Key: record.FlowKey{Proto: 17}, Len: uint16(len(ans)), Data: ans})
	if !ok || m.id != 9 || !m.response || m.name != "api.heldout-shop.example" || m.qtype != layers.DNSTypeAAAA ||
		len(m.answers) != 1 || m.answers[0] != "fd00::1" || m.truncated {
		t.Errorf("answer: %+v %v", m, ok)
	}
	// Over TCP, behind its length; cut by the copy, the header and question
	// still decode.
	tcp := append([]byte{0, byte(len(ans))}, ans...)
	cut := tcp[:len(tcp)-4]
	m, ok = decodeDNS(record.LinkLocalPayload{Key: record.FlowKey{Proto: 6}, Len: uint16(len(tcp)), Data: cut})
	if !ok || m.id != 9 || !m.truncated || m.name != "api.heldout-shop.example" || len(m.answers) != 0 {
		t.Errorf("cut answer over tcp: %+v %v", m, ok)
	}
	// A message the copy did not cut and that does not decode is not DNS.
	if _, ok := decodeDNS(record.LinkLocalPayload{Key: record.FlowKey{Proto: 17}, Len: 4, Data: []byte{1, 2, 3, 4}}); ok {
		t.Error("4 bytes decoded")
	}
}

// FuzzDNS feeds arbitrary bytes to the decode, as UDP and TCP, whole and
// cut: it must never panic, and what it decodes must have a name.
//
//	go test -run '^$' -fuzz FuzzDNS -fuzztime 60s ./analyzer
func FuzzDNS(f *testing.F) {
	q := layers.DNSQuestion{Name: []byte("a.default.svc.cluster.local"), Type: layers.DNSTypeA, Class: layers.DNSClassIN}
	f.Add(dnsBytes(f, &layers.DNS{ID: 1, RD: true, Questions: []layers.DNSQuestion{q}}), false, uint16(0))
	f.Add(dnsBytes(f, &layers.DNS{ID: 2, QR: true, ResponseCode: layers.DNSResponseCodeNXDomain, Questions: []layers.DNSQuestion{q}}), true, uint16(300))
	f.Fuzz(func(t *testing.T, b []byte, tcp bool, extra uint16) {
		if len(b) > record.LinkLocalPayloadBytes {
			b = b[:record.LinkLocalPayloadBytes]
		}
		p := record.LinkLocalPayload{Key: record.FlowKey{Proto: 17}, Len: uint16(len(b)) + extra%1024, Data: b}
		if tcp {
			p.Key.Proto = 6
		}
		if m, ok := decodeDNS(p); ok && m.name == "" {
			t.Errorf("decoded %+v without a name", m)
		}
	})
}
