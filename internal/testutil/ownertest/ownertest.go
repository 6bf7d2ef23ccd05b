//go:build linux

// Package ownertest makes cgroup v2 directories for tests that run
// processes as containers and services are run: each in its own cgroup.
package ownertest

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/enaprobe/enaprobe/internal/cgroup2"
)

// Cgroups makes a cgroup v2 directory per role under a fresh parent at the
// root of the v2 hierarchy, removed at the end of the test (processes must
// have left them by then). It returns the v2 mount and each role's path
// from the cgroup root, as owners name cgroups.
func Cgroups(t *testing.T, roles ...string) (mount string, paths map[string]string) {
	t.Helper()
	mount, err := cgroup2.Mount()
	if err != nil {
		t.Fatalf("cgroup v2: %v", err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	parent := "/enaprobe-test-" + hex.EncodeToString(b[:])
	if err := os.Mkdir(filepath.Join(mount, parent), 0o755); err != nil {
		t.Fatalf("make test cgroup: %v", err)
	}
	paths = make(map[string]string)
	for _, r := range roles {
		paths[r] = parent + "/" + r
		if err := os.Mkdir(filepath.Join(mount, paths[r]), 0o755); err != nil {
			t.Fatalf("make test cgroup: %v", err)
		}
	}
	t.Cleanup(func() {
		for _, p := range paths {
			if err := os.Remove(filepath.Join(mount, p)); err != nil {
				t.Errorf("remove test cgroup: %v", err)
			}
		}
		if err := os.Remove(filepath.Join(mount, parent)); err != nil {
			t.Errorf("remove test cgroup: %v", err)
		}
	})
	return mount, paths
}
