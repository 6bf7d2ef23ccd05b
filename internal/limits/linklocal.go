package limits

import "net/netip"

// LinkLocalPPSPerInterface is the packets/s allowance shared by the DNS
// resolver, IMDS and NTP on each network interface. AWS documents 1024 for
// the DNS resolver and says it cannot be increased; linklocal_allowance_exceeded
// counts drops for all three services together.
const LinkLocalPPSPerInterface = 1024

// Link-local service addresses (IPv6 ones on Nitro instances).
var (
	IMDSv4 = netip.MustParseAddr("169.254.169.254") // TCP 80
	IMDSv6 = netip.MustParseAddr("fd00:ec2::254")
	DNSv4  = netip.MustParseAddr("169.254.169.253") // UDP/TCP 53
	DNSv6  = netip.MustParseAddr("fd00:ec2::253")
	NTPv4  = netip.MustParseAddr("169.254.169.123") // UDP 123
	NTPv6  = netip.MustParseAddr("fd00:ec2::123")
)

// VPCResolver returns the Amazon DNS server address of a VPC whose primary
// IPv4 CIDR is cidr: the network base plus two. Host bits in cidr are
// ignored. It returns the zero Addr for an invalid or IPv6 prefix, or one
// too small to hold base+2.
func VPCResolver(cidr netip.Prefix) netip.Addr {
	if !cidr.IsValid() || !cidr.Addr().Is4() {
		return netip.Addr{}
	}
	a := cidr.Masked().Addr().Next().Next()
	if !cidr.Contains(a) {
		return netip.Addr{}
	}
	return a
}
