//go:build linux

package loader

import (
	"testing"

	"github.com/cilium/ebpf"
)

// BenchmarkTrampoline is what running first through the generation gate
// costs: the trampoline that tail-calls the counting program, against the
// counting program run directly, on the established-flow path.
func BenchmarkTrampoline(b *testing.B) {
	coll := loadProduct(b, DefaultOptions())
	egress := coll.Programs["enaprobe_egress"]
	h, err := newHook(&Attachment{Interface: "bench"}, "egress", egress, ebpf.AttachTCXEgress, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.close() })
	if err := h.gate.Put(uint32(0), uint32(1)); err != nil {
		b.Fatal(err)
	}
	tramp, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: TrampolineName, Type: ebpf.SchedCLS, License: "Dual MIT/GPL", Instructions: h.trampoline(1)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tramp.Close() })
	frame := benchFrames(b)[0].frame
	empty := loadFloors(b).Programs[BenchEmpty]
	for b.Loop() {
		r, _ := medianRatio(b, tramp, egress, frame)
		b.ReportMetric(r, "x_direct")
		r, _ = medianRatio(b, tramp, empty, frame)
		b.ReportMetric(r, "x_empty")
	}
}
