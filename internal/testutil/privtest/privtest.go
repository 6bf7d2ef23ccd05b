// Package privtest gates tests that need root and system tools: they skip
// for an unprivileged developer but fail in CI (CI=true), where a skip would
// hide a regression.
package privtest

import (
	"os"
	"os/exec"
	"testing"
)

// RequireRoot skips or fails tb when the process is not root or one of the
// named tools is missing from PATH.
func RequireRoot(tb testing.TB, tools ...string) {
	tb.Helper()
	missing := ""
	if os.Geteuid() != 0 {
		missing = "root"
	} else {
		for _, tool := range tools {
			if _, err := exec.LookPath(tool); err != nil {
				missing = "the " + tool + " tool"
				break
			}
		}
	}
	if missing == "" {
		return
	}
	Unavailable(tb, missing)
}

// Unavailable skips tb for want of what, or fails it in CI (CI=true).
func Unavailable(tb testing.TB, what string) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf("test needs %s, and CI=true forbids skipping it", what)
	}
	tb.Skipf("test needs %s", what)
}
