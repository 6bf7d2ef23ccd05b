package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/internal/ena"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/report"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
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

// TestAnalyzeNotABundle: input that is not a bundle (another file, a
// report, a truncated archive) is a usage error that says what was wanted.
func TestAnalyzeNotABundle(t *testing.T) {
	dir := t.TempDir()
	_, rec := smallInput(t)
	whole := filepath.Join(dir, "whole.tar.gz")
	if err := record.WriteBundle(whole, rec, record.EnvironmentOf(rec)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(whole)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"random.bin":     []byte("\x01\x02 not anything enaprobe wrote"),
		"report.json":    []byte(`{"findings": []}`),
		"cut.tar.gz":     b[:len(b)/2],
		"notgzip.tar.gz": []byte("plain text"),
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		code, out := execute(t, "analyze", p)
		if code != exitUsage || !strings.Contains(out, "is not a bundle: want the .tar.gz") {
			t.Errorf("analyze %s: exit %d, %q; want %d and what a bundle is", name, code, out, exitUsage)
		}
	}
	if code, out := execute(t, "analyze", whole, "--format", "json"); code != exitOK {
		t.Errorf("analyze of a whole bundle: exit %d\n%s", code, out)
	}
}

// TestFlagErrorsSayTheFix: a misspelt flag gets the flags it was probably
// meant to be, and a duration without a unit is told to take one; both
// exit 2.
func TestFlagErrorsSayTheFix(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"trace", "--duraton", "5s"}, "unknown flag: --duraton: did you mean --duration?"},
		{[]string{"serve", "--bundle-dri", "/tmp"}, "did you mean --bundle-dir?"},
		{[]string{"counters", "--intervall", "1s"}, "did you mean --interval?"},
		{[]string{"trace", "-d", "30"}, "-d, --duration 30 has no unit: write it with one, e.g. 30s"},
		{[]string{"counters", "--interval", "100"}, "--interval 100 has no unit: write it with one, e.g. 100s, 100ms"},
	} {
		code, out := execute(t, tc.args...)
		if code != exitUsage || !strings.Contains(out, tc.want) {
			t.Errorf("enaprobe %s: exit %d, %q; want %d and %q", strings.Join(tc.args, " "), code, out, exitUsage, tc.want)
		}
	}
}

// TestOutputReadOnlyNamesTheDirectory: -o on a read-only mount names the
// directory and the reason, not the file the check made.
func TestOutputReadOnlyNamesTheDirectory(t *testing.T) {
	privtest.RequireRoot(t)
	ro := t.TempDir()
	if err := unix.Mount("tmpfs", ro, "tmpfs", unix.MS_RDONLY, "size=64k"); err != nil {
		t.Fatalf("mount a read-only tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(ro, 0) })
	err := checkBundlePath(filepath.Join(ro, "b.tar.gz"))
	var ue usageError
	want := "cannot write in " + ro + ": read-only file system"
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), ".enaprobe-check") {
		t.Errorf("-o on a read-only mount: %v; want a usage error with %q", err, want)
	}
}

// TestUnknownInstanceTypeSuggests: a mistyped instance type gets the
// nearest ones of the table in the report's note.
func TestUnknownInstanceTypeSuggests(t *testing.T) {
	in, _ := smallInput(t)
	bundle := filepath.Join(t.TempDir(), "b")
	if err := report.WriteBundle(bundle, in); err != nil {
		t.Fatal(err)
	}
	code, out := execute(t, "analyze", bundle, "--instance-type", "c6i.xlargee", "--format", "json")
	want := "instance type c6i.xlargee is not in the table (did you mean c6i.xlarge"
	if code != exitOK || !strings.Contains(out, want) {
		t.Errorf("analyze --instance-type c6i.xlargee: exit %d; want a note with %q\n%.3000s", code, want, out)
	}
}

// TestLogsSayTheirUnits: off a terminal a duration is a string with its
// unit and the timestamp has milliseconds; on one the time shows them.
func TestLogsSayTheirUnits(t *testing.T) {
	var b bytes.Buffer
	log := newLoggerFor(&b, false, "info", false)
	log.Info().Dur("duration", 30*time.Second).Dur("elapsed", 225227493*time.Nanosecond).Msg("x")
	var line map[string]any
	if err := json.Unmarshal(b.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	if line["duration"] != "30s" || line["elapsed"] != "225.227493ms" {
		t.Errorf("durations logged %v and %v, want \"30s\" and \"225.227493ms\"", line["duration"], line["elapsed"])
	}
	if ts, _ := line["time"].(string); !regexp.MustCompile(`T\d\d:\d\d:\d\d\.\d{3}`).MatchString(ts) {
		t.Errorf("timestamp %q has no milliseconds", ts)
	}
	b.Reset()
	before := time.Now().Truncate(time.Millisecond)
	log = newLoggerFor(&b, true, "info", false)
	log.Info().Msg("x")
	after := time.Now()
	plain := regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(b.String(), "")
	shown, err := time.ParseInLocation("15:04:05.000", strings.Fields(plain)[0], time.Local)
	if err != nil {
		t.Fatalf("terminal line %q: %v", b.String(), err)
	}
	at := time.Date(before.Year(), before.Month(), before.Day(), shown.Hour(), shown.Minute(), shown.Second(), shown.Nanosecond(), time.Local)
	if at.Before(before) || at.After(after) {
		t.Errorf("terminal shows %s, the line was logged between %s and %s", strings.Fields(plain)[0],
			before.Format("15:04:05.000"), after.Format("15:04:05.000"))
	}
}
