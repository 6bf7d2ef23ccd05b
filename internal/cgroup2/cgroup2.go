//go:build linux

// Package cgroup2 finds the host's cgroup v2 hierarchy in the mount table
// (beside the v1 controllers on a hybrid host), or mounts it where the mount
// namespace lacks it.
package cgroup2

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrNotMounted says the cgroup v2 hierarchy is not mounted.
var ErrNotMounted = errors.New("no cgroup v2 hierarchy mounted")

// Mount is where the cgroup v2 hierarchy is mounted, from
// /proc/self/mountinfo: /sys/fs/cgroup on a unified host, often
// /sys/fs/cgroup/unified on a hybrid one, beside the v1 controllers.
func Mount() (string, error) {
	return mountIn("/proc/self/mountinfo")
}

// MountOwn mounts the cgroup v2 hierarchy on a directory of its own,
// for a mount namespace that lacks it (`ip netns exec` mounts a /sys of its
// own, without the cgroup mounts). The same hierarchy: ids are the same.
// The returned function unmounts it.
func MountOwn() (string, func() error, error) {
	dir, err := os.MkdirTemp("", "enaprobe-cgroup2-")
	if err != nil {
		return "", nil, err
	}
	if err := unix.Mount("none", dir, "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		_ = os.Remove(dir)
		return "", nil, fmt.Errorf("%w (and mounting one failed: %v)", ErrNotMounted, err)
	}
	return dir, func() error {
		return errors.Join(unix.Unmount(dir, unix.MNT_DETACH), os.Remove(dir))
	}, nil
}

func mountIn(mountinfo string) (string, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return "", fmt.Errorf("find the cgroup v2 mount: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fields, after := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(after) < 1 || after[0] != "cgroup2" {
			continue
		}
		return unescapeMount(fields[4]), nil
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read %s: %w", mountinfo, err)
	}
	return "", ErrNotMounted
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
