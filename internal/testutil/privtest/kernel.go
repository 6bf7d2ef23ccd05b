package privtest

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// KernelRelease is the running kernel's release, as uname -r prints it.
func KernelRelease(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		tb.Fatalf("read the kernel release: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// KernelAtLeast says whether the running kernel is Linux major.minor or
// later.
func KernelAtLeast(tb testing.TB, major, minor int) bool {
	tb.Helper()
	release := KernelRelease(tb)
	var ma, mi int
	if _, err := fmt.Sscanf(release, "%d.%d", &ma, &mi); err != nil {
		tb.Fatalf("kernel release %q: %v", release, err)
	}
	return ma > major || ma == major && mi >= minor
}

// KernelLacks skips tb, in CI too, because the kernel lacks feature, which
// Linux has since major.minor: absent by design, not a broken environment.
// On a kernel that new or newer the feature must be there, and tb fails.
func KernelLacks(tb testing.TB, feature string, major, minor int) {
	tb.Helper()
	if KernelAtLeast(tb, major, minor) {
		tb.Fatalf("kernel %s lacks %s, which Linux has since %d.%d", KernelRelease(tb), feature, major, minor)
	}
	tb.Skipf("kernel %s lacks %s (Linux %d.%d+): not tested here", KernelRelease(tb), feature, major, minor)
}
