//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/internal/privtest"
	"github.com/enaprobe/enaprobe/internal/vethpair"
	"github.com/enaprobe/enaprobe/loader"
)

// BenchmarkTraceOverhead measures 64-byte UDP throughput through a veth pair
// with and without `enaprobe trace` attached, alternating, in one run, and
// reports the ratio (budget: at least 0.95), with the tracer's CPU time
// while traffic flowed and its peak memory.
//
// This machine's throughput drifts by more than the budget from one second
// to the next, so: the sender and the receiver are pinned to CPUs of their
// own; blasts are short and many; each traced blast is compared with the
// mean of the untraced blasts just before and just after it, and the median
// of those ratios is reported with its quartiles. The sender's CPU time per
// packet (its thread's, which includes the softirq work done on its behalf)
// is reported the same way: it drifts less than throughput.
func BenchmarkTraceOverhead(b *testing.B) {
	privtest.RequireRoot(b)
	pair, err := vethpair.New(vethpair.Options{Octet: 90})
	if err != nil {
		b.Fatal(err)
	}
	defer pair.Close()
	dst := netip.AddrPortFrom(pair.AddrB, 9300)
	const rounds = 25
	const blastFor = 300 * time.Millisecond
	for b.Loop() {
		var ratios, cpuRatios, cpu, rss []float64
		before := blast(b, pair, dst, blastFor)
		first := before
		for r := 0; r < rounds; r++ {
			with, usage := tracedBlast(b, pair, dst, blastFor)
			after := blast(b, pair, dst, blastFor)
			ratios = append(ratios, with.recvPPS/((before.recvPPS+after.recvPPS)/2))
			cpuRatios = append(cpuRatios, (before.senderNs+after.senderNs)/2/with.senderNs)
			cpu = append(cpu, usage.cpuShare)
			rss = append(rss, usage.maxRSSMiB)
			before = after
		}
		slices.Sort(ratios)
		slices.Sort(cpuRatios)
		b.ReportMetric(ratios[rounds/2], "with/without")
		b.ReportMetric(ratios[rounds/4], "q1_with/without")
		b.ReportMetric(ratios[3*rounds/4], "q3_with/without")
		b.ReportMetric(cpuRatios[rounds/2], "sender_cpu_without/with")
		b.ReportMetric(first.recvPPS, "pps_without")
		b.ReportMetric(first.senderNs, "sender_ns_per_packet")
		// What the probe itself costs per packet in the kernel: BPF run-time
		// statistics of the egress program, less those of an empty program
		// measured the same way (the statistics' own clock reads), and the
		// ratio that cost predicts for this sender.
		costNs := progCostNs(b, pair, dst, blastFor)
		emptyNs := emptyProgNs(b, pair, dst, blastFor)
		perPacketNs := first.senderNs
		b.ReportMetric(costNs, "egress_prog_ns")
		b.ReportMetric(emptyNs, "empty_prog_ns")
		b.ReportMetric(perPacketNs/(perPacketNs+costNs-emptyNs), "predicted_with/without")
		b.ReportMetric(slices.Max(cpu), "tracer_cpu_share")
		b.ReportMetric(slices.Max(rss), "tracer_max_rss_MiB")
	}
}

type tracerUsage struct {
	cpuShare  float64 // the tracer's CPU seconds per second while traffic flowed
	maxRSSMiB float64
}

// tracedBlast runs enaprobe trace on A's veth end while blasting.
func tracedBlast(b *testing.B, pair *vethpair.Pair, dst netip.AddrPort, d time.Duration) (blastResult, tracerUsage) {
	b.Helper()
	return tracedBlastThen(b, pair, dst, d, nil)
}

// tracedBlastThen is tracedBlast, calling after (when set) once the blast
// is over and before the trace ends.
func tracedBlastThen(b *testing.B, pair *vethpair.Pair, dst netip.AddrPort, d time.Duration, after func()) (blastResult, tracerUsage) {
	b.Helper()
	ready := filepath.Join(b.TempDir(), "ready")
	cmd := exec.Command("ip", "netns", "exec", pair.NSA, binary, "trace", "-i", pair.IfA, "--duration", "1m",
		"--no-imds", "--format", "json", "--ready-file", ready, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = nil, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	waitFile(b, ready, 20*time.Second)
	time.Sleep(200 * time.Millisecond) // the load's aftermath settles
	cpu0 := processCPU(b, cmd.Process.Pid)
	res := blast(b, pair, dst, d)
	cpu := processCPU(b, cmd.Process.Pid) - cpu0
	if after != nil {
		after()
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		b.Fatalf("enaprobe trace: %v", err)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return res, tracerUsage{cpuShare: cpu / d.Seconds(), maxRSSMiB: float64(ru.Maxrss) / 1024}
}

// progCostNs runs one more traced blast with the kernel's BPF run-time
// statistics on, and returns the egress program's mean run time.
func progCostNs(b *testing.B, pair *vethpair.Pair, dst netip.AddrPort, d time.Duration) float64 {
	b.Helper()
	defer enableBPFStats(b)()
	var runtimeNs, runs float64
	_, _ = tracedBlastThen(b, pair, dst, d, func() {
		out, err := exec.Command("bpftool", "prog", "show", "name", "enaprobe_egress", "--json").Output()
		if err != nil {
			b.Fatalf("bpftool prog show: %v", err)
		}
		// One JSON object per matching program (only ours runs here).
		dec := json.NewDecoder(bytes.NewReader(out))
		for dec.More() {
			var p struct {
				RunTimeNs float64 `json:"run_time_ns"`
				RunCnt    float64 `json:"run_cnt"`
			}
			if err := dec.Decode(&p); err != nil {
				b.Fatalf("bpftool output %s: %v", out, err)
			}
			runtimeNs += p.RunTimeNs
			runs += p.RunCnt
		}
	})
	if runs == 0 {
		b.Fatal("the egress program never ran")
	}
	return runtimeNs / runs
}

// emptyProgNs is progCostNs for the object's empty tc program, attached
// with tcx in A: what the statistics cost by themselves.
func emptyProgNs(b *testing.B, pair *vethpair.Pair, dst netip.AddrPort, d time.Duration) float64 {
	b.Helper()
	spec, err := loader.Spec(loader.DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		b.Fatal(err)
	}
	defer coll.Close()
	prog := coll.Programs["enaprobe_empty"]
	var l link.Link
	err = vethpair.Do(pair.NSA, func() error {
		ifc, err := net.InterfaceByName(pair.IfA)
		if err != nil {
			return err
		}
		l, err = link.AttachTCX(link.TCXOptions{Interface: ifc.Index, Program: prog, Attach: ebpf.AttachTCXEgress, Anchor: link.Tail()})
		return err
	})
	if err != nil {
		b.Fatalf("attach empty program: %v", err)
	}
	defer l.Close()
	defer enableBPFStats(b)()
	blast(b, pair, dst, d)
	st, err := prog.Stats()
	if err != nil || st.RunCount == 0 {
		b.Fatalf("empty program statistics: %+v %v", st, err)
	}
	return float64(st.Runtime.Nanoseconds()) / float64(st.RunCount)
}

// enableBPFStats turns the kernel's BPF run-time statistics on; the
// returned function turns them off.
func enableBPFStats(b *testing.B) func() {
	b.Helper()
	if out, err := exec.Command("sysctl", "-qw", "kernel.bpf_stats_enabled=1").CombinedOutput(); err != nil {
		b.Fatalf("enable bpf stats: %v %s", err, out)
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

// blastResult is one blast: what B received, and what sending cost A.
type blastResult struct {
	recvPPS  float64 // packets per second B received
	senderNs float64 // the sender thread's CPU time per packet sent
}

// blast sends 64-byte frames (22-byte UDP payloads) from A to B for d. The
// sender runs on CPU 0 and the receiver on CPU 1 (on a machine with more
// than one), each on a thread of its own that is thrown away afterwards.
func blast(tb testing.TB, pair *vethpair.Pair, dst netip.AddrPort, d time.Duration) blastResult {
	tb.Helper()
	var rx *net.UDPConn
	if err := vethpair.Do(pair.NSB, func() (err error) {
		rx, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(dst))
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	got := make(chan int, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the pinned thread ends with us
		pinThread(1)
		buf := make([]byte, 2048)
		n := 0
		for {
			if _, _, err := rx.ReadFromUDPAddrPort(buf); err != nil {
				got <- n
				return
			}
			n++
		}
	}()
	type sent struct {
		packets int
		cpu     time.Duration
		err     error
	}
	done := make(chan sent, 1)
	start := time.Now()
	go func() {
		runtime.LockOSThread()
		pinThread(0)
		var s sent
		s.err = vethpair.Do(pair.NSA, func() error {
			tx, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
			if err != nil {
				return err
			}
			defer tx.Close()
			payload := make([]byte, 64-42)
			cpu0 := threadCPU()
			for time.Since(start) < d {
				for range 256 { // check the clock every 256 sends
					_, _ = tx.Write(payload)
				}
				s.packets += 256
			}
			s.cpu = threadCPU() - cpu0
			return nil
		})
		done <- s
	}()
	s := <-done
	elapsed := time.Since(start)
	if s.err != nil {
		tb.Fatal(s.err)
	}
	time.Sleep(50 * time.Millisecond)
	rx.Close()
	return blastResult{
		recvPPS:  float64(<-got) / elapsed.Seconds(),
		senderNs: float64(s.cpu.Nanoseconds()) / float64(s.packets),
	}
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
