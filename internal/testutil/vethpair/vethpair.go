//go:build linux

// Package vethpair builds two network namespaces joined by a veth pair, for
// tests that push real traffic through the kernel. Names are random, so
// concurrent tests never collide, and Close removes everything.
//
// The pair is quiet on purpose: IPv6 is off and neighbours are static, so
// the only packets on the wire are the ones a test sends.
package vethpair

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/enaprobe/enaprobe/internal/namedns"
)

// Pair is namespace A (the traced host) and namespace B (its peer).
type Pair struct {
	NSA, NSB     string // names under /run/netns
	IfA, IfB     string // veth ends, IfA in NSA and IfB in NSB
	AddrA, AddrB netip.Addr
	MACA, MACB   string

	nsA, nsB *namedns.NS
}

// Options shape the pair.
type Options struct {
	MTU int // 0 keeps the default 1500
	// Subnet third octet, so two pairs in one test get distinct addresses.
	Octet byte
	// BeforeUp, if set, runs inside B's namespace after the pair is made
	// and before its links are up: for settings a driver reads when the
	// link opens (veth enables NAPI at open when GRO is on).
	BeforeUp func(p *Pair) error
}

// New creates the namespaces, the veth pair, addresses 10.201.<octet>.1/24
// (A) and .2 (B), and static neighbour entries.
func New(opts Options) (p *Pair, err error) {
	id := randomID()
	p = &Pair{
		NSA: "enpa" + id, NSB: "enpb" + id, IfA: "enpa" + id, IfB: "enpb" + id,
		AddrA: netip.AddrFrom4([4]byte{10, 201, opts.Octet, 1}),
		AddrB: netip.AddrFrom4([4]byte{10, 201, opts.Octet, 2}),
		MACA:  "02:00:0a:c9:" + fmt.Sprintf("%02x", opts.Octet) + ":01",
		MACB:  "02:00:0a:c9:" + fmt.Sprintf("%02x", opts.Octet) + ":02",
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, p.Close())
			p = nil
		}
	}()
	mtu := opts.MTU
	if mtu == 0 {
		mtu = 1500
	}
	if p.nsA, err = namedns.New(p.NSA); err != nil {
		return p, err
	}
	if p.nsB, err = namedns.New(p.NSB); err != nil {
		return p, err
	}
	// IPv6 off before the links exist: no router or neighbour
	// solicitations among the packets a test counts.
	for _, ns := range []*namedns.NS{p.nsA, p.nsB} {
		if err := ns.SetSysctls(noIPv6); err != nil {
			return p, err
		}
	}
	if err := addVeth(p.nsA, p.IfA, p.MACA, p.nsB, p.IfB, p.MACB, mtu); err != nil {
		return p, err
	}
	if opts.BeforeUp != nil {
		if err := p.nsB.Do(func() error { return opts.BeforeUp(p) }); err != nil {
			return p, fmt.Errorf("before %s is up: %w", p.IfB, err)
		}
	}
	for _, side := range []struct {
		ns              *namedns.NS
		ifname, peerMAC string
		addr, peer      netip.Addr
	}{
		{p.nsA, p.IfA, p.MACB, p.AddrA, p.AddrB},
		{p.nsB, p.IfB, p.MACA, p.AddrB, p.AddrA},
	} {
		err := withLink(side.ns, side.ifname, func(h *netlink.Handle, l netlink.Link) error {
			if err := setUp(h, "lo"); err != nil {
				return err
			}
			if err := h.AddrAdd(l, &netlink.Addr{IPNet: prefix(side.addr, 24)}); err != nil {
				return fmt.Errorf("add %s/24 to %s: %w", side.addr, side.ifname, err)
			}
			if err := h.LinkSetUp(l); err != nil {
				return fmt.Errorf("set %s up: %w", side.ifname, err)
			}
			return setNeigh(h, l, side.peer, side.peerMAC)
		})
		if err != nil {
			return p, err
		}
	}
	if err := waitUp(p.nsA, p.IfA); err != nil {
		return p, err
	}
	return p, waitUp(p.nsB, p.IfB)
}

// waitUp polls until the link is operationally up. The kernel installs a
// link's real qdisc in the same deferred work that sets that state (link
// watch, up to a second after the link came up); until then the link drops
// what it sends, and with static neighbours a test's first packet would
// be lost.
func waitUp(ns *namedns.NS, ifname string) error {
	return withLink(ns, ifname, func(h *netlink.Handle, l netlink.Link) error {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			l, err := h.LinkByIndex(l.Attrs().Index)
			if err != nil {
				return fmt.Errorf("find %s: %w", ifname, err)
			}
			if l.Attrs().OperState == netlink.OperUp {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s in %s not up within 5 s (operational state %s)", ifname, ns.Name, l.Attrs().OperState)
			}
		}
	})
}

var noIPv6 = map[string]string{"net/ipv6/conf/all/disable_ipv6": "1", "net/ipv6/conf/default/disable_ipv6": "1"}

// addVeth makes a veth pair with one end in each namespace.
func addVeth(nsA *namedns.NS, ifA, macA string, nsB *namedns.NS, ifB, macB string, mtu int) error {
	hwA, err := net.ParseMAC(macA)
	if err != nil {
		return err
	}
	hwB, err := net.ParseMAC(macB)
	if err != nil {
		return err
	}
	h, err := nsA.Netlink()
	if err != nil {
		return err
	}
	defer h.Close()
	attrs := netlink.NewLinkAttrs()
	attrs.Name, attrs.HardwareAddr, attrs.MTU = ifA, hwA, mtu
	veth := &netlink.Veth{LinkAttrs: attrs, PeerName: ifB, PeerHardwareAddr: hwB, PeerMTU: uint32(mtu), PeerNamespace: netlink.NsFd(nsB.Handle)}
	if err := h.LinkAdd(veth); err != nil {
		return fmt.Errorf("add veth %s/%s: %w", ifA, ifB, err)
	}
	return nil
}

// withLink runs fn with a netlink handle in ns and the link called ifname.
func withLink(ns *namedns.NS, ifname string, fn func(h *netlink.Handle, l netlink.Link) error) error {
	h, err := ns.Netlink()
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(ifname)
	if err != nil {
		return fmt.Errorf("find %s in %s: %w", ifname, ns.Name, err)
	}
	return fn(h, l)
}

func setUp(h *netlink.Handle, ifname string) error {
	l, err := h.LinkByName(ifname)
	if err != nil {
		return fmt.Errorf("find %s: %w", ifname, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up: %w", ifname, err)
	}
	return nil
}

// setNeigh makes a permanent neighbour entry: no ARP on the pair.
func setNeigh(h *netlink.Handle, l netlink.Link, addr netip.Addr, mac string) error {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return err
	}
	n := &netlink.Neigh{LinkIndex: l.Attrs().Index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
		IP: net.IP(addr.AsSlice()), HardwareAddr: hw}
	if addr.Is6() {
		n.Family = netlink.FAMILY_V6
	}
	if err := h.NeighSet(n); err != nil {
		return fmt.Errorf("neighbour %s on %s: %w", addr, l.Attrs().Name, err)
	}
	return nil
}

func prefix(a netip.Addr, bits int) *net.IPNet {
	return &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(bits, a.BitLen())}
}

// AddPeerAddress puts addr on B's veth end and makes A reach it over the
// link with a static neighbour entry, as if B were that host.
func (p *Pair) AddPeerAddress(addr netip.Addr) error {
	err := withLink(p.nsB, p.IfB, func(h *netlink.Handle, l netlink.Link) error {
		if err := h.AddrAdd(l, &netlink.Addr{IPNet: prefix(addr, addr.BitLen())}); err != nil {
			return fmt.Errorf("add %s to %s: %w", addr, p.IfB, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// B answers from addr to A over its own link.
	return withLink(p.nsA, p.IfA, func(h *netlink.Handle, l netlink.Link) error {
		r := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: prefix(addr, addr.BitLen()), Scope: netlink.SCOPE_LINK}
		if err := h.RouteReplace(r); err != nil {
			return fmt.Errorf("route %s via %s: %w", addr, p.IfA, err)
		}
		return setNeigh(h, l, addr, p.MACB)
	})
}

// Close removes both namespaces; the veth pair goes with them.
func (p *Pair) Close() error {
	var errs []error
	for _, ns := range []*namedns.NS{p.nsA, p.nsB} {
		if ns != nil {
			errs = append(errs, ns.Close())
		}
	}
	return errors.Join(errs...)
}

// Do runs fn on a locked OS thread inside namespace ns. Sockets fn creates
// stay in ns after Do returns, so they can be used from any goroutine.
func Do(ns string, fn func() error) error { return namedns.Do(ns, fn) }

func randomID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Branch is a third namespace C joined to A by a second veth pair, for
// tests that redirect packets from A's interface to another one.
type Branch struct {
	NS       string // C
	IfA, IfC string // the second pair's ends, IfA in A's namespace

	ns *namedns.NS
}

// AddBranch makes C and its link to A; C's end gets mac and addr/24 and
// static neighbour entries for neigh (address to MAC). Close removes it.
func (p *Pair) AddBranch(mac string, addr netip.Addr, neigh map[netip.Addr]string) (b *Branch, err error) {
	id := randomID()
	b = &Branch{NS: "enpc" + id, IfA: "enpx" + id, IfC: "enpc" + id}
	defer func() {
		if err != nil {
			err = errors.Join(err, b.Close())
			b = nil
		}
	}()
	if b.ns, err = namedns.New(b.NS); err != nil {
		return b, err
	}
	for _, ns := range []*namedns.NS{b.ns, p.nsA} {
		if err := ns.SetSysctls(noIPv6); err != nil {
			return b, err
		}
	}
	hwC, err := net.ParseMAC(mac)
	if err != nil {
		return b, err
	}
	h, err := p.nsA.Netlink()
	if err != nil {
		return b, err
	}
	defer h.Close()
	attrs := netlink.NewLinkAttrs()
	attrs.Name = b.IfA
	veth := &netlink.Veth{LinkAttrs: attrs, PeerName: b.IfC, PeerHardwareAddr: hwC, PeerNamespace: netlink.NsFd(b.ns.Handle)}
	if err := h.LinkAdd(veth); err != nil {
		return b, fmt.Errorf("add veth %s/%s: %w", b.IfA, b.IfC, err)
	}
	if err := setUp(h, b.IfA); err != nil {
		return b, err
	}
	if err := withLink(b.ns, b.IfC, func(h *netlink.Handle, l netlink.Link) error {
		if err := setUp(h, "lo"); err != nil {
			return err
		}
		if err := h.AddrAdd(l, &netlink.Addr{IPNet: prefix(addr, 24)}); err != nil {
			return fmt.Errorf("add %s/24 to %s: %w", addr, b.IfC, err)
		}
		if err := h.LinkSetUp(l); err != nil {
			return fmt.Errorf("set %s up: %w", b.IfC, err)
		}
		for a, m := range neigh {
			if err := setNeigh(h, l, a, m); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return b, err
	}
	if err := waitUp(p.nsA, b.IfA); err != nil {
		return b, err
	}
	return b, waitUp(b.ns, b.IfC)
}

// Close removes C; the second pair goes with it.
func (b *Branch) Close() error {
	if b.ns == nil {
		return nil
	}
	return b.ns.Close()
}
