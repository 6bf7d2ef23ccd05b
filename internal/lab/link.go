package lab

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// setupLinks creates the veth pair instance<->VPC directly in the two
// namespaces (so its names never touch the root namespace), addresses both
// ends and routes the instance through the VPC end. Every VPC-side service
// and sink address is a host address on the VPC end, as a VPC router with
// its services behind it would appear to the instance.
func (l *Lab) setupLinks() error {
	for _, h := range []*netlink.Handle{l.instNl, l.vpcNl} {
		lo, err := h.LinkByName("lo")
		if err != nil {
			return fmt.Errorf("find lo: %w", err)
		}
		if err := h.LinkSetUp(lo); err != nil {
			return fmt.Errorf("set lo up: %w", err)
		}
	}

	attrs := netlink.NewLinkAttrs()
	attrs.Name = instanceIfc
	attrs.MTU = linkMTU
	// The queue of every htb leaf class is the device's txqueuelen.
	attrs.TxQLen = l.cfg.QueuePackets
	veth := &netlink.Veth{LinkAttrs: attrs, PeerName: vpcIfc, PeerTxQLen: l.cfg.QueuePackets, PeerNamespace: netlink.NsFd(l.vpc.Handle)}
	if err := l.instNl.LinkAdd(veth); err != nil {
		return fmt.Errorf("add veth %s/%s: %w", instanceIfc, vpcIfc, err)
	}
	var err error
	if l.instLink, err = l.instNl.LinkByName(instanceIfc); err != nil {
		return fmt.Errorf("find %s: %w", instanceIfc, err)
	}
	if l.vpcLink, err = l.vpcNl.LinkByName(vpcIfc); err != nil {
		return fmt.Errorf("find %s: %w", vpcIfc, err)
	}
	// One segment per skb: TSO/GSO super-packets are 64 KiB, which at the
	// lab's Mbit/s rates would be milliseconds of traffic in one skb, where
	// on EC2, at Gbit/s, they are microseconds. Without them the traffic
	// keeps EC2's shape at the lab's scale.
	if err := l.instNl.LinkSetGSOMaxSegs(l.instLink, 1); err != nil {
		return fmt.Errorf("limit gso on %s: %w", instanceIfc, err)
	}
	if err := l.vpcNl.LinkSetGSOMaxSegs(l.vpcLink, 1); err != nil {
		return fmt.Errorf("limit gso on %s: %w", vpcIfc, err)
	}
	// Up before addressing: an IPv6 address added to a down link joins its
	// solicited-node group late, and the first neighbour solicitation for
	// it is lost (a one-second stall on the first IPv6 connection).
	if err := l.instNl.LinkSetUp(l.instLink); err != nil {
		return fmt.Errorf("set %s up: %w", instanceIfc, err)
	}
	if err := l.vpcNl.LinkSetUp(l.vpcLink); err != nil {
		return fmt.Errorf("set %s up: %w", vpcIfc, err)
	}

	instAddrs := []netip.Prefix{netip.PrefixFrom(InstanceAddr, subnetBits), netip.PrefixFrom(InstanceAddr6, subnet6Bits)}
	vpcAddrs := []netip.Prefix{netip.PrefixFrom(GatewayAddr, subnetBits), netip.PrefixFrom(GatewayAddr6, subnet6Bits)}
	for _, a := range vpcSideAddrs {
		vpcAddrs = append(vpcAddrs, netip.PrefixFrom(a, a.BitLen()))
	}
	if err := addAddrs(l.instNl, l.instLink, instAddrs); err != nil {
		return err
	}
	if err := addAddrs(l.vpcNl, l.vpcLink, vpcAddrs); err != nil {
		return err
	}
	for _, gw := range []netip.Addr{GatewayAddr, GatewayAddr6} {
		r := &netlink.Route{LinkIndex: l.instLink.Attrs().Index, Gw: net.IP(gw.AsSlice())}
		if err := l.instNl.RouteAdd(r); err != nil {
			return fmt.Errorf("add default route via %s: %w", gw, err)
		}
	}
	// Refresh: the MAC and flags are read by IMDS and by callers.
	if l.instLink, err = l.instNl.LinkByIndex(l.instLink.Attrs().Index); err != nil {
		return fmt.Errorf("refresh %s: %w", instanceIfc, err)
	}
	return nil
}

// addAddrs adds addresses without IPv6 duplicate address detection, which
// would leave them unusable ("tentative") for a second or more.
func addAddrs(h *netlink.Handle, link netlink.Link, prefixes []netip.Prefix) error {
	for _, p := range prefixes {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
		if p.Addr().Is6() {
			a.Flags = unix.IFA_F_NODAD
		}
		if err := h.AddrAdd(link, a); err != nil {
			return fmt.Errorf("add %s to %s: %w", p, link.Attrs().Name, err)
		}
	}
	return nil
}
