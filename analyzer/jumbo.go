package analyzer

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"github.com/enaprobe/enaprobe/internal/record"
)

// jumboMTU is the largest packet that leaves a VPC: inside it the MTU is
// 9001, but through an internet gateway, a VPN, or to another Region it is
// 1500, and larger packets are fragmented or dropped (path MTU discovery
// needs ICMP "fragmentation needed" to come back).
const jumboMTU = 1500

// privateRanges are the IPv4 ranges a VPC's addresses normally come from.
// An IPv6 address says nothing (VPC IPv6 addresses are global unicast), so
// only IPv4 peers are judged.
var privateRanges = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("127.0.0.0/8"),
}

// outsideVPC tells whether an IPv4 address is outside every range a VPC
// normally uses.
func outsideVPC(a netip.Addr) bool {
	if !a.Is4() || a.IsMulticast() || a.IsUnspecified() {
		return false
	}
	for _, p := range privateRanges {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// jumboLeavingFindings reports flows that sent packets larger than 1500
// bytes toward an IPv4 address outside the private ranges: on EC2 that
// traffic leaves the VPC, where the MTU is 1500.
func (a *analysis) jumboLeavingFindings() []Finding {
	var out []Finding
	for id := range a.flows.flows {
		f := &a.flows.flows[id]
		if f.last.MaxSize <= jumboMTU || !outsideVPC(f.key.Dst.Addr()) || !hasDirection(f.last, record.Egress) {
			continue
		}
		fd := a.newFindingNs(KindJumboLeavingVPC, SeverityInfo, f.iface, f.firstSeenNs, max(f.last.LastSeenNs, f.firstSeenNs+1))
		fd.Direction = record.Egress.String()
		fd.Evidence = append(fd.Evidence,
			ev("max_packet_size", float64(f.last.MaxSize), "bytes"),
			ev("mtu_leaving_vpc", jumboMTU, "bytes"),
			ev("flow_bytes", float64(f.last.Bytes), "bytes"),
			ev("flow_packets", float64(f.last.Packets), "packets"))
		fd.FlowsRankedBy = rankBytes
		fd.Flows = []FlowShare{{Proto: record.ProtoName(f.key.Proto), Src: f.key.Src.String(), Dst: f.key.Dst.String(),
			Bytes: f.last.Bytes, Packets: f.last.Packets, MeanSize: meanSize(f.last.Bytes, f.last.Packets),
			MinSize: f.last.MinSize, MaxSize: f.last.MaxSize, Share: 1, Source: sourceSnapshots}}
		fd.Summary = fmt.Sprintf("%s %s -> %s sent packets of up to %d bytes toward an address outside the VPC's private ranges, where the MTU is %d",
			record.ProtoName(f.key.Proto), f.key.Src, f.key.Dst, f.last.MaxSize, jumboMTU)
		fd.Recommendation = recommendJumbo
		out = append(out, fd)
	}
	slices.SortStableFunc(out, func(x, y Finding) int { return cmp.Compare(x.StartOffsetS, y.StartOffsetS) })
	return out
}
