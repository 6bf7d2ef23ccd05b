package lab

import (
	"net/netip"

	"github.com/enaprobe/enaprobe/internal/limits"
)

// The lab's addresses. Only the 198.18.0.0/15 benchmark range (RFC 2544),
// its IPv6 counterpart 2001:2::/48 (RFC 5180) and the EC2 link-local service
// addresses are used, and only inside the lab's own namespaces, so nothing
// can leak toward a real network.
var (
	// VPCCIDR is the emulated VPC; the instance's subnet is its first /24.
	VPCCIDR = netip.MustParsePrefix("198.18.0.0/16")
	// SubnetCIDR is the instance's subnet.
	SubnetCIDR = netip.MustParsePrefix("198.18.0.0/24")
	// InstanceAddr is the instance's primary private address.
	InstanceAddr = netip.MustParseAddr("198.18.0.10")
	// GatewayAddr is the VPC router, the instance's default gateway.
	GatewayAddr = netip.MustParseAddr("198.18.0.1")
	// ResolverAddr is the VPC DNS resolver at the VPC CIDR base + 2.
	ResolverAddr = limits.VPCResolver(VPCCIDR)
	// PeerAddr is another host in the VPC: the traffic sinks live there.
	PeerAddr = netip.MustParseAddr("198.18.1.10")

	InstanceAddr6 = netip.MustParseAddr("2001:2:0:1::10")
	GatewayAddr6  = netip.MustParseAddr("2001:2:0:1::1")
	PeerAddr6     = netip.MustParseAddr("2001:2:0:2::10")

	// LinkLocalServices is the IPv4 range whose traffic shares the
	// link-local allowance.
	LinkLocalServices = netip.MustParsePrefix("169.254.169.0/24")
)

// Ports of the sinks on PeerAddr and PeerAddr6.
const (
	UDPSinkPort  = 9    // discard: counts datagrams
	BulkPort     = 5001 // TCP bulk: upload to it or download from it
	HoldPort     = 5002 // TCP: accepts and holds connections (conntrack floods)
	subnetBits   = 24
	subnet6Bits  = 64
	instanceIfc  = "ens5" // the Nitro name of the primary ENI
	vpcIfc       = "vpc0"
	linkMTU      = 1500
	ethHeaderLen = 14
	// maxPacketBytes is the largest frame qdiscs see without GSO.
	maxPacketBytes = linkMTU + ethHeaderLen
)

// vpcSideAddrs are the addresses the VPC namespace answers on, each as a
// host route on the VPC end of the veth.
var vpcSideAddrs = []netip.Addr{ResolverAddr, PeerAddr, limits.IMDSv4, limits.DNSv4, limits.NTPv4, PeerAddr6, limits.IMDSv6, limits.DNSv6, limits.NTPv6}
