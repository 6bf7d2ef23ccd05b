//go:build linux

package loader

import (
	"errors"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

// BenchmarkImpact is what the impact counting (bpf/include/impact.h) costs
// a packet of a known flow: the product's egress program against the same
// object loaded with NoImpact, alternated in one run (x_no_impact), and
// each against the empty program (x_empty). BPF_PROG_TEST_RUN repeats one
// frame, so a TCP segment with payload is, from its second run on, a
// retransmission every time: the worst case, which takes the bucket's
// atomic add too. Its socket is the test run's own, no TCP socket:
// bpf_sk_fullsock and bpf_tcp_sock are called and the latter finds none,
// so the socket's fields are not read. The socket is looked at once per
// fine window of a flow: the _every_packet rows set the window to 1 ns, so
// every packet pays the helper call, the cost of a flow's first packet in
// a window.
//
// The _timestamps rows are Linux's segments, NOP NOP TIMESTAMP first, whose
// echo the program ages; _vs_no_timestamps is each against the same segment
// without the option (12 bytes shorter), by the product alone: the parse of
// the option is in the NoImpact object too.
func BenchmarkImpact(b *testing.B) {
	withoutTimestamps := map[string][]byte{
		"ipv4_tcp_ack_timestamps":   tcpFrame(b, v4A, v4B, 40001, 443, false, true, 0),
		"ipv4_tcp_1500B_timestamps": tcpFrame(b, v4A, v4B, 40000, 443, false, true, 1500-52),
	}
	floors := loadFloors(b)
	empty := floors.Programs[BenchEmpty]
	on := loadProduct(b, DefaultOptions()).Programs["enaprobe_egress"]
	offOpts := DefaultOptions()
	offOpts.NoImpact = true
	off := loadProduct(b, offOpts).Programs["enaprobe_egress"]
	everyOn := loadEveryPacket(b, DefaultOptions())
	everyOff := loadEveryPacket(b, offOpts)
	for _, f := range []struct {
		name  string
		frame []byte
	}{
		{"ipv4_tcp_1500B_retransmitted", tcpFrame(b, v4A, v4B, 40000, 443, false, true, 1500-40)},
		{"ipv4_tcp_ack", tcpFrame(b, v4A, v4B, 40001, 443, false, true, 0)},
		{"ipv6_tcp_1500B_retransmitted", tcpFrame(b, v6A, v6B, 40000, 443, false, true, 1500-60)},
		{"ipv4_udp_64B", udpFrame(b, v4A, v4B, 1000, 2000, 64-42)},
		{"ipv4_tcp_ack_timestamps", tsFrame(b, 40001, linuxTS, 7, 9, 0)},
		{"ipv4_tcp_1500B_timestamps", tsFrame(b, 40000, linuxTS, 7, 9, 1500-52)},
	} {
		b.Run(f.name, func(b *testing.B) {
			for b.Loop() {
				r, ns := medianRatio(b, on, off, f.frame)
				b.ReportMetric(r, "x_no_impact")
				b.ReportMetric(ns, "prog_ns")
				r, _ = medianRatio(b, on, empty, f.frame)
				b.ReportMetric(r, "x_empty")
				r, _ = medianRatio(b, off, empty, f.frame)
				b.ReportMetric(r, "x_empty_no_impact")
			}
		})
		if plain, ok := withoutTimestamps[f.name]; ok {
			// The timestamps' parse and the echo's age, which the
			// NoImpact object parses too: against the same segment
			// without the option, by the product.
			b.Run(f.name+"_vs_no_timestamps", func(b *testing.B) {
				for b.Loop() {
					r, ns := medianRatioFrames(b, on, on, f.frame, plain)
					b.ReportMetric(r, "x_no_timestamps")
					b.ReportMetric(ns, "prog_ns")
				}
			})
		}
		if strings.HasPrefix(f.name, "ipv4_tcp") {
			b.Run(f.name+"_every_packet", func(b *testing.B) {
				for b.Loop() {
					r, ns := medianRatio(b, everyOn, everyOff, f.frame)
					b.ReportMetric(r, "x_no_impact")
					b.ReportMetric(ns, "prog_ns")
				}
			})
		}
	}
}

// loadEveryPacket loads the product's egress program with a fine window
// of 1 ns, a new window at every packet, and no window events.
func loadEveryPacket(b *testing.B, opts Options) *ebpf.Program {
	b.Helper()
	spec, err := Spec(opts)
	if err == nil {
		err = errors.Join(spec.Variables["window_ns"].Set(uint64(1)), spec.Variables["heavy_bytes"].Set(^uint64(0)))
	}
	return loadCollection(b, spec, err).Programs["enaprobe_egress"]
}
