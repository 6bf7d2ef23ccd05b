//go:build linux

package loader

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/bpf"
)

// flowTables are the datapath's two flow tables mapped read-only into
// memory: a snapshot of every flow is a walk over memory, with no syscall
// per entry. The layout is bpf.ProbeFlowBucket4 and 6 back to back.
type flowTables struct {
	mem4, mem6 []byte
	b4         []bpf.ProbeFlowBucket4
	b6         []bpf.ProbeFlowBucket6
}

func mapFlowTables(m4, m6 *ebpf.Map) (*flowTables, error) {
	t := &flowTables{}
	var err error
	if t.mem4, err = mapArray(m4, unsafe.Sizeof(bpf.ProbeFlowBucket4{})); err != nil {
		return nil, fmt.Errorf("map ipv4 flow table: %w", err)
	}
	if t.mem6, err = mapArray(m6, unsafe.Sizeof(bpf.ProbeFlowBucket6{})); err != nil {
		t.close()
		return nil, fmt.Errorf("map ipv6 flow table: %w", err)
	}
	t.b4 = unsafe.Slice((*bpf.ProbeFlowBucket4)(unsafe.Pointer(&t.mem4[0])), m4.MaxEntries())
	t.b6 = unsafe.Slice((*bpf.ProbeFlowBucket6)(unsafe.Pointer(&t.mem6[0])), m6.MaxEntries())
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
	for _, m := range [][]byte{t.mem4, t.mem6} {
		if m != nil {
			errs = append(errs, unix.Munmap(m))
		}
	}
	t.mem4, t.mem6, t.b4, t.b6 = nil, nil, nil, nil
	return errors.Join(errs...)
}

// each calls fn with every flow in the tables. A bucket's ways fill in
// order, so the first free way ends it. Counters are read while the
// datapath adds to them: each is a whole aligned word, never torn.
func (t *flowTables) each(fn func(stateKey, bpf.ProbeFlowStats)) {
	for i := range t.b4 {
		for w := range t.b4[i].Ways {
			s := t.b4[i].Ways[w] // one copy: key and stats read together
			if s.Key.Present == 0 {
				break
			}
			fn(stateKey4(s.Key), s.Stats)
		}
	}
	for i := range t.b6 {
		for w := range t.b6[i].Ways {
			s := t.b6[i].Ways[w]
			if s.Key.Present == 0 {
				break
			}
			fn(stateKey6(s.Key), s.Stats)
		}
	}
}
