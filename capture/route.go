package capture

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// DefaultRouteInterface names the interface of the IPv4 default route with
// the lowest metric, else of the IPv6 one.
func DefaultRouteInterface() (string, error) {
	if f, err := os.Open("/proc/net/route"); err == nil {
		name, err := defaultRoute4(f)
		f.Close()
		if err == nil {
			return name, nil
		}
	}
	f, err := os.Open("/proc/net/ipv6_route")
	if err != nil {
		return "", fmt.Errorf("find the default route: %w", err)
	}
	defer f.Close()
	return defaultRoute6(f)
}

var errNoDefaultRoute = errors.New("no default route: name the interface with --interface")

// defaultRoute4 reads /proc/net/route: Iface Destination Gateway Flags
// RefCnt Use Metric Mask ..., hexadecimal addresses.
func defaultRoute4(r io.Reader) (string, error) {
	best, bestMetric := "", int64(-1)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 8 || f[0] == "Iface" || f[1] != "00000000" || f[7] != "00000000" {
			continue
		}
		flags, err := strconv.ParseUint(f[3], 16, 32)
		if err != nil || flags&1 == 0 { // RTF_UP
			continue
		}
		metric, err := strconv.ParseInt(f[6], 10, 64)
		if err != nil {
			continue
		}
		if bestMetric < 0 || metric < bestMetric {
			best, bestMetric = f[0], metric
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read routes: %w", err)
	}
	if best == "" {
		return "", errNoDefaultRoute
	}
	return best, nil
}

// defaultRoute6 reads /proc/net/ipv6_route: dest destlen src srclen
// nexthop metric refcnt use flags iface.
func defaultRoute6(r io.Reader) (string, error) {
	best, bestMetric := "", uint64(0)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[0] != strings.Repeat("0", 32) || f[1] != "00" || f[9] == "lo" {
			continue
		}
		metric, err := strconv.ParseUint(f[5], 16, 32)
		if err != nil {
			continue
		}
		if best == "" || metric < bestMetric {
			best, bestMetric = f[9], metric
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read routes: %w", err)
	}
	if best == "" {
		return "", errNoDefaultRoute
	}
	return best, nil
}
