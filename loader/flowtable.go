//go:build linux

package loader

import (
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/bpf"
)

// flowTables are the datapath's two flow tables mapped read-only into
// memory: a snapshot of every flow is a walk over memory, with no syscall
// per entry. The layout is bpf.ProbeFlowBucket4 and 6 back to back; the
// used maps have a word per region, a bit per bucket that holds a flow, so
// a walk visits those buckets only.
type flowTables struct {
	mems         [][]byte
	b4           []bpf.ProbeFlowBucket4
	b6           []bpf.ProbeFlowBucket6
	used4, used6 []uint64
	per4, per6   int // buckets per region
}

// flowMaps are the maps behind flowTables.
type flowMaps struct {
	Flows4, Flows6, Used4, Used6 *ebpf.Map
}

func mapFlowTables(m flowMaps) (*flowTables, error) {
	t := &flowTables{}
	mapped := func(name string, m *ebpf.Map, size uintptr) (unsafe.Pointer, error) {
		mem, err := mapArray(m, size)
		if err != nil {
			t.close()
			return nil, fmt.Errorf("map %s: %w", name, err)
		}
		t.mems = append(t.mems, mem)
		return unsafe.Pointer(&mem[0]), nil
	}
	p4, err := mapped("ipv4 flow table", m.Flows4, unsafe.Sizeof(bpf.ProbeFlowBucket4{}))
	if err != nil {
		return nil, err
	}
	p6, err := mapped("ipv6 flow table", m.Flows6, unsafe.Sizeof(bpf.ProbeFlowBucket6{}))
	if err != nil {
		return nil, err
	}
	u4, err := mapped("ipv4 used buckets", m.Used4, 8)
	if err != nil {
		return nil, err
	}
	u6, err := mapped("ipv6 used buckets", m.Used6, 8)
	if err != nil {
		return nil, err
	}
	t.b4 = unsafe.Slice((*bpf.ProbeFlowBucket4)(p4), m.Flows4.MaxEntries())
	t.b6 = unsafe.Slice((*bpf.ProbeFlowBucket6)(p6), m.Flows6.MaxEntries())
	t.used4 = unsafe.Slice((*uint64)(u4), m.Used4.MaxEntries())
	t.used6 = unsafe.Slice((*uint64)(u6), m.Used6.MaxEntries())
	t.per4 = len(t.b4) / len(t.used4)
	t.per6 = len(t.b6) / len(t.used6)
	return t, nil
}

// mapArray maps a BPF_F_MMAPABLE array whose values are size bytes.
func mapArray(m *ebpf.Map, size uintptr) ([]byte, error) {
	if uintptr(m.ValueSize()) != size {
		return nil, fmt.Errorf("value size %d, the generated type has %d", m.ValueSize(), size)
	}
	return unix.Mmap(m.FD(), 0, roundUpPage(int(m.MaxEntries())*int(size)), unix.PROT_READ, unix.MAP_SHARED)
}

func (t *flowTables) close() error {
	var errs []error
	for _, m := range t.mems {
		errs = append(errs, unix.Munmap(m))
	}
	*t = flowTables{}
	return errors.Join(errs...)
}

// eachUsed calls fn with the index of every bucket marked used.
func eachUsed(used []uint64, per int, fn func(bucket int)) {
	for r := range used {
		for w := atomic.LoadUint64(&used[r]); w != 0; w &= w - 1 {
			fn(r*per + bits.TrailingZeros64(w))
		}
	}
}

// each calls fn with every flow in the tables. A bucket's ways fill in
// order, so the first free way ends it. Counters are read while the
// datapath adds to them: each is a whole aligned word, never torn.
func (t *flowTables) each(fn func(stateKey, bpf.ProbeFlowStats)) {
	eachUsed(t.used4, t.per4, func(i int) {
		for w := range t.b4[i].Ways {
			s := t.b4[i].Ways[w] // one copy: key and stats read together
			if s.Key.Present == 0 {
				break
			}
			fn(stateKey4(s.Key), s.Stats)
		}
	})
	eachUsed(t.used6, t.per6, func(i int) {
		for w := range t.b6[i].Ways {
			s := t.b6[i].Ways[w]
			if s.Key.Present == 0 {
				break
			}
			fn(stateKey6(s.Key), s.Stats)
		}
	})
}
