//go:build linux

package vethpair

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

// ForTest makes a pair for a test that needs root (skipped without, failed
// without under CI=true) and removes it when the test ends.
func ForTest(tb testing.TB, opts Options) *Pair {
	tb.Helper()
	privtest.RequireRoot(tb, "ip", "tc", "bpftool")
	p, err := New(opts)
	if err != nil {
		tb.Fatalf("make veth pair: %v", err)
	}
	tb.Cleanup(func() {
		if err := p.Close(); err != nil {
			tb.Errorf("remove veth pair: %v", err)
		}
	})
	return p
}

// Leftovers returns what of enaprobe is still hooked to A's interface, as
// tc and bpftool show it: legacy filters, a clsact qdisc, tcx programs.
// Empty means nothing.
func (p *Pair) Leftovers() (string, error) {
	var found []string
	for _, args := range [][]string{
		{"tc", "filter", "show", "dev", p.IfA, "ingress"},
		{"tc", "filter", "show", "dev", p.IfA, "egress"},
		{"tc", "qdisc", "show", "dev", p.IfA},
		{"bpftool", "net", "show", "dev", p.IfA},
	} {
		out, err := exec.Command("ip", append([]string{"netns", "exec", p.NSA}, args...)...).CombinedOutput()
		if err != nil && !strings.Contains(string(out), "Cannot find specified qdisc") {
			return "", fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "enaprobe") || strings.Contains(line, "clsact") || strings.Contains(line, "tcx/") {
				found = append(found, strings.Join(args[:2], " ")+": "+strings.TrimSpace(line))
			}
		}
	}
	// bpftool before 7.3 does not list tcx: ask the kernel.
	err := Do(p.NSA, func() error {
		ifc, err := net.InterfaceByName(p.IfA)
		if err != nil {
			return err
		}
		for _, typ := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
			res, err := link.QueryPrograms(link.QueryOptions{Target: ifc.Index, Attach: typ})
			if errors.Is(err, unix.EINVAL) || errors.Is(err, ebpf.ErrNotSupported) {
				return nil // a kernel without tcx (before 6.6): no tcx program can be left
			}
			if err != nil {
				return fmt.Errorf("query %s programs of %s: %w", typ, p.IfA, err)
			}
			for _, ap := range res.Programs {
				found = append(found, fmt.Sprintf("%s: program %d (%s)", typ, ap.ID, programName(ap.ID)))
			}
		}
		return nil
	})
	return strings.Join(found, "\n"), err
}

func programName(id ebpf.ProgramID) string {
	prog, err := ebpf.NewProgramFromID(id)
	if err != nil {
		return "?"
	}
	defer prog.Close()
	info, err := prog.Info()
	if err != nil {
		return "?"
	}
	return info.Name
}
