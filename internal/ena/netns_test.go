package ena

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/internal/testutil/vethpair"
)

// vethPair is a veth pair between two network namespaces made for one test
// (vethpair): linkA in nsA, linkB in nsB. IPv6 is off in both and neighbours
// are static, so the only packets on the pair are the ones the test sends.
type vethPair struct {
	nsA, nsB     string
	linkA, linkB string
	addrA, addrB netip.Addr
}

// newVethPair makes the namespaces and the pair, removed when the test ends.
// linkB receives in NAPI mode (GRO and UDP GRO forwarding on), the mode in
// which veth counts received packets in rx_queue_0_xdp_packets.
func newVethPair(tb testing.TB) *vethPair {
	tb.Helper()
	pair := vethpair.ForTest(tb, vethpair.Options{
		// Set before the link is up: veth enables NAPI at open when GRO is
		// wanted, and counts UDP from a local socket in NAPI only with UDP
		// GRO forwarding on the receiver.
		BeforeUp: func(p *vethpair.Pair) error {
			return enableFeatures(p.IfB, "rx-gro", "rx-udp-gro-forwarding")
		},
	})
	return &vethPair{nsA: pair.NSA, nsB: pair.NSB, linkA: pair.IfA, linkB: pair.IfB, addrA: pair.AddrA, addrB: pair.AddrB}
}

// inNetns runs fn on an OS thread moved into the named network namespace.
// Sockets fn creates stay in that namespace after it returns.
func inNetns(ns string, fn func() error) error { return vethpair.Do(ns, fn) }

// sourceIn opens an EthtoolSource whose socket lives in namespace ns.
func sourceIn(tb testing.TB, ns, ifname string) *EthtoolSource {
	tb.Helper()
	var src *EthtoolSource
	err := inNetns(ns, func() (err error) {
		src, err = NewEthtoolSource(ifname)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { src.Close() })
	return src
}

// ifindexIn is the index of an interface of namespace ns.
func ifindexIn(tb testing.TB, ns, ifname string) int {
	tb.Helper()
	var index int
	err := inNetns(ns, func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		index = ifi.Index
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return index
}

// ethtoolSFeatures is struct ethtool_sfeatures with room for 256 features.
type ethtoolSFeatures struct {
	cmd    uint32
	size   uint32
	blocks [8]struct{ valid, requested uint32 }
}

// enableFeatures turns on features of an interface of the current thread's
// namespace, by their kernel names (`ethtool -K` with ETHTOOL_SFEATURES).
func enableFeatures(ifname string, names ...string) error {
	fd, err := openEthtoolSocket()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	n, ok, err := stringSetSize(fd, ifname, ethSSFeatures)
	if err != nil || !ok {
		return fmt.Errorf("feature names of %s: %v, supported %v", ifname, err, ok)
	}
	var req ethtoolSFeatures
	if n > 32*len(req.blocks) {
		return fmt.Errorf("%d features, more than handled", n)
	}
	gs := new(ethtoolGStrings)
	if n, err = getStrings(fd, ifname, ethSSFeatures, n, gs); err != nil {
		return err
	}
	index := make(map[string]int, n)
	for i := range n {
		index[gstring(gs, i)] = i
	}
	req.cmd, req.size = unix.ETHTOOL_SFEATURES, uint32((n+31)/32)
	for _, name := range names {
		i, ok := index[name]
		if !ok {
			return fmt.Errorf("%s has no feature %q", ifname, name)
		}
		req.blocks[i/32].valid |= 1 << (i % 32)
		req.blocks[i/32].requested |= 1 << (i % 32)
	}
	return ethtoolIoctl(fd, ifname, unsafe.Pointer(&req))
}
