//go:build linux

package namedns

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

func randomName(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b)
}

// inPrivateMounts runs fn on a thread of its own in a private copy of the
// mount namespace, where Dir is not a mount point (as on a host where no
// `ip netns add` ran yet), whatever the host's is. Nothing fn mounts
// reaches the host; the thread is left locked, so it ends with fn.
func inPrivateMounts(t *testing.T, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			done <- err
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_PRIVATE|unix.MS_REC, ""); err != nil {
			done <- err
			return
		}
		for unix.Unmount(Dir, unix.MNT_DETACH) == nil { // every layer, in this copy only
		}
		done <- fn()
	}()
	return <-done
}

// TestCloseAfterIPNetnsAdd: a namespace made before another program's
// first `ip netns add` closes cleanly. iproute2 makes Dir a shared mount
// of itself when it is not one (mount --rbind Dir Dir), which copied the
// namespaces already mounted there on top of themselves: Close removed the
// copy, and removing the file failed with EBUSY on the original beneath
// (the lab's "remove /run/netns/enalab-...-vpc: device or resource busy").
func TestCloseAfterIPNetnsAdd(t *testing.T) {
	privtest.RequireRoot(t, "ip")
	ours, theirs := randomName(t, "enatest-"), randomName(t, "enatest-")
	err := inPrivateMounts(t, func() error {
		n, err := New(ours)
		if err != nil {
			return err
		}
		if out, err := exec.Command("ip", "netns", "add", theirs).CombinedOutput(); err != nil {
			n.Close()
			return errors.New("ip netns add: " + strings.TrimSpace(string(out)))
		}
		defer exec.Command("ip", "netns", "del", theirs).Run()
		return n.Close()
	})
	for _, name := range []string{ours, theirs} {
		os.Remove(filepath.Join(Dir, name)) // the files are on the host's filesystem
	}
	if err != nil {
		t.Fatal(err)
	}
}
