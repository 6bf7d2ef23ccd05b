//go:build linux

// Package namedns is the one way enaprobe's lab and tests make and enter
// network namespaces: named ones, bind-mounted under /run/netns as `ip
// netns` does, so `ip netns exec` and tools that take a namespace name work
// on them. Links inside are made with netlink (NS.Netlink).
package namedns

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Dir is where named namespaces are mounted.
const Dir = "/run/netns"

// NS is a named network namespace, its handle open until Close.
type NS struct {
	Name   string
	Handle netns.NsHandle
}

// New creates a namespace and mounts it under its name. Creating it moves
// the calling thread into it, so that happens on a locked thread that is
// moved back before being unlocked.
func New(name string) (*NS, error) {
	if err := shareDir(); err != nil {
		return nil, fmt.Errorf("create netns %s: %w", name, err)
	}
	var h netns.NsHandle
	err := onLockedThread(func() error {
		var err error
		h, err = netns.NewNamed(name)
		return err
	})
	if err != nil {
		if h.IsOpen() {
			h.Close()
		}
		return nil, fmt.Errorf("create netns %s: %w", name, err)
	}
	return &NS{Name: name, Handle: h}, nil
}

// shareDir makes Dir a shared mount of its own, as `ip netns add` does
// (iproute2's netns_add), before a namespace is mounted in it. When Dir is
// not a mount point, the first `ip netns add` of any other program does it
// with mount --rbind Dir Dir: the namespaces mounted before are copied on
// top of themselves, and removing one's file after unmounting the copy
// fails with EBUSY on the original beneath (TestCloseAfterIPNetnsAdd).
func shareDir() error {
	if err := os.MkdirAll(Dir, 0o755); err != nil {
		return err
	}
	err := unix.Mount("", Dir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if errors.Is(err, unix.EINVAL) { // not a mount point
		if err = unix.Mount(Dir, Dir, "none", unix.MS_BIND|unix.MS_REC, ""); err == nil {
			err = unix.Mount("", Dir, "none", unix.MS_SHARED|unix.MS_REC, "")
		}
	}
	if err != nil {
		return fmt.Errorf("make %s a shared mount: %w", Dir, err)
	}
	return nil
}

// Open opens an existing named namespace; Release closes what it opened and
// leaves the namespace.
func Open(name string) (*NS, error) {
	h, err := netns.GetFromName(name)
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", name, err)
	}
	return &NS{Name: name, Handle: h}, nil
}

// Path is the namespace's bind mount, for setns.
func (n *NS) Path() string { return filepath.Join(Dir, n.Name) }

// Release closes the handle; the namespace stays.
func (n *NS) Release() error {
	if n.Handle.IsOpen() {
		return n.Handle.Close()
	}
	return nil
}

// Close releases the handle and unmounts the name. The namespace itself,
// with its links, disappears when its last reference (socket, process,
// handle) is gone.
func (n *NS) Close() error {
	errs := []error{n.Release()}
	if err := deleteNamed(n.Path()); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("delete netns %s: %w", n.Name, err))
	}
	return errors.Join(errs...)
}

// deleteNamed unmounts the namespace's name and removes its file.
func deleteNamed(p string) error {
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unmount %s: %w", p, err) // EINVAL: not mounted (any more)
	}
	err := os.Remove(p)
	if errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("%w: it is still mounted beneath a bind mount of %s made after it (see shareDir)", err, Dir)
	}
	return err
}

// Netlink is a netlink handle that works in the namespace from any thread,
// for the netlink families named (NETLINK_ROUTE when none is): asking for
// every family fails on kernels built without one (5.10's cloud kernel has
// no NETLINK_XFRM until a module loads).
func (n *NS) Netlink(families ...int) (*netlink.Handle, error) {
	if len(families) == 0 {
		families = []int{unix.NETLINK_ROUTE}
	}
	h, err := netlink.NewHandleAt(n.Handle, families...)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", n.Name, err)
	}
	return h, nil
}

// Do runs fn on the calling goroutine with its OS thread locked in the
// namespace. Sockets fn creates stay in the namespace for their whole life,
// whatever thread uses them later; goroutines fn starts do not run there.
func (n *NS) Do(fn func() error) error {
	return onLockedThread(func() error {
		if err := netns.Set(n.Handle); err != nil {
			return fmt.Errorf("enter netns %s: %w", n.Name, err)
		}
		return fn()
	})
}

// Do runs fn inside the namespace called name (see NS.Do).
func Do(name string, fn func() error) error {
	n, err := Open(name)
	if err != nil {
		return err
	}
	defer n.Release()
	return n.Do(fn)
}

// Run execs a command inside the namespace: the child is forked from the
// locked thread and so inherits its network namespace. Unlike `ip netns
// exec` it keeps the caller's /sys: for tools that speak netlink (tc, nft),
// not for a program that reads /sys/class/net.
func (n *NS) Run(stdin []byte, name string, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := n.Do(cmd.Run); err != nil {
		return nil, fmt.Errorf("%s %v in netns %s: %w: %s", name, args, n.Name, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

// SetSysctls writes /proc/sys/<key> values inside the namespace:
// /proc/sys/net resolves to the namespace of the thread that opens the file.
func (n *NS) SetSysctls(kv map[string]string) error {
	return n.Do(func() error {
		for k, v := range kv {
			if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
				return fmt.Errorf("sysctl %s=%s in netns %s: %w", k, v, n.Name, err)
			}
		}
		return nil
	})
}

// onLockedThread runs fn with the calling goroutine locked to its thread
// and puts the thread back in its original namespace afterwards, even if
// fn panics. If that fails the thread stays locked, so no other goroutine
// ever runs in the wrong namespace (the runtime ends the thread with the
// goroutine), and the error says so.
func onLockedThread(fn func() error) (err error) {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("get current netns: %w", err)
	}
	defer func() {
		defer orig.Close()
		if rerr := netns.Set(orig); rerr != nil {
			err = errors.Join(err, fmt.Errorf("restore netns, thread left locked: %w", rerr))
			return
		}
		runtime.UnlockOSThread()
	}()
	return fn()
}
