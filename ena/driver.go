package ena

import (
	"bytes"
	"fmt"

	"golang.org/x/sys/unix"
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
