//go:build linux

package e2e

import (
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
	"github.com/enaprobe/enaprobe/internal/testutil/vethpair"
)

// TestInterruptWritesReport sends SIGINT to a trace in the middle: the
// report and bundle are still written, the exit code is 0, and nothing of
// ours stays attached. Both attach modes.
func TestInterruptWritesReport(t *testing.T) {
	privtest.RequireRoot(t)
	for i, mode := range []string{"tcx", "tc"} {
		t.Run(mode, func(t *testing.T) {
			pair := vethpair.ForTest(t, vethpair.Options{Octet: byte(80 + i)})
			dir := t.TempDir()
			ready, bundle := filepath.Join(dir, "ready"), filepath.Join(dir, "bundle.tar.gz")
			cmd := exec.Command("ip", "netns", "exec", pair.NSA, binary, "trace", "-i", pair.IfA, "--attach", mode,
				"--duration", "1m", "--no-imds", "--format", "json", "-o", bundle, "--ready-file", ready)
			stdout, err := os.Create(filepath.Join(dir, "stdout.json"))
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stdout = stdout
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitFile(t, ready, 20*time.Second)
			// Some traffic, so the report has something to say.
			err = vethpair.Do(pair.NSA, func() error {
				c, err := net.ListenUDP("udp", nil)
				if err != nil {
					return err
				}
				defer c.Close()
				for k := 0; k < 100; k++ {
					if _, err := c.WriteToUDPAddrPort(make([]byte, 100), netip.AddrPortFrom(pair.AddrB, 7000)); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			// Each datagram was counted on egress before its write returned;
			// the final drain after SIGINT reads them.
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("trace after SIGINT: %v\n%s", err, stderr.String())
			}
			stdout.Close()
			b, err := os.ReadFile(stdout.Name())
			if err != nil {
				t.Fatal(err)
			}
			var res analyzer.Result
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatalf("stdout is not the JSON report: %v\n%s", err, b)
			}
			if res.Trace.DurationS > 30 || res.Trace.AttachMode != mode {
				t.Errorf("trace info %+v", res.Trace)
			}
			var egress uint64
			for _, tt := range res.Totals {
				if tt.Direction == "egress" {
					egress = tt.Packets
				}
			}
			if egress < 100 {
				t.Errorf("egress packets %d, want at least the 100 sent", egress)
			}
			if err := validateReport(b); err != nil {
				t.Errorf("report does not validate: %v", err)
			}
			if _, err := os.Stat(bundle); err != nil {
				t.Errorf("bundle not written: %v", err)
			}
			if left, err := pair.Leftovers(); err != nil || left != "" {
				t.Errorf("after exit: %v\n%s", err, left)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	out, err := exec.Command(binary, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "enaprobe ") {
		t.Fatalf("version: %v %s", err, out)
	}
}

// TestUsageErrors checks the documented exit code 2 for bad flags.
func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"trace", "--bucket", "1us"}, {"trace", "--format", "yaml"}, {"trace", "--flow-limit", "fast"}, {"lab", "run", "nope"},
		{"trace", "--counter-lag", "-5ms"}, {"analyze", "bundle.tar.gz", "--counter-lag", "soon"},
		{"serve"}, {"serve", "--bundle-dir", "/tmp/x", "--history", "0s"}, {"serve", "--bundle-dir", "/tmp/x", "--listen", "9464"},
		{"serve", "--bundle-dir", "/tmp/x", "--min-gap", "-1s"}, {"serve", "--bundle-dir", "/tmp/x", "--recorder-bytes", "10"}} {
		err := exec.Command(binary, args...).Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("enaprobe %v: %v, want exit code 2", args, err)
		}
	}
}
