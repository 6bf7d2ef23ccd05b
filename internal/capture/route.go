package capture

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

var errNoDefaultRoute = errors.New("no default route: name the interface with --interface")

// DefaultRouteInterface names the interface of the IPv4 default route with
// the lowest metric, else of the IPv6 one, from the main routing table.
func DefaultRouteInterface() (string, error) {
	var errs []error
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := netlink.RouteListFiltered(family, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
		if err != nil {
			errs = append(errs, fmt.Errorf("list routes: %w", err))
			continue
		}
		idx, ok := defaultRouteLink(routes)
		if !ok {
			continue
		}
		l, err := netlink.LinkByIndex(idx)
		if err != nil {
			errs = append(errs, fmt.Errorf("default route's interface %d: %w", idx, err))
			continue
		}
		return l.Attrs().Name, nil
	}
	if len(errs) > 0 {
		return "", fmt.Errorf("find the default route: %w", errors.Join(errs...))
	}
	return "", errNoDefaultRoute
}

// defaultRouteLink picks the default route (no destination, or a /0) with
// the lowest metric that leaves through an interface other than loopback
// (the kernel's IPv6 "unreachable" default sits on lo), and returns that
// interface's index. A multipath route leaves through its first next hop.
func defaultRouteLink(routes []netlink.Route) (index int, ok bool) {
	best := -1
	for _, r := range routes {
		if r.Dst != nil {
			if ones, _ := r.Dst.Mask.Size(); ones != 0 {
				continue
			}
		}
		if r.Type != unix.RTN_UNICAST {
			continue
		}
		link := r.LinkIndex
		if link == 0 && len(r.MultiPath) > 0 {
			link = r.MultiPath[0].LinkIndex
		}
		if link <= 1 { // none, or lo (LOOPBACK_IFINDEX is 1 in every namespace)
			continue
		}
		if best < 0 || r.Priority < best {
			best, index, ok = r.Priority, link, true
		}
	}
	return index, ok
}
