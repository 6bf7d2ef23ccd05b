//go:build linux

package loader

import (
	"bytes"
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket/layers"

	"github.com/enaprobe/enaprobe/bpf"
	"github.com/enaprobe/enaprobe/bpf/countrules"
	"github.com/enaprobe/enaprobe/internal/monoclock"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/testutil/frames"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

// checkFrame runs one frame through the program and checks every counter it
// moved against the Go reference of the counting rules. A frame the
// kernel's test run refuses fails the test: the deterministic tests build
// only frames real traffic brings (only the fuzz target skips those).
func checkFrame(t testing.TB, tp *testProbe, dir record.Direction, frame []byte, gsoSegs, gsoSize uint32, vpc netip.Addr) countrules.Packet {
	t.Helper()
	ref, err := checkFrameOrRefused(t, tp, dir, frame, gsoSegs, gsoSize, vpc)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// checkFrameOrRefused is checkFrame returning errKernelRefused for a frame
// the kernel's test run refuses, so that the fuzz target can skip it.
func checkFrameOrRefused(t testing.TB, tp *testProbe, dir record.Direction, frame []byte, gsoSegs, gsoSize uint32, vpc netip.Addr) (countrules.Packet, error) {
	t.Helper()
	tp.deleteFlows(t)
	tp.clearBuckets(t)
	tp.imdsEvents(t)
	tp.linkLocalPayloads(t)
	before := tp.read(t)
	fromNs := monoclock.Now()
	if err := tp.tryRun(dir, frame, gsoSegs, gsoSize); err != nil {
		return countrules.Packet{}, err
	}
	toNs := monoclock.Now()
	after := tp.read(t)
	ref := countrules.Count(frame, gsoSegs, gsoSize, vpc)
	w := ref.Wire
	checkIMDS(t, tp, dir, frame, vpc)
	checkLinkLocalPayload(t, tp, dir, frame, vpc)

	for d := range after.totals {
		for c := range after.totals[d].Packets {
			var wantP, wantB uint64
			if record.Direction(d) == dir && record.Class(c) == ref.Class {
				wantP, wantB = uint64(w.Packets), uint64(w.Bytes)
			}
			if got := after.totals[d].Packets[c] - before.totals[d].Packets[c]; got != wantP {
				t.Errorf("%s %s packets: got %d, want %d", record.Direction(d), record.Class(c), got, wantP)
			}
			if got := after.totals[d].Bytes[c] - before.totals[d].Bytes[c]; got != wantB {
				t.Errorf("%s %s bytes: got %d, want %d", record.Direction(d), record.Class(c), got, wantB)
			}
		}
	}
	var wantSyn uint64
	if ref.SYN {
		wantSyn = 1
	}
	if got := after.totals[dir].Syns - before.totals[dir].Syns; got != wantSyn {
		t.Errorf("syns: got %d, want %d", got, wantSyn)
	}
	if after.loss != before.loss {
		t.Errorf("loss moved: %v -> %v", before.loss, after.loss)
	}

	b := after.bucket[dir]
	wantB := record.Bucket{Packets: uint64(w.Packets), Bytes: uint64(w.Bytes), SYNs: wantSyn}
	if i := ref.Service.Index(); i >= 0 {
		wantB.LinkLocal[i] = uint64(w.Packets)
	}
	if b != wantB {
		t.Errorf("bucket: got %+v, want %+v", b, wantB)
	}

	sizes, supers := w.SizeCounts()
	for i := range sizes {
		if got := after.sizes[dir][i] - before.sizes[dir][i]; got != sizes[i] {
			t.Errorf("size class %s: got %d, want %d", record.SizeClassNames[i], got, sizes[i])
		}
	}
	if got := after.supers[dir] - before.supers[dir]; got != supers {
		t.Errorf("super-packets: got %d, want %d", got, supers)
	}

	if !ref.IsIP {
		if n := tp.countFlows(t); n != 0 {
			t.Errorf("non-IP frame made %d flows", n)
		}
		return ref, nil
	}
	v, ok := tp.flow(t, ref.Key)
	if !ok {
		t.Fatalf("no flow %s in the map", ref.Key)
	}
	lo, hi := w.MinMaxSize()
	if v.Packets != uint64(w.Packets) || v.Bytes != uint64(w.Bytes) || v.Syns != uint32(wantSyn) ||
		v.MinSize != lo || v.MaxSize != hi || v.TcpFlags != ref.TCPFlags || v.Dirs != 1<<dir ||
		record.Service(v.Service) != ref.Service {
		t.Errorf("flow %s: got %+v, want packets %d bytes %d syns %d sizes %d-%d flags %#x dir %s service %s",
			ref.Key, v, w.Packets, w.Bytes, wantSyn, lo, hi, ref.TCPFlags, dir, ref.Service)
	}
	// The echo's age: one packet, so least and greatest alike, between
	// the clock's readings around the run.
	echoed := v.ImpactFlags&uint8(bpf.ProbeImpactFlagIMPACT_ECHO_GEN) != 0
	if echoed != (ref.Echo && ref.Class == record.ClassTCP) {
		t.Errorf("flow %s: echo ages kept %v, the reference's echo %v (class %s)", ref.Key, echoed, ref.Echo, ref.Class)
	} else if echoed {
		lo, hi := countrules.MsOf(uint64(fromNs))-ref.TSEcr, countrules.MsOf(uint64(toNs))-ref.TSEcr
		if v.EchoAgeMinMs != v.EchoAgeMaxMs || record.EchoRiseMs(lo, v.EchoAgeMinMs) < 0 || record.EchoRiseMs(v.EchoAgeMinMs, hi) < 0 {
			t.Errorf("flow %s: echo ages %d-%d, want one age in [%d, %d]", ref.Key, v.EchoAgeMinMs, v.EchoAgeMaxMs, lo, hi)
		}
	}
	return ref, nil
}

// checkIMDS checks the IMDS event of the frame just run against the Go
// reference: the same one, or none.
func checkIMDS(t testing.TB, tp *testProbe, dir record.Direction, frame []byte, vpc netip.Addr) {
	t.Helper()
	evs := tp.imdsEvents(t)
	want, ok := countrules.IMDS(frame, dir, vpc)
	if !ok {
		if len(evs) != 0 {
			t.Errorf("imds: got %d events (%+v), want none", len(evs), evs[0])
		}
		return
	}
	if len(evs) != 1 {
		t.Fatalf("imds: got %d events, want %+v", len(evs), want)
	}
	e := evs[0]
	got := countrules.IMDSEvent{Kind: record.IMDSKind(e.Kind), Key: flowKey(e.Key), TTL: e.Ttl}
	if got != want || record.Direction(e.Dir) != dir || e.TsNs == 0 {
		t.Errorf("imds: got %+v dir %d at %d, want %+v dir %s", got, e.Dir, e.TsNs, want, dir)
	}
}

// checkLinkLocalPayload checks the payload event of the frame just run
// against the Go reference: the same one, or none.
func checkLinkLocalPayload(t testing.TB, tp *testProbe, dir record.Direction, frame []byte, vpc netip.Addr) {
	t.Helper()
	evs := tp.linkLocalPayloads(t)
	want, ok := countrules.LinkLocalPayload(frame, dir, vpc)
	if !ok {
		if len(evs) != 0 {
			t.Errorf("link-local payload: got %d events (%+v), want none", len(evs), linkLocalPayload("", evs[0]))
		}
		return
	}
	if len(evs) != 1 {
		t.Fatalf("link-local payload: got %d events, want %+v", len(evs), want)
	}
	got := linkLocalPayload("", evs[0])
	if got.Service != want.Service || got.Key != want.Key || got.Len != want.Len || got.IMDSKind != want.IMDSKind ||
		got.TCPSeq != want.TCPSeq || !bytes.Equal(got.Data, want.Data) || got.Direction != dir || got.TimeNs == 0 {
		t.Errorf("link-local payload: got %+v, want %+v dir %s", got, want, dir)
	}
}

// TestDatapathLinkLocalPayload runs the link-local payload cases through
// the program against the reference, and the reference against the cases.
func TestDatapathLinkLocalPayload(t *testing.T) {
	if len(bpf.ProbeLlPayloadEvent{}.Data) != record.LinkLocalPayloadBytes {
		t.Fatalf("LL_PAYLOAD_MAX is %d, record.LinkLocalPayloadBytes %d", len(bpf.ProbeLlPayloadEvent{}.Data), record.LinkLocalPayloadBytes)
	}
	vpc := netip.MustParseAddr("10.1.0.2")
	opts := testOptions()
	opts.VPCResolver = vpc
	tp := newTestProbe(t, opts)
	for _, c := range frames.LinkLocal(t, net.IP(vpc.AsSlice())) {
		t.Run(c.Name, func(t *testing.T) {
			want, ok := countrules.LinkLocalPayload(c.Frame, c.Dir, vpc)
			if ok != (c.Service != record.ServiceNone) || want.Service != c.Service || len(want.Data) != c.Bytes {
				t.Fatalf("reference: got %+v %v, want service %s, %d bytes", want, ok, c.Service, c.Bytes)
			}
			checkFrame(t, tp, c.Dir, c.Frame, 0, 0, vpc)
		})
	}
}

// TestLinkLocalPayloadCap sends more DNS queries than the per-second cap:
// every one is either an event or counted as loss, and the cap holds within
// a second (the sends may straddle one turn of a second: twice the cap).
func TestLinkLocalPayloadCap(t *testing.T) {
	const rate, sent = 3, 10
	opts := testOptions()
	opts.LinkLocalPayloadRate = rate
	tp := newTestProbe(t, opts)
	frame := frames.LinkLocal(t, net.IPv4(10, 1, 0, 2))[0].Frame
	before := tp.read(t)
	for range sent {
		if err := tp.tryRun(record.Egress, frame, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	got := len(tp.linkLocalPayloads(t))
	lost := tp.read(t).loss[bpf.ProbeLossKindLOSS_LL_PAYLOAD] - before.loss[bpf.ProbeLossKindLOSS_LL_PAYLOAD]
	if uint64(got)+lost != sent || got < rate || got > 2*rate {
		t.Errorf("%d sent at a cap of %d/s: %d events, %d counted lost", sent, rate, got, lost)
	}

	opts.LinkLocalPayloadRate = 0
	off := newTestProbe(t, opts)
	if err := off.tryRun(record.Egress, frame, 0, 0); err != nil {
		t.Fatal(err)
	}
	if n := len(off.linkLocalPayloads(t)); n != 0 {
		t.Errorf("rate 0: %d events, want none", n)
	}
}

// TestDatapathIMDS runs IMDS packets of each kind and their near misses
// through the program: each must give the event the reference names, and
// the reference the one the case names (so a bug shared by both fails).
func TestDatapathIMDS(t *testing.T) {
	tp := newTestProbe(t, testOptions())
	for _, c := range frames.IMDS(t) {
		t.Run(c.Name, func(t *testing.T) {
			want, ok := countrules.IMDS(c.Frame, c.Dir, netip.Addr{})
			if ok != (c.Kind != 0) || want != (countrules.IMDSEvent{Kind: c.Kind, Key: c.Key, TTL: c.TTL}) {
				t.Fatalf("reference: got %+v %v, want kind %s key %s ttl %d", want, ok, c.Kind, c.Key, c.TTL)
			}
			checkFrame(t, tp, c.Dir, c.Frame, 0, 0, netip.Addr{})
		})
	}
}

func TestDatapathParsePaths(t *testing.T) {
	for _, mode := range bucketModes(t) {
		t.Run(mode.String(), func(t *testing.T) {
			opts := testOptions()
			opts.Buckets = mode
			testParsePaths(t, newTestProbe(t, opts))
		})
	}
}

func testParsePaths(t *testing.T, tp *testProbe) {
	udp4 := udpFrame(t, v4A, v4B, 1000, 2000, 18)
	frag4First, frag4Later := ipv4Fragments(t)
	frag6First, frag6Later := ipv6Fragments(t)
	ext6 := ipv6ExtFrame(t)
	tcp4 := tcpFrame(t, v4A, v4B, 40000, 443, false, true, 1448)

	cases := []struct {
		name  string
		frame []byte
		dir   record.Direction
		// what the reference must say, checked so that a bug shared by the
		// program and the reference still fails
		class record.Class
		key   string
	}{
		{"ipv4 udp", udp4, record.Egress, record.ClassUDP, "udp 10.1.0.1:1000 -> 10.1.0.2:2000"},
		{"ipv4 udp ingress", udp4, record.Ingress, record.ClassUDP, "udp 10.1.0.1:1000 -> 10.1.0.2:2000"},
		{"ipv4 tcp syn", tcpFrame(t, v4A, v4B, 40000, 443, true, false, 0), record.Egress, record.ClassTCP, "tcp 10.1.0.1:40000 -> 10.1.0.2:443"},
		{"ipv4 tcp syn-ack", tcpFrame(t, v4B, v4A, 443, 40000, true, true, 0), record.Ingress, record.ClassTCP, "tcp 10.1.0.2:443 -> 10.1.0.1:40000"},
		{"ipv4 tcp 1500", tcp4, record.Egress, record.ClassTCP, "tcp 10.1.0.1:40000 -> 10.1.0.2:443"},
		{"ipv4 options", ipv4OptionsFrame(t), record.Egress, record.ClassUDP, "udp 10.1.0.1:5353 -> 10.1.0.2:5354"},
		{"ipv4 first fragment", frag4First, record.Egress, record.ClassUDP, "udp 10.1.0.1:6000 -> 10.1.0.2:6001"},
		{"ipv4 later fragment", frag4Later, record.Egress, record.ClassUDP, "udp 10.1.0.1:0 -> 10.1.0.2:0"},
		{"ipv6 udp", udpFrame(t, v6A, v6B, 53000, 53, 40), record.Egress, record.ClassUDP, "udp [fd12::1]:53000 -> [fd12::2]:53"},
		{"ipv6 tcp syn", tcpFrame(t, v6A, v6B, 41000, 80, true, false, 0), record.Egress, record.ClassTCP, "tcp [fd12::1]:41000 -> [fd12::2]:80"},
		{"ipv6 extension headers", ext6, record.Ingress, record.ClassTCP, "tcp [fd12::1]:7000 -> [fd12::2]:443"},
		{"ipv6 first fragment", frag6First, record.Egress, record.ClassUDP, "udp [fd12::1]:8000 -> [fd12::2]:8001"},
		{"ipv6 later fragment", frag6Later, record.Egress, record.ClassUDP, "udp [fd12::1]:0 -> [fd12::2]:0"},
		{"802.1Q", vlanFrame(t, layers.EthernetTypeDot1Q), record.Egress, record.ClassUDP, "udp 10.1.0.1:4000 -> 10.1.0.2:4001"},
		{"802.1ad QinQ", vlanFrame(t, layers.EthernetTypeQinQ, layers.EthernetTypeDot1Q), record.Ingress, record.ClassUDP, "udp 10.1.0.1:4000 -> 10.1.0.2:4001"},
		{"icmp time exceeded to imds", icmpFrame(t), record.Egress, record.ClassICMP, "icmp 10.1.0.1:11 -> 169.254.169.254:0"},
		{"icmpv6 echo", icmpv6Frame(t), record.Egress, record.ClassICMP, "icmpv6 [fd12::1]:128 -> [fd12::2]:0"},
		{"arp", arpFrame(t), record.Egress, record.ClassOther, ""},
		{"gre", greFrame(t), record.Egress, record.ClassOther, "ip47 10.1.0.1:0 -> 10.1.0.2:0"},
		// The kernel's test run refuses an untagged IPv4 or IPv6 frame whose
		// IP header is incomplete, so truncated IP headers ride behind a tag.
		{"ethernet header only", arpFrame(t)[:14], record.Egress, record.ClassOther, ""},
		{"truncated ipv4 header", vlanFrame(t, layers.EthernetTypeDot1Q)[:28], record.Egress, record.ClassOther, ""},
		{"truncated udp", udp4[:38], record.Egress, record.ClassOther, "udp 10.1.0.1:0 -> 10.1.0.2:0"},
		{"truncated tcp", tcp4[:50], record.Egress, record.ClassOther, "tcp 10.1.0.1:0 -> 10.1.0.2:0"},
		{"truncated ipv6 ext", ext6[:60], record.Egress, record.ClassOther, "ip0 [fd12::1]:0 -> [fd12::2]:0"},
		{"truncated vlan", vlanFrame(t, layers.EthernetTypeDot1Q)[:16], record.Egress, record.ClassOther, ""},
		{"bad ip version", func() []byte { f := append([]byte(nil), udp4...); f[14] = 0x65; return f }(), record.Egress, record.ClassOther, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ref := checkFrame(t, tp, c.dir, c.frame, 0, 0, netip.Addr{})
			if ref.Class != c.class {
				t.Errorf("class %s, want %s", ref.Class, c.class)
			}
			key := ""
			if ref.IsIP {
				key = ref.Key.String()
			}
			if key != c.key {
				t.Errorf("key %q, want %q", key, c.key)
			}
		})
	}
}

func TestDatapathLinkLocal(t *testing.T) {
	vpc := netip.MustParseAddr("10.20.0.2")
	opts := testOptions()
	opts.VPCResolver = vpc
	tp := newTestProbe(t, opts)
	cases := []struct {
		name string
		dst  net.IP
		dir  record.Direction
		want record.Service
	}{
		{"imds v4", net.IPv4(169, 254, 169, 254), record.Egress, record.ServiceIMDS},
		{"dns v4", net.IPv4(169, 254, 169, 253), record.Egress, record.ServiceDNS},
		{"vpc resolver", net.IP(vpc.AsSlice()), record.Egress, record.ServiceDNS},
		{"ntp v4", net.IPv4(169, 254, 169, 123), record.Egress, record.ServiceNTP},
		{"imds v6", net.ParseIP("fd00:ec2::254"), record.Egress, record.ServiceIMDS},
		{"dns v6", net.ParseIP("fd00:ec2::253"), record.Egress, record.ServiceDNS},
		{"ntp v6", net.ParseIP("fd00:ec2::123"), record.Egress, record.ServiceNTP},
		{"other link-local", net.IPv4(169, 254, 169, 1), record.Egress, record.ServiceNone},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := v4A
			if c.dst.To4() == nil {
				src = v6A
			}
			// a request to the service, and its answer coming back
			req := udpFrame(t, src, c.dst, 33000, 53, 30)
			if ref := checkFrame(t, tp, c.dir, req, 0, 0, vpc); ref.Service != c.want {
				t.Errorf("request service %s, want %s", ref.Service, c.want)
			}
			resp := udpFrame(t, c.dst, src, 53, 33000, 60)
			if ref := checkFrame(t, tp, record.Ingress, resp, 0, 0, vpc); ref.Service != c.want {
				t.Errorf("response service %s, want %s", ref.Service, c.want)
			}
		})
	}
}

// TestDatapathSizeClasses runs a frame of every size class through the
// program. The test run takes frames of at most a page, so the classes above
// 1500 bytes are reached with GSO metadata: a super-packet whose full
// segments are that large.
func TestDatapathSizeClasses(t *testing.T) {
	tp := newTestProbe(t, testOptions())
	for class, size := range []int{60, 100, 200, 400, 1000, 1500} {
		ref := checkFrame(t, tp, record.Egress, udpFrame(t, v4A, v4B, 7100, 7101, size-28), 0, 0, netip.Addr{})
		if got := record.SizeClassOf(int(ref.Wire.SegSize)); got != class {
			t.Errorf("%d-byte packet in class %d, want %d", size, got, class)
		}
	}
	// Two segments: one full of gso_size, one short.
	for _, c := range []struct {
		gsoSize uint32
		class   int
	}{{1501 - 28, 6}, {9001 - 28, 6}, {9002 - 28, 7}} {
		frame := udpFrame(t, v4A, v4B, 7200, 7201, 100)
		// The frame's payload is short; a super-packet claims more
		// segments than fit, and the rules size its full ones by gso_size.
		ref := checkFrame(t, tp, record.Egress, frame, 2, c.gsoSize, netip.Addr{})
		if got := record.SizeClassOf(int(ref.Wire.SegSize)); got != c.class {
			t.Errorf("segments of gso_size %d in class %d, want %d", c.gsoSize, got, c.class)
		}
	}
}

func TestDatapathGSO(t *testing.T) {
	tp := newTestProbe(t, testOptions())
	// The test run takes frames of up to a page, so segments are small here;
	// full-size and jumbo super-packets go through the veth tests.
	const mss = 536
	super := tcpFrame(t, v4A, v4B, 40000, 443, false, true, 4*mss+100) // 5 segments, the last short
	udpGSO := udpFrame(t, v6A, v6B, 9000, 9001, 3*1000)
	cases := []struct {
		name          string
		frame         []byte
		segs, size    uint32
		wantPackets   uint32
		wantFullSize  uint32 // layer-3 size of a full segment
		wantSuperPkts bool
	}{
		{"tcp tso 5 segments", super, 5, mss, 5, mss + 40, true},
		{"tcp gso_segs unset", super, 0, mss, 5, mss + 40, true},
		{"udp gso", udpGSO, 3, 1000, 3, 1000 + 48, true},
		{"inconsistent gso_segs", super, 9, mss, 9, mss + 40, true},
		{"gso_size on a small packet", udpFrame(t, v4A, v4B, 1, 2, 100), 1, 1400, 1, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ref := checkFrame(t, tp, record.Egress, c.frame, c.segs, c.size, netip.Addr{})
			if ref.Wire.Packets != c.wantPackets {
				t.Errorf("wire packets %d, want %d", ref.Wire.Packets, c.wantPackets)
			}
			if c.wantSuperPkts && ref.Wire.SegSize != c.wantFullSize {
				t.Errorf("segment size %d, want %d", ref.Wire.SegSize, c.wantFullSize)
			}
			// every segment repeats the headers, and the payload is conserved
			hdr := ref.HdrLen
			payload := uint32(len(c.frame)) - hdr
			if got := ref.Wire.Bytes - ref.Wire.Packets*hdr; got != payload {
				t.Errorf("wire bytes %d hold payload %d, want %d", ref.Wire.Bytes, got, payload)
			}
		})
	}
}

// TestMinimalProgram checks the benchmarks' floor program counts what it
// says it does (a floor that counted nothing would flatter the probe): each
// frame once in its class, with its length, and nothing else. The product
// object carries no floor program.
func TestMinimalProgram(t *testing.T) {
	privtest.RequireRoot(t)
	product, err := Spec(testOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{BenchEmpty, BenchClock, BenchMinimal} {
		if _, ok := product.Programs[name]; ok {
			t.Errorf("the product object carries the benchmark program %s", name)
		}
	}
	if _, ok := product.Variables[bpf.ProbeBenchVarAtomicAdds]; ok {
		t.Error("the product object carries the benchmarks' atomic_adds knob")
	}
	spec, err := BenchSpec(testOptions(), true)
	if err != nil {
		t.Fatal(err)
	}
	tp := newTestProbeOf(t, spec, testOptions())
	udp4 := udpFrame(t, v4A, v4B, 1000, 2000, 18)
	tcp6 := tcpFrame(t, v6A, v6B, 40000, 443, false, true, 1000)
	prog := tp.coll.Programs[BenchMinimal]
	for _, f := range [][]byte{udp4, udp4, tcp6} {
		ret, err := prog.Run(&ebpf.RunOptions{Data: f})
		if err != nil || int32(ret) != -1 {
			t.Fatalf("run enaprobe_minimal: %d, %v", int32(ret), err)
		}
	}
	c := tp.read(t)
	eg := c.totals[record.Egress]
	want := map[record.Class][2]uint64{
		record.ClassUDP: {2, 2 * uint64(len(udp4))},
		record.ClassTCP: {1, uint64(len(tcp6))},
	}
	for class := range eg.Packets {
		w := want[record.Class(class)]
		if eg.Packets[class] != w[0] || eg.Bytes[class] != w[1] {
			t.Errorf("class %v: %d packets, %d bytes; want %d, %d", record.Class(class), eg.Packets[class], eg.Bytes[class], w[0], w[1])
		}
	}
	if in := c.totals[record.Ingress]; in.Packets != [4]uint64{} {
		t.Errorf("ingress totals %v, want none", in.Packets)
	}
}
