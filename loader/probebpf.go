//go:build linux

package loader

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// ProbeBPF creates and closes the smallest map there is, with the raw
// system call: cilium/ebpf would run feature probes first and wrap what
// they met. With CAP_BPF held, EPERM from it means something besides
// capabilities refuses bpf(2): a seccomp filter (capture.CheckCapabilities
// says which).
func ProbeBPF() error {
	attr := struct{ mapType, keySize, valueSize, maxEntries uint32 }{mapType: unix.BPF_MAP_TYPE_ARRAY, keySize: 4, valueSize: 4, maxEntries: 1}
	fd, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_MAP_CREATE, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	if errno != 0 {
		return errno
	}
	return unix.Close(int(fd))
}
