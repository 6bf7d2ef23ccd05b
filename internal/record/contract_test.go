//go:build linux

package record_test

import (
	"testing"

	"github.com/enaprobe/enaprobe/bpf"
	"github.com/enaprobe/enaprobe/internal/record"
)

// The C/Go contract, checked by the compiler: record's enums and array
// lengths are the ones bpf2go generated from probe.c. A change on one side
// only stops `go vet` and `make test-short` from compiling this file.

// Array lengths: each assignment compiles only if the lengths are equal.
var (
	_ [record.NumSizeClasses]uint64            = bpf.ProbeSizeSlice{}.Counts
	_ [record.NumClasses]uint64                = bpf.ProbeDirTotals{}.Packets
	_ [record.NumDirections]bpf.ProbeDirTotals = bpf.ProbeCpuState{}.Totals
	_ [record.NumServices]uint32               = bpf.ProbeBucket{}.LinkLocal
)

// Enum values: indexing a one-element array with a constant compiles only
// when the constant is 0, that is when the two values are equal.
var (
	_ = [1]int{}[int(bpf.ProbeDirectionDIR_INGRESS)-int(record.Ingress)]
	_ = [1]int{}[int(bpf.ProbeDirectionDIR_EGRESS)-int(record.Egress)]
	_ = [1]int{}[int(bpf.ProbeDirectionNUM_DIRECTIONS)-record.NumDirections]

	_ = [1]int{}[int(bpf.ProbeProtoClassCLASS_TCP)-int(record.ClassTCP)]
	_ = [1]int{}[int(bpf.ProbeProtoClassCLASS_UDP)-int(record.ClassUDP)]
	_ = [1]int{}[int(bpf.ProbeProtoClassCLASS_ICMP)-int(record.ClassICMP)]
	_ = [1]int{}[int(bpf.ProbeProtoClassCLASS_OTHER)-int(record.ClassOther)]
	_ = [1]int{}[int(bpf.ProbeProtoClassNUM_CLASSES)-record.NumClasses]

	_ = [1]int{}[int(bpf.ProbeLlServiceLL_NONE)-int(record.ServiceNone)]
	_ = [1]int{}[int(bpf.ProbeLlServiceLL_IMDS)-int(record.ServiceIMDS)]
	_ = [1]int{}[int(bpf.ProbeLlServiceLL_DNS)-int(record.ServiceDNS)]
	_ = [1]int{}[int(bpf.ProbeLlServiceLL_NTP)-int(record.ServiceNTP)]
	_ = [1]int{}[int(bpf.ProbeLlServiceNUM_LL_SERVICES)-record.NumServices]
)

// TestContractLists: the lists record derives from the enums cover them.
func TestContractLists(t *testing.T) {
	if len(record.Services) != int(bpf.ProbeLlServiceNUM_LL_SERVICES) {
		t.Errorf("record.Services has %d services, the datapath %d", len(record.Services), bpf.ProbeLlServiceNUM_LL_SERVICES)
	}
	for i, s := range record.Services {
		if s.Index() != i || s == record.ServiceNone {
			t.Errorf("record.Services[%d] = %v, index %d", i, s, s.Index())
		}
	}
	if len(record.SizeClassLimits)+1 != len(bpf.ProbeSizeSlice{}.Counts) || len(record.SizeClassNames) != len(bpf.ProbeSizeSlice{}.Counts) {
		t.Errorf("%d size limits and %d names for the datapath's %d classes", len(record.SizeClassLimits), len(record.SizeClassNames), len(bpf.ProbeSizeSlice{}.Counts))
	}
}
