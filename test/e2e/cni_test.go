//go:build linux

package e2e

import (
	"encoding/json"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
	"github.com/enaprobe/enaprobe/internal/testutil/vethpair"
)

// TestTraceBesideCNIFilter is the legacy tc case through the real
// binary: another tool's filter at priority 1, handle 1 ends the chain on
// every packet (a classic BPF classifier that matches all). `trace --attach
// tc` starts beside it (it used to fail with "file exists"), counts every
// packet that arrived, and leaves the other filter and its qdisc in place.
func TestTraceBesideCNIFilter(t *testing.T) {
	privtest.RequireRoot(t, "ip", "tc")
	pair := vethpair.ForTest(t, vethpair.Options{Octet: 94})
	inNS(t, pair.NSA, "tc", "qdisc", "add", "dev", pair.IfA, "clsact")
	inNS(t, pair.NSA, "tc", "filter", "add", "dev", pair.IfA, "ingress", "prio", "1", "handle", "1",
		"bpf", "bytecode", "1,6 0 0 4294967295,", "classid", "1:1")
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command("ip", "netns", "exec", pair.NSA, binary, "trace", "-i", pair.IfA, "--attach", "tc",
		"--duration", "3s", "--no-imds", "--format", "json", "--ready-file", ready, "--log-level", "warn")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, ready, 30*time.Second)
	const n = 250
	err := vethpair.Do(pair.NSB, func() error {
		c, err := net.ListenUDP("udp", nil)
		if err != nil {
			return err
		}
		defer c.Close()
		for i := 0; i < n; i++ {
			if _, err := c.WriteToUDPAddrPort(make([]byte, 100), netip.AddrPortFrom(pair.AddrA, 7100)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("trace beside another filter: %v\n%s", err, stderr.String())
	}
	var res analyzer.Result
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, stdout.String())
	}
	var ingress uint64
	for _, tt := range res.Totals {
		if tt.Direction == "ingress" {
			ingress = tt.Packets
		}
	}
	// Only B's datagrams cross: the pair is quiet and A answers nothing
	// (the port unreachable replies are egress).
	if ingress != n {
		t.Errorf("ingress packets %d, want the %d sent", ingress, n)
	}
	for _, note := range res.Trace.Notes {
		if strings.Contains(note, "before enaprobe") {
			t.Errorf("note %q: enaprobe should run first", note)
		}
	}
	filters := inNS(t, pair.NSA, "tc", "filter", "show", "dev", pair.IfA, "ingress")
	if strings.Contains(filters, "enaprobe") || !strings.Contains(filters, "handle 0x1") {
		t.Errorf("after the trace, want only the other tool's filter:\n%s", filters)
	}
}
