//go:build linux

package owner

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

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
