package ena

import (
	"bytes"
	"fmt"
	"net"

	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/record"
)

// ENADriver is the driver name the ENA driver reports through
// ETHTOOL_GDRVINFO.
const ENADriver = "ena"

// IsENA tells whether a driver name is the ENA driver, the one with the
// allowance counters.
func IsENA(driver string) bool { return driver == ENADriver }

// DriverInfo reads the driver name and version of an interface of the
// current network namespace (ETHTOOL_GDRVINFO), e.g. "ena", "2.13.0g".
func DriverInfo(ifname string) (driver, version string, err error) {
	fd, err := openEthtoolSocket()
	if err != nil {
		return "", "", fmt.Errorf("open ethtool socket for %s: %w", ifname, err)
	}
	defer unix.Close(fd)
	return driverInfo(fd, ifname)
}

func driverInfo(fd int, ifname string) (driver, version string, err error) {
	info, err := unix.IoctlGetEthtoolDrvinfo(fd, ifname)
	if err != nil {
		return "", "", fmt.Errorf("read driver info of %s: %w", ifname, err)
	}
	return cString(info.Driver[:]), cString(info.Version[:]), nil
}

func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// DescribeInterface gathers what a trace records about an interface of the
// current network namespace. ENA is true only when the driver is ENA and a
// read of its statistics holds all five allowance counters: ENA drivers
// before 2.2.10 have none of them.
func DescribeInterface(ifname string) (record.InterfaceInfo, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return record.InterfaceInfo{}, fmt.Errorf("describe %s: %w", ifname, err)
	}
	info := record.InterfaceInfo{Name: ifname, Index: ifi.Index, MTU: ifi.MTU}
	src, err := NewEthtoolSource(ifname)
	if err != nil {
		return info, fmt.Errorf("describe %s: %w", ifname, err)
	}
	defer src.Close()
	if info.Driver, info.DriverVersion, err = src.DriverInfo(ifname); err != nil {
		return info, fmt.Errorf("describe %s: %w", ifname, err)
	}
	if !IsENA(info.Driver) {
		return info, nil
	}
	values, err := src.Read()
	if err != nil {
		return info, fmt.Errorf("describe %s: %w", ifname, err)
	}
	info.ENA = hasAll(values, counters.AllowanceExceeded)
	return info, nil
}

func hasAll(values map[string]uint64, names []string) bool {
	for _, name := range names {
		if _, ok := values[name]; !ok {
			return false
		}
	}
	return true
}

// ExpressMode tells whether ENA drives ifname and reads its ena_srd_mode
// (ENA Express's state); srdKnown is false when the driver does not report
// it or the read fails.
func ExpressMode(ifname string) (isENA bool, srdMode uint64, srdKnown bool) {
	if d, _, err := DriverInfo(ifname); err != nil || !IsENA(d) {
		return false, 0, false
	}
	src, err := NewEthtoolSource(ifname)
	if err != nil {
		return true, 0, false
	}
	defer src.Close()
	vals, err := src.Read()
	v, ok := vals[counters.SRDMode]
	return true, v, err == nil && ok
}
