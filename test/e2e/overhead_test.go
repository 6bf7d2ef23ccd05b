//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
	"github.com/enaprobe/enaprobe/internal/testutil/vethpair"
	"github.com/enaprobe/enaprobe/loader"
)

// BenchmarkTraceOverhead measures 64-byte UDP throughput through a veth pair
// with and without `enaprobe trace` attached (budget: at least 0.95), with
// the tracer's CPU time and peak memory over the same run.
//
// This machine's throughput drifts by more than the budget within a second,
// and a blast that follows an idle pause (a tracer starting) runs slower
// for its first tens of milliseconds. So one sender thread alternates every
// 25 ms between two identical veth pairs, one of them traced by the real
// binary: traced and untraced packets go out of the same thread on the
// same CPU, interleaved finely enough that drift falls on both alike. Each
// pair is traced in turn (the geometric mean of the two ratios cancels any
// difference between the pairs), and a control with no tracer measures
// what the method reads when nothing differs: it must be close to 1. The
// same method then measures the floor under the budget on this machine: the
// tc hook alone, a clock read, and the least a counting probe does.
func BenchmarkTraceOverhead(b *testing.B) {
	privtest.RequireRoot(b)
	var pairs []*vethpair.Pair
	for _, octet := range []byte{90, 89} {
		pair, err := vethpair.New(vethpair.Options{Octet: octet})
		if err != nil {
			b.Fatal(err)
		}
		defer pair.Close()
		pairs = append(pairs, pair)
	}
	const runs = 4 // traced pair: 0, 1, 0, 1
	const runFor = 10 * time.Second
	for b.Loop() {
		control := alternate(b, pairs, -1, runFor)
		var thr, cpu, recv []float64
		var usage []tracerUsage
		for r := range runs {
			k := r % 2
			res := alternate(b, pairs, k, runFor)
			thr = append(thr, res.paths[k].pps()/res.paths[1-k].pps())
			cpu = append(cpu, res.paths[1-k].nsPerPacket()/res.paths[k].nsPerPacket())
			recv = append(recv, res.paths[k].recvPPS()/res.paths[1-k].recvPPS())
			usage = append(usage, res.tracer)
		}
		b.ReportMetric(geoMean(thr), "with/without")
		b.ReportMetric(slices.Min(thr), "min_with/without")
		b.ReportMetric(slices.Max(thr), "max_with/without")
		b.ReportMetric(geoMean(cpu), "sender_cpu_without/with")
		b.ReportMetric(geoMean(recv), "received_with/without")
		b.ReportMetric(control.paths[0].pps()/control.paths[1].pps(), "control_pair0/pair1")
		b.ReportMetric((control.paths[0].pps()+control.paths[1].pps())/2, "pps_without")
		b.ReportMetric(control.paths[0].nsPerPacket(), "sender_ns_per_packet")
		var cpuShare, rss []float64
		for _, u := range usage {
			cpuShare = append(cpuShare, u.cpuShare)
			rss = append(rss, u.maxRSSMiB)
		}
		b.ReportMetric(slices.Max(cpuShare), "tracer_cpu_share")
		b.ReportMetric(slices.Max(rss), "tracer_max_rss_MiB")
		// The floor any counting tc probe starts from, by the same method:
		// the benchmark object's empty program (the hook's own cost), one that only
		// reads the clock, and one that reads the clock, parses the frame
		// and adds it to its CPU's totals, each attached alone to each pair
		// in turn.
		for _, floor := range []struct{ prog, metric string }{
			{loader.BenchEmpty, "hook_with/without"},
			{loader.BenchClock, "hook_clock_with/without"},
			{loader.BenchMinimal, "minimal_probe_with/without"},
		} {
			b.ReportMetric(floorRatio(b, pairs, floor.prog, runFor), floor.metric)
		}
		// What the probe itself costs per packet in the kernel: BPF run-time
		// statistics of the egress program, less those of an empty program
		// measured the same way (the statistics' own clock reads), and the
		// ratio that cost predicts for this sender.
		costNs := progCostNs(b, pairs[0], time.Second)
		emptyNs := emptyProgNs(b, pairs[0], time.Second)
		perPacketNs := control.paths[0].nsPerPacket()
		b.ReportMetric(costNs, "egress_prog_ns")
		b.ReportMetric(emptyNs, "empty_prog_ns")
		b.ReportMetric(perPacketNs/(perPacketNs+costNs-emptyNs), "predicted_with/without")
		besideOtherTools(b, pairs, runFor)
	}
}

// besideOtherTools measures, by the same method in the same run, what users
// run today (`tcpdump -w` on the same interface) and `enaprobe serve` (the
// flight recorder, its metrics scraped every second) on the 64-byte UDP
// stream, then all three on a TCP stream of 1500-byte frames. Each tool runs
// on each pair in turn (the geometric mean of the two ratios cancels any
// difference between the pairs).
func besideOtherTools(b *testing.B, pairs []*vethpair.Pair, d time.Duration) {
	b.Helper()
	tools := []struct {
		name string
		run  tool
	}{{"trace", traceWhile}, {"tcpdump", tcpdumpWhile}, {"serve", serveWhile}}
	streams := []struct {
		name string
		send sender
	}{{"udp64", sendAlternating}, {"tcp1500", sendAlternatingTCP}}
	for _, st := range streams {
		if st.name == "tcp1500" {
			// Frames of the MTU at tc, as on a wire without offloads: with
			// TSO and GSO (ENA's default) tc sees fewer, larger packets.
			for _, pair := range pairs {
				if out, err := exec.Command("ip", "netns", "exec", pair.NSA, "ethtool", "-K", pair.IfA, "tso", "off", "gso", "off").CombinedOutput(); err != nil {
					b.Fatalf("ethtool -K %s: %v %s", pair.IfA, err, out)
				}
			}
			control := alternateWith(b, pairs, -1, d, nil, st.send)
			b.ReportMetric(control.paths[0].pps()/control.paths[1].pps(), "control_tcp1500_pair0/pair1")
			b.ReportMetric(8*1500*(control.paths[0].pps()+control.paths[1].pps())/2/1e9, "tcp1500_Gbit/s_without")
		}
		for _, tl := range tools {
			if tl.name == "trace" && st.name == "udp64" {
				continue // measured above
			}
			var thr, senderCPU []float64
			var cpu, rss float64
			for k := range pairs {
				res := alternateWith(b, pairs, k, d, tl.run, st.send)
				thr = append(thr, res.paths[k].pps()/res.paths[1-k].pps())
				senderCPU = append(senderCPU, res.paths[1-k].nsPerPacket()/res.paths[k].nsPerPacket())
				cpu = max(cpu, res.tracer.cpuShare)
				rss = max(rss, res.tracer.maxRSSMiB)
			}
			b.ReportMetric(geoMean(thr), tl.name+"_"+st.name+"_with/without")
			b.ReportMetric(geoMean(senderCPU), tl.name+"_"+st.name+"_sender_cpu_without/with")
			b.ReportMetric(cpu, tl.name+"_"+st.name+"_cpu_share")
			b.ReportMetric(rss, tl.name+"_"+st.name+"_max_rss_MiB")
		}
	}
}

// tcpdumpWhile runs `tcpdump -w` on pair's A end while fn runs, writing a
// ring of two 100 MB files as a long capture would, and returns what
// traceWhile returns.
func tcpdumpWhile(tb testing.TB, pair *vethpair.Pair, fn func()) tracerUsage {
	tb.Helper()
	file := filepath.Join(tb.TempDir(), "capture.pcap")
	// -Z root: Debian's tcpdump otherwise drops to its own user, which
	// cannot write to the test's directory.
	cmd := exec.Command("ip", "netns", "exec", pair.NSA, "tcpdump", "-i", pair.IfA, "-n", "-w", file,
		"-C", "100", "-W", "2", "-Z", "root")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	// tcpdump says "listening on IFACE" once its socket is bound.
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		buf := make([]byte, 4096)
		var acc string
		for {
			n, err := stderr.Read(buf)
			acc += string(buf[:n])
			for {
				i := strings.IndexByte(acc, '\n')
				if i < 0 {
					break
				}
				lines <- acc[:i]
				acc = acc[i+1:]
			}
			if err != nil {
				return
			}
		}
	}()
	deadline := time.After(20 * time.Second)
	for listening := false; !listening; {
		select {
		case l, ok := <-lines:
			if !ok {
				tb.Fatal("tcpdump exited before listening")
			}
			listening = strings.Contains(l, "listening on")
		case <-deadline:
			tb.Fatal("tcpdump not listening within 20 s")
		}
	}
	time.Sleep(200 * time.Millisecond) // as for the tracer
	cpu0, t0 := processCPU(tb, cmd.Process.Pid), time.Now()
	fn()
	cpu, elapsed := processCPU(tb, cmd.Process.Pid)-cpu0, time.Since(t0)
	_ = cmd.Process.Signal(syscall.SIGINT)
	for range lines { // its closing statistics
	}
	if err := cmd.Wait(); err != nil {
		tb.Fatalf("tcpdump: %v", err)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return tracerUsage{cpuShare: cpu / elapsed.Seconds(), maxRSSMiB: float64(ru.Maxrss) / 1024}
}

// serveWhile runs `enaprobe serve` on pair's A end while fn runs, scraping
// its metrics every second, and returns what traceWhile returns.
func serveWhile(tb testing.TB, pair *vethpair.Pair, fn func()) tracerUsage {
	tb.Helper()
	dir := tb.TempDir()
	ready := filepath.Join(dir, "ready")
	cmd := exec.Command("ip", "netns", "exec", pair.NSA, binary, "serve", "-i", pair.IfA, "--no-imds",
		"--bundle-dir", filepath.Join(dir, "bundles"), "--listen", "127.0.0.1:0", "--ready-file", ready, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = nil, os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	waitFile(tb, ready, 20*time.Second)
	raw, err := os.ReadFile(ready)
	if err != nil {
		tb.Fatal(err)
	}
	addr := strings.TrimSpace(string(raw))
	time.Sleep(200 * time.Millisecond)
	stop := make(chan struct{})
	scraped := make(chan int)
	go func() {
		n := 0
		defer func() { scraped <- n }()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if scrapeIn(pair.NSA, addr) == nil {
					n++
				}
			}
		}
	}()
	cpu0, t0 := processCPU(tb, cmd.Process.Pid), time.Now()
	fn()
	cpu, elapsed := processCPU(tb, cmd.Process.Pid)-cpu0, time.Since(t0)
	close(stop)
	if n := <-scraped; n == 0 {
		tb.Error("no scrape of serve's /metrics succeeded")
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		tb.Fatalf("enaprobe serve: %v", err)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return tracerUsage{cpuShare: cpu / elapsed.Seconds(), maxRSSMiB: float64(ru.Maxrss) / 1024}
}

// scrapeIn reads http://addr/metrics from inside the namespace ns.
func scrapeIn(ns, addr string) error {
	var conn net.Conn
	if err := vethpair.Do(ns, func() (err error) {
		conn, err = net.DialTimeout("tcp", addr, time.Second)
		return err
	}); err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("GET /metrics HTTP/1.0\r\nHost: " + addr + "\r\n\r\n")); err != nil {
		return err
	}
	body, err := io.ReadAll(conn)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(string(body), "HTTP/1.0 200") && !strings.HasPrefix(string(body), "HTTP/1.1 200") {
		return fmt.Errorf("scrape: %.40s", body)
	}
	return nil
}

func geoMean(v []float64) float64 {
	l := 0.0
	for _, x := range v {
		l += math.Log(x)
	}
	return math.Exp(l / float64(len(v)))
}

type tracerUsage struct {
	cpuShare  float64 // the tracer's CPU seconds per second while traffic flowed
	maxRSSMiB float64
}

// alternated is one alternating run: what went through each pair, and
// what the tracer (if any) used meanwhile.
type alternated struct {
	paths  []pathStats
	tracer tracerUsage
}

// alternate runs `enaprobe trace` on pairs[traced] (none when traced < 0)
// and sends 64-byte UDP through the pairs in turn for d.
func alternate(b *testing.B, pairs []*vethpair.Pair, traced int, d time.Duration) alternated {
	return alternateWith(b, pairs, traced, d, traceWhile, sendAlternating)
}

// tool runs a packet tool on pair's A end while fn runs, and returns its
// CPU share during fn and its peak memory.
type tool func(tb testing.TB, pair *vethpair.Pair, fn func()) tracerUsage

// sender sends through pairs in turn, a phase at a time, for d.
type sender func(tb testing.TB, pairs []*vethpair.Pair, d time.Duration) []pathStats

// alternateWith runs run on pairs[traced] (nothing when traced < 0) while
// send sends through the pairs in turn for d.
func alternateWith(b *testing.B, pairs []*vethpair.Pair, traced int, d time.Duration, run tool, send sender) alternated {
	b.Helper()
	if traced < 0 {
		return alternated{paths: send(b, pairs, d)}
	}
	var res alternated
	res.tracer = run(b, pairs[traced], func() { res.paths = send(b, pairs, d) })
	return res
}

// traceWhile runs enaprobe trace on pair's A end while fn runs, and
// returns the tracer's CPU share during fn and its peak memory.
func traceWhile(tb testing.TB, pair *vethpair.Pair, fn func()) tracerUsage {
	tb.Helper()
	ready := filepath.Join(tb.TempDir(), "ready")
	cmd := exec.Command("ip", "netns", "exec", pair.NSA, binary, "trace", "-i", pair.IfA, "--duration", "5m",
		"--no-imds", "--format", "json", "--ready-file", ready, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = nil, os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	waitFile(tb, ready, 20*time.Second)
	time.Sleep(200 * time.Millisecond) // the load's aftermath settles
	cpu0, t0 := processCPU(tb, cmd.Process.Pid), time.Now()
	fn()
	cpu, elapsed := processCPU(tb, cmd.Process.Pid)-cpu0, time.Since(t0)
	_ = cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		tb.Fatalf("enaprobe trace: %v", err)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return tracerUsage{cpuShare: cpu / elapsed.Seconds(), maxRSSMiB: float64(ru.Maxrss) / 1024}
}

// progCostNs traces pair once more with the kernel's BPF run-time
// statistics on while sending through it for d, and returns the egress
// program's mean run time.
func progCostNs(b *testing.B, pair *vethpair.Pair, d time.Duration) float64 {
	b.Helper()
	defer enableBPFStats(b)()
	var runtimeNs, runs float64
	traceWhile(b, pair, func() {
		sendAlternating(b, []*vethpair.Pair{pair}, d)
		// The hooks run the trampolines, which tail-call the counting
		// programs: the kernel keeps statistics only for the program a hook
		// runs, so a trampoline's include the program it calls. Only
		// egress sees this traffic; the ingress trampoline adds no run.
		out, err := exec.Command("bpftool", "prog", "show", "name", loader.TrampolineName, "--json").Output()
		if err != nil {
			b.Fatalf("bpftool prog show: %v", err)
		}
		// An array of the matching programs (the two trampolines), or one
		// object when one matches.
		type stats struct {
			RunTimeNs float64 `json:"run_time_ns"`
			RunCnt    float64 `json:"run_cnt"`
		}
		var progs []stats
		if err := json.Unmarshal(out, &progs); err != nil {
			var one stats
			if err := json.Unmarshal(out, &one); err != nil {
				b.Fatalf("bpftool output %s: %v", out, err)
			}
			progs = []stats{one}
		}
		for _, p := range progs {
			runtimeNs += p.RunTimeNs
			runs += p.RunCnt
		}
	})
	if runs == 0 {
		b.Fatal("the egress program never ran")
	}
	return runtimeNs / runs
}

// emptyProgNs is progCostNs for the benchmark object's empty tc program, attached
// with tcx in A: what the statistics cost by themselves.
func emptyProgNs(b *testing.B, pair *vethpair.Pair, d time.Duration) float64 {
	b.Helper()
	coll := loadFloors(b)
	defer coll.Close()
	prog := coll.Programs[loader.BenchEmpty]
	defer attachEgress(b, pair, prog).Close()
	defer enableBPFStats(b)()
	sendAlternating(b, []*vethpair.Pair{pair}, d)
	st, err := prog.Stats()
	if err != nil || st.RunCount == 0 {
		b.Fatalf("empty program statistics: %+v %v", st, err)
	}
	return float64(st.Runtime.Nanoseconds()) / float64(st.RunCount)
}

// floorRatio is the with / without throughput of the benchmark object's program
// prog alone on A's egress, each pair traced in turn for d.
func floorRatio(b *testing.B, pairs []*vethpair.Pair, prog string, d time.Duration) float64 {
	b.Helper()
	coll := loadFloors(b)
	defer coll.Close()
	p, ok := coll.Programs[prog]
	if !ok {
		b.Fatalf("the object has no program %s", prog)
	}
	var ratios []float64
	for k := range pairs {
		l := attachEgress(b, pairs[k], p)
		paths := sendAlternating(b, pairs, d)
		l.Close()
		ratios = append(ratios, paths[k].pps()/paths[1-k].pps())
	}
	return geoMean(ratios)
}

// loadFloors loads the benchmark object (loader.BenchSpec), for its floor
// programs, which the product object does not carry.
func loadFloors(b *testing.B) *ebpf.Collection {
	b.Helper()
	spec, err := loader.BenchSpec(loader.DefaultOptions(), true)
	if err != nil {
		b.Fatal(err)
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		b.Fatal(err)
	}
	return coll
}

// attachEgress attaches prog with tcx to the egress of pair's A end.
func attachEgress(b *testing.B, pair *vethpair.Pair, prog *ebpf.Program) link.Link {
	b.Helper()
	var l link.Link
	err := vethpair.Do(pair.NSA, func() error {
		ifc, err := net.InterfaceByName(pair.IfA)
		if err != nil {
			return err
		}
		l, err = link.AttachTCX(link.TCXOptions{Interface: ifc.Index, Program: prog, Attach: ebpf.AttachTCXEgress, Anchor: link.Tail()})
		return err
	})
	if err != nil {
		b.Fatalf("attach %s to %s egress: %v", prog, pair.IfA, err)
	}
	return l
}

// enableBPFStats turns the kernel's BPF run-time statistics on; the
// returned function turns them off.
func enableBPFStats(tb testing.TB) func() {
	tb.Helper()
	if out, err := exec.Command("sysctl", "-qw", "kernel.bpf_stats_enabled=1").CombinedOutput(); err != nil {
		tb.Fatalf("enable bpf stats: %v %s", err, out)
	}
	return func() { _ = exec.Command("sysctl", "-qw", "kernel.bpf_stats_enabled=0").Run() }
}

// processCPU is a process's user and system CPU seconds so far.
func processCPU(tb testing.TB, pid int) float64 {
	tb.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		tb.Fatal(err)
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndex(s, ")")+2:]) // fields from 3 on
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

// pathStats is what one pair carried in an alternating run.
type pathStats struct {
	packets  int           // sent by A's socket
	received int           // received by B's socket
	elapsed  time.Duration // the time its phases took
	cpu      time.Duration // the sender thread's CPU time in its phases
}

func (p pathStats) pps() float64         { return float64(p.packets) / p.elapsed.Seconds() }
func (p pathStats) recvPPS() float64     { return float64(p.received) / p.elapsed.Seconds() }
func (p pathStats) nsPerPacket() float64 { return float64(p.cpu.Nanoseconds()) / float64(p.packets) }

// warmUp is how long the sender sends before it starts counting.
const warmUp = 100 * time.Millisecond

// phase is how long the sender stays on one pair before moving to the next.
const phase = 25 * time.Millisecond

// sendAlternating sends 64-byte frames (22-byte UDP payloads) from A to B
// of each pair in turn, a phase at a time, for d after a warm-up. The
// sender runs on CPU 0 and the receivers on CPU 1 (on a machine with more
// than one), each on a thread of its own that is thrown away afterwards.
//
// Throughput is what A sent: every packet A's socket accepts crosses the
// veth pair in the same system call, on the same CPU (veth delivers to B's
// backlog, which the sender's own softirq processing empties), so it counts
// what the path sustained. B's socket keeps up with less (its Go receiver
// loses 3 to 20% of packets whatever is attached): what it received is
// reported beside, as a measure of the receiver.
func sendAlternating(tb testing.TB, pairs []*vethpair.Pair, d time.Duration) []pathStats {
	tb.Helper()
	stats := make([]pathStats, len(pairs))
	var counting atomic.Bool
	var receivers sync.WaitGroup
	var txs, rxs []*net.UDPConn
	closeAll := func() {
		for _, c := range append(txs, rxs...) {
			c.Close()
		}
		txs, rxs = nil, nil
	}
	defer closeAll()
	for i, pair := range pairs {
		dst := net.UDPAddrFromAddrPort(netip.AddrPortFrom(pair.AddrB, 9300))
		rx := socketIn(tb, pair.NSB, func() (*net.UDPConn, error) { return net.ListenUDP("udp", dst) })
		rxs = append(rxs, rx)
		// A socket stays in the namespace it was made in: the sender
		// thread can use every pair's without moving.
		txs = append(txs, socketIn(tb, pair.NSA, func() (*net.UDPConn, error) { return net.DialUDP("udp", nil, dst) }))
		receivers.Add(1)
		go func() {
			defer receivers.Done()
			runtime.LockOSThread() // never unlocked: the pinned thread ends with us
			pinThread(1)
			buf := make([]byte, 2048)
			for {
				if _, _, err := rx.ReadFromUDPAddrPort(buf); err != nil {
					return
				}
				if counting.Load() {
					stats[i].received++
				}
			}
		}()
	}
	payload := make([]byte, 64-42)
	sendPhases(txs, payload, 32, len(payload), d, stats, &counting) // the clock read every 32 sends
	time.Sleep(50 * time.Millisecond)                               // the last packets reach the receivers
	closeAll()
	receivers.Wait()
	return stats
}

// socketIn makes a socket in the network namespace ns, where it stays
// whichever thread uses it; an error fails tb.
func socketIn[S any](tb testing.TB, ns string, open func() (S, error)) S {
	tb.Helper()
	var s S
	if err := vethpair.Do(ns, func() (err error) {
		s, err = open()
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	return s
}

// sendPhases is the sender of sendAlternating and sendAlternatingTCP. On a
// thread of its own pinned to CPU 0 (thrown away afterwards), it writes
// payload to each conn for the warm-up, then to one conn after the other a
// phase at a time for d, reading the clock every batch writes; counting is
// set meanwhile. Each phase adds to its conn's stats the frames of
// frameBytes it wrote, its time and the sender thread's CPU time.
func sendPhases[C io.Writer](conns []C, payload []byte, batch, frameBytes int, d time.Duration, stats []pathStats, counting *atomic.Bool) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		pinThread(0)
		for _, c := range conns {
			for start := time.Now(); time.Since(start) < warmUp/time.Duration(len(conns)); {
				_, _ = c.Write(payload)
			}
		}
		counting.Store(true)
		start := time.Now()
		cur, from, cpu0, n := 0, start, threadCPU(), 0
		for {
			for range batch {
				w, _ := conns[cur].Write(payload)
				n += w
			}
			if now := time.Now(); now.Sub(from) >= phase {
				cpu := threadCPU()
				s := &stats[cur]
				s.packets += n / frameBytes
				s.elapsed += now.Sub(from)
				s.cpu += cpu - cpu0
				if now.Sub(start) >= d {
					break
				}
				cur, from, cpu0, n = (cur+1)%len(conns), now, cpu, 0
			}
		}
		counting.Store(false)
	}()
	<-done
}

// pinThread binds the calling thread to cpu, when the machine has more
// than one.
func pinThread(cpu int) {
	if runtime.NumCPU() < 2 {
		return
	}
	var set unix.CPUSet
	set.Set(cpu % runtime.NumCPU())
	_ = unix.SchedSetaffinity(0, &set)
}

// threadCPU is the calling thread's user and system CPU time so far.
func threadCPU() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func waitFile(tb testing.TB, path string, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	tb.Fatalf("%s did not appear within %v", path, timeout)
}

// tcpPayload is the TCP payload of a 1500-byte frame with timestamps: the
// MSS at an MTU of 1500.
const tcpPayload = 1448

// sendAlternatingTCP is sendAlternating for one TCP connection per pair,
// written 16 KiB at a time: with TSO and GSO off on A, the stack hands tc
// frames of the MTU. Throughput is in frames (bytes written / MSS), what
// each path sustained as sendAlternating counts it; each write crosses the
// pair in the sender's system call until the receiver's window closes.
func sendAlternatingTCP(tb testing.TB, pairs []*vethpair.Pair, d time.Duration) []pathStats {
	tb.Helper()
	stats := make([]pathStats, len(pairs))
	var counting atomic.Bool
	var receivers sync.WaitGroup
	var txs []net.Conn
	var lns []net.Listener
	received := make([]atomic.Int64, len(pairs))
	defer func() {
		for _, c := range txs {
			c.Close()
		}
		for _, l := range lns {
			l.Close()
		}
		receivers.Wait()
	}()
	for i, pair := range pairs {
		addr := netip.AddrPortFrom(pair.AddrB, 9301).String()
		ln := socketIn(tb, pair.NSB, func() (net.Listener, error) { return net.Listen("tcp", addr) })
		lns = append(lns, ln)
		receivers.Add(1)
		go func() {
			defer receivers.Done()
			runtime.LockOSThread()
			pinThread(1)
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			buf := make([]byte, 256<<10)
			for {
				n, err := c.Read(buf)
				if counting.Load() {
					received[i].Add(int64(n))
				}
				if err != nil {
					return
				}
			}
		}()
		txs = append(txs, socketIn(tb, pair.NSA, func() (net.Conn, error) { return net.DialTimeout("tcp", addr, 5*time.Second) }))
	}
	sendPhases(txs, make([]byte, 16<<10), 1, tcpPayload, d, stats, &counting)
	for i := range stats {
		stats[i].received = int(received[i].Load() / tcpPayload)
	}
	return stats
}
