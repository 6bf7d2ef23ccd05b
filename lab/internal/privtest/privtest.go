// Package privtest gates tests that need root: they skip for an unprivileged
// developer but fail in CI (CI=true), where skipping would hide a regression.
package privtest

import (
	"os"
	"testing"
)

// RequireRoot skips or fails t when the process is not root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("test needs root, and CI=true forbids skipping it")
	}
	t.Skip("test needs root")
}
