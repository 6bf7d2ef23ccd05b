package ena

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/enaprobe/enaprobe/internal/privtest"

	"golang.org/x/sys/unix"
)

// vethPair is a veth pair between two network namespaces made for one test:
// linkA in nsA, linkB in nsB. IPv6 is off in both, so the only packets on the
// pair are the ones the test sends (and ARP).
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
	privtest.RequireRoot(tb, "ip")
	var raw [4]byte
	if _, err := rand.Read(raw[:]); err != nil {
		tb.Fatal(err)
	}
	id := hex.EncodeToString(raw[:]) // names "enp" + 8 hex + a/b fit IFNAMSIZ
	p := &vethPair{
		nsA: "enp" + id + "a", nsB: "enp" + id + "b",
		linkA: "enp" + id + "a", linkB: "enp" + id + "b",
		addrA: netip.MustParseAddr("10.211.0.1"), addrB: netip.MustParseAddr("10.211.0.2"),
	}
	for _, ns := range []string{p.nsA, p.nsB} {
		runIP(tb, "netns", "add", ns)
		tb.Cleanup(func() {
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
				tb.Errorf("ip netns del %s: %v: %s", ns, err, out)
			}
		})
		if err := inNetns(ns, disableIPv6); err != nil {
			tb.Fatal(err)
		}
	}
	runIP(tb, "link", "add", p.linkA, "netns", p.nsA, "type", "veth", "peer", "name", p.linkB, "netns", p.nsB)
	// Set before the link is up: veth enables NAPI at open when GRO is
	// wanted, and counts UDP from a local socket in NAPI only with UDP GRO
	// forwarding on the receiver.
	err := inNetns(p.nsB, func() error {
		return enableFeatures(p.linkB, "rx-gro", "rx-udp-gro-forwarding")
	})
	if err != nil {
		tb.Fatalf("enable GRO on %s: %v", p.linkB, err)
	}
	runIP(tb, "-n", p.nsA, "addr", "add", p.addrA.String()+"/30", "dev", p.linkA)
	runIP(tb, "-n", p.nsB, "addr", "add", p.addrB.String()+"/30", "dev", p.linkB)
	runIP(tb, "-n", p.nsA, "link", "set", p.linkA, "up")
	runIP(tb, "-n", p.nsB, "link", "set", p.linkB, "up")
	return p
}

func runIP(tb testing.TB, args ...string) {
	tb.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		tb.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// disableIPv6 turns IPv6 off in the current thread's namespace, for the
// links created after it. A kernel without IPv6 has nothing to turn off.
func disableIPv6() error {
	for _, conf := range []string{"all", "default"} {
		err := os.WriteFile("/proc/sys/net/ipv6/conf/"+conf+"/disable_ipv6", []byte("1"), 0)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("disable ipv6: %w", err)
		}
	}
	return nil
}

// inNetns runs fn on an OS thread moved into the named network namespace.
// Sockets fn creates stay in that namespace after it returns.
func inNetns(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		// The thread is unlocked only once back in its namespace; if the
		// way back fails it stays locked and dies with the goroutine
		// rather than serve other goroutines in the wrong namespace.
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		target, err := os.Open("/run/netns/" + ns)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter netns %s: %w", ns, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("leave netns %s: %w", ns, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

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
