package lab

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/enaprobe/enaprobe/internal/limits"
	"github.com/miekg/dns"
)

// Default names the VPC resolver answers, besides Config.DNSRecords.
var defaultDNSRecords = map[string][]netip.Addr{
	"peer.lab.internal.":     {PeerAddr, PeerAddr6},
	"instance.lab.internal.": {InstanceAddr, InstanceAddr6},
	"gateway.lab.internal.":  {GatewayAddr, GatewayAddr6},
}

// dnsZone maps lower-case FQDNs to their addresses.
type dnsZone map[string][]netip.Addr

func newDNSZone(extra map[string][]netip.Addr) dnsZone {
	z := dnsZone{}
	for _, m := range []map[string][]netip.Addr{defaultDNSRecords, extra} {
		for name, addrs := range m {
			z[dns.CanonicalName(name)] = addrs
		}
	}
	return z
}

// ServeDNS answers A and AAAA from the zone, NOERROR with no answer for
// other types of a known name, NXDOMAIN for unknown names, like a
// recursive resolver that knows only these names.
func (z dnsZone) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	resp := new(dns.Msg)
	resp.SetReply(req)
	resp.RecursionAvailable = true
	if len(req.Question) != 1 {
		resp.Rcode = dns.RcodeFormatError
		w.WriteMsg(resp)
		return
	}
	q := req.Question[0]
	addrs, ok := z[strings.ToLower(q.Name)]
	if !ok {
		resp.Rcode = dns.RcodeNameError
	}
	hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: 60}
	for _, a := range addrs {
		switch {
		case q.Qtype == dns.TypeA && a.Is4():
			hdr.Rrtype = dns.TypeA
			resp.Answer = append(resp.Answer, &dns.A{Hdr: hdr, A: a.AsSlice()})
		case q.Qtype == dns.TypeAAAA && a.Is6():
			hdr.Rrtype = dns.TypeAAAA
			resp.Answer = append(resp.Answer, &dns.AAAA{Hdr: hdr, AAAA: a.AsSlice()})
		}
	}
	w.WriteMsg(resp)
}

// dnsAddrs are where the resolver listens: its link-local addresses and
// the VPC base + 2.
var dnsAddrs = []netip.Addr{limits.DNSv4, ResolverAddr, limits.DNSv6}

const dnsPort = 53

func (l *Lab) startDNS() error {
	zone := newDNSZone(l.cfg.DNSRecords)
	pcs, err := l.listenPacketVPC(dnsAddrs, dnsPort)
	if err != nil {
		return err
	}
	lns, err := l.listenVPC(dnsAddrs, dnsPort)
	if err != nil {
		return err
	}
	var servers []*dns.Server
	for _, pc := range pcs {
		servers = append(servers, &dns.Server{PacketConn: pc, Handler: zone})
	}
	for _, ln := range lns {
		servers = append(servers, &dns.Server{Listener: ln, Handler: zone})
	}
	for _, srv := range servers {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		done := make(chan error, 1)
		l.services.goServe(func() { done <- srv.ActivateAndServe() })
		// Shutdown fails on a server not yet started: wait for it.
		select {
		case <-started:
		case err := <-done:
			return fmt.Errorf("serve dns: %w", err)
		}
		l.services.onClose(srv.Shutdown)
	}
	return nil
}
