//go:build linux

package e2e

import (
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/vethpair"
)

// BenchmarkTraceOverhead measures 64-byte UDP throughput through a veth pair
// with and without `enaprobe trace` attached, alternating, in one run, and
// reports the ratio (budget: at least 0.95), with the tracer's CPU time and
// peak memory.
func BenchmarkTraceOverhead(b *testing.B) {
	requireRoot(b)
	pair, err := vethpair.New(vethpair.Options{Octet: 90})
	if err != nil {
		b.Fatal(err)
	}
	defer pair.Close()
	dst := netip.AddrPortFrom(pair.AddrB, 9300)
	const rounds = 4
	const burst = 1500 * time.Millisecond
	for b.Loop() {
		var with, without []float64
		var cpu, rss []float64
		for r := 0; r < rounds; r++ {
			without = append(without, blastPPS(b, pair, dst, burst))
			pps, usage := tracedBlast(b, pair, dst, burst)
			with = append(with, pps)
			cpu = append(cpu, usage.cpuShare)
			rss = append(rss, usage.maxRSSMiB)
		}
		slices.Sort(with)
		slices.Sort(without)
		b.ReportMetric(with[rounds/2]/without[rounds/2], "with/without")
		b.ReportMetric(without[rounds/2], "pps_without")
		b.ReportMetric(slices.Max(cpu), "tracer_cpu_share")
		b.ReportMetric(slices.Max(rss), "tracer_max_rss_MiB")
	}
}

type tracerUsage struct {
	cpuShare  float64 // user+system CPU seconds per wall second of the trace
	maxRSSMiB float64
}

// tracedBlast runs enaprobe trace on A's veth end while blasting.
func tracedBlast(b *testing.B, pair *vethpair.Pair, dst netip.AddrPort, d time.Duration) (float64, tracerUsage) {
	b.Helper()
	ready := filepath.Join(b.TempDir(), "ready")
	cmd := exec.Command("ip", "netns", "exec", pair.NSA, binary, "trace", "-i", pair.IfA, "--duration", "1m",
		"--no-imds", "--format", "json", "--ready-file", ready, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = nil, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	waitFile(b, ready, 20*time.Second)
	start := time.Now()
	pps := blastPPS(b, pair, dst, d)
	_ = cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		b.Fatalf("enaprobe trace: %v", err)
	}
	wall := time.Since(start).Seconds()
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpuS := float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	return pps, tracerUsage{cpuShare: cpuS / wall, maxRSSMiB: float64(ru.Maxrss) / 1024}
}

// blastPPS sends 64-byte frames (22-byte UDP payloads) from A to B for d and
// returns the packets per second B received.
func blastPPS(b *testing.B, pair *vethpair.Pair, dst netip.AddrPort, d time.Duration) float64 {
	b.Helper()
	var rx *net.UDPConn
	if err := vethpair.Do(pair.NSB, func() (err error) {
		rx, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(dst))
		return err
	}); err != nil {
		b.Fatal(err)
	}
	got := make(chan int, 1)
	go func() {
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
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	err := vethpair.Do(pair.NSA, func() error {
		tx, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
		if err != nil {
			return err
		}
		defer tx.Close()
		payload := make([]byte, 64-42)
		for ctx.Err() == nil {
			for i := 0; i < 256; i++ { // check the clock every 256 sends
				_, _ = tx.Write(payload)
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	rx.Close()
	return float64(<-got) / d.Seconds()
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
