// Package lab emulates the network allowances of an EC2 instance off EC2,
// with real kernel machinery and its real counters, scaled down (Mbit/s,
// not Gbit/s), every limit a Config field.
//
// Up creates two network namespaces with random names: the "instance",
// whose interface ens5 stands for the ENA device, and the "VPC", the other
// end of a veth pair. The instance routes everything through the VPC end
// (198.18.0.1), which also holds the VPC resolver (198.18.0.2, base + 2),
// a peer host with traffic sinks (198.18.1.10) and the link-local services
// 169.254.169.254 (IMDS), .253 (DNS), .123 (NTP) and their fd00:ec2::
// IPv6 twins, all served in Go from sockets made inside the VPC namespace.
//
// Where each allowance is enforced, and the kernel counter that becomes
// its ENA counter (Counters, WriteCountersFile):
//
//	bw_out   tbf root qdisc on ens5 egress (rate, burst bucket, optional
//	         peak rate) shapes: its overlimits + own drops, plus the
//	         packets an nftables limit of the same rate and bucket on
//	         ens5's netdev egress hook saw offered over it (a burst counts
//	         as it happens, as an ENA counts packets when it queues them,
//	         not only while the qdisc's queue drains)
//	bw_in    the same on the VPC end's egress, toward the instance
//	per-flow htb under each tbf, one class per flow-hash bucket, chosen by
//	         the flowclass cls_bpf program (bpf_get_hash_recalc): no counter
//	pps      nftables named limit shared by netdev ingress and egress on
//	         the VPC end (both directions): drops counted by a named counter
//	linklocal nftables limit on packets to 169.254.169.0/24, the resolver
//	         and fd00:ec2::{254,253,123} (netdev ingress, VPC end): counter
//	conntrack nftables `ct count over N` in the VPC namespace (one
//	         conncount list for both directions): drops counted; available =
//	         N - confirmed conntrack entries not in TCP TIME_WAIT/CLOSE (the
//	         entries conncount counts), from a ctnetlink dump
//
// The instance namespace holds nothing of ours but the egress qdisc, so a
// tracer attached there (InInstance, InstanceNetnsPath) sees what the
// instance offers before the allowances act, as on an ENA.
//
// The generators (UDPFlows, Burst, TCPBulk, OpenConns/ConnFlood,
// LinkLocal) send from sockets created in the instance namespace toward
// VPC addresses only, each bounded in packets and time.
//
// Known differences from EC2: a flow's cap is shared with any flow whose
// hash lands in the same bucket (Config.FlowBuckets); nftables counts a
// GSO super-packet as one packet, so the pps allowance undercounts TSO
// traffic; the burst bucket refills at the baseline rate as EC2 credits do,
// but is bytes, not minutes; link-local replies are not counted against
// the link-local allowance.
package lab
