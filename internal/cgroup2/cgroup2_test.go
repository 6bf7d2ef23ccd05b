//go:build linux

package cgroup2

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestMount finds the v2 hierarchy in mountinfo as a hybrid host
// (v1 controllers beside it) and a unified one write it.
func TestMount(t *testing.T) {
	v1 := "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" +
		"31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu\n"
	cases := []struct{ name, info, want string }{
		{"hybrid", v1 + "40 30 0:37 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n", "/sys/fs/cgroup/unified"},
		{"unified", "29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n", "/sys/fs/cgroup"},
		{"escaped", `41 30 0:38 / /mnt/cg\040two rw,relatime - cgroup2 none rw` + "\n", "/mnt/cg two"},
		{"v1 only", v1, ""},
	}
	for _, c := range cases {
		p := filepath.Join(t.TempDir(), "mountinfo")
		if err := os.WriteFile(p, []byte(c.info), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := mountIn(p)
		if c.want == "" {
			if !errors.Is(err, ErrNotMounted) {
				t.Errorf("%s: %q, %v; want ErrNotMounted", c.name, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}
