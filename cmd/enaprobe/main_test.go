package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/capture"
	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/report"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

// execute runs the command line in this process and returns its exit code
// and what it printed.
func execute(t *testing.T, args ...string) (int, string) {
	t.Helper()
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	if err != nil {
		out.WriteString(err.Error())
	}
	return exitCode(err), out.String()
}

// TestExitCodes: every usage error exits 2, with a one-line reason.
func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	garbage := filepath.Join(dir, "garbage.txt")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(garbage, []byte("this is not ethtool -S output\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"nosuchcommand"},
		{"analyze"},
		{"analyze", "a", "b"},
		{"analyze", filepath.Join(dir, "no-such-bundle.tar.gz")},
		{"analyze", filepath.Join(dir, "no-such-bundle.tar.gz"), "--counter-lag", "soon"},
		{"analyze", filepath.Join(dir, "no-such-bundle.tar.gz"), "--counter-refresh", "2s"},
		{"trace", "--counter-refresh", "-100ms"},
		{"trace", "--counter-refresh", "often"},
		{"lab", "run"},
		{"lab", "nosuch"},
		{"trace", "extra-arg"},
		{"trace", "--flow-limit", "5"},
		{"trace", "--baseline", "0Gbit"},
		{"trace", "--pps-allowance", "-5"},
		{"trace", "--log-level", "loud"},
		{"trace", "-o", filepath.Join(dir, "x.zip")},
		{"trace", "-o", file},
		{"trace", "--heavy-share", "0"},
		{"trace", "--bucket", "20ms"},
		{"trace", "--window", "0s"},
		{"lab", "run", "clean", "--bucket", "5us"},
		{"lab", "run", "clean", "--window", "-1ms"},
		{"lab", "run", "clean", "--attach", "xdp"},
		{"trace", "-i", "nosuch0"},
		{"trace", "-i", "lo", "--counters-file", garbage},
		{"counters", "--count", "-1", "-i", "lo"},
		{"counters", "-i", "nosuch0", "--count", "1"},
		{"counters", "--counters-file", "eth9=" + garbage, "--count", "1"},
	} {
		code, out := execute(t, args...)
		if code != exitUsage {
			t.Errorf("enaprobe %s: exit %d, want %d\n%s", strings.Join(args, " "), code, exitUsage, out)
		}
	}
}

// scriptedSource returns its reads in order.
type scriptedSource struct{ reads []map[string]uint64 }

func (s *scriptedSource) Kind() string { return "test" }
func (s *scriptedSource) Read() (map[string]uint64, error) {
	v := s.reads[0]
	s.reads = s.reads[1:]
	return v, nil
}

// TestCountersAllZeroIsFailedRead: `enaprobe counters` follows the trace's
// rule (counters.Diff): device counters all zero after nonzero ones are a
// failed admin command, not a reset followed by the whole value again.
func TestCountersAllZeroIsFailedRead(t *testing.T) {
	read := func(bw uint64) map[string]uint64 {
		m := map[string]uint64{}
		for _, n := range counters.AllowanceExceeded {
			m[n] = 0
		}
		m["bw_out_allowance_exceeded"] = bw
		return m
	}
	src := &scriptedSource{reads: []map[string]uint64{read(100), read(0), read(160)}}
	r := &counterReader{iface: "eth9", src: src}
	var lines []string
	for range 3 {
		var b bytes.Buffer
		r.show(&b, r.start)
		lines = append(lines, b.String())
	}
	if !strings.Contains(lines[0], "bw_out 100") {
		t.Errorf("first line %q", lines[0])
	}
	if !strings.Contains(lines[1], "read failed") || !strings.Contains(lines[1], "all zero") {
		t.Errorf("all-zero read shown as %q, want a failed read", lines[1])
	}
	if !strings.Contains(lines[2], "bw_out +60") || strings.Contains(lines[2], "reset") {
		t.Errorf("after the failed read %q, want bw_out +60", lines[2])
	}
}

// smallInput is a recording with a few buckets, analyzed.
func smallInput(t *testing.T) (report.Input, *record.Recording) {
	t.Helper()
	rec, err := record.ReadFile("../../testdata/recordings/" + firstRecording(t))
	if err != nil {
		t.Fatal(err)
	}
	res := analyzer.Analyze(rec, analyzer.DefaultOptions())
	return report.Input{Result: res, Recording: rec, Env: record.EnvironmentOf(rec)}, rec
}

func firstRecording(t *testing.T) string {
	m, err := filepath.Glob("../../testdata/recordings/*.rec.gz")
	if err != nil || len(m) == 0 {
		t.Fatalf("no recordings: %v", err)
	}
	return filepath.Base(m[0])
}

// TestBundleNeverLosesTheTrace: a bundle path that fails after the trace
// still leaves the report on stdout, and the bundle in the temporary
// directory.
func TestBundleNeverLosesTheTrace(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	_, rec := smallInput(t)
	var stdout bytes.Buffer
	out := outputFlags{format: "json", output: "/dev/null/not-a-dir/b.tar.gz"}
	err := writeReports(&stdout, rec, analyzer.DefaultOptions(), out, record.EnvironmentOf(rec), zerolog.Nop())
	if err == nil {
		t.Fatal("writing under /dev/null succeeded")
	}
	var res analyzer.Result
	if jerr := json.Unmarshal(stdout.Bytes(), &res); jerr != nil {
		t.Fatalf("no report on stdout after the bundle failed: %v\n%s", jerr, stdout.String())
	}
	saved, _ := filepath.Glob(filepath.Join(tmp, "enaprobe-*.tar.gz"))
	if len(saved) != 1 || !strings.Contains(err.Error(), saved[0]) {
		t.Fatalf("fallback bundles %v; error %v", saved, err)
	}
	if _, _, err := record.ReadBundle(saved[0]); err != nil {
		t.Errorf("fallback bundle: %v", err)
	}
}

// TestCheckBundlePath: -o is checked before tracing, and the .tar.gz form
// creates missing parents as the directory form does.
func TestCheckBundlePath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "existing")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	isDir := filepath.Join(dir, "d.tar.gz")
	if err := os.Mkdir(isDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var ue usageError
	for _, p := range []string{file, filepath.Join(dir, "x.zip"), isDir} {
		if err := checkBundlePath(p); !errors.As(err, &ue) {
			t.Errorf("-o %s: %v, want a usage error", p, err)
		}
	}
	deep := filepath.Join(dir, "a", "b", "trace.tar.gz")
	if err := checkBundlePath(deep); err != nil {
		t.Fatalf("-o %s: %v", deep, err)
	}
	if st, err := os.Stat(filepath.Dir(deep)); err != nil || !st.IsDir() {
		t.Errorf("parents of %s not created: %v", deep, err)
	}
	if left, _ := os.ReadDir(filepath.Dir(deep)); len(left) != 0 {
		t.Errorf("the check left files: %v", left)
	}
}

// TestBundleBelongsToSudoUser: under sudo the bundle goes to the invoking
// user, files 0644, in both forms.
func TestBundleBelongsToSudoUser(t *testing.T) {
	privtest.RequireRoot(t)
	t.Setenv("SUDO_UID", "65534")
	t.Setenv("SUDO_GID", "65533")
	in, _ := smallInput(t)
	dir := t.TempDir()
	for _, p := range []string{filepath.Join(dir, "new", "b.tar.gz"), filepath.Join(dir, "bdir")} {
		if err := checkBundlePath(p); err != nil {
			t.Fatal(err)
		}
		if err := writeBundle(p, in); err != nil {
			t.Fatal(err)
		}
		check := []string{p}
		if !record.IsArchive(p) {
			check = append(check, filepath.Join(p, record.BundleRecording))
		} else {
			check = append(check, filepath.Dir(p))
		}
		for _, c := range check {
			st, err := os.Stat(c)
			if err != nil {
				t.Fatal(err)
			}
			uid, gid := ownerOf(st)
			if uid != 65534 || gid != 65533 {
				t.Errorf("%s belongs to %d:%d, want 65534:65533", c, uid, gid)
			}
			if !st.IsDir() && st.Mode().Perm() != 0o644 {
				t.Errorf("%s mode %v, want 0644", c, st.Mode().Perm())
			}
		}
	}
}

// TestStatusLineFixedDuration: a fixed-duration trace never says
// "open-ended", not even at its last update.
func TestStatusLineFixedDuration(t *testing.T) {
	for _, tc := range []struct {
		duration, remaining time.Duration
		want                string
	}{{30 * time.Second, 0, "0s left"}, {30 * time.Second, 12 * time.Second, "12s left"}, {0, 0, "until Ctrl-C"}} {
		var b bytes.Buffer
		s := &statusLine{w: &b, tty: true, duration: tc.duration}
		s.update(capture.Progress{Elapsed: time.Second, Remaining: tc.remaining})
		if !strings.Contains(b.String(), tc.want) || strings.Contains(b.String(), "open-ended") {
			t.Errorf("duration %v, remaining %v: %q, want %q", tc.duration, tc.remaining, b.String(), tc.want)
		}
	}
}

// TestAnalyzeStrict: analyze raises a window below the recording's bucket
// to the bucket and says so, as trace does, and notes an instance type the
// table lacks.
func TestAnalyzeStrict(t *testing.T) {
	in, rec := smallInput(t)
	bundle := filepath.Join(t.TempDir(), "b")
	if err := report.WriteBundle(bundle, in); err != nil {
		t.Fatal(err)
	}
	bucket := time.Duration(rec.BucketNs())
	below := bucket / 2
	if code, out := execute(t, "analyze", bundle, "--window", below.String(), "--format", "json"); code != exitOK ||
		!strings.Contains(out, fmt.Sprintf("raised to %v", bucket)) || !strings.Contains(out, fmt.Sprintf(`"fine_window_us": %d`, bucket.Microseconds())) {
		t.Errorf("analyze --window %v: exit %d, want %d, the window raised to %v and said\n%.3000s", below, code, exitOK, bucket, out)
	}
	code, out := execute(t, "analyze", bundle, "--instance-type", "z9.huge", "--format", "json")
	if code != exitOK {
		t.Fatalf("analyze --instance-type z9.huge: exit %d\n%s", code, out)
	}
	if !strings.Contains(out, "instance type z9.huge is not in the table: give --baseline and --burst") {
		t.Errorf("no note on the unknown instance type:\n%.2000s", out)
	}
}

// TestServeTakesTraceFlags: every trace flag but --duration, --format and
// --output works in serve, as docs/serve.md says (docs/cli.md lists both).
func TestServeTakesTraceFlags(t *testing.T) {
	flags := func(name string) []string {
		var names []string
		for _, c := range newRootCommand().Commands() {
			if c.Name() == name {
				c.Flags().VisitAll(func(f *pflag.Flag) {
					if !f.Hidden {
						names = append(names, "--"+f.Name)
					}
				})
			}
		}
		return names
	}
	serve := flags("serve")
	notInServe := []string{"--duration", "--format", "--output"}
	for _, f := range flags("trace") {
		if in := slices.Contains(serve, f); in == slices.Contains(notInServe, f) {
			t.Errorf("trace %s: in serve %v, want %v", f, in, !in)
		}
	}
}

// TestFlagsGiveUnits: every flag taking a rate or a duration gives its unit
// and an example, in every command.
func TestFlagsGiveUnits(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if typ := f.Value.Type(); (typ == "rate" || typ == "duration") && !f.Hidden &&
				!(strings.Contains(f.Usage, "e.g.") && strings.Contains(f.Usage, "a "+typ)) {
				t.Errorf("%s --%s (%s): no unit and example in %q", c.CommandPath(), f.Name, typ, f.Usage)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCommand())
}

// TestREADMEExitCodes: the README's exit-code table has every code run
// returns.
func TestREADMEExitCodes(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range []int{exitOK, exitError, exitUsage, exitPrivileges} {
		if !strings.Contains(string(b), fmt.Sprintf("| `%d` |", code)) {
			t.Errorf("README exit-code table lacks %d", code)
		}
	}
}

// TestFineWindowRaised: a --window below --bucket, or not a whole number
// of buckets, is raised (as the analysis would) rather than refused.
func TestFineWindowRaised(t *testing.T) {
	c := captureFlags{bucket: 2 * time.Millisecond}
	for window, want := range map[time.Duration]time.Duration{
		time.Millisecond:     2 * time.Millisecond,
		3 * time.Millisecond: 4 * time.Millisecond,
		4 * time.Millisecond: 4 * time.Millisecond,
	} {
		got, err := c.fineWindow(window, zerolog.Nop())
		if err != nil || got != want {
			t.Errorf("--bucket %v --window %v: %v, %v; want %v", c.bucket, window, got, err, want)
		}
	}
}
