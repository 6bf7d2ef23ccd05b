//go:build linux

package loader

import (
	"testing"
)

// BenchmarkImpact is what the impact counting (bpf/include/impact.h) costs
// a packet of a known flow: the product's egress program against the same
// object loaded with NoImpact, alternated in one run (x_no_impact), and
// each against the empty program (x_empty). BPF_PROG_TEST_RUN repeats one
// frame, so a TCP segment with payload is, from its second run on, a
// retransmission every time: the worst case, which takes the bucket's
// atomic add too. Its socket is the test run's own, no TCP socket:
// bpf_sk_fullsock and bpf_tcp_sock are called and the latter finds none,
// so the socket's fields are not read; BenchmarkImpactVeth measures
// real sockets.
func BenchmarkImpact(b *testing.B) {
	floors := loadFloors(b)
	empty := floors.Programs[BenchEmpty]
	on := loadProduct(b, DefaultOptions()).Programs["enaprobe_egress"]
	offOpts := DefaultOptions()
	offOpts.NoImpact = true
	off := loadProduct(b, offOpts).Programs["enaprobe_egress"]
	for _, f := range []struct {
		name  string
		frame []byte
	}{
		{"ipv4_tcp_1500B_retransmitted", tcpFrame(b, v4A, v4B, 40000, 443, false, true, 1500-40)},
		{"ipv4_tcp_ack", tcpFrame(b, v4A, v4B, 40001, 443, false, true, 0)},
		{"ipv6_tcp_1500B_retransmitted", tcpFrame(b, v6A, v6B, 40000, 443, false, true, 1500-60)},
		{"ipv4_udp_64B", udpFrame(b, v4A, v4B, 1000, 2000, 64-42)},
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
	}
}
