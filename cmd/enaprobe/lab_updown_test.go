//go:build linux

package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/enaprobe/enaprobe/internal/lab"
	"github.com/enaprobe/enaprobe/internal/namedns"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

// TestLabBurstFlags: --out-burst and --in-burst set the lab's buckets,
// in bytes with their unit.
func TestLabBurstFlags(t *testing.T) {
	var f labFlags
	fs := pflag.NewFlagSet("lab", pflag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse([]string{"--out-burst", "360kB", "--in-burst", "3.6MB"}); err != nil {
		t.Fatal(err)
	}
	c := f.apply(lab.DefaultConfig())
	if c.OutBurst != 360_000 || c.InBurst != 3_600_000 {
		t.Errorf("bursts out %d, in %d; want 360000 and 3600000", c.OutBurst, c.InBurst)
	}
	for _, bad := range []string{"0", "-1kB", "5 parsecs", "5Mb"} {
		if err := fs.Parse([]string{"--out-burst", bad}); err == nil {
			t.Errorf("--out-burst %s accepted", bad)
		}
	}
	for v, want := range map[uint64]string{40_000_000: "40Mbit", 2_500_000: "2500kbit", 1234: "1234bit", 1e9: "1Gbit"} {
		if got := formatRateFlag(v); got != want {
			t.Errorf("formatRateFlag(%d) = %s, want %s", v, got, want)
		}
	}
	for v, want := range map[uint64]string{1 << 20: "1MiB", 360_000: "360kB", 1234: "1234B"} {
		if got := formatBytesFlag(v); got != want {
			t.Errorf("formatBytesFlag(%d) = %s, want %s", v, got, want)
		}
	}
}

// startLabUp runs `lab up` as its own process and returns it once it
// printed its commands, with what it printed.
func startLabUp(t *testing.T, args ...string) (*exec.Cmd, []string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, append([]string{"lab", "up"}, args...)...)
	cmd.Env = append(os.Environ(), enaprobeMainEnv+"=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var out []string
	deadline := time.After(90 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("lab up ended before it was up: %q", out)
			}
			out = append(out, l)
			if strings.Contains(l, "lab down") {
				go func() { // drain what else it prints
					for range lines {
					}
				}()
				return cmd, out
			}
		case <-deadline:
			t.Fatalf("lab up not up within 90s: %q", out)
		}
	}
}

func namespacesOf(t *testing.T, id string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(namedns.Dir, "enalab-"+id+"-*"))
	return m
}

// TestLabUpDown: lab up prints a trace command that pastes as is (the
// binary's path, the limits as flags take them, the pps allowance); lab
// down stops it and everything it made goes, also after a lab up was
// killed; lab down twice is fine.
func TestLabUpDown(t *testing.T) {
	privtest.RequireRoot(t, "nft", "tc")
	stateDir := t.TempDir()
	t.Setenv(labStateDirEnv, stateDir) // for the lab up and down it runs
	self, _ := os.Executable()
	counters := filepath.Join(t.TempDir(), "counters.txt")
	up, out := startLabUp(t, "--counters-file", counters, "--duration", "2m", "--out-burst", "360kB")
	text := strings.Join(out, "\n")
	id := strings.Fields(out[0])[1]
	for _, want := range []string{"sudo ip netns exec enalab-" + id + "-inst " + self + " trace -i ens5",
		"--baseline 40Mbit", "--flow-limit 10Mbit", "--pps-allowance 8000", "(burst 360kB)"} {
		if !strings.Contains(text, want) {
			t.Errorf("lab up printed no %q:\n%s", want, text)
		}
	}
	if n := namespacesOf(t, id); len(n) != 2 {
		t.Fatalf("lab %s namespaces %v, want 2", id, n)
	}
	code, stderr := runMain(t, nil, "lab", "down")
	if code != exitOK {
		t.Fatalf("lab down: exit %d: %s", code, stderr)
	}
	if err := up.Wait(); err != nil {
		t.Errorf("lab up after lab down: %v", err)
	}
	if n := namespacesOf(t, id); len(n) != 0 {
		t.Errorf("after lab down: namespaces %v left", n)
	}
	if _, err := os.Stat(counters); !os.IsNotExist(err) {
		t.Errorf("after lab down: counters file %s: %v", counters, err)
	}
	if code, stderr := runMain(t, nil, "lab", "down"); code != exitOK {
		t.Errorf("lab down twice: exit %d: %s", code, stderr)
	}

	// A killed lab up leaves its namespaces; lab down removes them.
	up, out = startLabUp(t, "--counters-file", counters, "--duration", "2m")
	id = strings.Fields(out[0])[1]
	if err := up.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	up.Wait()
	if n := namespacesOf(t, id); len(n) != 2 {
		t.Fatalf("killed lab %s namespaces %v, want 2 left", id, n)
	}
	if code, stderr := runMain(t, nil, "lab", "down"); code != exitOK {
		t.Fatalf("lab down after kill: exit %d: %s", code, stderr)
	}
	if n := namespacesOf(t, id); len(n) != 0 {
		t.Errorf("after lab down of a killed lab: namespaces %v left", n)
	}
	if left, _ := os.ReadDir(stateDir); len(left) != 0 {
		t.Errorf("lab state left: %v", left)
	}
}
