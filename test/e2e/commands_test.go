//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
	"github.com/enaprobe/enaprobe/internal/testutil/vethpair"
)

// TestCountersCommand reads counters from a file that an "emulator"
// rewrites, and checks the deltas, rates, the reset and the gauge.
func TestCountersCommand(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "counters.txt")
	write := func(bwOut, pps, avail uint64) {
		text := "NIC statistics:\n" +
			"     bw_in_allowance_exceeded: 0\n" +
			"     bw_out_allowance_exceeded: " + itoa(bwOut) + "\n" +
			"     pps_allowance_exceeded: " + itoa(pps) + "\n" +
			"     conntrack_allowance_exceeded: 0\n" +
			"     linklocal_allowance_exceeded: 0\n" +
			"     conntrack_allowance_available: " + itoa(avail) + "\n"
		// Renamed into place, so a read never sees a half-written file.
		tmp := path + ".new"
		if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	// Each rewrite follows the line of the read before it, so every read
	// sees the next state whatever the machine's load.
	write(100, 50, 9000)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "counters", "--counters-file", "eth9="+path, "--interval", "300ms", "--count", "2")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		switch len(lines) {
		case 1:
			write(160, 10, 8000) // bw_out +60; pps went down: a reset
		case 2:
			write(160, 15, 7000)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("counters: %v\n%s%s", err, strings.Join(lines, "\n"), stderr.String())
	}
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4 (first read, then 2 intervals, then the refresh):\n%s", len(lines), strings.Join(lines, "\n"))
	}
	// Changes at successive reads 300 ms apart: a refresh at least that
	// fast, not how fast.
	if want := "eth9: the counters changed at successive reads 300ms apart (2 changes): they refresh at least that often"; !strings.HasPrefix(lines[3], want) {
		t.Errorf("last line %q, want %q", lines[3], want)
	}
	for _, want := range []string{"bw_out 100", "conntrack_available 9000"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("first line %q lacks %q", lines[0], want)
		}
	}
	for _, want := range []string{"bw_out +60", "pps reset(50->10)", "conntrack_available 8000"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("second line %q lacks %q", lines[1], want)
		}
	}
	if !strings.Contains(lines[2], "pps +5") {
		t.Errorf("third line %q lacks pps +5", lines[2])
	}
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

// TestAnalyzeBundle re-analyzes a lab bundle with another per-flow cap, as
// an unprivileged user would: no root, nothing traced.
func TestAnalyzeBundle(t *testing.T) {
	privtest.RequireRoot(t, "ip", "nft")
	dir := t.TempDir()
	bundle := filepath.Join(dir, "b.tar.gz")
	if out, err := exec.Command(binary, "lab", "run", "clean", "--format", "json", "-o", bundle).CombinedOutput(); err != nil {
		t.Fatalf("lab run: %v\n%s", err, out)
	}
	cmd := exec.Command(binary, "analyze", bundle, "--format", "json", "--flow-limit", "1Mbit")
	cmd.Env = append(os.Environ(), "HOME="+dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("analyze: %v", err)
	}
	if err := validateReport(out); err != nil {
		t.Fatalf("report does not validate: %v", err)
	}
	var res analyzer.Result
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	if l := res.Trace.Limits.FlowLimitBps; l.Value != 1e6 || l.Source != "options" {
		t.Errorf("flow limit %+v, want 1 Mbit/s from the options", l)
	}
	if !hasNote(res, "analyze --flow-limit 1 Mbit/s overrides the recorded 10 Mbit/s (from lab)") {
		t.Errorf("the override is not noted: %q", res.Trace.Notes)
	}
	if l := res.Trace.Limits.BaselineBps; l.Value != 40e6 || l.Source != "lab" {
		t.Errorf("baseline %+v, want the lab's 40 Mbit/s kept from the recording", l)
	}
	var packets uint64
	for _, tt := range res.Totals {
		packets += tt.Packets
	}
	if packets == 0 {
		t.Error("the re-analyzed bundle has no traffic")
	}
}

// TestCountersReplay traces a veth with the counters of a saved lab bundle
// replayed on their recorded timeline: the report carries the recorded
// counter jumps and names the replay as the source.
func TestCountersReplay(t *testing.T) {
	pair := vethpair.ForTest(t, vethpair.Options{Octet: 84})
	privtest.RequireRoot(t, "nft")
	dir := t.TempDir()
	bundle := filepath.Join(dir, "lab")
	if out, err := exec.Command(binary, "lab", "run", "micro-burst", "--format", "json", "-o", bundle).CombinedOutput(); err != nil {
		t.Fatalf("lab run: %v\n%s", err, out)
	}
	// The bundle says how the time buckets were counted, for a ticket.
	raw, err := os.ReadFile(filepath.Join(bundle, record.BundleEnvironment))
	if err != nil {
		t.Fatal(err)
	}
	var env record.Environment
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	if env.BucketMode != "per-cpu" && env.BucketMode != "shared" {
		t.Errorf("bundle environment bucket mode %q, want per-cpu or shared", env.BucketMode)
	}
	cmd := exec.Command("ip", "netns", "exec", pair.NSA, binary, "trace", "-i", pair.IfA, "--duration", "4s",
		"--no-imds", "--format", "json", "--counters-replay", bundle, "--sample-interval", "50ms")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("trace with replay: %v", err)
	}
	var res analyzer.Result
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	if res.Trace.CounterSource != "replay" {
		t.Errorf("counter source %q, want replay", res.Trace.CounterSource)
	}
	var moved uint64
	for _, c := range res.Counters {
		if c.Name == "bw_out_allowance_exceeded" {
			moved = c.Delta
		}
	}
	if moved == 0 {
		t.Errorf("bw_out_allowance_exceeded did not move in the replay: %+v", res.Counters)
	}
}
