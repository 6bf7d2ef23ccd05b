package ena

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Constants of linux/ethtool.h that golang.org/x/sys does not define.
const (
	ethSSStats    = 1 // ETH_SS_STATS: the string set of `ethtool -S`
	ethSSFeatures = 4 // ETH_SS_FEATURES
	ethGStringLen = 32
)

// maxStats is the most statistics one read handles. The buffers are sized for
// it up front because ETHTOOL_GSTRINGS and ETHTOOL_GSTATS write as many
// entries as the driver has at that moment, whatever the caller asked for: a
// driver growing its stat set between two calls (an ENA reset with more
// queues) must not write past the end.
const maxStats = 32768

// ethtoolSsetInfo is struct ethtool_sset_info asking for one string set.
type ethtoolSsetInfo struct {
	cmd      uint32
	reserved uint32
	mask     uint64
	data     [1]uint32
}

// ethtoolGStrings is struct ethtool_gstrings with room for maxStats names.
type ethtoolGStrings struct {
	cmd       uint32
	stringSet uint32
	len       uint32
	data      [maxStats * ethGStringLen]byte
}

// ethtoolStats is struct ethtool_stats with room for maxStats values.
type ethtoolStats struct {
	cmd    uint32
	nStats uint32
	data   [maxStats]uint64
}

// ifreqData is struct ifreq carrying ifr_data. data is an unsafe.Pointer,
// not a uintptr, so the garbage collector sees it and a stack copy updates it
// (golang.org/x/sys/unix does the same). Storing a uintptr there, as
// github.com/safchain/ethtool v0.7.0 does, lets the kernel write through a
// stale pointer whenever the goroutine's stack moves before the ioctl.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unix.SizeofPtr]byte // pad to at least sizeof(struct ifreq)
}

// ethtoolIoctl runs one SIOCETHTOOL command; cmd points to its struct.
func ethtoolIoctl(fd int, ifname string, cmd unsafe.Pointer) error {
	if len(ifname) >= unix.IFNAMSIZ {
		return fmt.Errorf("interface name %q longer than %d bytes", ifname, unix.IFNAMSIZ-1)
	}
	req := ifreqData{data: cmd}
	copy(req.name[:], ifname)
	// The conversion in the argument list keeps req alive and in place
	// until the system call returns (unsafe.Pointer rule 4).
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&req)))
	if errno != 0 {
		return errno
	}
	return nil
}

// stringSetSize is the number of strings of set ss of the interface, and
// false when the driver has no such set.
func stringSetSize(fd int, ifname string, ss uint32) (int, bool, error) {
	info := &ethtoolSsetInfo{cmd: unix.ETHTOOL_GSSET_INFO, mask: 1 << ss}
	if err := ethtoolIoctl(fd, ifname, unsafe.Pointer(info)); err != nil {
		return 0, false, fmt.Errorf("ETHTOOL_GSSET_INFO: %w", err)
	}
	if info.mask&(1<<ss) == 0 {
		return 0, false, nil
	}
	return int(info.data[0]), true, nil
}

// getStrings fills gs with the strings of set ss and returns their number.
// The caller has checked that the set fits.
func getStrings(fd int, ifname string, ss uint32, n int, gs *ethtoolGStrings) (int, error) {
	gs.cmd, gs.stringSet, gs.len = unix.ETHTOOL_GSTRINGS, ss, uint32(n)
	if err := ethtoolIoctl(fd, ifname, unsafe.Pointer(gs)); err != nil {
		return 0, fmt.Errorf("ETHTOOL_GSTRINGS: %w", err)
	}
	return int(gs.len), nil
}

// gstring is the i-th name of gs, without its NUL padding.
func gstring(gs *ethtoolGStrings, i int) string {
	b := gs.data[i*ethGStringLen : (i+1)*ethGStringLen]
	for j, c := range b {
		if c == 0 {
			return string(b[:j])
		}
	}
	return string(b)
}

// openEthtoolSocket opens the socket SIOCETHTOOL goes through. It belongs to
// the caller's network namespace for its whole life.
func openEthtoolSocket() (int, error) {
	return unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
}
