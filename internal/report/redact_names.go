package report

import (
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"slices"
	"strings"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/net/publicsuffix"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/record"
)

// Names in the link-local detail (redaction, continued):
//
//   - A DNS name keeps the labels of public suffixes (golang.org/x/net's
//     list: example, com, co.uk) and of the well-known cluster suffixes
//     (svc.cluster.local, ec2.internal, compute.internal); every other
//     label becomes "l" and 8 hex digits of its keyed hash, the same label
//     the same pseudonym, so that a search-path expansion stays one of its
//     base name and a redacted recording analyzes alike.
//   - Each name of the recording's DNS payloads and of the result's detail
//     is replaced wherever it is written, longest first.
//   - The DNS payloads themselves are decoded and written again with the
//     names replaced, keeping only answer records whose address is
//     link-local (A, AAAA) and CNAMEs; authority and additional records are
//     dropped.
//   - An IMDS role name (the path segment after
//     /latest/meta-data/iam/security-credentials/) becomes "role-" and 8 hex
//     digits, in the payloads and in the text.

// wellKnownSuffixes are kept whole: they name no customer.
var wellKnownSuffixes = []string{"svc.cluster.local", "cluster.local", "ec2.internal", "compute.internal", "compute.amazonaws.com"}

const credentialsDir = "/latest/meta-data/iam/security-credentials/"

// addLinkLocalNames registers the names and roles of in's link-local
// payloads and of its findings' detail.
func (r *redactor) addLinkLocalNames(in Input) {
	var names, roles []string
	if in.Recording != nil {
		for _, p := range in.Recording.LinkLocalPayloads {
			switch p.Service {
			case record.ServiceDNS:
				if d, ok := decodeDNSPayload(p); ok {
					names = append(names, dnsNames(d)...)
				}
			case record.ServiceIMDS:
				if role := roleOf(string(p.Data)); role != "" {
					roles = append(roles, role)
				}
			}
		}
	}
	if in.Result != nil {
		for _, f := range in.Result.Findings {
			if f.LinkLocal == nil {
				continue
			}
			for _, c := range f.LinkLocal.Clients {
				names, roles = append(names, detailNames(c)...), append(roles, detailRoles(c)...)
			}
		}
	}
	r.keepLabels = map[string]bool{}
	for _, s := range wellKnownSuffixes {
		for _, l := range strings.Split(s, ".") {
			r.keepLabels[l] = true
		}
	}
	for _, n := range names {
		if ps, _ := publicsuffix.PublicSuffix(n); ps != "" {
			for _, l := range strings.Split(ps, ".") {
				r.keepLabels[l] = true
			}
		}
	}
	seen := map[string]bool{}
	for _, n := range names {
		if n == "" || n == "." || seen[n] {
			continue
		}
		seen[n] = true
		if to := r.dnsName(n); to != n {
			r.names = append(r.names, hostRename{n, to})
		}
	}
	for _, role := range roles {
		if !seen["\x00"+role] {
			seen["\x00"+role] = true
			r.names = append(r.names, hostRename{role, r.role(role)})
		}
	}
	slices.SortStableFunc(r.names, func(a, b hostRename) int { return len(b.from) - len(a.from) })
}

// dnsName is the pseudonym of a DNS name: kept labels stay.
func (r *redactor) dnsName(n string) string {
	trail := strings.HasSuffix(n, ".")
	labels := strings.Split(strings.TrimSuffix(n, "."), ".")
	for i, l := range labels {
		if l != "" && !r.keepLabels[strings.ToLower(l)] {
			labels[i] = "l" + hex.EncodeToString(r.mac("dnslabel", []byte(strings.ToLower(l))))[:8]
		}
	}
	out := strings.Join(labels, ".")
	if trail {
		out += "."
	}
	return out
}

func (r *redactor) role(role string) string {
	return "role-" + hex.EncodeToString(r.mac("role", []byte(role)))[:8]
}

// textNames replaces the registered names and roles written in s.
func (r *redactor) textNames(s string) string {
	for _, n := range r.names {
		s = replaceWord(s, n.from, n.to)
	}
	return s
}

func roleOf(line string) string {
	_, after, ok := strings.Cut(line, credentialsDir)
	if !ok {
		return ""
	}
	role, _, _ := strings.Cut(after, " ")
	role, _, _ = strings.Cut(role, "/")
	role, _, _ = strings.Cut(role, "?")
	return role
}

func detailNames(c analyzer.LinkLocalClient) []string {
	d := c.DNS
	if d == nil {
		return nil
	}
	var out []string
	for _, n := range d.Names {
		out = append(out, n.Name)
	}
	for _, x := range d.Expansions {
		out = append(out, x.Base)
		for _, s := range x.Suffixes {
			out = append(out, s, x.Base+"."+s)
		}
	}
	return out
}

func detailRoles(c analyzer.LinkLocalClient) []string {
	if c.IMDS == nil {
		return nil
	}
	var out []string
	for _, p := range c.IMDS.Paths {
		if role := roleOf(p.Path); role != "" {
			out = append(out, role)
		}
	}
	for _, p := range c.IMDS.CredentialPaths {
		if role := roleOf(p); role != "" {
			out = append(out, role)
		}
	}
	return out
}

// decodeDNSPayload decodes a DNS payload as the analyzer does.
func decodeDNSPayload(p record.LinkLocalPayload) (*layers.DNS, bool) {
	d, _, ok := analyzer.DecodeDNS(p)
	return d, ok
}

func dnsNames(d *layers.DNS) []string {
	var out []string
	for _, q := range d.Questions {
		out = append(out, string(q.Name))
	}
	for _, rr := range d.Answers {
		out = append(out, string(rr.Name))
		if len(rr.CNAME) > 0 {
			out = append(out, string(rr.CNAME))
		}
	}
	return out
}

// linkLocalPayload redacts one payload of the recording (a copy).
func (r *redactor) linkLocalPayload(p record.LinkLocalPayload) record.LinkLocalPayload {
	switch p.Service {
	case record.ServiceDNS:
		d, ok := decodeDNSPayload(p)
		if !ok {
			p.Data, p.Len = nil, 0
			return p
		}
		out := layers.DNS{ID: d.ID, QR: d.QR, OpCode: d.OpCode, AA: d.AA, TC: d.TC, RD: d.RD, RA: d.RA, Z: d.Z, ResponseCode: d.ResponseCode}
		for _, q := range d.Questions {
			q.Name = []byte(r.dnsName(string(q.Name)))
			out.Questions = append(out.Questions, q)
		}
		for _, rr := range d.Answers {
			switch {
			case rr.Type == layers.DNSTypeA || rr.Type == layers.DNSTypeAAAA:
				a, ok := netip.AddrFromSlice(rr.IP)
				if !ok || !keepAddr(a) {
					continue
				}
			case rr.Type == layers.DNSTypeCNAME:
				rr.CNAME = []byte(r.dnsName(string(rr.CNAME)))
			default:
				continue
			}
			rr.Name = []byte(r.dnsName(string(rr.Name)))
			out.Answers = append(out.Answers, rr)
		}
		buf := gopacket.NewSerializeBuffer()
		if err := out.SerializeTo(buf, gopacket.SerializeOptions{FixLengths: true}); err != nil {
			p.Data, p.Len = nil, 0
			return p
		}
		b := buf.Bytes()
		if p.Key.Proto == 6 {
			b = append(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b...)
		}
		p.Data = append([]byte(nil), b[:min(len(b), record.LinkLocalPayloadBytes)]...)
		p.Len = uint16(len(b))
	case record.ServiceIMDS:
		line := string(p.Data)
		if role := roleOf(line); role != "" {
			line = strings.Replace(line, credentialsDir+role, credentialsDir+r.role(role), 1)
		}
		p.Data, p.Len = []byte(line), uint16(len(line))
	}
	return p
}
