//go:build linux

package loader

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/bpf"
	"github.com/enaprobe/enaprobe/bpf/countrules"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/testutil/frames"
	"github.com/enaprobe/enaprobe/internal/testutil/vethpair"
)

// TestVethNonLinearHeaders sends TCP and UDP frames over IPv4 and IPv6 with
// AF_PACKET into both ends of a veth pair and checks that what the trace on
// A counts, by direction, class and flow, is what the Go reference makes of
// the same bytes. A frame that does not fit in a page with the socket's
// headroom is built with only its Ethernet header in the skb's linear part
// and the rest in page fragments (af_packet.c, packet_alloc_skb): on a
// jumbo link (MTU 9001, the VPC default) that is every frame over about 4 kB
// (the 4,170 and 7,306 bytes of issue 23), in both directions, as a driver
// that builds skbs from pages would bring them. The 1500-byte link's frames
// are linear, and are held to the same reference.
func TestVethNonLinearHeaders(t *testing.T) {
	for _, c := range []struct {
		name  string
		mtu   int
		sizes []int
	}{
		{"jumbo", 9001, []int{3054, 4170, 7306, 9015}},
		{"standard", 1500, []int{90, 600, 1514}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pair := vethpair.ForTest(t, vethpair.Options{Octet: 7, MTU: c.mtu})
			tr := startTrace(t, pair, AttachAuto, DefaultOptions())

			var want [record.NumDirections]record.Totals
			wantFlows := map[record.FlowKey]uint64{}
			sent := [record.NumDirections]int{}
			for _, s := range []struct {
				dir     record.Direction
				ns, if_ string
			}{{record.Egress, pair.NSA, pair.IfA}, {record.Ingress, pair.NSB, pair.IfB}} {
				var batch [][]byte
				for i, size := range c.sizes {
					for _, ips := range [][2]net.IP{{frames.V4A, frames.V4B}, {frames.V6A, frames.V6B}} {
						src, dst := ips[0], ips[1]
						if s.dir == record.Ingress {
							src, dst = dst, src
						}
						// One flow per frame: its own source port.
						sport := uint16(30000 + 100*int(s.dir) + i)
						batch = append(batch,
							nonLinearFrame(t, src, dst, sport, true, size),
							nonLinearFrame(t, src, dst, sport, false, size))
					}
				}
				for _, f := range batch {
					ref := countrules.Count(f, 0, 0, netip.Addr{})
					if ref.Class != record.ClassTCP && ref.Class != record.ClassUDP {
						t.Fatalf("the reference makes %s of a %d-byte test frame", ref.Class, len(f))
					}
					want[s.dir].Packets[ref.Class] += uint64(ref.Wire.Packets)
					want[s.dir].Bytes[ref.Class] += uint64(ref.Wire.Bytes)
					wantFlows[ref.Key] += uint64(ref.Wire.Packets)
				}
				sendRaw(t, s.ns, s.if_, batch)
				sent[s.dir] += len(batch)
			}
			// Egress counted each frame before its send returned; ingress
			// counts in the receiving softirq, perhaps later.
			waitCounted(t, tr.probe, record.Ingress, sent[record.Ingress])
			res := tr.stop(t)

			for _, d := range []record.Direction{record.Egress, record.Ingress} {
				got := res.Totals[d]
				if got.Packets != want[d].Packets || got.Bytes != want[d].Bytes {
					t.Errorf("%s totals: packets %v bytes %v, want (Go reference) packets %v bytes %v, by class tcp, udp, icmp, other)",
						d, got.Packets, got.Bytes, want[d].Packets, want[d].Bytes)
				}
			}
			gotFlows := map[record.FlowKey]uint64{}
			for _, f := range res.Flows {
				gotFlows[f.Key] = f.Packets // snapshots are cumulative: keep the last
			}
			for k, n := range wantFlows {
				if gotFlows[k] != n {
					t.Errorf("flow %s: %d packets, want %d", k, gotFlows[k], n)
				}
			}
			if len(gotFlows) != len(wantFlows) {
				t.Errorf("%d flows, want %d", len(gotFlows), len(wantFlows))
			}
		})
	}
}

// nonLinearFrame is a TCP (ACK) or UDP frame of size bytes from src to dst,
// over IPv4 or IPv6 by the family of src.
func nonLinearFrame(t testing.TB, src, dst net.IP, sport uint16, tcp bool, size int) []byte {
	t.Helper()
	ip := 20
	if src.To4() == nil {
		ip = 40
	}
	if tcp {
		return frames.TCP(t, src, dst, sport, 443, false, true, size-14-ip-20)
	}
	return frames.UDP(t, src, dst, sport, 4789, size-14-ip-8)
}

// sendRaw writes each frame as it is to ifname in namespace ns with an
// AF_PACKET socket: through the interface's egress, qdisc and tc included.
func sendRaw(t testing.TB, ns, ifname string, batch [][]byte) {
	t.Helper()
	err := vethpair.Do(ns, func() error {
		ifc, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0) // protocol 0: sends, receives nothing
		if err != nil {
			return fmt.Errorf("af_packet socket: %w", err)
		}
		defer unix.Close(fd)
		to := &unix.SockaddrLinklayer{Ifindex: ifc.Index, Halen: 6}
		for _, f := range batch {
			copy(to.Addr[:], f[:6])
			if err := unix.Sendto(fd, f, 0, to); err != nil {
				return fmt.Errorf("send %d-byte frame on %s: %w", len(f), ifname, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitCounted polls the datapath's totals until direction dir has counted at
// least n packets of any class, for 5 s at most.
func waitCounted(t testing.TB, p *Probe, dir record.Direction, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var states []bpf.ProbeCpuState
		if err := p.objs.CpuStates.Lookup(uint32(0), &states); err != nil {
			t.Fatal(err)
		}
		var got uint64
		for _, s := range states {
			for _, v := range s.Totals[dir].Packets {
				got += v
			}
		}
		if got >= uint64(n) {
			return
		}
	}
	t.Errorf("%s counted fewer than %d packets within 5 s", dir, n)
}

// BenchmarkNonLinear is what the datapath costs a frame whose headers lie
// outside the skb's linear part, the pull included, as a ratio to a linear
// frame of the same flow, measured in one run through a real veth
// (BPF_PROG_TEST_RUN builds only linear skbs). The kernel's run-time
// statistics time the egress hook's program (the trampoline, whose runs
// include the counting program it tail-calls) over batches of each kind in
// turn; reported are the medians over the rounds of each one's ns per run
// and of their ratio.
//
//	go test -run '^$' -bench NonLinear -benchtime 1x ./loader
func BenchmarkNonLinear(b *testing.B) {
	pair := vethpair.ForTest(b, vethpair.Options{Octet: 8, MTU: 9001})
	var p *Probe
	var att *Attachment
	if err := vethpair.Do(pair.NSA, func() (err error) {
		if p, err = Load(DefaultOptions()); err != nil {
			return err
		}
		att, err = Attach(p, pair.IfA, AttachAuto)
		return err
	}); err != nil {
		b.Fatalf("%+v", err)
	}
	b.Cleanup(func() {
		_ = vethpair.Do(pair.NSA, att.Close)
		p.Close()
	})
	var hook *ebpf.Program
	for _, h := range att.hooks {
		if h.dir == "egress" {
			hook = h.cur.prog
		}
	}
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Fatalf("enable bpf run-time statistics: %v", err)
	}
	defer stats.Close()
	const batch, rounds = 2000, 21
	run := func(f []byte) float64 { // mean ns per run of the egress hook
		before := progRuntime(b, hook)
		frames := make([][]byte, batch)
		for i := range frames {
			frames[i] = f
		}
		sendRaw(b, pair.NSA, pair.IfA, frames)
		after := progRuntime(b, hook)
		if after.runs-before.runs < batch {
			b.Fatalf("%d runs counted for %d frames sent", after.runs-before.runs, batch)
		}
		return float64(after.ns-before.ns) / float64(after.runs-before.runs)
	}
	for _, c := range []struct {
		name string
		src  net.IP
		tcp  bool
	}{{"ipv4_tcp", frames.V4A, true}, {"ipv4_udp", frames.V4A, false}, {"ipv6_tcp", frames.V6A, true}, {"ipv6_udp", frames.V6A, false}} {
		dst := frames.V4B
		if c.src.To4() == nil {
			dst = frames.V6B
		}
		linear := nonLinearFrame(b, c.src, dst, 30000, c.tcp, 3054)
		paged := nonLinearFrame(b, c.src, dst, 30000, c.tcp, 4170)
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				var lin, pag, ratios []float64
				for range rounds {
					l, n := run(linear), run(paged)
					lin, pag, ratios = append(lin, l), append(pag, n), append(ratios, n/l)
				}
				for _, s := range [][]float64{lin, pag, ratios} {
					slices.Sort(s)
				}
				b.ReportMetric(lin[rounds/2], "linear_ns")
				b.ReportMetric(pag[rounds/2], "paged_ns")
				b.ReportMetric(ratios[rounds/2], "x_linear")
			}
		})
	}
}

type progRun struct{ ns, runs uint64 }

// progRuntime is the kernel's run-time statistics of prog.
func progRuntime(tb testing.TB, prog *ebpf.Program) progRun {
	tb.Helper()
	st, err := prog.Stats()
	if err != nil {
		tb.Fatalf("program run-time statistics: %v", err)
	}
	return progRun{uint64(st.Runtime), st.RunCount}
}

// TestLargestTestRunFrame checks the fuzz target's bound: above what it fuzzed
// before (3,000 bytes), below a page.
func TestLargestTestRunFrame(t *testing.T) {
	tp := newTestProbe(t, testOptions())
	n := tp.largestTestRunFrame(t)
	t.Logf("largest frame the test run takes: %d bytes", n)
	if n <= 3000 || n >= os.Getpagesize() {
		t.Errorf("largest test-run frame %d bytes, want between 3,000 and a page", n)
	}
}
