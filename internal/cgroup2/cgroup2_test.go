//go:build linux

package cgroup2

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
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

// TestRemoveStale: a killed run's empty directory goes; a live mount (of
// this run), a directory whose PID runs, and one with something in it stay.
func TestRemoveStale(t *testing.T) {
	privtest.RequireRoot(t, "unshare")
	t.Setenv("TMPDIR", t.TempDir())
	mk := func(name string) string {
		d := filepath.Join(os.TempDir(), name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-2 * staleAfter)
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
		return d
	}
	oldStale := mk(ownPrefix + "123456789")          // an older build's name: no PID
	deadStale := mk(ownPrefix + "999999999-2740011") // a PID no process has
	livePID := mk(ownPrefix + strconv.Itoa(os.Getppid()) + "-1")
	full := mk(ownPrefix + "42")
	if err := os.WriteFile(filepath.Join(full, "keep"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(full, time.Now().Add(-2*staleAfter), time.Now().Add(-2*staleAfter)); err != nil {
		t.Fatal(err)
	}
	live, unmount, err := MountOwn() // removes the stale ones first
	if err != nil {
		t.Fatal(err)
	}
	defer unmount()
	exists := func(d string) bool { _, err := os.Stat(d); return err == nil }
	for _, d := range []string{oldStale, deadStale} {
		if exists(d) {
			t.Errorf("stale %s left", d)
		}
	}
	for _, d := range []string{livePID, full, live} {
		if !exists(d) {
			t.Errorf("%s removed", d)
		}
	}
	young := mk(ownPrefix + "777")
	now := time.Now()
	if err := os.Chtimes(young, now, now); err != nil {
		t.Fatal(err)
	}
	// Another run's live mount in a mount namespace of its own (as under
	// `ip netns exec`): from here its directory looks empty and its PID
	// (here none) says nothing; its mount table keeps it.
	other := mk(ownPrefix + "999999998-1")
	child := exec.Command("unshare", "-m", "sh", "-c", "mount -t tmpfs none "+other+" && echo up && exec sleep 60")
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()
	line := make([]byte, 3)
	if _, err := io.ReadFull(out, line); err != nil || string(line) != "up\n" {
		t.Fatalf("mount in another mount namespace: %q, %v", line, err)
	}
	if removed := RemoveStale(); len(removed) != 0 {
		t.Errorf("RemoveStale removed %v: live mounts, nothing stale", removed)
	}
	if !exists(young) {
		t.Errorf("%s, made a moment ago, removed", young)
	}
	if !exists(other) {
		t.Errorf("%s, mounted in another mount namespace, removed", other)
	}
	if _, err := Mount(); err != nil {
		t.Logf("no cgroup2 in this mount table: %v", err)
	}
}
