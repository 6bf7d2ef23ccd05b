//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
	"github.com/enaprobe/enaprobe/internal/testutil/vethpair"
)

func exitCodeOf(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestTraceMissingCapability: a trace without a capability it needs exits 3
// before loading anything, naming the capability (without CAP_PERFMON the
// verifier's own message was "invalid read from stack").
func TestTraceMissingCapability(t *testing.T) {
	privtest.RequireRoot(t, "setpriv")
	// A copy every user may run: the shared binary sits in a 0700 directory.
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "enaprobe")
	data, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		setpriv []string
		want    []string
	}{
		{"root without CAP_PERFMON", []string{"--bounding-set", "-perfmon,-sys_admin"}, []string{"CAP_PERFMON"}},
		{"root without CAP_NET_ADMIN", []string{"--bounding-set", "-net_admin"}, []string{"CAP_NET_ADMIN"}},
		{"nobody", []string{"--reuid", "65534", "--regid", "65534", "--clear-groups"}, []string{"CAP_BPF", "CAP_NET_ADMIN", "CAP_PERFMON"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(tc.setpriv, "--", bin, "trace", "-i", "lo", "--duration", "1s", "--no-imds")
			cmd := exec.Command("setpriv", args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if code := exitCodeOf(err); code != 3 {
				t.Fatalf("exit %d, want 3\n%s", code, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr does not name %s:\n%s", w, stderr.String())
				}
			}
			if strings.Contains(stderr.String(), "verifier") {
				t.Errorf("reported as a verifier error:\n%s", stderr.String())
			}
		})
	}
}

// TestTraceBundleParentsAndWideBucket: -o x.tar.gz creates its missing
// parents as the directory form does; --bucket 10ms (the documented
// maximum) works with the default window, raised to the bucket; a down
// interface is traced with a note.
func TestTraceBundleParentsAndWideBucket(t *testing.T) {
	pair := vethpair.ForTest(t, vethpair.Options{Octet: 86})
	err := vethpair.Do(pair.NSA, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetDown(lo)
	})
	if err != nil {
		t.Fatalf("set lo down: %v", err)
	}
	bundle := filepath.Join(t.TempDir(), "no", "such", "dir", "b.tar.gz")
	cmd := exec.Command("ip", "netns", "exec", pair.NSA, binary, "trace", "-i", pair.IfA, "-i", "lo", "-i", pair.IfA,
		"--duration", "1s", "--no-imds", "--format", "json", "--bucket", "10ms", "-o", bundle)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("trace: %v\n%s", err, stderr.String())
	}
	var res analyzer.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout: %v\n%s", err, stdout.String())
	}
	if res.Trace.BucketUs != 10_000 || res.Trace.FineWindowUs != 10_000 {
		t.Errorf("bucket %d µs, window %d µs, want 10 ms both", res.Trace.BucketUs, res.Trace.FineWindowUs)
	}
	if !strings.Contains(stderr.String(), "raised") {
		t.Errorf("raising the window is not said:\n%s", stderr.String())
	}
	if !reflect.DeepEqual(res.Trace.Interfaces, []string{pair.IfA, "lo"}) {
		t.Errorf("interfaces %v, want %s and lo once each", res.Trace.Interfaces, pair.IfA)
	}
	if !hasNote(res, "lo: down") {
		t.Errorf("no note on the down interface: %q", res.Trace.Notes)
	}
	if l := res.Trace.Limits.FlowLimitBps; l.Source != "default" {
		t.Errorf("flow limit of a live trace from %q, want default", l.Source)
	}
	if _, err := os.Stat(bundle); err != nil {
		t.Errorf("bundle: %v", err)
	}
}

func hasNote(res analyzer.Result, prefix string) bool {
	for _, n := range res.Trace.Notes {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

// checkReanalysis: analyze BUNDLE with no flags gives the bundle's own
// findings and limits exactly.
func checkReanalysis(t *testing.T, bundle string, res *analyzer.Result) {
	t.Helper()
	out, err := exec.Command(binary, "analyze", bundle, "--format", "json").Output()
	if err != nil {
		t.Fatalf("analyze %s: %v", bundle, err)
	}
	var again analyzer.Result
	if err := json.Unmarshal(out, &again); err != nil {
		t.Fatal(err)
	}
	if len(res.Findings) != len(again.Findings) {
		t.Errorf("analyze of the bundle changed its findings: %d in the bundle, %d again", len(res.Findings), len(again.Findings))
	}
	for i := range min(len(res.Findings), len(again.Findings)) {
		a, _ := json.Marshal(res.Findings[i])
		b, _ := json.Marshal(again.Findings[i])
		if !bytes.Equal(a, b) {
			t.Errorf("finding %d differs:\nbundle: %.600s\nagain:  %.600s", i, a, b)
			break
		}
	}
	if !reflect.DeepEqual(res.Trace.Limits, again.Trace.Limits) || res.Trace.FineWindowUs != again.Trace.FineWindowUs {
		t.Errorf("limits %+v (window %d µs) became %+v (window %d µs)", res.Trace.Limits, res.Trace.FineWindowUs,
			again.Trace.Limits, again.Trace.FineWindowUs)
	}
}

// TestLabInterruptWritesReport: Ctrl-C during a lab scenario ends it early
// and writes the report of what ran, exit 0.
func TestLabInterruptWritesReport(t *testing.T) {
	privtest.RequireRoot(t, "ip", "nft")
	dir := t.TempDir()
	ready, bundle := filepath.Join(dir, "ready"), filepath.Join(dir, "b")
	cmd := exec.Command(binary, "lab", "run", "flow-at-cap", "--format", "json", "-o", bundle, "--ready-file", ready)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, ready, 30*time.Second)
	started := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("lab run after SIGINT: %v\n%s", err, stderr.String())
	}
	var res analyzer.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("no report after SIGINT: %v\n%s", err, stderr.String())
	}
	if d := time.Since(started); d > 5*time.Second || res.Trace.DurationS > 5 {
		t.Errorf("ended %v after SIGINT, trace %.1f s: the 6 s upload was not cut short", d, res.Trace.DurationS)
	}
	if _, err := os.Stat(filepath.Join(bundle, "report.json")); err != nil {
		t.Errorf("bundle: %v", err)
	}
}
