package analyzer

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/enaprobe/enaprobe/internal/limits"
	"github.com/enaprobe/enaprobe/internal/record"
)

// kubeSearch is a pod's search list in namespace default on EC2.
var kubeSearch = []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local", "ec2.internal"}

// expansionPayloads is what glibc with ndots:5 and kubeSearch sends and
// gets for lookups of base: each lookup a new socket (source port), under
// every suffix then bare, A then AAAA, the suffixed names NXDOMAIN.
func expansionPayloads(t testing.TB, client netip.Addr, base string, lookups int, startNs, gapNs int64) []record.LinkLocalPayload {
	var out []record.LinkLocalPayload
	now := startNs
	for l := range lookups {
		port := uint16(30000 + l)
		key := record.FlowKey{Proto: 17, Src: netip.AddrPortFrom(client, port), Dst: netip.AddrPortFrom(limits.DNSv4, 53)}
		names := append([]string{}, kubeSearch...)
		for i, s := range names {
			names[i] = base + "." + s
		}
		names = append(names, base)
		id := uint16(l * 16)
		for i, n := range names {
			for _, qt := range []layers.DNSType{layers.DNSTypeA, layers.DNSTypeAAAA} {
				id++
				q := layers.DNSQuestion{Name: []byte(n), Type: qt, Class: layers.DNSClassIN}
				qb := dnsBytes(t, &layers.DNS{ID: id, RD: true, Questions: []layers.DNSQuestion{q}})
				rc := layers.DNSResponseCodeNXDomain
				var ans []layers.DNSResourceRecord
				if i == len(names)-1 {
					rc = layers.DNSResponseCodeNoErr
					ip := []byte{203, 0, 113, 7}
					if qt == layers.DNSTypeAAAA {
						ip = netip.MustParseAddr("2001:db8::7").AsSlice()
					}
					ans = []layers.DNSResourceRecord{{Name: q.Name, Type: qt, Class: layers.DNSClassIN, TTL: 30, IP: ip}}
				}
				ab := dnsBytes(t, &layers.DNS{ID: id, QR: true, RD: true, RA: true, ResponseCode: rc, Questions: []layers.DNSQuestion{q}, Answers: ans})
				out = append(out,
					record.LinkLocalPayload{Interface: "eth0", Direction: record.Egress, TimeNs: now, Service: record.ServiceDNS, Key: key, Len: uint16(len(qb)), Data: qb},
					record.LinkLocalPayload{Interface: "eth0", Direction: record.Ingress, TimeNs: now + 300_000, Service: record.ServiceDNS, Key: reverse(key), Len: uint16(len(ab)), Data: ab})
				now += gapNs
			}
		}
	}
	return out
}

// credentialStorm is a client that takes a new IMDSv2 token before each
// credentials GET.
func credentialStorm(client netip.Addr, role string, calls int, startNs, gapNs int64) []record.LinkLocalPayload {
	var out []record.LinkLocalPayload
	put := "PUT /latest/api/token HTTP/1.1\r\nHost: 169.254.169.254\r\nX-Aws-Ec2-Metadata-Token-Ttl-Seconds: 21600\r\n\r\n"
	get := "GET " + credentialsPrefix + role + " HTTP/1.1\r\nHost: 169.254.169.254\r\nX-Aws-Ec2-Metadata-Token: AQAE\r\n\r\n"
	for i := range calls {
		for j, req := range []struct {
			s string
			k record.IMDSKind
		}{{put, record.IMDSTokenRequest}, {get, record.IMDSGetToken}} {
			key := record.FlowKey{Proto: 6, Src: netip.AddrPortFrom(client, uint16(40000+2*i+j)), Dst: netip.AddrPortFrom(limits.IMDSv4, 80)}
			out = append(out, record.LinkLocalPayload{Interface: "eth0", Direction: record.Egress, TimeNs: startNs + int64(2*i+j)*gapNs,
				Service: record.ServiceIMDS, Key: key, Len: uint16(len(req.s)), IMDSKind: req.k, Data: []byte(req.s)})
		}
	}
	return out
}

func TestLinkLocalDetailSearchExpansion(t *testing.T) {
	client := netip.MustParseAddr("10.0.3.9")
	rec := &record.Recording{LinkLocalPayloads: expansionPayloads(t, client, "api.heldout-shop.example", 15, 0, 600_000)}
	a := &analysis{rec: rec}
	d := a.linkLocalDetail("eth0", 0, 1e9)
	if d == nil || len(d.Clients) != 1 || d.Clients[0].Client != client.String() || d.Clients[0].DNS == nil {
		t.Fatalf("detail %+v: want one client %s with DNS", d, client)
	}
	dns := d.Clients[0].DNS
	if dns.Queries != 150 || dns.Answers != 150 || dns.Unanswered != 0 || dns.Resent != 0 || dns.NXDomain != 120 || dns.NXDomainShare != 0.8 {
		t.Errorf("dns %+v: want 150 queries, 150 answers, 120 NXDOMAIN", dns)
	}
	if dns.LatencyP50S != 0.0003 || dns.QTypes["A"] != 75 || dns.QTypes["AAAA"] != 75 || dns.RCodes["Non-Existent Domain"] != 120 {
		t.Errorf("dns latency %v qtypes %v rcodes %v", dns.LatencyP50S, dns.QTypes, dns.RCodes)
	}
	if len(dns.Expansions) != 1 {
		t.Fatalf("expansions %+v: want one", dns.Expansions)
	}
	x := dns.Expansions[0]
	if x.Base != "api.heldout-shop.example" || strings.Join(x.Suffixes, " ") != strings.Join(kubeSearch, " ") || x.Queries != 120 ||
		x.BaseQueries != 30 || x.NXDomain != 120 || x.NDots != 5 || x.NDotsFrom != "kubernetes_search_list" || dns.ExpansionShare != 0.8 {
		t.Errorf("expansion %+v share %v", x, dns.ExpansionShare)
	}
	if len(d.Fixes) == 0 || d.Fixes[0].Kind != "search_path" ||
		!strings.HasPrefix(d.Fixes[0].Text, "80% of these queries are search-path expansions of `api.heldout-shop.example` (ndots:5 implied") ||
		!strings.Contains(d.Fixes[0].Text, "trailing dot") || !strings.Contains(d.Fixes[0].Text, "NodeLocal DNSCache") {
		t.Errorf("fixes %+v: want the search path first", d.Fixes)
	}
	// A stretch that begins inside a lookup (after its first suffix's
	// queries), its payloads sampled (every third query left out, as the
	// datapath's rate cap may): the search list in the resolver's order
	// all the same.
	var sampled []record.LinkLocalPayload
	for i, p := range rec.LinkLocalPayloads {
		if p.Direction == record.Ingress || i/2%3 != 2 {
			sampled = append(sampled, p)
		}
	}
	cut := &analysis{rec: &record.Recording{LinkLocalPayloads: sampled}}
	if x := cut.linkLocalDetail("eth0", 1_100_000, 1e9).Clients[0].DNS.Expansions[0]; strings.Join(x.Suffixes, " ") != strings.Join(kubeSearch, " ") || x.NDots != 5 {
		t.Errorf("from inside a lookup, sampled: suffixes %v ndots %d, want %v and 5", x.Suffixes, x.NDots, kubeSearch)
	}
	// A name with more dots than the search list's default ndots, tried
	// under the suffixes, says ndots is above it.
	deep := &analysis{rec: &record.Recording{LinkLocalPayloads: expansionPayloads(t, client, "a.b.c.d.e.example", 1, 0, 1000)}}
	if x := deep.linkLocalDetail("eth0", 0, 1e9).Clients[0].DNS.Expansions[0]; x.NDots != 6 || x.NDotsFrom != "at_least" {
		t.Errorf("deep name: %+v, want ndots 6 at least", x)
	}
}

func TestLinkLocalDetailIMDSTokens(t *testing.T) {
	client := netip.MustParseAddr("10.0.3.10")
	rec := &record.Recording{LinkLocalPayloads: credentialStorm(client, "app-role", 120, 0, 4_000_000),
		Loss: []record.Loss{{Interface: "eth0", LinkLocalPayloads: 7}}}
	d := (&analysis{rec: rec}).linkLocalDetail("eth0", 0, 1e9)
	if d == nil || len(d.Clients) != 1 || d.Clients[0].IMDS == nil || d.PayloadsLost != 7 {
		t.Fatalf("detail %+v", d)
	}
	im := d.Clients[0].IMDS
	if im.TokenRequests != 120 || im.GetsWithToken != 120 || im.TokensPerGet != 1 || im.RequestsPerS != 240 ||
		len(im.CredentialPaths) != 1 || im.CredentialPaths[0] != credentialsPrefix+"app-role" ||
		im.Paths[0].Path != tokenPath && im.Paths[0].Path != credentialsPrefix+"app-role" {
		t.Errorf("imds %+v", im)
	}
	if len(d.Fixes) < 2 || d.Fixes[0].Kind != "imds_token" ||
		!strings.HasPrefix(d.Fixes[0].Text, "a new IMDSv2 token for every request") ||
		!strings.Contains(d.Fixes[0].Text, "reuse it for its TTL; cache credentials (every AWS SDK does by default)") {
		t.Errorf("fixes %+v: want the token first", d.Fixes)
	}
}

// TestLinkLocalDetailIMDSRetransmissions: a request segment sent again
// (same connection, same sequence number) is one request; a second request
// on a kept-alive connection (a new sequence number) is another; a
// recording without sequence numbers (0) counts every copy, as before.
func TestLinkLocalDetailIMDSRetransmissions(t *testing.T) {
	client := netip.MustParseAddr("10.0.3.10")
	storm := credentialStorm(client, "app-role", 40, 0, 4_000_000)
	var ps []record.LinkLocalPayload
	for i, p := range storm {
		p.TCPSeq = 1_000_000 + uint32(i)
		ps = append(ps, p)
		if i%4 == 1 { // every other GET sent three times
			p.TimeNs += 200_000
			ps = append(ps, p)
			p.TimeNs += 400_000
			ps = append(ps, p)
		}
	}
	// A kept-alive connection: the same token request twice, 100 bytes apart.
	keep := storm[0]
	keep.Key.Src = netip.AddrPortFrom(client, 39000)
	keep.TCPSeq = 7
	second := keep
	second.TCPSeq, second.TimeNs = 107, keep.TimeNs+1_000_000
	ps = append(ps, keep, second)
	im := (&analysis{rec: &record.Recording{LinkLocalPayloads: ps}}).linkLocalDetail("eth0", 0, 1e9).Clients[0].IMDS
	if im.Requests != 82 || im.Retransmitted != 40 || im.TokenRequests != 42 || im.GetsWithToken != 40 || im.TokensPerGet != 42.0/40 {
		t.Errorf("with sequence numbers: %+v, want 82 requests (42 token, 40 GETs), 40 retransmitted", im)
	}
	for i := range ps {
		ps[i].TCPSeq = 0
	}
	im = (&analysis{rec: &record.Recording{LinkLocalPayloads: ps}}).linkLocalDetail("eth0", 0, 1e9).Clients[0].IMDS
	if im.Requests != 122 || im.Retransmitted != 0 || im.GetsWithToken != 80 {
		t.Errorf("without: %+v, want every one of 122 copies counted", im)
	}
}

func TestLinkLocalDetailNTP(t *testing.T) {
	client := netip.MustParseAddr("10.0.3.11")
	var ps []record.LinkLocalPayload
	for i := range 50 {
		key := record.FlowKey{Proto: 17, Src: netip.AddrPortFrom(client, 123), Dst: netip.AddrPortFrom(limits.NTPv4, 123)}
		ps = append(ps, record.LinkLocalPayload{Interface: "eth0", Direction: record.Egress, TimeNs: int64(i) * 20_000_000,
			Service: record.ServiceNTP, Key: key, Len: 48, Data: []byte{0x23, 0, 0, 0xe9}},
			record.LinkLocalPayload{Interface: "eth0", Direction: record.Ingress, TimeNs: int64(i)*20_000_000 + 100_000,
				Service: record.ServiceNTP, Key: reverse(key), Len: 48, Data: []byte{0x24, 3, 0, 0xe9}})
	}
	d := (&analysis{rec: &record.Recording{LinkLocalPayloads: ps}}).linkLocalDetail("eth0", 0, 1e9)
	if d == nil || len(d.Clients) != 1 || d.Clients[0].NTP == nil {
		t.Fatalf("detail %+v", d)
	}
	if n := d.Clients[0].NTP; n.Polls != 50 || n.PollsPerS != 50 || n.PollIntervalS != 1 || d.Fixes[0].Kind != "ntp_poll" {
		t.Errorf("ntp %+v fixes %+v", n, d.Fixes)
	}
}

// withExpansion is the linklocal_exceeded recording (a DNS storm from 4.2 s
// to 5.7 s) with the storm's payloads: lookups through a pod's search list.
func withExpansion(t testing.TB) *record.Recording {
	rec, err := record.ReadFile(recordingPath("linklocal_exceeded"))
	if err != nil {
		t.Fatal(err)
	}
	start := rec.Meta.Start.MonoNs + int64(4.3e9)
	rec.LinkLocalPayloads = expansionPayloads(t, netip.MustParseAddr("10.0.3.9"), "api.heldout-shop.example", 100, start, 1_000_000)
	return rec
}

// TestLinkLocalFindingDetail: the finding carries the detail and leads its
// recommendation with the search-path fix.
func TestLinkLocalFindingDetail(t *testing.T) {
	res := Analyze(withExpansion(t), DefaultOptions())
	var f *Finding
	for i := range res.Findings {
		if res.Findings[i].Kind == KindLinkLocalExceeded {
			f = &res.Findings[i]
		}
	}
	if f == nil || f.LinkLocal == nil {
		t.Fatalf("no linklocal_exceeded finding with its detail: %+v", f)
	}
	if f.LinkLocal.Fixes[0].Kind != "search_path" || !strings.HasPrefix(f.Recommendation, "80% of these queries are search-path expansions of `api.heldout-shop.example`") ||
		!strings.Contains(f.Summary, "search-path expansions of `api.heldout-shop.example`") {
		t.Errorf("recommendation %q summary %q", f.Recommendation, f.Summary)
	}
}
