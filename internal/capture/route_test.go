package capture

import (
	"errors"
	"net"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/internal/testutil/vethpair"
)

func TestDefaultRouteLink(t *testing.T) {
	_, net10, _ := net.ParseCIDR("10.0.0.0/16")
	_, any4, _ := net.ParseCIDR("0.0.0.0/0")
	uni := unix.RTN_UNICAST
	for _, c := range []struct {
		name   string
		routes []netlink.Route
		want   int // 0: none
	}{
		{"none", nil, 0},
		{"lowest metric wins", []netlink.Route{
			{LinkIndex: 3, Priority: 200, Type: uni},
			{LinkIndex: 2, Priority: 100, Type: uni},
			{LinkIndex: 4, Dst: net10, Priority: 1, Type: uni},
		}, 2},
		{"a /0 destination is the default", []netlink.Route{{LinkIndex: 5, Dst: any4, Type: uni}}, 5},
		{"the unreachable IPv6 default on lo is not", []netlink.Route{
			{LinkIndex: 1, Priority: 1, Type: unix.RTN_UNREACHABLE},
			{LinkIndex: 1, Priority: 2, Type: uni},
		}, 0},
		{"multipath leaves through its first hop", []netlink.Route{
			{MultiPath: []*netlink.NexthopInfo{{LinkIndex: 7}, {LinkIndex: 8}}, Type: uni},
		}, 7},
		{"only a subnet route", []netlink.Route{{LinkIndex: 2, Dst: net10, Type: uni}}, 0},
	} {
		got, ok := defaultRouteLink(c.routes)
		if !ok {
			got = 0
		}
		if got != c.want || ok != (c.want != 0) {
			t.Errorf("%s: interface %d (%v), want %d", c.name, got, ok, c.want)
		}
	}
}

// TestDefaultRouteInterface reads the routing table of a namespace the test
// builds: none, then a default route over the veth.
func TestDefaultRouteInterface(t *testing.T) {
	if testing.Short() {
		t.Skip("needs root and network namespaces")
	}
	pair := vethpair.ForTest(t, vethpair.Options{Octet: 61})
	err := vethpair.Do(pair.NSA, func() error {
		if name, err := DefaultRouteInterface(); !errors.Is(err, errNoDefaultRoute) {
			t.Errorf("no default route: got %q, %v; want errNoDefaultRoute", name, err)
		}
		link, err := netlink.LinkByName(pair.IfA)
		if err != nil {
			return err
		}
		gw := net.IP(pair.AddrB.AsSlice())
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Gw: gw}); err != nil {
			return err
		}
		name, err := DefaultRouteInterface()
		if err != nil || name != pair.IfA {
			t.Errorf("DefaultRouteInterface = %q, %v; want %s", name, err, pair.IfA)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
