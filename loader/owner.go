//go:build linux

package loader

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"

	"github.com/enaprobe/enaprobe/bpf"
)

// DefaultSockets is the owner map's capacity: sockets remembered at once,
// about 100 bytes each in the kernel (an LRU hash is allocated whole). The
// map is read every second and what was read is kept in userspace, so it
// needs to hold the sockets of about a second: 16,384 is a thousand new
// connections a second with room to spare.
const DefaultSockets = 16384

// cacheFactor bounds the sockets kept in userspace, as a multiple of the
// map's capacity: a long trace of a busy host would otherwise keep every
// socket it ever saw.
const cacheFactor = 8

// SocketOwners runs the cgroup programs (bpf/owner.c) that record who each
// socket belongs to, and keeps what their map held: the owner package
// resolves those sockets to processes, units, containers and pods.
type SocketOwners struct {
	objs   bpf.OwnerObjects
	links  []link.Link
	socks  map[uint64]Socket // read so far: kept when the map evicts them
	maxEnt uint32
	// dropped counts sockets forgotten in userspace to bound socks.
	dropped uint64
}

// Socket is one socket's owner as the cgroup programs saw it.
type Socket struct {
	PID      uint32
	Comm     string
	CgroupID uint64
}

// AttachSocketOwners loads the cgroup programs and attaches them to the
// cgroup v2 directory mount (its root, so that they run for every process).
// sockets bounds the owner map (0: DefaultSockets). The programs are
// bpf_links: they go away with the process, even when it is killed.
func AttachSocketOwners(mount string, sockets uint32) (*SocketOwners, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("remove memlock limit: %w", err)
	}
	spec, err := bpf.LoadOwner()
	if err != nil {
		return nil, fmt.Errorf("parse embedded owner object: %w", err)
	}
	if sockets == 0 {
		sockets = DefaultSockets
	}
	spec.Maps[bpf.OwnerMapSockOwners].MaxEntries = sockets
	t := &SocketOwners{socks: make(map[uint64]Socket), maxEnt: sockets}
	if err := spec.LoadAndAssign(&t.objs, nil); err != nil {
		return nil, fmt.Errorf("load owner programs: %w", err)
	}
	hooks := []struct {
		prog   *ebpf.Program
		attach ebpf.AttachType
	}{
		{t.objs.OwnerSockCreate, ebpf.AttachCGroupInetSockCreate},
		{t.objs.OwnerPostBind4, ebpf.AttachCGroupInet4PostBind},
		{t.objs.OwnerPostBind6, ebpf.AttachCGroupInet6PostBind},
		{t.objs.OwnerConnect4, ebpf.AttachCGroupInet4Connect},
		{t.objs.OwnerConnect6, ebpf.AttachCGroupInet6Connect},
		{t.objs.OwnerSendmsg4, ebpf.AttachCGroupUDP4Sendmsg},
		{t.objs.OwnerSendmsg6, ebpf.AttachCGroupUDP6Sendmsg},
		{t.objs.OwnerRecvmsg4, ebpf.AttachCGroupUDP4Recvmsg},
		{t.objs.OwnerRecvmsg6, ebpf.AttachCGroupUDP6Recvmsg},
	}
	for _, h := range hooks {
		l, err := link.AttachCgroup(link.CgroupOptions{Path: mount, Attach: h.attach, Program: h.prog})
		if err != nil {
			return nil, errors.Join(fmt.Errorf("attach %s to cgroup %s: %w", h.attach, mount, err), t.Close())
		}
		t.links = append(t.links, l)
	}
	return t, nil
}

// Detach stops the programs; the map can still be read. Read after it
// takes in every socket they recorded: only evicted ones are missing.
func (t *SocketOwners) Detach() error {
	var errs []error
	for _, l := range t.links {
		errs = append(errs, l.Close())
	}
	t.links = nil
	return errors.Join(errs...)
}

// Close detaches the programs and frees the maps; what was read stays.
func (t *SocketOwners) Close() error {
	return errors.Join(t.Detach(), t.objs.Close())
}

// Read takes in the owner map. Reading during the trace keeps sockets
// that the bounded map would evict later.
func (t *SocketOwners) Read() error {
	if err := t.readBatch(); errors.Is(err, ebpf.ErrNotSupported) {
		if err := t.readEach(); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	// Over the bound, forget the sockets the map no longer holds: the
	// oldest, as the map evicts the least recently used.
	if len(t.socks) > cacheFactor*int(t.maxEnt) {
		var v bpf.OwnerSockOwner
		for c := range t.socks {
			if t.objs.SockOwners.Lookup(c, &v) != nil {
				delete(t.socks, c)
				t.dropped++
			}
		}
	}
	return nil
}

// readBatchSize is how many entries one batch lookup reads.
const readBatchSize = 4096

// readBatch reads the map in batches: a full map of 16,384 sockets in a
// few system calls, not two per socket (readEach: about 80 ms a read of
// a full map here, 8 % of a core when read every second).
func (t *SocketOwners) readBatch() error {
	keys := make([]uint64, readBatchSize)
	vals := make([]bpf.OwnerSockOwner, readBatchSize)
	var cursor ebpf.MapBatchCursor
	for {
		n, err := t.objs.SockOwners.BatchLookup(&cursor, keys, vals, nil)
		for i := range n {
			t.take(keys[i], vals[i])
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read socket owners: %w", err)
		}
	}
}

// readEach reads the map entry by entry, on kernels without batch lookups.
func (t *SocketOwners) readEach() error {
	var cookie uint64
	var o bpf.OwnerSockOwner
	it := t.objs.SockOwners.Iterate()
	for it.Next(&cookie, &o) {
		t.take(cookie, o)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read socket owners: %w", err)
	}
	return nil
}

// take keeps one socket's owner; the comm string is made only for a
// socket not known yet or changed.
func (t *SocketOwners) take(cookie uint64, o bpf.OwnerSockOwner) {
	if s, ok := t.socks[cookie]; ok && s.PID == o.Pid && s.CgroupID == o.CgroupId && commEqual(s.Comm, o.Comm) {
		return
	}
	t.socks[cookie] = Socket{PID: o.Pid, Comm: commString(o.Comm), CgroupID: o.CgroupId}
}

func commEqual(s string, b [16]int8) bool {
	for i, c := range b {
		if c == 0 {
			return i == len(s)
		}
		if i >= len(s) || s[i] != byte(c) {
			return false
		}
	}
	return len(s) == len(b)
}

// Counts are what the owner map took in: sockets inserted, and evicted
// before they were read (the map is never deleted from, so what was
// inserted and was never read was evicted), or forgotten in userspace to
// bound its memory.
type Counts struct {
	Inserted, Evicted uint64
}

// Counts reads the map's counters; call after Read.
func (t *SocketOwners) Counts() (Counts, error) {
	var per []bpf.OwnerOwnerCounts
	if err := t.objs.OwnerStats.Lookup(uint32(0), &per); err != nil {
		return Counts{}, fmt.Errorf("read owner counters: %w", err)
	}
	var c Counts
	for _, p := range per {
		c.Inserted += p.Inserted
	}
	if n := uint64(len(t.socks)) + t.dropped; c.Inserted > n {
		c.Evicted = c.Inserted - n
	}
	c.Evicted += t.dropped
	return c, nil
}

// Socket is the owner recorded for a cookie.
func (t *SocketOwners) Socket(cookie uint64) (Socket, bool) {
	s, ok := t.socks[cookie]
	return s, ok
}

func commString(b [16]int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}

// Capacity is the owner map's size in sockets.
func (t *SocketOwners) Capacity() uint32 { return t.maxEnt }
