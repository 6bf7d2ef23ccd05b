package lab

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/vishvananda/netns"
)

// netnsDir is where `ip netns` keeps named namespaces, so `ip netns exec`
// works on the lab's namespaces.
const netnsDir = "/run/netns"

// namedNetns is a network namespace bind-mounted under netnsDir.
type namedNetns struct {
	name   string
	handle netns.NsHandle // open for the lab's lifetime
}

func (n *namedNetns) path() string { return filepath.Join(netnsDir, n.name) }

// newNamedNetns creates a namespace and mounts it under its name. Creating
// it moves the calling thread into it, so that happens on a locked thread
// that is moved back before being unlocked.
func newNamedNetns(name string) (*namedNetns, error) {
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
	return &namedNetns{name: name, handle: h}, nil
}

// close releases the handle and unmounts the name. The namespace itself
// disappears when its last reference (socket, process, handle) is gone.
func (n *namedNetns) close() error {
	var errs []error
	if n.handle.IsOpen() {
		errs = append(errs, n.handle.Close())
	}
	if err := netns.DeleteNamed(n.name); err != nil {
		errs = append(errs, fmt.Errorf("delete netns %s: %w", n.name, err))
	}
	return errors.Join(errs...)
}

// do runs fn on the calling goroutine with its OS thread locked in the
// namespace. Sockets fn creates stay in the namespace for their whole life,
// whatever thread uses them later; goroutines fn starts do not run there.
func (n *namedNetns) do(fn func() error) error {
	return onLockedThread(func() error {
		if err := netns.Set(n.handle); err != nil {
			return fmt.Errorf("enter netns %s: %w", n.name, err)
		}
		return fn()
	})
}

// onLockedThread runs fn with the calling goroutine locked to its thread
// and puts the thread back in its original namespace afterwards, even if
// fn panics. If that fails the thread stays locked, so no other goroutine
// ever runs in the wrong namespace, and the error says so.
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

// run execs a command inside the namespace: the child is forked from the
// locked thread and so inherits its namespace, without `ip netns exec`.
func (n *namedNetns) run(stdin []byte, name string, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := n.do(cmd.Run)
	if err != nil {
		return nil, fmt.Errorf("%s %v in netns %s: %w: %s", name, args, n.name, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

// setSysctls writes /proc/sys/<key> values inside the namespace: /proc/sys/net
// resolves to the namespace of the thread that opens the file.
func (n *namedNetns) setSysctls(kv map[string]string) error {
	return n.do(func() error {
		for k, v := range kv {
			if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
				return fmt.Errorf("sysctl %s=%s in netns %s: %w", k, v, n.name, err)
			}
		}
		return nil
	})
}
