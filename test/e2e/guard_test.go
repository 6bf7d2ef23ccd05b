//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/testutil/vethpair"
)

// TestTraceBacksOffOnDeviceTrouble: the counters file's
// ena_admin_q_no_completion moves 3 s into a 6 s trace (the device's admin
// queue lost a command: the driver resets the device if it goes on). The
// trace backs its reads off at once to one a second, goes on tracing, and
// the report says so: in the JSON (trace.ena[].read_guard, a note) and in
// the text report of the bundle; it also says how long the reads held the
// lock in all.
func TestTraceBacksOffOnDeviceTrouble(t *testing.T) {
	pair := vethpair.ForTest(t, vethpair.Options{Octet: 87})
	dir := t.TempDir()
	counters := filepath.Join(dir, "counters.txt")
	base, err := os.ReadFile("../../testdata/ethtool/ena-2.10.txt")
	if err != nil {
		t.Fatal(err)
	}
	write := func(noCompletion string) {
		b := bytes.Replace(base, []byte("ena_admin_q_no_completion: 0"), []byte("ena_admin_q_no_completion: "+noCompletion), 1)
		tmp := counters + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, counters); err != nil { // whole, never half written
			t.Fatal(err)
		}
	}
	write("0")
	ready, bundle := filepath.Join(dir, "ready"), filepath.Join(dir, "b.tar.gz")
	cmd := exec.Command("ip", "netns", "exec", pair.NSA, binary, "trace", "-i", pair.IfA, "--counters-file", pair.IfA+"="+counters,
		"--duration", "6s", "--no-imds", "--format", "json", "-o", bundle, "--ready-file", ready, "--log-level", "warn")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, ready, 30*time.Second)
	// The scenario itself is timed: the counter moves 3 s in.
	time.Sleep(3 * time.Second)
	write("1")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("trace: %v\n%s", err, stderr.String())
	}
	var res analyzer.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout: %v\n%s", err, stdout.String())
	}
	if len(res.Trace.ENA) != 1 {
		t.Fatalf("ena: %+v", res.Trace.ENA)
	}
	e := res.Trace.ENA[0]
	if len(e.ReadGuard) != 1 {
		t.Fatalf("read guard events %+v, want one: the counter moved once", e.ReadGuard)
	}
	g := e.ReadGuard[0]
	if g.Action != "backed off" || g.IntervalMs != 1000 || !strings.Contains(g.Reason, "ena_admin_q_no_completion +1") || g.AtS < 2.5 || g.AtS > 5.5 {
		t.Errorf("read guard event %+v, want backed off to 1000 ms on ena_admin_q_no_completion +1, about 3 s in", g)
	}
	// Every 10 ms until the sign, then every second: a handful more.
	if most := int(g.AtS*100) + 2 + int(6-g.AtS) + 2; e.Reads > most {
		t.Errorf("%d reads, want at most %d: reads did not back off", e.Reads, most)
	}
	if !hasNote(res, pair.IfA+": counter reads backed off to every 1s") {
		t.Errorf("no note on the backing off: %q", res.Trace.Notes)
	}
	if len(res.Profile.CounterReadLatency) != 1 || res.Profile.CounterReadLatency[0].HeldMs <= 0 {
		t.Errorf("read latency %+v, want the lock's time held in all", res.Profile.CounterReadLatency)
	}
	text, err := exec.Command(binary, "analyze", bundle).Output()
	if err != nil {
		t.Fatalf("analyze %s: %v", bundle, err)
	}
	if !strings.Contains(string(text), "counter reads backed off to every 1s") || !strings.Contains(string(text), "LOCK HELD") {
		t.Errorf("the text report does not say the reads backed off, or how long they held the lock:\n%s", text)
	}
}
