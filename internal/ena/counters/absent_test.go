package counters

import (
	"reflect"
	"testing"

	"github.com/enaprobe/enaprobe/internal/record"
)

func TestAbsent(t *testing.T) {
	old, err := parseFixture(t, "ena-2.2.10.txt")
	if err != nil {
		t.Fatal(err)
	}
	samples := []record.CounterSample{
		{Interface: "eth0", Err: "boom"},
		{Interface: "eth0", Values: old},
	}
	want := []string{ConntrackAllowanceAvailable, SRDMode, SRDTxPkts, SRDEligibleTxPkts, SRDRxPkts, SRDResourceUtilization, TotalResets}
	if got := Absent(samples, ENACounters); !reflect.DeepEqual(got, want) {
		t.Errorf("Absent = %v, want %v", got, want)
	}
	// The five exceeded counters are there, even at zero.
	if got := Absent(samples, AllowanceExceeded); got != nil {
		t.Errorf("Absent(exceeded) = %v, want none", got)
	}
	// Only failed reads: everything is absent.
	if got := Absent(samples[:1], AllowanceExceeded); !reflect.DeepEqual(got, AllowanceExceeded) {
		t.Errorf("Absent with failed reads only = %v", got)
	}
}

func TestByInterface(t *testing.T) {
	samples := []record.CounterSample{
		{Interface: "eth0", BeforeNs: 1}, {Interface: "eth1", BeforeNs: 2}, {Interface: "eth0", BeforeNs: 3},
	}
	got := ByInterface(samples)
	if len(got) != 2 || len(got["eth0"]) != 2 || got["eth0"][1].BeforeNs != 3 || len(got["eth1"]) != 1 {
		t.Errorf("ByInterface = %+v", got)
	}
}
