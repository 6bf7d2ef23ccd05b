package main

import (
	"net"
	"strings"
	"testing"

	"github.com/enaprobe/enaprobe/internal/ena"
)

// TestCountersRefusesNonENA: `counters -i IFACE` on an interface without
// the allowance counters exits 2 naming its driver, as without -i, instead
// of printing "absent" at every interval.
func TestCountersRefusesNonENA(t *testing.T) {
	// lo reports no driver; any other interface with a driver that is not
	// ena (virtio_net, veth, ifb) is named by it.
	cases := map[string]string{"lo": "lo reports no driver"}
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if d, _, err := ena.DriverInfo(i.Name); err == nil && !ena.IsENA(d) {
			cases[i.Name] = i.Name + " is " + d + ": no allowance counters"
			break
		}
	}
	for iface, want := range cases {
		code, out := execute(t, "counters", "-i", iface, "--count", "1", "--interval", "10ms")
		if code != exitUsage || !strings.Contains(out, want) || strings.Contains(out, "absent") {
			t.Errorf("counters -i %s: exit %d, %q; want %d and %q", iface, code, out, exitUsage, want)
		}
	}
}

// TestTraceDurationZeroDocumented: -d 0 traces until Ctrl-C, and --help
// says so.
func TestTraceDurationZeroDocumented(t *testing.T) {
	f := newTraceCommand().Flags().Lookup("duration")
	if !strings.Contains(f.Usage, "0: until Ctrl-C") {
		t.Errorf("trace --duration usage %q does not say what 0 does", f.Usage)
	}
}
