//go:build linux

package loader

import (
	"testing"

	"github.com/enaprobe/enaprobe/bpf"
	"github.com/enaprobe/enaprobe/internal/record"
)

// TestImpactStats: a flow's impact fields through the collector. The
// socket's count is what it rose by since the entry's first packet with a
// socket, and its D-SACKs alike, summed over entries of one flow (an evicted entry and its
// successor); the wire's counts add up; the srtt range and the echo ages
// count only when set in the snapshot generation now ending, the ages
// only from the entry that set them.
func TestImpactStats(t *testing.T) {
	sockSeen, echoGen := uint8(bpf.ProbeImpactFlagIMPACT_SOCK_SEEN), uint8(bpf.ProbeImpactFlagIMPACT_ECHO_GEN)
	first := bpf.ProbeFlowStats{Packets: 10, FirstSeenNs: 1, SeqRetrans: 3, SeqTail: 1,
		SkRetrans: 107, SkRetrans0: 100, SkDsack: 12, SkDsack0: 10, ImpactFlags: sockSeen | echoGen, SrttMinUs: 900, SrttMaxUs: 1500, SnapGen: 4, GapMaxNs: 7_500_000,
		EchoAgeMinMs: 0xfffffffe, EchoAgeMaxMs: 40}
	st := flowStats(addStats(bpf.ProbeFlowStats{}, first), 4)
	if st.RetransLocal != 7 || st.DSACKLocal != 2 || st.RetransWire != 3 || st.RetransTail != 1 || st.SRTTMinUs != 900 || st.SRTTMaxUs != 1500 || st.GapMaxUs != 7500 {
		t.Errorf("one entry: %+v, want local 7 (2 D-SACKed) wire 3 tail 1 srtt 900-1500 gap 7500 us", st)
	}
	if !st.Echoed || st.EchoAgeMinMs != 0xfffffffe || st.EchoAgeMaxMs != 40 || record.EchoRiseMs(st.EchoAgeMinMs, st.EchoAgeMaxMs) != 42 {
		t.Errorf("one entry: echo ages %v %d-%d, want 0xfffffffe-40, 42 ms apart across the wrap", st.Echoed, st.EchoAgeMinMs, st.EchoAgeMaxMs)
	}
	if st := flowStats(first, 5); st.SRTTMaxUs != 0 || st.SRTTMinUs != 0 || st.GapMaxUs != 0 || st.Echoed {
		t.Errorf("srtt range and gap of generation 4 taken in generation 5: %d-%d, %d", st.SRTTMinUs, st.SRTTMaxUs, st.GapMaxUs)
	}
	// The entry evicted, a new one of the same flow (the same socket,
	// whose count went on from 107).
	second := bpf.ProbeFlowStats{Packets: 4, FirstSeenNs: 50, SeqRetrans: 2,
		SkRetrans: 112, SkRetrans0: 109, SkDsack: 13, SkDsack0: 12, ImpactFlags: sockSeen, SrttMinUs: 2000, SrttMaxUs: 2100, SnapGen: 6}
	base := addStats(bpf.ProbeFlowStats{}, first)
	cum := addStats(base, second)
	st = flowStats(cum, 6)
	if st.RetransLocal != 7+3 || st.DSACKLocal != 2+1 || st.RetransWire != 5 || st.RetransTail != 1 || st.SRTTMinUs != 2000 {
		t.Errorf("two entries: %+v, want local 10 (3 D-SACKed) wire 5 tail 1 srtt from the second", st)
	}
	if st.Echoed {
		t.Errorf("two entries: echo ages %d-%d of the first entry's generation taken for the second's", st.EchoAgeMinMs, st.EchoAgeMaxMs)
	}
	// A third entry that saw no socket keeps the sum.
	third := bpf.ProbeFlowStats{Packets: 1, FirstSeenNs: 90}
	if st := flowStats(addStats(cum, third), 7); st.RetransLocal != 10 || st.RetransWire != 5 {
		t.Errorf("three entries: %+v, want local 10 wire 5", st)
	}
	// No socket at all: nothing local, whatever the fields hold.
	if st := flowStats(bpf.ProbeFlowStats{Packets: 1, SkRetrans: 5, SkDsack: 2}, 0); st.RetransLocal != 0 || st.DSACKLocal != 0 {
		t.Errorf("entry without a socket: local %d", st.RetransLocal)
	}
}
