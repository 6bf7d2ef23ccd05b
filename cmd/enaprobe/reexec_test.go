package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

// TestMain runs the command itself when a test re-executes this binary
// with enaprobeMainEnv set (under setpriv, say), so a test sees exactly what
// a user sees: stderr and the exit code of main.
func TestMain(m *testing.M) {
	if os.Getenv(enaprobeMainEnv) == "1" {
		os.Exit(run())
	}
	os.Exit(m.Run())
}

const enaprobeMainEnv = "ENAPROBE_TEST_RUN_MAIN"

// runMain runs `enaprobe args...` as its own process, through prefix (a
// command such as setpriv, or none), and returns its exit code and stderr.
func runMain(t *testing.T, prefix []string, args ...string) (int, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := append(append(append([]string(nil), prefix...), self), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), enaprobeMainEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %v: %v", argv, err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// TestMissingCapabilitiesNameTheCommand: without privileges every command
// that loads programs says which command needs them, and exits 3.
func TestMissingCapabilitiesNameTheCommand(t *testing.T) {
	privtest.RequireRoot(t, "setpriv")
	drop := []string{"setpriv", "--inh-caps", "-all", "--bounding-set", "-all", "--"}
	counters := writeCountersFile(t)
	for command, out := range map[string][]string{
		"trace": {"-o", t.TempDir() + "/x.tar.gz"},
		"serve": {"--bundle-dir", t.TempDir(), "--listen", "127.0.0.1:0"},
	} {
		args := append([]string{command, "-i", "lo", "--counters-file", "lo=" + counters, "--no-imds"}, out...)
		code, stderr := runMain(t, drop, args...)
		if code != exitPrivileges || !strings.Contains(stderr, "enaprobe "+command+" needs CAP_") {
			t.Errorf("enaprobe %s without capabilities: exit %d, stderr %q; want %d and %q", command, code, stderr,
				exitPrivileges, "enaprobe "+command+" needs CAP_")
		}
	}
}

func writeCountersFile(t *testing.T) string {
	t.Helper()
	path := t.TempDir() + "/counters"
	if err := os.WriteFile(path, []byte("NIC statistics:\n     bw_in_allowance_exceeded: 0\n     pps_allowance_exceeded: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
