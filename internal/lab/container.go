package lab

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/vishvananda/netlink"

	"github.com/enaprobe/enaprobe/internal/namedns"
)

// ContainerPrefix holds the containers' subnets: container n has
// 10.99.n.0/24, the instance end of its veth .1 and the container .2.
var ContainerPrefix = netip.MustParsePrefix("10.99.0.0/16")

// Container is a network namespace behind the lab's instance, as a
// container or pod is behind its host: a veth into the instance, which
// forwards its traffic and masquerades it out of ens5 (nftables), so a
// tracer on ens5 sees it with the instance's address, one hop further
// from the VPC than the instance's own sockets. IPv4 only.
type Container struct {
	ns   *namedns.NS
	Addr netip.Addr // the container's address
	// Veth is the instance end of the container's veth pair.
	Veth string
}

// NetnsPath is the container's namespace under /run/netns.
func (c *Container) NetnsPath() string { return c.ns.Path() }

// Netns is the container's namespace name (ip netns exec NAME ...).
func (c *Container) Netns() string { return c.ns.Name }

// Do runs fn on a locked thread inside the container's namespace.
func (c *Container) Do(fn func() error) error { return c.ns.Do(fn) }

// containerNAT masquerades the containers' traffic leaving the instance.
const containerNAT = `table ip enalab_containers {
	chain post {
		type nat hook postrouting priority srcnat; policy accept;
		ip saddr %s oifname %q masquerade
	}
}
`

// AddContainer makes a container behind the instance. The lab removes it
// on Close.
func (l *Lab) AddContainer() (*Container, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return nil, fmt.Errorf("add container: the lab is closed")
	}
	n := len(l.containers)
	if n > 250 {
		return nil, fmt.Errorf("add container: %d containers already", n)
	}
	base := ContainerPrefix.Addr().As4()
	gw := netip.AddrFrom4([4]byte{base[0], base[1], byte(n), 1})
	addr := netip.AddrFrom4([4]byte{base[0], base[1], byte(n), 2})
	ns, err := namedns.New("enalab-" + l.id + "-ctr" + strconv.Itoa(n))
	if err != nil {
		return nil, fmt.Errorf("add container: %w", err)
	}
	c := &Container{ns: ns, Addr: addr, Veth: "ctr" + strconv.Itoa(n)}
	l.containers = append(l.containers, ns)
	if err := l.wireContainer(c, gw, n == 0); err != nil {
		return nil, fmt.Errorf("add container %s: %w", c.Veth, err)
	}
	return c, nil
}

func (l *Lab) wireContainer(c *Container, gw netip.Addr, first bool) error {
	if err := plugHost(l.instNl, "instance", c, gw); err != nil {
		return err
	}
	if !first {
		return nil
	}
	if err := l.inst.SetSysctls(map[string]string{"net/ipv4/ip_forward": "1"}); err != nil {
		return err
	}
	if _, err := l.inst.Run([]byte(fmt.Sprintf(containerNAT, ContainerPrefix, instanceIfc)), "nft", "-f", "-"); err != nil {
		return fmt.Errorf("load container nat: %w", err)
	}
	return nil
}

// Dial connects from inside the container, as its processes would.
func (c *Container) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	var conn net.Conn
	err := c.Do(func() error {
		var d net.Dialer
		var err error
		conn, err = d.DialContext(ctx, network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dial %s %s from container %s: %w", network, address, c.Addr, err)
	}
	return conn, nil
}

// plugHost wires the namespace of c to parent's namespace by a veth pair,
// c.Veth on parent's side (gw/24) and eth0 on c's (c.Addr/24), c routing
// through gw. side names parent's end in errors.
func plugHost(parent *netlink.Handle, side string, c *Container, gw netip.Addr) error {
	h, err := c.ns.Netlink()
	if err != nil {
		return err
	}
	defer h.Close()
	attrs := netlink.NewLinkAttrs()
	attrs.Name = c.Veth
	if err := parent.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: "eth0", PeerNamespace: netlink.NsFd(c.ns.Handle)}); err != nil {
		return fmt.Errorf("add veth: %w", err)
	}
	end, err := parent.LinkByName(c.Veth)
	if err != nil {
		return fmt.Errorf("find %s: %w", c.Veth, err)
	}
	inner, err := h.LinkByName("eth0")
	if err != nil {
		return fmt.Errorf("find eth0: %w", err)
	}
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo: %w", err)
	}
	for _, step := range []struct {
		what string
		do   func() error
	}{
		{"address the " + side + " end", func() error { return addAddrs(parent, end, []netip.Prefix{netip.PrefixFrom(gw, 24)}) }},
		{"address the far end", func() error { return addAddrs(h, inner, []netip.Prefix{netip.PrefixFrom(c.Addr, 24)}) }},
		// One segment per skb, as on the instance's own link (link.go):
		// a forwarded super-packet is cut to the device's limit only as it
		// leaves the shaper, so it would take one slot of the shaper's
		// queue for tens of packets (a remote sender's whole bunch let in
		// or dropped as one, where on the wire its packets meet the queue
		// one by one).
		{"limit gso on the " + side + " end", func() error { return parent.LinkSetGSOMaxSegs(end, 1) }},
		{"limit gso on the far end", func() error { return h.LinkSetGSOMaxSegs(inner, 1) }},
		{"set the " + side + " end up", func() error { return parent.LinkSetUp(end) }},
		{"set eth0 up", func() error { return h.LinkSetUp(inner) }},
		{"set lo up", func() error { return h.LinkSetUp(lo) }},
		{"route through the " + side, func() error {
			return h.RouteAdd(&netlink.Route{LinkIndex: inner.Attrs().Index, Gw: net.IP(gw.AsSlice())})
		}},
	} {
		if err := step.do(); err != nil {
			return fmt.Errorf("%s: %w", step.what, err)
		}
	}
	return nil
}
