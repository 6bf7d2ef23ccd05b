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
	"path/filepath"
	"strconv"
	"strings"
	"time"

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
	RemoveStale()
	// The PID in the name lets a later run tell a live mount of another
	// mount namespace (invisible from here) from a killed run's litter.
	dir, err := os.MkdirTemp("", ownPrefix+strconv.Itoa(os.Getpid())+"-")
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

// staleAfter is how old an unmounted directory must be to be litter.
const staleAfter = time.Minute

// ownPrefix starts the name of every directory MountOwn makes.
const ownPrefix = "enaprobe-cgroup2-"

// RemoveStale removes the directories MountOwn made for runs that are gone
// (a run killed under `ip netns exec` never unmounts: its mount went with
// its mount namespace, its empty directory stays in /tmp). A directory goes
// only when it is empty, the run its name holds the PID of no longer runs,
// and no process's mount table has it mounted: never a live mount of
// another enaprobe, in this mount namespace or another. It returns what it
// removed.
func RemoveStale() []string {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), ownPrefix+"*"))
	if len(dirs) == 0 {
		return nil
	}
	mounted := mountedAnywhere()
	var removed []string
	for _, d := range dirs {
		if mounted[d] || runningOwner(filepath.Base(d)) {
			continue
		}
		// A run makes its directory a moment before it mounts on it: one
		// that young may be that moment of a build whose names hold no PID.
		if st, err := os.Stat(d); err != nil || time.Since(st.ModTime()) < staleAfter {
			continue
		}
		if entries, err := os.ReadDir(d); err != nil || len(entries) > 0 {
			continue // not a directory, or something in it: not ours to judge
		}
		if os.Remove(d) == nil {
			removed = append(removed, d)
		}
	}
	return removed
}

// runningOwner tells whether the PID in a MountOwn directory's name
// (enaprobe-cgroup2-PID-random) is a running process. Names of older
// builds hold no PID: the mount tables alone decide for them.
func runningOwner(name string) bool {
	pid, _, ok := strings.Cut(strings.TrimPrefix(name, ownPrefix), "-")
	if !ok {
		return false
	}
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return false
	}
	return unix.Kill(n, 0) == nil || errors.Is(unix.Kill(n, 0), unix.EPERM)
}

// mountedAnywhere is every mount point of every process's mount table:
// a mount of another mount namespace shows only in the tables of the
// processes inside it.
func mountedAnywhere() map[string]bool {
	out := map[string]bool{}
	tables, _ := filepath.Glob("/proc/[0-9]*/mountinfo")
	seen := map[string]bool{} // mount namespaces already read
	for _, table := range tables {
		ns, err := os.Readlink(filepath.Join(filepath.Dir(table), "ns", "mnt"))
		if err == nil {
			if seen[ns] {
				continue
			}
			seen[ns] = true
		}
		f, err := os.Open(table)
		if err != nil {
			continue // the process ended
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if fields := strings.Fields(sc.Text()); len(fields) > 4 {
				out[unescapeMount(fields[4])] = true
			}
		}
		f.Close()
	}
	return out
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
