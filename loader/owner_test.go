//go:build linux

package loader

import (
	"maps"
	"syscall"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/cgroup2"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

// TestReadBatch: a batched read of a full owner map takes in the same
// sockets as a read entry by entry, in fewer system calls (the ratio of
// their times is logged: serve reads the map every second).
func TestReadBatch(t *testing.T) {
	privtest.RequireRoot(t)
	const sockets = 4096
	so, err := AttachSocketOwners(cgroup2Root(t), sockets)
	if err != nil {
		t.Fatal(err)
	}
	defer so.Close()
	for range sockets {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		_ = syscall.Close(fd)
	}
	// Stopped: the map holds what it holds while both read it.
	if err := so.Detach(); err != nil {
		t.Fatal(err)
	}
	read := func(f func() error) (map[uint64]Socket, time.Duration) {
		so.socks = map[uint64]Socket{}
		start := time.Now()
		if err := f(); err != nil {
			t.Fatal(err)
		}
		return so.socks, time.Since(start)
	}
	each, eachTime := read(so.readEach)
	batch, batchTime := read(so.readBatch)
	if len(each) < sockets/2 || !maps.Equal(each, batch) {
		t.Errorf("batched read: %d sockets, entry by entry %d (want the same, and at least %d of the %d created)", len(batch), len(each), sockets/2, sockets)
	}
	t.Logf("%d sockets: entry by entry %v, batched %v (%.1fx)", len(batch), eachTime, batchTime, float64(eachTime)/float64(batchTime))
}

// cgroup2Root is the host's cgroup v2 mount, for tests that attach there.
func cgroup2Root(t *testing.T) string {
	t.Helper()
	m, err := cgroup2.Mount()
	if err != nil {
		t.Fatal(err)
	}
	return m
}
