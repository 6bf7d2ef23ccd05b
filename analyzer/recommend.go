package analyzer

import (
	"fmt"

	"github.com/enaprobe/enaprobe/internal/limits"
	"github.com/enaprobe/enaprobe/internal/units"
)

// Recommendations, each drawn from /work/shared/AWS-LIMITS.md.
const (
	recommendMicroburst = "bw_*_allowance_exceeded counts packets queued or dropped because the instance's aggregate bandwidth went over its allowance, " +
		"here in a burst far shorter than any CloudWatch period (1-minute and 5-minute averages hide it). " +
		"Smooth the sender's bursts (pacing, spreading transfers over time) or move to an instance size with a higher allowance " +
		"(DescribeInstanceTypes NetworkInfo.NetworkCards[].BaselineBandwidthInGbps / PeakBandwidthInGbps)."
	recommendNearMiss = "No packet was queued or dropped: bursts above the aggregate bandwidth allowance were absorbed by its burst bucket, " +
		"and those just under it came close. A longer or larger burst, or one before the bucket refilled, would move bw_*_allowance_exceeded. " +
		"Pace or spread the bursts to keep headroom."
	recommendPPS = "pps_allowance_exceeded counts packets queued or dropped over the instance's packets/s allowance, which AWS does not publish " +
		"and which depends on protocol, flow count, packet size, new versus existing connections and security group rules. " +
		"Send fewer, larger packets (batch small writes; inside a VPC the MTU is 9001), reuse connections instead of opening new ones, " +
		"spread the flows over more instances or move to a larger size."
	recommendConntrack = "conntrack_allowance_exceeded counts packets dropped because connection tracking was full and no new connection could be made. " +
		"Where the rules allow, make flows untracked: a security group tracks nothing only when it allows 0.0.0.0/0 and ::/0 on all ports in both directions " +
		"(ICMP is always tracked, and so is traffic through NLB, NAT gateway, GWLB, PrivateLink endpoints, transit gateway and others). " +
		"Shorten idle timeouts with ConnectionTrackingConfiguration (TCP established 432000 s by default, down to 60 s; UDP 30 s; UDP stream 180 s), " +
		"and reuse connections (pooling, keep-alive) instead of opening one per request."
	recommendConntrackNear = "conntrack_allowance_available is running out: when it reaches 0, new connections are dropped (conntrack_allowance_exceeded). " +
		"Reuse connections, shorten idle timeouts with ConnectionTrackingConfiguration (TCP established 432000 s by default, down to 60 s), " +
		"and make flows untracked where security group rules allow (0.0.0.0/0 and ::/0, all ports, both directions)."
	recommendJumbo = "Inside a VPC the MTU is 9001, but traffic that leaves it (internet gateway, VPN, another Region) has an MTU of 1500: " +
		"larger packets are fragmented or dropped, and TCP stalls if the ICMP \"fragmentation needed\" answers are filtered. " +
		"Allow that ICMP in security groups and network ACLs, or cap the MTU toward destinations outside the VPC (ip route ... mtu 1500)."
	recommendBaseline = "Instance sizes sold as \"Up to X Gbps\" burst to X only while burst credits last (typically 5 to 60 minutes), then fall to the baseline, " +
		"and bw_*_allowance_exceeded counts what is queued or dropped over it. Use a size sold as \"N Gigabit\" (no burst) or a larger one, " +
		"or spread the transfer over time so that credits refill. CloudWatch NetworkIn/NetworkOut are bytes per period: bps = Sum / period seconds x 8."
)

// Recommendations that name a limit take its number from limits, its one
// home.
var (
	linkLocalPPS = fmt.Sprintf("%d packets/s", limits.LinkLocalPPSPerInterface)
	flowCaps     = fmt.Sprintf("%s outside a cluster placement group, up to %s inside one and up to %s with ENA Express",
		units.BitRate(limits.FlowDefaultBps), units.BitRate(limits.FlowPlacementGroupBps), units.BitRate(limits.FlowENAExpressBps))
	flowCapsShort = fmt.Sprintf("%s, %s in a cluster placement group, %s with ENA Express",
		units.BitRate(limits.FlowDefaultBps), units.BitRate(limits.FlowPlacementGroupBps), units.BitRate(limits.FlowENAExpressBps))

	recommendLinkLocal = "Link-local services (DNS resolver, IMDS, NTP) share one limit of " + linkLocalPPS + " per network interface, which cannot be increased; " +
		"linklocal_allowance_exceeded counts packets dropped over it. Cache DNS answers locally (a local caching resolver), " +
		"read IMDS once and cache credentials and metadata (one HTTP request to IMDS is several packets), and do not poll NTP more than needed."
	recommendLinkLocalHot = "Link-local traffic (DNS, IMDS, NTP together) is close to the per-interface limit of " + linkLocalPPS + ", which cannot be increased; " +
		"over it packets are dropped (linklocal_allowance_exceeded). Cache DNS answers locally (a local caching resolver) and cache IMDS credentials and metadata."
	recommendFlowCap = "A single flow (5-tuple) is limited to " + flowCaps + ", " +
		"silently: no counter moves. Split the transfer over several flows (parallel connections), or place both instances in a cluster placement group, or use ENA Express."
	recommendFlowPlateau = "This flow ran flat at its maximum for a long time with no allowance counter moving: something caps it (a per-flow limit, the sender, " +
		"the receiver window). If it is the EC2 per-flow limit (" + flowCapsShort + "), " +
		"split the transfer over several flows; set FlowLimitBps to compare with the right cap."
)
