package frames

import (
	"net"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/enaprobe/enaprobe/internal/limits"
	"github.com/enaprobe/enaprobe/internal/record"
)

// PayloadCase is one link-local frame and whether the datapath copies its
// payload (Service, with Bytes of it), for the Go reference's table and the
// loader's differential test.
type PayloadCase struct {
	Name    string
	Frame   []byte
	Dir     record.Direction
	Service record.Service // ServiceNone: no payload event
	Bytes   int
}

// DNSQuery is the DNS message of a query for name of type qt.
func DNSQuery(tb testing.TB, id uint16, name string, qt layers.DNSType) []byte {
	tb.Helper()
	return DNSMessage(tb, &layers.DNS{ID: id, RD: true, Questions: []layers.DNSQuestion{{Name: []byte(name), Type: qt, Class: layers.DNSClassIN}}})
}

// DNSMessage serializes d.
func DNSMessage(tb testing.TB, d *layers.DNS) []byte {
	tb.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := d.SerializeTo(buf, gopacket.SerializeOptions{FixLengths: true}); err != nil {
		tb.Fatalf("serialize dns message: %v", err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// udpPayload is a UDP datagram carrying payload over IPv4 or IPv6 (by src).
func udpPayload(tb testing.TB, src, dst net.IP, sport, dport uint16, payload []byte) []byte {
	tb.Helper()
	u := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
	if src.To4() != nil {
		ip := IPv4(src, dst, layers.IPProtocolUDP)
		_ = u.SetNetworkLayerForChecksum(ip)
		return Serialize(tb, Eth(layers.EthernetTypeIPv4), ip, u, gopacket.Payload(payload))
	}
	ip := IPv6(src, dst, layers.IPProtocolUDP)
	_ = u.SetNetworkLayerForChecksum(ip)
	return Serialize(tb, Eth(layers.EthernetTypeIPv6), ip, u, gopacket.Payload(payload))
}

// UDPPayload is udpPayload for other packages' tests.
func UDPPayload(tb testing.TB, src, dst net.IP, sport, dport uint16, payload []byte) []byte {
	tb.Helper()
	return udpPayload(tb, src, dst, sport, dport, payload)
}

// LinkLocal are link-local packets whose payload the datapath copies, and
// near misses. vpc is the VPC resolver the datapath is told of.
func LinkLocal(tb testing.TB, vpc net.IP) []PayloadCase {
	dns, dns6 := net.IP(limits.DNSv4.AsSlice()), net.IP(limits.DNSv6.AsSlice())
	ntp := net.IP(limits.NTPv4.AsSlice())
	imds := net.IP(limits.IMDSv4.AsSlice())
	q := DNSQuery(tb, 0x1234, "api.heldout-shop.example.default.svc.cluster.local", layers.DNSTypeA)
	ans := DNSMessage(tb, &layers.DNS{ID: 0x1234, QR: true, RD: true, RA: true, ResponseCode: layers.DNSResponseCodeNXDomain,
		Questions: []layers.DNSQuestion{{Name: []byte("api.heldout-shop.example.default.svc.cluster.local"), Type: layers.DNSTypeA, Class: layers.DNSClassIN}}})
	long := DNSMessage(tb, &layers.DNS{ID: 7, QR: true, Questions: []layers.DNSQuestion{{Name: []byte("a.example"), Type: layers.DNSTypeTXT, Class: layers.DNSClassIN}},
		Answers: []layers.DNSResourceRecord{{Name: []byte("a.example"), Type: layers.DNSTypeTXT, Class: layers.DNSClassIN, TTL: 60,
			TXTs: [][]byte{make([]byte, 200), make([]byte, 200)}}}})
	// NTP client request: LI 0, version 4, mode 3; stratum 0, poll 6.
	ntpReq := append([]byte{0x23, 0, 6, 0xe9}, make([]byte, 44)...)
	tcpDNS := append([]byte{0, byte(len(q))}, q...)
	get := "GET /latest/meta-data/iam/security-credentials/role HTTP/1.1\r\nHost: 169.254.169.254\r\nX-Aws-Ec2-Metadata-Token: AQAE\r\n\r\n"
	e, i := record.Egress, record.Ingress
	return []PayloadCase{
		{"dns query", udpPayload(tb, V4A, dns, 40000, 53, q), e, record.ServiceDNS, len(q)},
		{"dns answer", udpPayload(tb, dns, V4A, 53, 40000, ans), i, record.ServiceDNS, len(ans)},
		{"dns answer longer than the copy", udpPayload(tb, dns, V4A, 53, 40000, long), i, record.ServiceDNS, record.LinkLocalPayloadBytes},
		{"dns query over ipv6", udpPayload(tb, V6A, dns6, 40000, 53, q), e, record.ServiceDNS, len(q)},
		{"dns query to the vpc resolver", udpPayload(tb, V4A, vpc, 40000, 53, q), e, record.ServiceDNS, len(q)},
		{"dns query over tcp", TCPPayload(tb, V4A, dns, 40000, 53, 64, tcpDNS), e, record.ServiceDNS, len(tcpDNS)},
		{"tcp ack to the resolver (padded to 60 bytes)", TCP(tb, V4A, dns, 40000, 53, false, true, 0), e, record.ServiceNone, 0},
		{"tcp ack to the resolver over ipv6", TCP(tb, V6A, dns6, 40000, 53, false, true, 0), e, record.ServiceNone, 0},
		{"short dns message padded to 60 bytes", udpPayload(tb, V4A, dns, 40000, 53, q[:4]), e, record.ServiceDNS, 4},
		{"udp to the resolver, another port", udpPayload(tb, V4A, dns, 40000, 5353, q), e, record.ServiceNone, 0},
		{"ntp request", udpPayload(tb, V4A, ntp, 40000, 123, ntpReq), e, record.ServiceNTP, record.LinkLocalNTPBytes},
		{"ntp reply", udpPayload(tb, ntp, V4A, 123, 40000, ntpReq), i, record.ServiceNTP, record.LinkLocalNTPBytes},
		{"tcp to ntp", TCPPayload(tb, V4A, ntp, 40000, 123, 64, ntpReq), e, record.ServiceNone, 0},
		{"imds credentials GET", TCPPayload(tb, V4A, imds, 41000, 80, 64, []byte(get)), e, record.ServiceIMDS, len(get)},
		{"imds reply", TCPPayload(tb, imds, V4A, 80, 41000, 64, []byte("HTTP/1.1 200 OK\r\n\r\n")), i, record.ServiceNone, 0},
		{"dns-looking packet elsewhere", udpPayload(tb, V4A, net.IPv4(10, 9, 9, 9), 40000, 53, q), e, record.ServiceNone, 0},
	}
}
