//go:build linux

package loader

import "github.com/cilium/ebpf"

// ProbeBPF creates and closes the smallest map there is. With CAP_BPF
// held, an EPERM from it means something besides capabilities refuses
// bpf(2): a seccomp filter (capture.CheckCapabilities says which).
func ProbeBPF() error {
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		return err
	}
	return m.Close()
}
