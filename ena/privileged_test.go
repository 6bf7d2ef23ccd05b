package ena

import (
	"os"
	"os/exec"
	"testing"
)

// requirePrivileged stops a test that needs root and the ip tool when they
// are missing: a skip on a developer's machine, a failure when CI=true, where
// a skip would hide that the real ioctl path was never exercised.
func requirePrivileged(tb testing.TB, tools ...string) {
	tb.Helper()
	missing := ""
	if os.Geteuid() != 0 {
		missing = "root"
	} else {
		for _, tool := range append([]string{"ip"}, tools...) {
			if _, err := exec.LookPath(tool); err != nil {
				missing = "the " + tool + " tool"
				break
			}
		}
	}
	if missing == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("needs %s; CI=true, so privileged tests must run", missing)
	}
	tb.Skipf("needs %s", missing)
}
