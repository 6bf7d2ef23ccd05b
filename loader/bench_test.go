//go:build linux

package loader

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/testutil/privtest"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
	"github.com/gopacket/gopacket/layers"

	"github.com/enaprobe/enaprobe/bpf"
	"github.com/enaprobe/enaprobe/bpf/countrules"
	"github.com/enaprobe/enaprobe/internal/testutil/frames"
)

// The datapath benchmarks report costs as ratios to an empty tc program
// measured in the same run, alternating the two, because this machine is
// shared and noisy: absolute nanoseconds mean little, ratios travel.
//
//	make bench   (or: go test -run '^$' -bench . ./loader)

// benchRepeat is how many times the kernel runs a program per measurement.
const benchRepeat = 50_000

// ratioRounds alternates empty and measured program this many times, short
// runs many times so that the host's drift falls on both alike; the
// median ratio is reported.
const ratioRounds = 41

// loadCollection loads spec (the product object from Spec, or the benchmark
// object from BenchSpec) for a benchmark.
func loadCollection(b *testing.B, spec *ebpf.CollectionSpec, err error) *ebpf.Collection {
	b.Helper()
	privtest.RequireRoot(b)
	if err != nil {
		b.Fatal(err)
	}
	if err := rlimit.RemoveMemlock(); err != nil { // maps count against it before 5.11
		b.Fatal(err)
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		b.Fatalf("%+v", err)
	}
	b.Cleanup(func() { coll.Close() })
	return coll
}

// loadProduct loads the datapath a trace would load with opts.
func loadProduct(b *testing.B, opts Options) *ebpf.Collection {
	b.Helper()
	spec, err := Spec(opts)
	return loadCollection(b, spec, err)
}

// loadFloors loads the benchmark object, for its floor programs.
func loadFloors(b *testing.B) *ebpf.Collection {
	b.Helper()
	spec, err := BenchSpec(DefaultOptions(), true)
	return loadCollection(b, spec, err)
}

// medianRatio measures prog against base on frame, alternating them.
func medianRatio(b *testing.B, prog, base *ebpf.Program, frame []byte) (ratio float64, progNs float64) {
	b.Helper()
	return medianRatioFrames(b, prog, base, frame, frame)
}

// medianRatioFrames is medianRatio with the base running baseFrame.
func medianRatioFrames(b *testing.B, prog, base *ebpf.Program, frame, baseFrame []byte) (ratio float64, progNs float64) {
	b.Helper()
	var ratios, times []float64
	for range ratioRounds {
		_, d0, err := base.Benchmark(baseFrame, benchRepeat, nil)
		if err != nil {
			b.Fatal(err)
		}
		_, d1, err := prog.Benchmark(frame, benchRepeat, nil)
		if err != nil {
			b.Fatal(err)
		}
		ratios = append(ratios, float64(d1)/float64(d0))
		times = append(times, float64(d1))
	}
	slices.Sort(ratios)
	slices.Sort(times)
	return ratios[len(ratios)/2], times[len(times)/2]
}

func benchFrames(b *testing.B) []struct {
	name  string
	frame []byte
} {
	return []struct {
		name  string
		frame []byte
	}{
		{"ipv4_udp_64B", udpFrame(b, v4A, v4B, 1000, 2000, 64-42)},
		{"ipv4_tcp_1500B", tcpFrame(b, v4A, v4B, 40000, 443, false, true, 1500-40)},
		{"ipv6_tcp_syn", tcpFrame(b, v6A, v6B, 40000, 443, true, false, 0)},
		{"vlan_ipv4_udp", vlanFrame(b, layers.EthernetTypeDot1Q)},
		{"linklocal_dns", udpFrame(b, v4A, net.IPv4(169, 254, 169, 253), 33000, 53, 40)},
	}
}

// BenchmarkDatapath is the established-flow path: the flow exists, as for
// every packet of a connection but its first. Budget: 4.5x the empty program.
func BenchmarkDatapath(b *testing.B) {
	floors := loadFloors(b)
	empty, clock := floors.Programs[BenchEmpty], floors.Programs[BenchClock]
	product := loadProduct(b, DefaultOptions())
	egress := product.Programs["enaprobe_egress"]
	for _, f := range benchFrames(b) {
		b.Run(f.name, func(b *testing.B) {
			for b.Loop() {
				r, ns := medianRatio(b, egress, empty, f.frame)
				b.ReportMetric(r, "x_empty")
				b.ReportMetric(ns, "prog_ns")
			}
		})
	}
	// IMDS requests and replies, the only packets imds_look reads further
	// into: a GET searches its first 512 payload bytes for the token header.
	for _, c := range frames.IMDS(b) {
		if c.Name != "token request" && c.Name != "GET with a token" && c.Name != "reply with ttl 1" {
			continue
		}
		prog := product.Programs["enaprobe_"+c.Dir.String()]
		b.Run("imds_"+strings.ReplaceAll(c.Name, " ", "_"), func(b *testing.B) {
			for b.Loop() {
				r, ns := medianRatio(b, prog, empty, c.Frame)
				b.ReportMetric(r, "x_empty")
				b.ReportMetric(ns, "prog_ns")
			}
		})
	}
	// A DNS query with and without its payload copied (llpayload.h), in the
	// same run: what the copy costs a link-local packet. Every other
	// packet takes the path it took before (one comparison on its service).
	noPayload := DefaultOptions()
	noPayload.LinkLocalPayloadRate = 0
	offPayload := loadProduct(b, noPayload)
	for _, f := range benchFrames(b) {
		if f.name != "linklocal_dns" && f.name != "ipv4_udp_64B" {
			continue
		}
		b.Run(f.name+"_no_payload_copy", func(b *testing.B) {
			for b.Loop() {
				r, ns := medianRatio(b, offPayload.Programs["enaprobe_egress"], empty, f.frame)
				b.ReportMetric(r, "x_empty")
				b.ReportMetric(ns, "prog_ns")
			}
		})
	}
	// The same path without noting origins (--no-owners), in the same run:
	// what owner attribution costs a packet of a known flow (one byte read;
	// the helper calls are paid by a flow's first egress packet only).
	noOrigins := DefaultOptions()
	noOrigins.NoOrigins = true
	off := loadProduct(b, noOrigins)
	for _, f := range benchFrames(b)[:2] {
		b.Run(f.name+"_no_origins", func(b *testing.B) {
			for b.Loop() {
				r, ns := medianRatio(b, off.Programs["enaprobe_egress"], empty, f.frame)
				b.ReportMetric(r, "x_empty")
				b.ReportMetric(ns, "prog_ns")
			}
		})
	}
	for _, floor := range []struct {
		name string
		prog *ebpf.Program
	}{{"clock_only", clock}, {"minimal", floors.Programs[BenchMinimal]}} {
		b.Run(floor.name, func(b *testing.B) {
			for b.Loop() {
				r, _ := medianRatio(b, floor.prog, empty, benchFrames(b)[0].frame)
				b.ReportMetric(r, "x_empty")
			}
		})
	}
}

// BenchmarkContention measures what sharing costs when CPUs count at once:
// the time-bucket ring written by every CPU's packets (shared buckets, with
// atomic adds or plain ones, which lose counts under the race) against
// per-CPU open buckets, alone and with both CPUs of this machine running
// the program at once, on different flows (every CPU's packets meet in the
// current bucket) and on the same flow (they also meet in its counters).
func BenchmarkContention(b *testing.B) {
	frames := [2][]byte{
		udpFrame(b, v4A, v4B, 1000, 2000, 22),
		udpFrame(b, v4B, v4A, 3000, 4000, 22),
	}
	variants := []struct {
		name    string
		buckets BucketMode
		atomic  uint8
	}{
		{"per-cpu_buckets", BucketsPerCPU, 1},
		{"shared_buckets", BucketsShared, 1},
		{"shared_buckets_plain_adds", BucketsShared, 0},
	}
	empty := loadFloors(b).Programs[BenchEmpty]
	for _, v := range variants {
		if v.buckets == BucketsPerCPU && !timerPinSupported() {
			continue
		}
		opts := DefaultOptions()
		opts.Buckets = v.buckets
		var coll *ebpf.Collection
		if v.atomic == 1 {
			coll = loadProduct(b, opts)
		} else {
			spec, err := BenchSpec(opts, false)
			coll = loadCollection(b, spec, err)
		}
		egress := coll.Programs["enaprobe_egress"]
		b.Run(v.name+"/one_cpu", func(b *testing.B) {
			for b.Loop() {
				r, _ := medianRatio(b, egress, empty, frames[0])
				b.ReportMetric(r, "x_empty")
			}
		})
		b.Run(v.name+"/two_cpus_two_flows", func(b *testing.B) {
			for b.Loop() {
				b.ReportMetric(concurrentRatio(b, egress, empty, frames), "x_empty")
			}
		})
		b.Run(v.name+"/two_cpus_one_flow", func(b *testing.B) {
			for b.Loop() {
				b.ReportMetric(concurrentRatio(b, egress, empty, [2][]byte{frames[0], frames[0]}), "x_empty")
			}
		})
	}
}

// concurrentRatio runs prog on two goroutines at once, one frame each: the
// mean per-packet time over that of a lone empty run just before, median of
// ratioRounds.
func concurrentRatio(b *testing.B, prog, empty *ebpf.Program, frames [2][]byte) float64 {
	b.Helper()
	var ratios []float64
	for range ratioRounds {
		_, d0, err := empty.Benchmark(frames[0], benchRepeat, nil)
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		ds := make([]time.Duration, 2)
		errs := make([]error, 2)
		for i := range ds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, ds[i], errs[i] = prog.Benchmark(frames[i], benchRepeat, nil)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			b.Fatal(err)
		}
		ratios = append(ratios, float64(ds[0]+ds[1])/2/float64(d0))
	}
	slices.Sort(ratios)
	return ratios[len(ratios)/2]
}

// BenchmarkNewFlow is the first packet of each flow: a map insert. Measured
// with one kernel run per frame over distinct flows, against the same frames
// once their flows exist, and against the empty program run the same way.
func BenchmarkNewFlow(b *testing.B) {
	const flows = 20_000
	opts := DefaultOptions()
	opts.FlowEntries = 2 * flows
	coll := loadProduct(b, opts)
	empty, egress := loadFloors(b).Programs[BenchEmpty], coll.Programs["enaprobe_egress"]
	frames := make([][]byte, flows)
	for i := range frames {
		frames[i] = udpFrame(b, v4A, v4B, uint16(1024+i), 53, 22)
	}
	runAll := func(p *ebpf.Program) time.Duration {
		var sum time.Duration
		for _, f := range frames {
			_, d, err := p.Benchmark(f, 1, nil)
			if err != nil {
				b.Fatal(err)
			}
			sum += d
		}
		return sum
	}
	for b.Loop() {
		clearFlowTables(b, coll)
		base := runAll(empty)
		inserts := runAll(egress)
		established := runAll(egress)
		b.ReportMetric(float64(inserts)/float64(base), "new_x_empty")
		b.ReportMetric(float64(established)/float64(base), "est_x_empty")
		b.ReportMetric(float64(inserts)/float64(established), "new_x_est")
	}
}

// BenchmarkFullMap is the established path with 100,000 other flows in a
// table of 131,072, against the same path with the table holding only this
// flow. The others go in first, so this flow sits deep in its bucket.
func BenchmarkFullMap(b *testing.B) {
	const others = 100_000
	opts := DefaultOptions()
	opts.FlowEntries = 131072
	opts.FlowEntries6 = 1024
	coll := loadProduct(b, opts)
	empty, egress := loadFloors(b).Programs[BenchEmpty], coll.Programs["enaprobe_egress"]
	frame := benchFrames(b)[0].frame
	small, _ := medianRatio(b, egress, empty, frame)

	clearFlowTables(b, coll)
	for i := range others {
		a := net.IPv4(10, byte(9+i>>16), byte(i>>8), byte(i))
		f := udpFrame(b, a, a, uint16(i), 443, 22)
		if _, _, err := egress.Benchmark(f, 1, nil); err != nil {
			b.Fatalf("fill flow table: %v", err)
		}
	}
	if _, _, err := egress.Benchmark(frame, 1, nil); err != nil {
		b.Fatal(err)
	}
	tables, err := mapFlowTables(flowMapsOf(coll))
	if err != nil {
		b.Fatal(err)
	}
	defer tables.close()
	n := 0
	tables.each(func(stateKey, bpf.ProbeFlowStats) { n++ })
	for b.Loop() {
		full, _ := medianRatio(b, egress, empty, frame)
		b.ReportMetric(full, "x_empty")
		b.ReportMetric(full/small, "x_small_map")
		b.ReportMetric(float64(n), "flows_in_table")
	}
}

// BenchmarkReference is the Go reference's cost per frame, for scale when
// the fuzz target runs.
func BenchmarkReference(b *testing.B) {
	frame := benchFrames(b)[1].frame
	for b.Loop() {
		countrules.Count(frame, 0, 0, netip.Addr{})
	}
}
