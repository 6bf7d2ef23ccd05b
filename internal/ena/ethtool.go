package ena

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// EthtoolSource reads an interface's statistics with the SIOCETHTOOL ioctl,
// as `ethtool -S` does, without running the binary. It keeps one socket and
// one pair of name and value buffers (about 1.3 MB, sized for maxStats) for
// all its reads, so a read allocates only the returned map. A read is one
// round of three ioctls: ETHTOOL_GSSET_INFO for the count, ETHTOOL_GSTRINGS
// for the names, ETHTOOL_GSTATS for the values; on ENA only the last one
// reaches the device.
//
// The socket belongs to the network namespace the source was created in, and
// so do the interfaces it can read. An EthtoolSource is safe for concurrent
// use; reads are serialised.
type EthtoolSource struct {
	ifname string

	mu       sync.Mutex // guards the fields below
	fd       int        // -1 once closed
	gstrings *ethtoolGStrings
	stats    *ethtoolStats
}

var (
	errClosed = errors.New("ethtool source closed")
	// errStatsChanged is a read whose stat set changed between the names
	// and the values (a driver reset, a queue count change): the values
	// cannot be matched to names.
	errStatsChanged = errors.New("statistics changed during the read")
)

// NewEthtoolSource opens an ethtool socket for reading ifname.
func NewEthtoolSource(ifname string) (*EthtoolSource, error) {
	fd, err := openEthtoolSocket()
	if err != nil {
		return nil, fmt.Errorf("open ethtool socket for %s: %w", ifname, err)
	}
	return &EthtoolSource{
		ifname:   ifname,
		fd:       fd,
		gstrings: new(ethtoolGStrings),
		stats:    new(ethtoolStats),
	}, nil
}

// Interface is the interface Read reads.
func (s *EthtoolSource) Interface() string { return s.ifname }

// Kind is "ethtool".
func (s *EthtoolSource) Kind() string { return "ethtool" }

// Read reads the statistics of the source's interface.
func (s *EthtoolSource) Read() (map[string]uint64, error) {
	return s.Stats(s.ifname)
}

// Stats reads the statistics of any interface of the source's namespace
// through its socket and buffers. The map is new at every call. A driver
// without statistics gives an error wrapping unix.EOPNOTSUPP.
func (s *EthtoolSource) Stats(ifname string) (map[string]uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		return nil, fmt.Errorf("read ethtool stats of %s: %w", ifname, errClosed)
	}
	values, err := s.stats1(ifname)
	if errors.Is(err, errStatsChanged) {
		values, err = s.stats1(ifname) // once more: such changes are rare
	}
	if err != nil {
		return nil, fmt.Errorf("read ethtool stats of %s: %w", ifname, err)
	}
	return values, nil
}

// stats1 is one read round.
func (s *EthtoolSource) stats1(ifname string) (map[string]uint64, error) {
	n, ok, err := stringSetSize(s.fd, ifname, ethSSStats)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("driver has no statistics: %w", unix.EOPNOTSUPP)
	}
	if n > maxStats {
		return nil, fmt.Errorf("%d statistics, more than the %d handled", n, maxStats)
	}
	names, err := getStrings(s.fd, ifname, ethSSStats, n, s.gstrings)
	if err != nil {
		return nil, err
	}
	s.stats.cmd, s.stats.nStats = unix.ETHTOOL_GSTATS, uint32(n)
	if err := ethtoolIoctl(s.fd, ifname, unsafe.Pointer(s.stats)); err != nil {
		return nil, fmt.Errorf("ETHTOOL_GSTATS: %w", err)
	}
	count := int(s.stats.nStats)
	if names != n || count != n {
		return nil, fmt.Errorf("%w: %d announced, %d names, %d values", errStatsChanged, n, names, count)
	}
	values := make(map[string]uint64, count)
	for i := range count {
		name := gstring(s.gstrings, i)
		if _, dup := values[name]; name != "" && !dup { // first wins, as in counters.ParseEthtoolS
			values[name] = s.stats.data[i]
		}
	}
	return values, nil
}

// DriverInfo reads the driver name and version of any interface of the
// source's namespace (ETHTOOL_GDRVINFO).
func (s *EthtoolSource) DriverInfo(ifname string) (driver, version string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		return "", "", fmt.Errorf("read driver info of %s: %w", ifname, errClosed)
	}
	return driverInfo(s.fd, ifname)
}

// Close releases the socket and the buffers. Reads after Close fail.
func (s *EthtoolSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		return nil
	}
	err := unix.Close(s.fd)
	s.fd, s.gstrings, s.stats = -1, nil, nil
	if err != nil {
		return fmt.Errorf("close ethtool socket of %s: %w", s.ifname, err)
	}
	return nil
}
