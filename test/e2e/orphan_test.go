//go:build linux

package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
	"github.com/enaprobe/enaprobe/internal/testutil/vethpair"
)

// startTCTrace starts `enaprobe trace --attach tc` on A's interface and
// waits until it is attached. `ip netns exec` execs the binary: the PID is
// enaprobe's.
func startTCTrace(t *testing.T, pair *vethpair.Pair) *exec.Cmd {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command("ip", "netns", "exec", pair.NSA, binary, "trace", "-i", pair.IfA, "--attach", "tc",
		"--duration", "1m", "--no-imds", "--ready-file", ready, "--log-level", "warn")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitFile(t, ready, 30*time.Second)
	return cmd
}

func killHard(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
}

func inNS(t *testing.T, ns string, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestOrphansOfSIGKILL kills `enaprobe trace --attach tc` with SIGKILL and
// checks what it left is found and removed: by `enaprobe cleanup`, and by
// the next trace in either mode; a filter and qdisc of another tool stay.
func TestOrphansOfSIGKILL(t *testing.T) {
	privtest.RequireRoot(t, "ip", "tc")
	t.Run("cleanup", func(t *testing.T) {
		pair := vethpair.ForTest(t, vethpair.Options{Octet: 90})
		live := startTCTrace(t, pair)
		pid := live.Process.Pid
		// A second tc trace beside the first works.
		second := startTCTrace(t, pair)
		out := inNS(t, pair.NSA, binary, "cleanup", "-i", pair.IfA)
		for _, p := range []int{pid, second.Process.Pid} {
			if strings.Count(out, fmt.Sprintf("PID %d running: kept", p)) != 2 {
				t.Errorf("cleanup with two traces running, want both filters of PID %d kept:\n%s", p, out)
			}
		}
		killHard(t, live)
		killHard(t, second)
		left, err := pair.Leftovers()
		if err != nil || !strings.Contains(left, fmt.Sprintf("enaprobe-%d-ingress", pid)) || !strings.Contains(left, "clsact") {
			t.Fatalf("after SIGKILL, want the orphan filters and qdisc: %v\n%s", err, left)
		}
		out = inNS(t, pair.NSA, binary, "cleanup")
		if strings.Count(out, "not running: removed") != 4 || !strings.Contains(out, "clsact qdisc added by enaprobe\tremoved") {
			t.Errorf("cleanup output, want 4 filters and the qdisc removed:\n%s", out)
		}
		if left, err := pair.Leftovers(); err != nil || left != "" {
			t.Errorf("after cleanup: %v\n%s", err, left)
		}
		if out := inNS(t, pair.NSA, binary, "cleanup"); !strings.Contains(out, "no tc filter of enaprobe found") {
			t.Errorf("second cleanup: %s", out)
		}
	})
	for i, mode := range []string{"tcx", "tc"} {
		t.Run("next trace "+mode, func(t *testing.T) {
			pair := vethpair.ForTest(t, vethpair.Options{Octet: byte(91 + i)})
			dead := startTCTrace(t, pair)
			killHard(t, dead)
			out, err := exec.Command("ip", "netns", "exec", pair.NSA, binary, "trace", "-i", pair.IfA, "--attach", mode,
				"--duration", "300ms", "--no-imds", "--log-level", "warn", "--format", "json").CombinedOutput()
			if err != nil {
				t.Fatalf("trace after an orphan: %v\n%s", err, out)
			}
			for _, want := range []string{
				fmt.Sprintf("removed tc ingress filter enaprobe-%d-ingress", dead.Process.Pid),
				fmt.Sprintf("removed tc egress filter enaprobe-%d-egress", dead.Process.Pid),
				"removed the clsact qdisc a killed enaprobe had added to " + pair.IfA,
			} {
				if !strings.Contains(string(out), want) {
					t.Errorf("the trace's log does not say %q:\n%s", want, out)
				}
			}
			if left, err := pair.Leftovers(); err != nil || left != "" {
				t.Errorf("after the trace: %v\n%s", err, left)
			}
		})
	}
	t.Run("foreign qdisc", func(t *testing.T) {
		pair := vethpair.ForTest(t, vethpair.Options{Octet: 93})
		// Another tool's qdisc and filter (classic BPF: match everything).
		inNS(t, pair.NSA, "tc", "qdisc", "add", "dev", pair.IfA, "clsact")
		inNS(t, pair.NSA, "tc", "filter", "add", "dev", pair.IfA, "ingress", "prio", "5", "handle", "7",
			"bpf", "bytecode", "1,6 0 0 4294967295,", "classid", "1:1")
		dead := startTCTrace(t, pair)
		killHard(t, dead)
		out := inNS(t, pair.NSA, binary, "cleanup", "-i", pair.IfA)
		if strings.Count(out, "not running: removed") != 2 || strings.Contains(out, "qdisc") {
			t.Errorf("cleanup output, want the 2 filters removed and no qdisc:\n%s", out)
		}
		filters := inNS(t, pair.NSA, "tc", "filter", "show", "dev", pair.IfA, "ingress")
		if strings.Contains(filters, "enaprobe") || !strings.Contains(filters, "handle 0x7") {
			t.Errorf("after cleanup, want only the other tool's filter:\n%s", filters)
		}
		if q := inNS(t, pair.NSA, "tc", "qdisc", "show", "dev", pair.IfA); !strings.Contains(q, "clsact") {
			t.Errorf("cleanup removed a qdisc enaprobe did not add:\n%s", q)
		}
	})
}
