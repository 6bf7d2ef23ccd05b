package lab

import (
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/limits"
	"github.com/enaprobe/enaprobe/internal/monoclock"
	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

// instanceHTTP is an HTTP client whose connections start in the instance
// namespace.
func instanceHTTP(l *Lab) *http.Client {
	return &http.Client{
		Timeout:   3 * time.Second,
		Transport: &http.Transport{DialContext: l.DialInstance, DisableKeepAlives: true},
	}
}

func imdsRequest(t *testing.T, c *http.Client, method, url string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// rawTCPReader opens a raw IPv4 TCP socket in the instance namespace: it
// gets a copy of every TCP packet the instance receives, IP header
// included, which is where the TTL the sender set can be read.
func rawTCPReader(t *testing.T, l *Lab) int {
	t.Helper()
	var fd int
	err := l.InInstance(func() error {
		var err error
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
		return err
	})
	if err != nil {
		t.Fatalf("raw socket: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	tv := unix.NsecToTimeval(int64(200 * time.Millisecond))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	return fd
}

// ttlOfResponse returns the TTL of the first packet from IMDS whose TCP
// payload starts with "HTTP/1.1 <status>".
func ttlOfResponse(t *testing.T, fd int, status string) int {
	t.Helper()
	buf := make([]byte, 65536)
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		n, err := unix.Read(fd, buf)
		if err != nil {
			continue // receive timeout: look again until the deadline
		}
		pkt := buf[:n]
		ihl := int(pkt[0]&0xf) * 4
		if n < ihl+20 || netip.AddrFrom4([4]byte(pkt[12:16])) != limits.IMDSv4 || binary.BigEndian.Uint16(pkt[ihl:]) != imdsPort {
			continue
		}
		payload := pkt[ihl+int(pkt[ihl+12]>>4)*4:]
		if strings.HasPrefix(string(payload), "HTTP/1.1 "+status) {
			return int(pkt[8])
		}
	}
	t.Fatalf("no HTTP %s response from IMDS seen", status)
	return 0
}

func TestIMDSTokenResponseTTLIsHopLimit(t *testing.T) {
	for _, hop := range []int{1, 3} {
		l := upLab(t, Config{IMDSHopLimit: hop, IMDSv2Required: true, InstanceType: "m7i.large"})
		fd := rawTCPReader(t, l)
		c := instanceHTTP(l)
		base := "http://" + limits.IMDSv4.String()

		code, tok := imdsRequest(t, c, http.MethodPut, base+"/latest/api/token", map[string]string{IMDSTokenTTLHeader: "60"})
		if code != http.StatusOK || tok == "" {
			t.Fatalf("hop %d: token: status %d body %q", hop, code, tok)
		}
		if ttl := ttlOfResponse(t, fd, "200"); ttl != hop {
			t.Errorf("token response left with TTL %d, want the hop limit %d", ttl, hop)
		}

		code, body := imdsRequest(t, c, http.MethodGet, base+"/latest/meta-data/instance-type", map[string]string{IMDSTokenHeader: tok})
		if code != http.StatusOK || body != "m7i.large" {
			t.Errorf("hop %d: instance-type with token: %d %q", hop, code, body)
		}
		if ttl := ttlOfResponse(t, fd, "200"); ttl != 64 {
			t.Errorf("metadata response left with TTL %d, want the default 64", ttl)
		}
		if code, _ := imdsRequest(t, c, http.MethodGet, base+"/latest/meta-data/instance-type", nil); code != http.StatusUnauthorized {
			t.Errorf("IMDSv2 required: read without token got %d, want 401", code)
		}
	}
}

func TestIMDSv1AndMetadataTree(t *testing.T) {
	l := upLab(t, Config{})
	c := instanceHTTP(l)
	base := "http://" + limits.IMDSv4.String() + "/latest/meta-data/"
	code, mac := imdsRequest(t, c, http.MethodGet, base+"mac", nil)
	if code != http.StatusOK || mac != l.InstanceMAC().String() {
		t.Fatalf("mac: %d %q, want %s", code, mac, l.InstanceMAC())
	}
	if _, cidr := imdsRequest(t, c, http.MethodGet, base+"network/interfaces/macs/"+mac+"/vpc-ipv4-cidr-blocks", nil); cidr != VPCCIDR.String() {
		t.Errorf("vpc cidr %q, want %s", cidr, VPCCIDR)
	}
	if _, list := imdsRequest(t, c, http.MethodGet, base, nil); !slices.Contains(strings.Split(list, "\n"), "instance-type") || !slices.Contains(strings.Split(list, "\n"), "placement/") {
		t.Errorf("listing lacks instance-type or placement/: %q", list)
	}
	if code, _ := imdsRequest(t, c, http.MethodGet, base+"placement/group-name", nil); code != http.StatusNotFound {
		t.Errorf("placement group of an instance outside one: %d, want 404", code)
	}
	if code, _ := imdsRequest(t, c, http.MethodPut, "http://"+limits.IMDSv4.String()+"/latest/api/token", nil); code != http.StatusBadRequest {
		t.Errorf("token without ttl header: %d, want 400", code)
	}
	// IPv6 endpoint.
	if code, typ := imdsRequest(t, c, http.MethodGet, "http://["+limits.IMDSv6.String()+"]/latest/meta-data/instance-type", nil); code != http.StatusOK || typ != "c5.large" {
		t.Errorf("IMDS over IPv6: %d %q", code, typ)
	}
}

func TestDNSAnswersOverUDPAndTCP(t *testing.T) {
	l := upLab(t, Config{DNSRecords: map[string][]netip.Addr{"db.example.internal": {netip.MustParseAddr("198.18.2.1")}}})
	cases := []struct {
		network string
		server  netip.Addr
		name    string
		qtype   uint16
		want    string // first answer's address, or "" for NXDOMAIN
	}{
		{"udp", limits.DNSv4, "peer.lab.internal.", dns.TypeA, PeerAddr.String()},
		{"tcp", limits.DNSv4, "peer.lab.internal.", dns.TypeA, PeerAddr.String()},
		{"udp", ResolverAddr, "db.example.internal.", dns.TypeA, "198.18.2.1"},
		{"udp", limits.DNSv6, "peer.lab.internal.", dns.TypeAAAA, PeerAddr6.String()},
		{"udp", limits.DNSv4, "nope.lab.internal.", dns.TypeA, ""},
	}
	for _, tc := range cases {
		conn, err := l.DialInstance(context.Background(), tc.network, netip.AddrPortFrom(tc.server, dnsPort).String())
		if err != nil {
			t.Fatal(err)
		}
		m := new(dns.Msg)
		m.SetQuestion(tc.name, tc.qtype)
		c := &dns.Client{Net: tc.network, Timeout: 2 * time.Second}
		resp, _, err := c.ExchangeWithConn(m, &dns.Conn{Conn: conn})
		conn.Close()
		if err != nil {
			t.Fatalf("%s %s %s: %v", tc.network, tc.server, tc.name, err)
		}
		var got string
		if len(resp.Answer) > 0 {
			switch rr := resp.Answer[0].(type) {
			case *dns.A:
				got = rr.A.String()
			case *dns.AAAA:
				got = rr.AAAA.String()
			}
		}
		if got != tc.want || (tc.want == "" && resp.Rcode != dns.RcodeNameError) {
			t.Errorf("%s %s %s: answer %q rcode %d, want %q", tc.network, tc.server, tc.name, got, resp.Rcode, tc.want)
		}
	}
}

func TestNTPReplyIsValid(t *testing.T) {
	l := upLab(t, Config{})
	conn, err := l.DialInstance(context.Background(), "udp", netip.AddrPortFrom(limits.NTPv4, ntpPort).String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := ntpRequest(0)
	if _, err := conn.Write(req); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	resp := make([]byte, 128)
	n, err := conn.Read(resp)
	if err != nil {
		t.Fatal(err)
	}
	resp = resp[:n]
	if n != ntpPacketLen || resp[0] != 4<<3|ntpModeServer || resp[1] != 1 {
		t.Fatalf("reply header % x, want NTPv4 server stratum 1", resp[:4])
	}
	if string(resp[24:32]) != string(req[40:48]) {
		t.Error("origin timestamp is not the request's transmit timestamp")
	}
	tx := binary.BigEndian.Uint64(resp[40:])
	secs := int64(tx>>32) - ntpEpochOffset
	if d := time.Since(time.Unix(secs, 0)); d < -2*time.Second || d > 2*time.Second {
		t.Errorf("server transmit time %v off by %v", time.Unix(secs, 0), d)
	}
}

func TestBurstAndIPv6Flows(t *testing.T) {
	l := upLab(t, Config{})
	ctx := context.Background()
	s0 := l.SinkStats()
	b, err := l.Burst(ctx, BurstSpec{Packets: 100, PacketSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if b.Sent != 100 || b.EndNs <= b.StartNs || b.StartNs < monoclock.Now()-int64(time.Minute) {
		t.Errorf("burst: sent %d between %d and %d ns", b.Sent, b.StartNs, b.EndNs)
	}
	if b.FirstSentNs <= b.StartNs || b.FirstSentNs > b.EndNs {
		t.Errorf("burst: first send returned at %d ns, outside its start %d and end %d", b.FirstSentNs, b.StartNs, b.EndNs)
	}
	t.Logf("burst of 100 x 1000 B took %v at the sender", time.Duration(b.EndNs-b.StartNs))
	res, err := l.UDPFlows(ctx, UDPFlowsSpec{Flows: 2, Rate: 1_000_000, PacketSize: 500, Dst: netip.AddrPortFrom(PeerAddr6, UDPSinkPort), Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	want := 100 + res.Sent
	waitFor(t, time.Second, func() bool { return l.SinkStats().UDPPackets-s0.UDPPackets == want })
}

// waitFor polls cond every 20 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
