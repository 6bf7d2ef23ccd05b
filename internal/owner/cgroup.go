//go:build linux

package owner

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrNoCgroup2 says the cgroup v2 hierarchy is not mounted.
var ErrNoCgroup2 = errors.New("no cgroup v2 hierarchy mounted")

// Cgroup2Mount is where the cgroup v2 hierarchy is mounted, from
// /proc/self/mountinfo: /sys/fs/cgroup on a unified host, often
// /sys/fs/cgroup/unified on a hybrid one, beside the v1 controllers.
func Cgroup2Mount() (string, error) {
	return cgroup2MountIn("/proc/self/mountinfo")
}

// mountCgroup2 mounts the cgroup v2 hierarchy on a directory of its own,
// for a mount namespace that lacks it (`ip netns exec` mounts a /sys of its
// own, without the cgroup mounts). The same hierarchy: ids are the same.
// The returned function unmounts it.
func mountCgroup2() (string, func() error, error) {
	dir, err := os.MkdirTemp("", "enaprobe-cgroup2-")
	if err != nil {
		return "", nil, err
	}
	if err := unix.Mount("none", dir, "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		_ = os.Remove(dir)
		return "", nil, fmt.Errorf("%w (and mounting one failed: %v)", ErrNoCgroup2, err)
	}
	return dir, func() error {
		return errors.Join(unix.Unmount(dir, unix.MNT_DETACH), os.Remove(dir))
	}, nil
}

func cgroup2MountIn(mountinfo string) (string, error) {
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
	return "", ErrNoCgroup2
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

// cgroupPaths maps cgroup ids to paths from the hierarchy's root. A cgroup
// id is the inode number of its directory (Linux 5.5 and later on 64-bit).
// Paths found once are kept: a cgroup removed before the trace ends is
// still named if a walk saw it.
type cgroupPaths struct {
	mount string
	paths map[uint64]string
}

func newCgroupPaths(mount string) *cgroupPaths {
	return &cgroupPaths{mount: mount, paths: make(map[uint64]string)}
}

// walk adds every cgroup of the hierarchy.
func (c *cgroupPaths) walk() error {
	return filepath.WalkDir(c.mount, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == c.mount {
				return err
			}
			return nil // a cgroup removed during the walk
		}
		if !d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		rel, _ := filepath.Rel(c.mount, p)
		if rel == "." {
			rel = ""
		}
		c.paths[st.Ino] = "/" + filepath.ToSlash(rel)
		return nil
	})
}

// path names cgroup id, walking the hierarchy again once for an id not
// seen yet (walked says whether it did already).
func (c *cgroupPaths) path(id uint64, walked *bool) (string, bool) {
	if p, ok := c.paths[id]; ok {
		return p, true
	}
	if *walked {
		return "", false
	}
	*walked = true
	if err := c.walk(); err != nil {
		return "", false
	}
	p, ok := c.paths[id]
	return p, ok
}

// procCgroup is the cgroup v2 path of a process, from /proc/PID/cgroup
// (its "0::" line).
func procCgroup(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("process %d: no cgroup v2 entry", pid)
}
