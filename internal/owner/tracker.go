//go:build linux

package owner

import (
	"errors"
	"fmt"

	"github.com/enaprobe/enaprobe/internal/cgroup2"
	"github.com/enaprobe/enaprobe/loader"
)

// Tracker is the cgroup programs (loader.SocketOwners) on the host's cgroup
// v2 hierarchy, with the cgroup paths they name sockets by.
type Tracker struct {
	*loader.SocketOwners
	mount   string
	paths   *cgroupPaths
	unmount func() error // of a cgroup2 mount of our own
}

// Start attaches the cgroup programs to the root of the cgroup v2
// hierarchy, mounting one of its own where the mount namespace lacks it.
// sockets bounds the owner map (0: loader.DefaultSockets).
func Start(sockets uint32) (*Tracker, error) {
	mount, err := cgroup2.Mount()
	var unmount func() error
	if errors.Is(err, cgroup2.ErrNotMounted) {
		mount, unmount, err = cgroup2.MountOwn()
	}
	if err != nil {
		return nil, err
	}
	t, err := start(mount, sockets)
	if err != nil && unmount != nil {
		return nil, errors.Join(err, unmount())
	}
	if t != nil {
		t.unmount = unmount
	}
	return t, err
}

func start(mount string, sockets uint32) (*Tracker, error) {
	so, err := loader.AttachSocketOwners(mount, sockets)
	if err != nil {
		return nil, err
	}
	t := &Tracker{SocketOwners: so, mount: mount, paths: newCgroupPaths(mount)}
	// Cgroups that exist now are named even if removed before the end.
	if err := t.paths.walk(); err != nil {
		return nil, errors.Join(fmt.Errorf("walk cgroup hierarchy %s: %w", mount, err), t.Close())
	}
	return t, nil
}

// Close detaches the programs and frees the maps (what was read stays),
// and unmounts a cgroup2 mount of its own.
func (t *Tracker) Close() error {
	errs := []error{t.SocketOwners.Close()}
	if t.unmount != nil {
		errs = append(errs, t.unmount())
		t.unmount = nil
	}
	return errors.Join(errs...)
}

// Mount is the cgroup v2 mount the programs are attached to.
func (t *Tracker) Mount() string { return t.mount }
