// Package ena reads NIC statistics (the ENA allowance counters above all)
// from a counter source and samples them on the monotonic clock.
package ena

// Source reads one interface's NIC statistics by their ethtool names. A name
// the source does not have is absent from the map, never present as zero.
type Source interface {
	Read() (map[string]uint64, error)
	// Kind names the source for reports: "ethtool", "file", "lab", "replay".
	Kind() string
}
