package ena

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/testutil/privtest"

	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/record"
)

const payload = "enaprobe" // 8 bytes: 36-byte IPv4 UDP datagrams

// sendUDP sends n datagrams from nsA to a socket in nsB, one at a time,
// each waited for, so all n have been received when it returns.
func (p *vethPair) sendUDP(tb testing.TB, n int) {
	tb.Helper()
	var rx, tx *net.UDPConn
	err := inNetns(p.nsB, func() (err error) {
		rx, err = net.ListenUDP("udp4", &net.UDPAddr{IP: p.addrB.AsSlice()})
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	defer rx.Close()
	err = inNetns(p.nsA, func() (err error) {
		tx, err = net.ListenUDP("udp4", &net.UDPAddr{IP: p.addrA.AsSlice()})
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Close()

	dst := rx.LocalAddr().(*net.UDPAddr)
	buf := make([]byte, 64)
	if err := rx.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		if _, err := tx.WriteToUDP([]byte(payload), dst); err != nil {
			tb.Fatalf("send datagram %d: %v", i, err)
		}
		if _, _, err := rx.ReadFromUDP(buf); err != nil {
			tb.Fatalf("datagram %d of %d not received: %v", i+1, n, err)
		}
	}
}

func TestEthtoolSourceVeth(t *testing.T) {
	p := newVethPair(t)
	src := sourceIn(t, p.nsA, p.linkA)
	if src.Kind() != "ethtool" || src.Interface() != p.linkA {
		t.Errorf("kind %q, interface %q", src.Kind(), src.Interface())
	}
	values, err := src.Read()
	if err != nil {
		t.Fatal(err)
	}
	// veth reports the index of its peer, in the peer's namespace.
	peer := ifindexIn(t, p.nsB, p.linkB)
	if got, ok := values["peer_ifindex"]; !ok || got != uint64(peer) {
		t.Errorf("peer_ifindex = %d (present %v), want %d", got, ok, peer)
	}
	for _, name := range []string{"rx_queue_0_xdp_packets", "rx_queue_0_xdp_bytes", "tx_queue_0_xdp_xmit"} {
		if _, ok := values[name]; !ok {
			t.Errorf("%s absent from %v", name, values)
		}
	}
	for _, name := range counters.ENACounters {
		if _, ok := values[name]; ok {
			t.Errorf("veth reports ENA counter %s", name)
		}
	}
	// Stats reads any interface of the handle's namespace.
	other := sourceIn(t, p.nsA, "lo")
	if v, err := other.Stats(p.linkA); err != nil || v["peer_ifindex"] != uint64(peer) {
		t.Errorf("Stats(%s) through another source = %v, %v", p.linkA, v, err)
	}
}

func TestDriverInfoVeth(t *testing.T) {
	p := newVethPair(t)
	src := sourceIn(t, p.nsA, p.linkA)
	driver, version, err := src.DriverInfo(p.linkA)
	if err != nil {
		t.Fatal(err)
	}
	if driver != "veth" || version == "" {
		t.Errorf("driver %q version %q, want veth and a version", driver, version)
	}
	if IsENA(driver) {
		t.Error("IsENA(veth) = true")
	}
	// The package function opens its socket in the caller's namespace.
	var pkgDriver string
	err = inNetns(p.nsB, func() (err error) {
		pkgDriver, _, err = DriverInfo(p.linkB)
		return err
	})
	if err != nil || pkgDriver != "veth" {
		t.Errorf("DriverInfo(%s) in its namespace = %q, %v", p.linkB, pkgDriver, err)
	}
}

func TestIsENA(t *testing.T) {
	for driver, want := range map[string]bool{"ena": true, "veth": false, "virtio_net": false, "": false, "ENA": false, "ixgbevf": false} {
		if IsENA(driver) != want {
			t.Errorf("IsENA(%q) = %v", driver, !want)
		}
	}
}

func TestEthtoolSourceCountsReceivedPackets(t *testing.T) {
	p := newVethPair(t)
	src := sourceIn(t, p.nsB, p.linkB)
	p.sendUDP(t, 1) // resolves ARP, so only the datagrams below cross next
	before, err := src.Read()
	if err != nil {
		t.Fatal(err)
	}
	const n = 25
	p.sendUDP(t, n)
	after, err := src.Read()
	if err != nil {
		t.Fatal(err)
	}
	if d := after["rx_queue_0_xdp_packets"] - before["rx_queue_0_xdp_packets"]; d != n {
		t.Errorf("rx_queue_0_xdp_packets rose by %d, want %d (before %v, after %v)", d, n, before, after)
	}
	// Bytes are counted from the IP header: 20 + 8 + payload.
	if d := after["rx_queue_0_xdp_bytes"] - before["rx_queue_0_xdp_bytes"]; d != n*uint64(20+8+len(payload)) {
		t.Errorf("rx_queue_0_xdp_bytes rose by %d, want %d", d, n*(20+8+len(payload)))
	}
	if after["rx_queue_0_drops"] != before["rx_queue_0_drops"] {
		t.Errorf("drops %d -> %d", before["rx_queue_0_drops"], after["rx_queue_0_drops"])
	}
}

func TestEthtoolSourceMatchesEthtoolBinary(t *testing.T) {
	privtest.RequireRoot(t, "ip", "ethtool")
	p := newVethPair(t)
	src := sourceIn(t, p.nsA, p.linkA)
	out, err := exec.Command("ip", "netns", "exec", p.nsA, "ethtool", "-S", p.linkA).CombinedOutput()
	if err != nil {
		t.Fatalf("ethtool -S: %v: %s", err, out)
	}
	want, err := counters.ParseEthtoolS(strings.NewReader(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := src.Read()
	if err != nil {
		t.Fatal(err)
	}
	// Nothing crosses the pair meanwhile, so every value is the same.
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ioctl read %v\nethtool -S  %v", got, want)
	}
}

func TestEthtoolSourceMissingInterface(t *testing.T) {
	const name = "enpnosuchif0"
	src, err := NewEthtoolSource(name)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	_, err = src.Read()
	if !errors.Is(err, unix.ENODEV) || !strings.Contains(err.Error(), name) {
		t.Errorf("read of a missing interface: %v, want ENODEV naming it", err)
	}
	if _, _, err := DriverInfo(name); !errors.Is(err, unix.ENODEV) {
		t.Errorf("driver info of a missing interface: %v, want ENODEV", err)
	}
	if _, err := DescribeInterface(name); err == nil {
		t.Error("described a missing interface")
	}
	// Loopback has no statistics at all.
	if v, err := src.Stats("lo"); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("stats of lo: %v, %v; want EOPNOTSUPP", v, err)
	}
}

func TestDescribeInterfaceVeth(t *testing.T) {
	p := newVethPair(t)
	var info record.InterfaceInfo
	err := inNetns(p.nsA, func() (err error) {
		info, err = DescribeInterface(p.linkA)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := record.InterfaceInfo{Name: p.linkA, Index: ifindexIn(t, p.nsA, p.linkA), Driver: "veth", DriverVersion: info.DriverVersion, ENA: false, MTU: 1500}
	if info != want || info.DriverVersion == "" {
		t.Errorf("DescribeInterface = %+v, want %+v", info, want)
	}
}

func TestHasAll(t *testing.T) {
	old, err := NewFileSource("../../testdata/ethtool/ena-2.2.10.txt").Read()
	if err != nil {
		t.Fatal(err)
	}
	if !hasAll(old, counters.AllowanceExceeded) {
		t.Error("ENA 2.2.10 stats lack an allowance counter")
	}
	if hasAll(old, counters.ENACounters) {
		t.Error("ENA 2.2.10 stats have every ENA counter")
	}
}

func TestEthtoolSourceClosed(t *testing.T) {
	src, err := NewEthtoolSource("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if err := src.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if _, err := src.Read(); !errors.Is(err, errClosed) {
		t.Errorf("read after close: %v", err)
	}
	if _, _, err := src.DriverInfo("lo"); !errors.Is(err, errClosed) {
		t.Errorf("driver info after close: %v", err)
	}
}

func TestSamplerEthtoolVeth(t *testing.T) {
	p := newVethPair(t)
	src := sourceIn(t, p.nsB, p.linkB)
	s, err := NewSampler(p.linkB, src, 2*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	const rxName = "rx_queue_0_xdp_packets"
	var (
		mu      sync.Mutex
		samples []record.CounterSample
	)
	first := make(chan struct{})
	allSeen := make(chan struct{}) // a sample shows the 20 datagrams
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx, func(cs record.CounterSample) {
			mu.Lock()
			defer mu.Unlock()
			samples = append(samples, cs)
			switch {
			case len(samples) == 1:
				close(first)
			case cs.Values[rxName] == samples[0].Values[rxName]+20:
				select {
				case <-allSeen:
				default:
					close(allSeen)
				}
			}
		})
	}()
	<-first // a baseline before any datagram
	p.sendUDP(t, 20)
	select {
	case <-allSeen:
	case <-time.After(5 * time.Second):
		t.Error("no sample showed the 20 datagrams within 5 s")
	}
	cancel()
	<-done

	if len(samples) < 2 {
		t.Fatalf("%d samples", len(samples))
	}
	for _, cs := range samples {
		if cs.Err != "" || cs.Values["peer_ifindex"] == 0 || cs.BeforeNs > cs.AfterNs {
			t.Fatalf("bad sample %+v of %d", cs, len(samples))
		}
	}
	// The received datagrams show up as jumps (ARP is not counted).
	ch := counters.Diff(samples)
	if got := ch.Totals[counters.Key{Interface: p.linkB, Name: rxName}]; got != 20 {
		t.Errorf("total rx_queue_0_xdp_packets = %d, want 20", got)
	}
	if len(ch.Resets) != 0 || len(ch.Failed) != 0 {
		t.Errorf("resets %v, failed %v", ch.Resets, ch.Failed)
	}
}

func BenchmarkEthtoolRead(b *testing.B) {
	p := newVethPair(b)
	src := sourceIn(b, p.nsA, p.linkA)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := src.Read(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReadLatencyVeth measures the ethtool ioctl read path (ETHTOOL_GSTATS
// through EthtoolSource and the Sampler's stamps) on a veth, 2000 reads
// back to back, and logs its distribution: the number serve's default
// read interval is chosen from (docs/serve.md, "ENA counter reads").
// On veth no device answers; on ENA each read adds the device's admin
// command, which the driver waits for.
func TestReadLatencyVeth(t *testing.T) {
	p := newVethPair(t)
	src := sourceIn(t, p.nsA, p.linkA)
	s, err := NewSampler(p.linkA, src, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	samples := make([]record.CounterSample, 0, 2000)
	for range cap(samples) {
		cs := s.Sample()
		if cs.Err != "" {
			t.Fatalf("read: %s", cs.Err)
		}
		samples = append(samples, cs)
	}
	lat := counters.Latency(samples)
	d := make([]int64, len(samples))
	for i, cs := range samples {
		d[i] = cs.AfterNs - cs.BeforeNs
	}
	slices.Sort(d)
	p99 := time.Duration(d[len(d)*99/100])
	t.Logf("ethtool read on veth, %d reads: min %v, median %v, p99 %v, max %v; at serve's 1 s interval the reads take %.4f%% of the time",
		lat.Reads, lat.Min, lat.Median, p99, lat.Max, 100*float64(lat.Median)/float64(time.Second))
}
