package frames

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/enaprobe/enaprobe/internal/limits"
	"github.com/enaprobe/enaprobe/internal/record"
)

// IMDSCase is one IMDS frame and the event the datapath reports of it.
type IMDSCase struct {
	Name  string
	Frame []byte
	Dir   record.Direction
	Kind  record.IMDSKind // 0: no event
	Key   record.FlowKey
	TTL   uint8
}

// IMDS are IMDS packets of each kind and their near misses, with what the
// datapath reports of them (Kind 0: nothing), for the Go reference's table
// and the loader's differential test.
func IMDS(t testing.TB) []IMDSCase {
	imds, imds6 := net.IP(limits.IMDSv4.AsSlice()), net.IP(limits.IMDSv6.AsSlice())
	host, host6 := V4A, V6A
	put := "PUT /latest/api/token HTTP/1.1\r\nHost: 169.254.169.254\r\nX-Aws-Ec2-Metadata-Token-Ttl-Seconds: 21600\r\n\r\n"
	ua := "User-Agent: aws-sdk-go-v2/1.36.3 ua/2.1 os/linux lang/go#1.24.0 md/GOOS#linux md/GOARCH#amd64 api/ec2imds#1.16.30\r\n"
	getTok := "GET /latest/meta-data/instance-id HTTP/1.1\r\nHost: 169.254.169.254\r\n" + ua + "X-Aws-Ec2-Metadata-Token: AQAEA\r\n\r\n"
	getNoTok := "GET /latest/meta-data/instance-id HTTP/1.1\r\nHost: 169.254.169.254\r\n" + ua + "\r\n"
	// A token header after the bytes the datapath looks at.
	getFar := "GET /latest/meta-data/ HTTP/1.1\r\nX-Pad: " + strings.Repeat("a", record.IMDSPeekBytes) + "\r\nx-aws-ec2-metadata-token: A\r\n\r\n"
	reply := "HTTP/1.1 200 OK\r\nContent-Length: 56\r\n\r\n"
	k := func(src net.IP, sp uint16, dst net.IP, dp uint16) record.FlowKey {
		s, _ := netip.AddrFromSlice(src)
		d, _ := netip.AddrFromSlice(dst)
		return record.FlowKey{Proto: 6, Src: netip.AddrPortFrom(s.Unmap(), sp), Dst: netip.AddrPortFrom(d.Unmap(), dp)}
	}
	tcp := func(src, dst net.IP, sp, dp uint16, ttl uint8, payload string) []byte {
		return TCPPayload(t, src, dst, sp, dp, ttl, []byte(payload))
	}
	// The reply that died, as the host quotes it: IP header and 8 bytes.
	dead := tcp(imds, host, 80, 41000, 1, reply)[14 : 14+20+8]
	dead6 := tcp(imds6, host6, 80, 41000, 1, reply)[14 : 14+40+8]
	e := record.Egress
	i := record.Ingress
	return []IMDSCase{
		{"token request", tcp(host, imds, 41000, 80, 64, put), e, record.IMDSTokenRequest, k(host, 41000, imds, 80), 64},
		{"token request over ipv6", tcp(host6, imds6, 41000, 80, 63, put), e, record.IMDSTokenRequest, k(host6, 41000, imds6, 80), 63},
		{"token request seen at ingress", tcp(host, imds, 41000, 80, 64, put), i, 0, record.FlowKey{}, 0},
		{"token request to another port", tcp(host, imds, 41000, 8080, 64, put), e, 0, record.FlowKey{}, 0},
		{"token request to another address", tcp(host, V4B, 41000, 80, 64, put), e, 0, record.FlowKey{}, 0},
		{"another PUT", tcp(host, imds, 41000, 80, 64, "PUT /latest/api/tokens"[:20]+"x"), e, 0, record.FlowKey{}, 0},
		{"GET with a token", tcp(host, imds, 41000, 80, 64, getTok), e, record.IMDSGetToken, k(host, 41000, imds, 80), 64},
		{"GET with a token, header in lower case", tcp(host, imds, 41000, 80, 64, getTok[:40]+"\r\nx-aws-ec2-metadata-token: A\r\n\r\n"), e,
			record.IMDSGetToken, k(host, 41000, imds, 80), 64},
		{"GET without a token", tcp(host, imds, 41000, 80, 64, getNoTok), e, record.IMDSGetNoToken, k(host, 41000, imds, 80), 64},
		{"GET whose token header lies beyond the look", tcp(host, imds, 41000, 80, 64, getFar), e, record.IMDSGetNoToken, k(host, 41000, imds, 80), 64},
		{"token header cut by the end of the segment", tcp(host, imds, 41000, 80, 64, "GET / HTTP/1.1\r\nX-aws-ec2-metadata-toke"), e,
			record.IMDSGetNoToken, k(host, 41000, imds, 80), 64},
		{"short payload", tcp(host, imds, 41000, 80, 64, "GET /"), e, 0, record.FlowKey{}, 0},
		{"no payload", TCP(t, host, imds, 41000, 80, false, true, 0), e, 0, record.FlowKey{}, 0},
		{"reply with ttl 1", tcp(imds, host, 80, 41000, 1, reply), i, record.IMDSReply, k(imds, 80, host, 41000), 1},
		{"reply with hop limit 2", tcp(imds6, host6, 80, 41000, 2, reply), i, record.IMDSReply, k(imds6, 80, host6, 41000), 2},
		{"the rest of a reply", tcp(imds, host, 80, 41000, 1, "AQAEAAAA"), i, 0, record.FlowKey{}, 0},
		{"reply seen at egress", tcp(imds, host, 80, 41000, 1, reply), e, 0, record.FlowKey{}, 0},
		{"time exceeded toward IMDS", TimeExceeded(t, host, imds, dead), e, record.IMDSTimeExceeded, k(imds, 80, host, 41000), 1},
		{"icmpv6 time exceeded toward IMDS", TimeExceeded(t, host6, imds6, dead6), e, record.IMDSTimeExceeded, k(imds6, 80, host6, 41000), 1},
		{"time exceeded toward another address", TimeExceeded(t, host, V4B, dead), e, 0, record.FlowKey{}, 0},
		{"time exceeded quoting udp", TimeExceeded(t, host, imds, UDP(t, imds, host, 53, 5000, 8)[14:14+28]), e, 0, record.FlowKey{}, 0},
		{"time exceeded quoting too little", TimeExceeded(t, host, imds, dead[:22]), e, 0, record.FlowKey{}, 0},
	}
}
