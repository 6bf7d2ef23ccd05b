//go:build linux

package loader

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/internal/monoclock"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
	"github.com/enaprobe/enaprobe/internal/testutil/vethpair"
)

// Integration tests: real traffic through a veth pair in namespaces the test
// creates, traced on A's end.

type trace struct {
	pair  *vethpair.Pair
	probe *Probe
	att   *Attachment
	col   *Collector

	// Drains while the trace runs, as capture does: the bucket ring holds
	// 1.6 s, and a slow machine (a guest under qemu without acceleration)
	// takes longer than that to send and stop.
	stopDrains chan struct{}
	drained    chan error
}

// drainUntilStopped drains tr's collector every 100 ms until stop closes,
// then reports the first error on done. It takes the channels as arguments:
// stopDraining clears tr's fields.
func (tr *trace) drainUntilStopped(stop <-chan struct{}, done chan<- error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var err error
	for {
		select {
		case <-stop:
			done <- err
			return
		case <-tick.C:
			if derr := tr.col.Drain(monoclock.Now(), false); derr != nil && err == nil {
				err = derr
			}
		}
	}
}

// stopDraining ends drainUntilStopped, if it runs.
func (tr *trace) stopDraining() error {
	if tr.stopDrains == nil {
		return nil
	}
	close(tr.stopDrains)
	tr.stopDrains = nil
	return <-tr.drained
}

func startTrace(t *testing.T, pair *vethpair.Pair, mode AttachMode, opts Options) *trace {
	t.Helper()
	tr := &trace{pair: pair}
	err := vethpair.Do(pair.NSA, func() error {
		var err error
		if tr.probe, err = Load(opts); err != nil {
			return err
		}
		if tr.col, err = NewCollector(tr.probe, pair.IfA, monoclock.Now()); err != nil {
			return err
		}
		tr.att, err = Attach(tr.probe, pair.IfA, mode)
		return err
	})
	if errors.Is(err, ebpf.ErrNotSupported) && mode == AttachTCX {
		tr.close()
		privtest.KernelLacks(t, "tcx", 6, 6)
	}
	if err != nil {
		t.Fatalf("start trace: %+v", err)
	}
	if mode != AttachAuto && tr.att.Mode != mode {
		t.Fatalf("attached with %s, want %s", tr.att.Mode, mode)
	}
	t.Cleanup(tr.close)
	tr.stopDrains, tr.drained = make(chan struct{}), make(chan error, 1)
	go tr.drainUntilStopped(tr.stopDrains, tr.drained)
	return tr
}

// close undoes what startTrace did, as far as it got.
func (tr *trace) close() {
	_ = tr.stopDraining()
	if tr.att != nil {
		_ = vethpair.Do(tr.pair.NSA, tr.att.Close)
		tr.att = nil
	}
	if tr.col != nil {
		tr.col.Close()
		tr.col = nil
	}
	if tr.probe != nil {
		tr.probe.Close()
		tr.probe = nil
	}
}

// stop detaches, checks nothing of ours is left on the interface, and
// returns everything collected.
func (tr *trace) stop(t *testing.T) Result {
	t.Helper()
	err := vethpair.Do(tr.pair.NSA, func() error {
		if err := tr.att.Close(); err != nil {
			return err
		}
		tr.att = nil
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if left, err := tr.pair.Leftovers(); err != nil || left != "" {
		t.Fatalf("after detach: %v\n%s", err, left)
	}
	return tr.finish(t)
}

// finish stops the trace's own drains and makes the final drain: what
// the trace counted.
func (tr *trace) finish(t *testing.T) Result {
	t.Helper()
	if err := tr.stopDraining(); err != nil {
		t.Fatalf("drain while tracing: %v", err)
	}
	if err := tr.col.Finish(monoclock.Now()); err != nil {
		t.Fatal(err)
	}
	return tr.col.Result()
}

// udpSink listens on addr inside ns and counts datagrams until closed.
type udpSink struct {
	conn  *net.UDPConn
	got   chan int
	count atomic.Int64 // datagrams so far
}

func newUDPSink(t *testing.T, ns string, addr netip.AddrPort) *udpSink {
	t.Helper()
	s := &udpSink{got: make(chan int, 1)}
	err := vethpair.Do(ns, func() error {
		var err error
		if s.conn, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr)); err != nil {
			return err
		}
		return s.conn.SetReadBuffer(16 << 20)
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 65536)
		n := 0
		for {
			if _, _, err := s.conn.ReadFromUDP(buf); err != nil {
				s.got <- n
				return
			}
			n++
			s.count.Add(1)
		}
	}()
	return s
}

// received returns what the sink got and closes it: once it has want
// datagrams (or, with no want, once nothing arrived for 50 ms), or after
// 5 s. Polled: a slow guest under qemu delivers late.
func (s *udpSink) received(want ...int) int {
	deadline := time.Now().Add(5 * time.Second)
	last, quietSince := s.count.Load(), time.Now()
	for time.Now().Before(deadline) {
		n := s.count.Load()
		if len(want) > 0 && n >= int64(want[0]) {
			break
		}
		if n != last {
			last, quietSince = n, time.Now()
		} else if len(want) == 0 && time.Since(quietSince) >= 50*time.Millisecond {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.conn.Close()
	return <-s.got
}

// sendUDP sends n datagrams of payload bytes from namespace ns to dst.
func sendUDP(t *testing.T, ns string, dst netip.AddrPort, n, payload int) {
	t.Helper()
	err := vethpair.Do(ns, func() error {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
		if err != nil {
			return err
		}
		defer c.Close()
		buf := make([]byte, payload)
		for i := 0; i < n; i++ {
			if _, err := c.Write(buf); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("send udp: %v", err)
	}
}

func TestVethUDPExact(t *testing.T) {
	type run struct {
		attach  AttachMode
		buckets BucketMode
	}
	var runs []run
	for _, b := range bucketModes(t) {
		for _, a := range []AttachMode{AttachTCX, AttachTC} {
			runs = append(runs, run{a, b})
		}
	}
	for _, r := range runs {
		t.Run(string(r.attach)+"/"+r.buckets.String(), func(t *testing.T) {
			pair := vethpair.ForTest(t, vethpair.Options{Octet: 1})
			dst := netip.AddrPortFrom(pair.AddrB, 9000)
			sink := newUDPSink(t, pair.NSB, dst)
			opts := DefaultOptions()
			opts.Buckets = r.buckets
			tr := startTrace(t, pair, r.attach, opts)
			const n, payload = 500, 100
			sendUDP(t, pair.NSA, dst, n, payload)
			if got := sink.received(n); got != n {
				t.Fatalf("sink got %d datagrams, want %d", got, n)
			}
			res := tr.stop(t)

			frame := uint64(14 + 20 + 8 + payload)
			eg := res.Totals[record.Egress]
			if eg.Packets[record.ClassUDP] != n || eg.Bytes[record.ClassUDP] != n*frame {
				t.Errorf("egress udp totals %d packets %d bytes, want %d and %d", eg.Packets[record.ClassUDP], eg.Bytes[record.ClassUDP], n, n*frame)
			}
			if eg.SumPackets() != n {
				t.Errorf("egress saw %d packets in all, want only the %d sent: %+v", eg.SumPackets(), n, eg)
			}
			var bucketPackets, bucketBytes uint64
			for _, b := range res.Series[record.Egress].Buckets {
				bucketPackets += b.Packets
				bucketBytes += b.Bytes
			}
			if bucketPackets != n || bucketBytes != n*frame {
				t.Errorf("egress buckets hold %d packets %d bytes, want %d and %d", bucketPackets, bucketBytes, n, n*frame)
			}
			key := record.FlowKey{Proto: 17, Dst: dst}
			var flow *record.FlowSnapshot
			for i := range res.Flows {
				if f := &res.Flows[i]; f.Key.Proto == 17 && f.Key.Dst == dst {
					flow = f
				}
			}
			if flow == nil {
				t.Fatalf("no snapshot of flow to %s: %+v", key.Dst, res.Flows)
			}
			if flow.Packets != n || flow.Bytes != n*frame || flow.MinSize != 20+8+payload || flow.MaxSize != 20+8+payload {
				t.Errorf("flow %s: %+v", flow.Key, flow.FlowStats)
			}
			if res.Loss != (record.Loss{Interface: pair.IfA}) {
				t.Errorf("loss: %+v", res.Loss)
			}
		})
	}
}

func TestVethSYNsExact(t *testing.T) {
	pair := vethpair.ForTest(t, vethpair.Options{Octet: 2})
	var ln net.Listener
	if err := vethpair.Do(pair.NSB, func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(pair.AddrB, 8080).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	tr := startTrace(t, pair, AttachAuto, DefaultOptions())
	const n = 40
	err := vethpair.Do(pair.NSA, func() error {
		for i := 0; i < n; i++ {
			c, err := net.DialTimeout("tcp", netip.AddrPortFrom(pair.AddrB, 8080).String(), 2*time.Second)
			if err != nil {
				return err
			}
			c.Close()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Each SYN left through egress, and was counted, before its Dial
	// returned; the FIN exchanges still under way add no SYN.
	res := tr.stop(t)
	if got := res.Totals[record.Egress].SYNs; got != n {
		t.Errorf("egress SYNs %d, want %d", got, n)
	}
	if got := res.Totals[record.Ingress].SYNs; got != 0 {
		t.Errorf("ingress SYNs %d, want 0 (SYN-ACKs are not new connections)", got)
	}
	var bucketSYNs, flowSYNs uint64
	for _, b := range res.Series[record.Egress].Buckets {
		bucketSYNs += b.SYNs
	}
	flows := map[record.FlowKey]uint64{}
	for _, f := range res.Flows {
		flows[f.Key] = f.SYNs // snapshots are cumulative: keep the last
	}
	for _, s := range flows {
		flowSYNs += s
	}
	if bucketSYNs != n || flowSYNs != n {
		t.Errorf("SYNs in buckets %d, in flows %d, want %d", bucketSYNs, flowSYNs, n)
	}
}

func TestVethLinkLocalExact(t *testing.T) {
	pair := vethpair.ForTest(t, vethpair.Options{Octet: 3})
	services := []struct {
		addr netip.Addr
		port uint16
		svc  record.Service
		n    int
	}{
		{netip.MustParseAddr("169.254.169.253"), 53, record.ServiceDNS, 120},
		{netip.MustParseAddr("169.254.169.123"), 123, record.ServiceNTP, 30},
		{netip.MustParseAddr("169.254.169.254"), 80, record.ServiceIMDS, 10},
	}
	for _, s := range services {
		if err := pair.AddPeerAddress(s.addr); err != nil {
			t.Fatal(err)
		}
	}
	// B answers every datagram, as the services do.
	var conns []*net.UDPConn
	for _, s := range services {
		var c *net.UDPConn
		if err := vethpair.Do(pair.NSB, func() (err error) {
			c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(s.addr, s.port)))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		go func() {
			buf := make([]byte, 2048)
			for {
				n, from, err := c.ReadFromUDPAddrPort(buf)
				if err != nil {
					return
				}
				_, _ = c.WriteToUDPAddrPort(buf[:n], from)
			}
		}()
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()

	tr := startTrace(t, pair, AttachAuto, DefaultOptions())
	err := vethpair.Do(pair.NSA, func() error {
		for _, s := range services {
			c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(s.addr, s.port)))
			if err != nil {
				return err
			}
			buf := make([]byte, 48)
			for i := 0; i < s.n; i++ {
				if _, err := c.Write(buf); err != nil {
					return err
				}
				_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
				if _, err := c.Read(buf); err != nil {
					return fmt.Errorf("answer %d from %s: %w", i, s.addr, err)
				}
			}
			c.Close()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	res := tr.stop(t)
	for _, s := range services {
		for _, d := range []record.Direction{record.Ingress, record.Egress} {
			var got uint64
			for _, b := range res.Series[d].Buckets {
				got += b.LinkLocal[s.svc.Index()]
			}
			if got != uint64(s.n) {
				t.Errorf("%s %s link-local packets %d, want %d", s.svc, d, got, s.n)
			}
		}
	}
	for _, f := range res.Flows {
		want := wireService(f.Key)
		if f.Service != want {
			t.Errorf("flow %s service %s, want %s", f.Key, f.Service, want)
		}
	}
}

func wireService(k record.FlowKey) record.Service {
	for _, a := range []netip.Addr{k.Dst.Addr(), k.Src.Addr()} {
		switch a.String() {
		case "169.254.169.254":
			return record.ServiceIMDS
		case "169.254.169.253":
			return record.ServiceDNS
		case "169.254.169.123":
			return record.ServiceNTP
		}
	}
	return record.ServiceNone
}

// TestVethBurstTiming sends bursts at known monotonic times and checks the
// buckets put every packet within one bucket of when it was sent.
func TestVethBurstTiming(t *testing.T) {
	pair := vethpair.ForTest(t, vethpair.Options{Octet: 4})
	dst := netip.AddrPortFrom(pair.AddrB, 9100)
	sink := newUDPSink(t, pair.NSB, dst)
	opts := DefaultOptions()
	tr := startTrace(t, pair, AttachAuto, opts)
	type burst struct{ from, to int64 }
	var bursts []burst
	const perBurst = 50
	err := vethpair.Do(pair.NSA, func() error {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
		if err != nil {
			return err
		}
		defer c.Close()
		buf := make([]byte, 200)
		for i := 0; i < 5; i++ {
			time.Sleep(20 * time.Millisecond)
			b := burst{from: monoclock.Now()}
			for j := 0; j < perBurst; j++ {
				if _, err := c.Write(buf); err != nil {
					return err
				}
			}
			b.to = monoclock.Now()
			bursts = append(bursts, b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sink.received(len(bursts) * perBurst)
	res := tr.stop(t)
	width := int64(opts.Bucket)
	var total uint64
	for _, b := range res.Series[record.Egress].Buckets {
		total += b.Packets
		inside := false
		for _, bu := range bursts {
			if b.StartNs+width >= bu.from-width && b.StartNs <= bu.to+width {
				inside = true
			}
		}
		if !inside {
			t.Errorf("bucket at %d holds %d packets outside every burst (±1 bucket): %+v", b.StartNs, b.Packets, bursts)
		}
	}
	if total != uint64(len(bursts)*perBurst) {
		t.Errorf("buckets hold %d packets, want %d", total, len(bursts)*perBurst)
	}
}

// TestVethSizeClasses sends datagrams of one size per class (the edges of
// the 1500 and 9001 classes among them), and a UDP GSO super-packet, over a
// link with an MTU above 9001, and checks the histogram exactly.
func TestVethSizeClasses(t *testing.T) {
	// MTU 9500, so that the class above jumbo frames is reachable too.
	pair := vethpair.ForTest(t, vethpair.Options{Octet: 5, MTU: 9500})
	dst := netip.AddrPortFrom(pair.AddrB, 9200)
	sink := newUDPSink(t, pair.NSB, dst)
	tr := startTrace(t, pair, AttachAuto, DefaultOptions())
	var want [record.NumSizeClasses]uint64
	sent := 0
	for i, size := range []int{60, 100, 200, 400, 1000, 1400, 8000, 9001, 9400} {
		n := i + 1
		sendUDP(t, pair.NSA, dst, n, size-28)
		want[record.SizeClassOf(size)] += uint64(n)
		sent += n
	}
	// One sendmsg of 8 segments of 1000 bytes with UDP_SEGMENT: the veth
	// carries it to tc as one GSO skb.
	const segs, segPayload = 8, 1000
	err := vethpair.Do(pair.NSA, func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_SEGMENT, segPayload); err != nil {
			return fmt.Errorf("set UDP_SEGMENT: %w", err)
		}
		return unix.Sendto(fd, make([]byte, segs*segPayload), 0, &unix.SockaddrInet4{Port: int(dst.Port()), Addr: dst.Addr().As4()})
	})
	if err != nil {
		t.Fatal(err)
	}
	want[record.SizeClassOf(segPayload+28)] += segs
	sent += segs
	if got := sink.received(sent); got != sent {
		t.Fatalf("sink got %d datagrams, want %d", got, sent)
	}
	res := tr.stop(t)
	var got [record.NumSizeClasses]uint64
	var supers uint64
	for _, s := range res.Sizes {
		if s.Direction != record.Egress {
			continue
		}
		for i, n := range s.Counts {
			got[i] += n
		}
		supers += s.SuperPackets
	}
	if got != want {
		t.Errorf("egress size classes %v, want %v (classes %v)", got, want, record.SizeClassNames)
	}
	if supers != 1 {
		t.Errorf("super-packets %d, want 1", supers)
	}
	if p := res.Totals[record.Egress].Packets[record.ClassUDP]; p != uint64(sent) {
		t.Errorf("egress udp packets %d, want %d wire packets", p, sent)
	}
}

// TestStaleFilterRemoved leaves a legacy filter as a killed run would, next
// to another tool's filter on a clsact qdisc we did not create, and checks
// that attach removes only the stale one and close leaves the rest alone.
func TestStaleFilterRemoved(t *testing.T) {
	pair := vethpair.ForTest(t, vethpair.Options{Octet: 6})
	p, err := Load(DefaultOptions())
	if err != nil {
		t.Fatalf("%+v", err)
	}
	defer p.Close()
	dead := deadPID(t)
	listFilters := func() (names []string) {
		out, err := exec.Command("ip", "netns", "exec", pair.NSA, "tc", "filter", "show", "dev", pair.IfA, "egress").CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		for _, f := range strings.Fields(string(out)) {
			if strings.HasPrefix(f, "enaprobe-") || f == "othertool" {
				names = append(names, f)
			}
		}
		return names
	}
	err = vethpair.Do(pair.NSA, func() error {
		if out, err := exec.Command("tc", "qdisc", "add", "dev", pair.IfA, "clsact").CombinedOutput(); err != nil {
			return fmt.Errorf("add clsact: %w: %s", err, out)
		}
		lnk, err := netlink.LinkByName(pair.IfA)
		if err != nil {
			return err
		}
		for _, f := range []struct {
			name string
			prio uint16
		}{{filterOwner{pid: dead, hook: "egress", pidNS: ownPIDNS()}.String(), tcPrio}, {"othertool", 7}} {
			if err := netlink.FilterAdd(&netlink.BpfFilter{
				FilterAttrs: netlink.FilterAttrs{LinkIndex: lnk.Attrs().Index, Parent: netlink.HANDLE_MIN_EGRESS, Handle: 1, Protocol: unix.ETH_P_ALL, Priority: f.prio},
				Fd:          p.objs.EnaprobeEgress.FD(), Name: f.name, DirectAction: true,
			}); err != nil {
				return fmt.Errorf("add filter %s: %w", f.name, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var att *Attachment
	if err := vethpair.Do(pair.NSA, func() (err error) { att, err = Attach(p, pair.IfA, AttachTC); return err }); err != nil {
		t.Fatalf("attach over a stale filter: %v", err)
	}
	live := newFilterOwner("egress", false).String()
	if got := strings.Join(listFilters(), " "); got != "othertool "+live && got != live+" othertool" {
		t.Errorf("filters after attach: %q, want othertool and %s", got, live)
	}
	if err := vethpair.Do(pair.NSA, att.Close); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(listFilters(), " "); got != "othertool" {
		t.Errorf("filters after close: %q, want only othertool", got)
	}
	out, _ := exec.Command("ip", "netns", "exec", pair.NSA, "tc", "qdisc", "show", "dev", pair.IfA).CombinedOutput()
	if !strings.Contains(string(out), "clsact") {
		t.Errorf("close removed a clsact qdisc it did not create: %s", out)
	}
}

// deadPID is the PID of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	// The test binary itself, running no test: guests of the kernel
	// matrix have no coreutils.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}
